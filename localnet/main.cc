#include <signal.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/str_split.h"
#include "common/clock.h"
#include "fmt/format.h"
#include "localnet/localnet.h"
#include "spdlog/spdlog.h"

namespace {

using switchyard::Pubkey;

int Fail(const std::string& message) {
  std::fprintf(stderr, "switchyard-localnet: %s\n", message.c_str());
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"switchyard-localnet: a local Solana base layer or MagicBlock ER on loopback"};
  switchyard::localnet::LocalnetOptions options;
  int slot_ms = -1;
  int base_timeout_ms = 5000;
  std::string identity;
  std::vector<std::string> airdrops;
  std::vector<std::string> registry_ers;
  std::vector<std::string> scenario_identities;
  std::string ready_file;
  uint32_t scenario_accounts = 0;
  int64_t idle_timeout_ms = absl::ToInt64Milliseconds(options.idle_timeout);
  int64_t ws_ping_interval_ms = absl::ToInt64Milliseconds(options.ws_ping_interval);
  int64_t fault_delay_ms = 0;

  app.add_option("--bind", options.bind_address, "Address to listen on")->capture_default_str();
  app.add_option("--port", options.port, "HTTP JSON-RPC port; pubsub is on port+1 (0: free ports)")
      ->capture_default_str();
  app.add_option("--threads", options.io_threads, "I/O threads (0: one per core)")
      ->capture_default_str();
  app.add_option("--slot-ms", slot_ms, "Slot interval in ms, >= 1 (default 400, ER 50)");
  app.add_flag("--verify-signatures", options.verify_signatures,
               "Check ed25519 signatures of sent transactions");
  app.add_option("--fee-lamports", options.fee_lamports_per_signature,
                 "Fee per signature in lamports")
      ->capture_default_str();
  app.add_option("--fund", airdrops, "Genesis account PUBKEY=LAMPORTS (repeatable)");
  app.add_option("--registry-er", registry_ers,
                 "Base mode: an ER record of the Magic Domain Program at genesis, "
                 "IDENTITY=ADDR (Active; repeatable). POST /registry changes records later");
  app.add_flag("--er", options.er_mode, "Run as an ephemeral rollup");
  app.add_option("--identity", identity, "ER validator identity (ER mode)");
  app.add_option("--base", options.base_url, "Base layer JSON-RPC URL (ER mode)");
  app.add_option("--base-timeout-ms", base_timeout_ms, "Timeout of a base-layer request")
      ->capture_default_str();
  app.add_option("--seed", options.scenario.seed, "Scenario and fault seed")->capture_default_str();
  app.add_option("--accounts", scenario_accounts, "Scenario accounts (enables the scenario)");
  app.add_option("--delegate-rate", options.scenario.delegate_rate,
                 "Scenario Delegate transactions per slot");
  app.add_option("--undelegate-rate", options.scenario.undelegate_rate,
                 "Scenario Undelegate transactions per slot");
  app.add_option("--scenario-er-count", options.scenario.identity_count,
                 "ER identities the scenario derives from the seed")
      ->capture_default_str();
  app.add_option("--scenario-identity", scenario_identities,
                 "ER identity for the scenario (repeatable; overrides --scenario-er-count)");
  app.add_option("--scenario-stop-slot", options.scenario.stop_slot,
                 "The scenario sends no more transactions from this slot on");
  app.add_option("--scenario-start-slot", options.scenario.start_slot,
                 "The scenario sends no transactions before this slot");
  app.add_option("--ground-truth", options.scenario.ground_truth_path,
                 "Write the true delegated set per slot (JSON lines, on change) to this file");
  app.add_option("--drop-websockets-at-slot", options.faults.drop_websockets_at_slot,
                 "Fault: close every WebSocket at this slot");
  app.add_option("--drop-notification-rate", options.faults.drop_notification_rate,
                 "Fault: drop this fraction of notifications (0..1)");
  app.add_option("--idle-timeout-ms", idle_timeout_ms,
                 "Close an HTTP connection idle (no next request) this long (0: never)")
      ->capture_default_str();
  app.add_option("--ws-ping-interval-ms", ws_ping_interval_ms,
                 "Ping WebSockets at this interval; close one that sends nothing between two "
                 "pings (0: no pings)")
      ->capture_default_str();
  app.add_option("--blockhash-validity", options.blockhash_validity_blocks,
                 "Blocks a recent blockhash stays valid")
      ->capture_default_str();
  app.add_option("--fault-429-rate", options.faults.http_429_rate,
                 "Fault: answer this fraction of HTTP requests 429 with Retry-After");
  app.add_option("--fault-retry-after-s", options.faults.retry_after_seconds,
                 "Fault: the Retry-After seconds of a 429")
      ->capture_default_str();
  app.add_option("--fault-5xx-rate", options.faults.http_5xx_rate,
                 "Fault: answer this fraction of HTTP requests with --fault-5xx-status");
  app.add_option("--fault-5xx-status", options.faults.server_error_status,
                 "Fault: the status of a 5xx answer")
      ->capture_default_str();
  app.add_option("--fault-reset-rate", options.faults.reset_rate,
                 "Fault: reset the connection (TCP RST) of this fraction of HTTP requests");
  app.add_option("--fault-delay-rate", options.faults.delay_rate,
                 "Fault: delay the answer of this fraction of HTTP requests by --fault-delay-ms");
  app.add_option("--fault-delay-ms", fault_delay_ms, "Fault: the delay of a delayed answer");
  app.add_flag("--fault-no-pipelining", options.faults.no_pipelining,
               "Fault: answer a request that came with the next one already sent with "
               "Connection: close, and close (no HTTP pipelining)");
  app.add_option("--slot-lag", options.faults.slot_lag,
                 "Fault: HTTP answers report slots (getSlot, context slots) this far behind");
  app.add_option("--fault-lie-lamports", options.faults.lie_lamports,
                 "Fault: HTTP answers report every account's lamports this much too high");
  app.add_option("--transaction-history-slots", options.max_transaction_history_slots,
                 "Forget transactions older than this many slots, as a node with a pruned "
                 "ledger (getTransaction, getSignaturesForAddress; 0: never)")
      ->capture_default_str();
  app.add_option("--gzip-min-bytes", options.gzip_min_bytes,
                 "Answers of at least this many bytes are gzipped for clients that accept it "
                 "(0: never)")
      ->capture_default_str();
  app.add_option("--ready-file", ready_file,
                 "Write {\"http\":PORT,\"ws\":PORT} here once listening");
  CLI11_PARSE(app, argc, argv);

  options.slot_interval = absl::Milliseconds(slot_ms > 0 ? slot_ms : (options.er_mode ? 50 : 400));
  if (slot_ms == 0 || slot_ms < -1) return Fail("--slot-ms must be at least 1");
  options.base_timeout = absl::Milliseconds(base_timeout_ms);
  options.faults.seed = options.scenario.seed;
  if (options.faults.drop_notification_rate < 0 || options.faults.drop_notification_rate > 1) {
    return Fail("--drop-notification-rate must be within [0, 1]");
  }
  if (idle_timeout_ms < 0) return Fail("--idle-timeout-ms must not be negative");
  if (ws_ping_interval_ms < 0) return Fail("--ws-ping-interval-ms must not be negative");
  if (options.blockhash_validity_blocks < 1) return Fail("--blockhash-validity must be at least 1");
  options.idle_timeout = absl::Milliseconds(idle_timeout_ms);
  options.ws_ping_interval = absl::Milliseconds(ws_ping_interval_ms);
  options.faults.delay = absl::Milliseconds(fault_delay_ms);
  if (absl::Status faults = switchyard::localnet::ValidateHttpFaults(options.faults);
      !faults.ok()) {
    return Fail(std::string(faults.message()));
  }
  if (options.er_mode) {
    if (identity.empty() || options.base_url.empty()) {
      return Fail("--er needs --identity and --base");
    }
    auto key = Pubkey::FromBase58(identity);
    if (!key.ok()) return Fail(fmt::format("--identity: {}", std::string(key.status().message())));
    options.identity = *key;
    options.fee_lamports_per_signature = 0;
  } else if (!identity.empty()) {
    auto key = Pubkey::FromBase58(identity);
    if (!key.ok()) return Fail(fmt::format("--identity: {}", std::string(key.status().message())));
    options.identity = *key;
  }
  for (const std::string& entry : airdrops) {
    std::vector<std::string> parts = absl::StrSplit(entry, '=');
    uint64_t lamports = 0;
    auto key = parts.size() == 2 ? Pubkey::FromBase58(parts[0])
                                 : absl::StatusOr<Pubkey>(absl::InvalidArgumentError("x"));
    if (!key.ok() || parts[1].empty() ||
        parts[1].find_first_not_of("0123456789") != std::string::npos) {
      return Fail(fmt::format("--fund expects PUBKEY=LAMPORTS, got '{}'", entry));
    }
    lamports = std::stoull(parts[1]);
    options.genesis_accounts.emplace_back(*key, lamports);
  }
  for (const std::string& entry : registry_ers) {
    const size_t eq = entry.find('=');
    auto key = eq == std::string::npos ? absl::StatusOr<Pubkey>(absl::InvalidArgumentError("x"))
                                       : Pubkey::FromBase58(entry.substr(0, eq));
    if (!key.ok() || eq + 1 >= entry.size()) {
      return Fail(fmt::format("--registry-er expects IDENTITY=ADDR, got '{}'", entry));
    }
    switchyard::ErRecord record;
    record.identity = *key;
    record.addr = entry.substr(eq + 1);
    record.block_time_ms = 50;
    options.registry_records.push_back(std::move(record));
  }
  for (const std::string& text : scenario_identities) {
    auto key = Pubkey::FromBase58(text);
    if (!key.ok()) return Fail(fmt::format("--scenario-identity: bad pubkey '{}'", text));
    options.scenario.identities.push_back(*key);
  }
  options.scenario.accounts = scenario_accounts > 0 ? scenario_accounts : 100;
  options.scenario.enabled = scenario_accounts > 0 || options.scenario.delegate_rate > 0 ||
                             options.scenario.undelegate_rate > 0 ||
                             !options.scenario.ground_truth_path.empty();
  if (options.scenario.enabled && options.er_mode) {
    return Fail("the scenario driver runs on the base layer, not with --er");
  }

  // Signals are taken by sigwait below; block them before any thread starts.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  switchyard::SystemClock clock;
  switchyard::localnet::Localnet localnet(options, &clock);
  absl::Status status = localnet.Start();
  if (!status.ok()) return Fail(std::string(status.message()));
  spdlog::info("switchyard-localnet {} listening: http={} ws={} identity={} slot={}ms",
               options.er_mode ? "ER" : "base", localnet.http_port(), localnet.ws_port(),
               localnet.identity().ToBase58(), absl::ToInt64Milliseconds(options.slot_interval));
  if (!ready_file.empty()) {
    const std::string tmp = ready_file + ".tmp";
    {
      std::ofstream out(tmp, std::ios::trunc);
      out << fmt::format("{{\"http\":{},\"ws\":{},\"identity\":\"{}\"}}\n", localnet.http_port(),
                         localnet.ws_port(), localnet.identity().ToBase58());
    }
    std::rename(tmp.c_str(), ready_file.c_str());
  }
  int signal_number = 0;
  sigwait(&signals, &signal_number);
  spdlog::info("switchyard-localnet: signal {}, stopping", signal_number);
  localnet.Stop();
  return 0;
}
