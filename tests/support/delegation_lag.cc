#include "tests/support/delegation_lag.h"

#include <signal.h>
#include <simdjson.h>
#include <sys/wait.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <thread>

#include "fmt/format.h"
#include "solana/delegation.h"
#include "tests/localnet/test_clients.h"
#include "tests/support/subprocess.h"

namespace switchyard::testing {
namespace {

using localnet::testing::HttpClient;
using SteadyClock = std::chrono::steady_clock;

constexpr std::string_view kSystemProgram = "11111111111111111111111111111111";
constexpr uint64_t kAccountLamports = 1'000'000'000;

std::optional<std::string> ReadWhole(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Waits for a ready file holding a JSON object and returns the number under `key`.
std::optional<uint64_t> WaitForPort(const std::string& path, const char* key) {
  const auto end = SteadyClock::now() + std::chrono::seconds(20);
  while (SteadyClock::now() < end) {
    if (std::optional<std::string> text = ReadWhole(path);
        text && text->find('}') != std::string::npos) {
      simdjson::dom::parser parser;
      uint64_t port = 0;
      if (parser.parse(*text)[key].get_uint64().get(port) == simdjson::SUCCESS) return port;
      return std::nullopt;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return std::nullopt;
}

std::string Request(std::string_view method, std::string_view params) {
  return fmt::format(R"({{"jsonrpc":"2.0","id":1,"method":"{}","params":{}}})", method, params);
}

}  // namespace

struct DelegationLagHarness::Impl {
  DelegationLagOptions options;
  std::vector<pid_t> processes;
  Keypair payer;
  Pubkey er_identity;
  uint16_t base_port = 0;
  uint16_t router_port = 0;
  uint16_t admin = 0;
  std::unique_ptr<HttpClient> base;
  std::unique_ptr<HttpClient> router;
  int next_round = 0;

  ~Impl() {
    for (pid_t pid : processes) {
      kill(pid, SIGKILL);
      int status = 0;
      waitpid(pid, &status, 0);
    }
  }

  absl::StatusOr<uint16_t> StartLocalnet(const std::string& name, std::vector<std::string> args) {
    const std::string ready = options.work_dir + "/" + name + ".ready";
    args.insert(args.begin(),
                {options.localnet_binary, "--port", "0", "--threads", "1", "--ready-file", ready});
    const pid_t pid = StartProcess(args);
    if (pid <= 0) return absl::InternalError("cannot start " + name);
    processes.push_back(pid);
    std::optional<uint64_t> port = WaitForPort(ready, "http");
    if (!port) return absl::DeadlineExceededError(name + " did not become ready");
    return static_cast<uint16_t>(*port);
  }

  static Keypair RoundAccount(int round) { return MakeKeypair(static_cast<uint8_t>(100 + round)); }

  std::optional<Hash> LatestBlockhash() {
    std::optional<std::string> answer = base->Post(Request("getLatestBlockhash", "[]"));
    if (!answer) return std::nullopt;
    simdjson::dom::parser parser;
    std::string_view text;
    if (parser.parse(*answer)["result"]["value"]["blockhash"].get_string().get(text) !=
        simdjson::SUCCESS) {
      return std::nullopt;
    }
    absl::StatusOr<Hash> hash = Hash::FromBase58(text);
    if (!hash.ok()) return std::nullopt;
    return *hash;
  }
};

DelegationLagHarness::DelegationLagHarness(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
DelegationLagHarness::~DelegationLagHarness() = default;

uint16_t DelegationLagHarness::admin_port() const { return impl_->admin; }

absl::StatusOr<std::unique_ptr<DelegationLagHarness>> DelegationLagHarness::Start(
    DelegationLagOptions options) {
  if (sodium_init() < 0) return absl::InternalError("libsodium did not initialise");
  auto impl = std::make_unique<Impl>();
  impl->options = std::move(options);
  Impl& s = *impl;
  std::filesystem::create_directories(s.options.work_dir);
  s.payer = MakeKeypair(1);
  s.er_identity = MakeKeypair(10).pubkey;
  std::vector<std::string> base_args = {"--slot-ms", std::to_string(s.options.base_slot_ms),
                                        "--fund",
                                        fmt::format("{}=100000000000", s.payer.pubkey.ToBase58())};
  for (int round = 0; round < s.options.max_rounds; ++round) {
    base_args.push_back("--fund");
    base_args.push_back(
        fmt::format("{}={}", Impl::RoundAccount(round).pubkey.ToBase58(), kAccountLamports));
  }
  base_args.insert(base_args.end(), s.options.base_flags.begin(), s.options.base_flags.end());
  absl::StatusOr<uint16_t> base_port = s.StartLocalnet("base", base_args);
  if (!base_port.ok()) return base_port.status();
  s.base_port = *base_port;
  const std::string base_url = fmt::format("http://127.0.0.1:{}", s.base_port);
  absl::StatusOr<uint16_t> er_port = s.StartLocalnet(
      "er",
      {"--er", "--identity", s.er_identity.ToBase58(), "--base", base_url, "--slot-ms", "50"});
  if (!er_port.ok()) return er_port.status();

  const std::string config = s.options.work_dir + "/serve.toml";
  std::ofstream(config) << fmt::format(
      "[api]\nlisten = \"127.0.0.1:0\"\n"
      "[admin]\nlisten = \"127.0.0.1:0\"\n"
      "[upstreams.base]\nendpoints = [{{url = \"{}\"}}]\n"
      "[upstreams.er1]\nendpoints = [{{url = \"http://127.0.0.1:{}\"}}]\n"
      "[[ers]]\nidentity = \"{}\"\nupstream = \"er1\"\n"
      "[routing]\ndefault_er = \"er1\"\n"
      "[ingest]\nbase_url = \"{}\"\n",
      base_url, *er_port, s.er_identity.ToBase58(), base_url);
  const std::string ready = s.options.work_dir + "/serve.ready";
  const pid_t serve =
      StartProcess({s.options.switchyard_binary, "serve", "--config", config, "--data-dir",
                    s.options.work_dir + "/data", "--ready-file", ready});
  if (serve <= 0) return absl::InternalError("cannot start switchyard serve");
  s.processes.push_back(serve);
  std::optional<uint64_t> api = WaitForPort(ready, "api");
  std::optional<uint64_t> admin = WaitForPort(ready, "admin");
  if (!api || !admin) return absl::DeadlineExceededError("switchyard serve did not become ready");
  s.router_port = static_cast<uint16_t>(*api);
  s.admin = static_cast<uint16_t>(*admin);
  s.base = std::make_unique<HttpClient>(s.base_port);
  s.router = std::make_unique<HttpClient>(s.router_port);
  return std::unique_ptr<DelegationLagHarness>(new DelegationLagHarness(std::move(impl)));
}

absl::StatusOr<absl::Duration> DelegationLagHarness::Round(absl::Duration idle,
                                                           absl::Duration deadline) {
  Impl& s = *impl_;
  if (s.next_round >= s.options.max_rounds) {
    return absl::ResourceExhaustedError("no funded account left for another round");
  }
  const Keypair account = Impl::RoundAccount(s.next_round++);
  absl::SleepFor(idle);
  std::optional<Hash> blockhash = s.LatestBlockhash();
  if (!blockhash) return absl::UnavailableError("the base layer gave no blockhash");
  std::optional<std::string> sent = s.base->Post(Request(
      "sendTransaction",
      fmt::format(R"(["{}",{{"encoding":"base64"}}])",
                  DelegateTransaction(s.payer, account.pubkey, s.er_identity, *blockhash))));
  simdjson::dom::parser parser;
  std::string_view signature;
  if (!sent || parser.parse(*sent)["result"].get_string().get(signature) != simdjson::SUCCESS) {
    return absl::UnavailableError(
        fmt::format("the Delegate was not accepted: {}", sent.value_or("no answer")));
  }
  const std::string statuses =
      Request("getSignatureStatuses", fmt::format(R"([["{}"]])", signature));
  const std::string delegation_status =
      Request("getDelegationStatus", fmt::format(R"(["{}"])", account.pubkey.ToBase58()));
  const std::string account_info =
      Request("getAccountInfo",
              fmt::format(R"(["{}",{{"encoding":"base64"}}])", account.pubkey.ToBase58()));
  const auto end = SteadyClock::now() + absl::ToChronoNanoseconds(deadline);
  std::optional<SteadyClock::time_point> confirmed;
  while (SteadyClock::now() < end) {
    if (!confirmed) {
      std::optional<std::string> answer = s.base->Post(statuses);
      simdjson::dom::element status;
      if (answer &&
          parser.parse(*answer)["result"]["value"].at(0).get(status) == simdjson::SUCCESS &&
          !status.is_null()) {
        if (!status["err"].is_null()) {
          return absl::InternalError(fmt::format("the Delegate failed on base: {}", *answer));
        }
        confirmed = SteadyClock::now();
      }
    } else {
      std::optional<std::string> answer = s.router->Post(delegation_status);
      bool delegated = false;
      if (answer &&
          parser.parse(*answer)["result"]["isDelegated"].get_bool().get(delegated) ==
              simdjson::SUCCESS &&
          delegated) {
        const auto routed = SteadyClock::now();
        // The ER shows an account delegated to it with its original owner; base shows the
        // delegation program.
        std::optional<std::string> info = s.router->Post(account_info);
        std::string_view owner;
        if (!info || parser.parse(*info)["result"]["value"]["owner"].get_string().get(owner) !=
                         simdjson::SUCCESS) {
          return absl::InternalError(
              fmt::format("getAccountInfo through the router: {}", info.value_or("no answer")));
        }
        if (owner != kSystemProgram) {
          return absl::InternalError(fmt::format(
              "getAccountInfo of a delegated account was not answered by its ER: owner {}", owner));
        }
        return absl::FromChrono(routed - *confirmed);
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return absl::DeadlineExceededError(
      fmt::format("account {} was {} within {}", account.pubkey.ToBase58(),
                  confirmed ? "not routed to its ER" : "not confirmed on base",
                  absl::FormatDuration(deadline)));
}

}  // namespace switchyard::testing
