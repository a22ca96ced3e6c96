// Pubsub load: N accountSubscribe subscriptions through the router (PubsubServer in-process,
// in front of a switchyard-localnet base layer) and the same N directly on localnet, while a
// generator changes `--changes-per-slot` of the accounts every slot with system transfers.
// Every notification is keyed by (account, context slot); the latency the router adds is its
// arrival through the router minus its arrival directly, per notification seen on both sides.
// Prints notifications/s on each side, the added latency's percentiles and any loss, and writes
// the same as JSON with --json.
//
// The direct side uses as many connections to localnet as the router does upstream (one per
// router thread) unless --direct-connections says otherwise: localnet writes each connection's
// messages in order, so the comparison holds the upstream side equal and measures the router.
//
//   pubsub_load LOCALNET_BINARY [--subscriptions 10000] [--connections 10] [--seconds 20]
//               [--slot-ms 50] [--changes-per-slot 500] [--threads 1]
//               [--direct-connections N] [--json FILE]
// --direct-connections -1 subscribes nothing directly (the router's throughput alone; localnet
// then serves only the router).
#include <signal.h>
#include <simdjson.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/websocket.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "api/metrics/api_metrics.h"
#include "api/net/http_server.h"
#include "api/pubsub/pubsub_metrics.h"
#include "api/pubsub/pubsub_server.h"
#include "api/rpc/router.h"
#include "common/clock.h"
#include "common/endian.h"
#include "common/metrics.h"
#include "engine/snapshot.h"
#include "fmt/format.h"
#include "solana/base64.h"
#include "solana/transaction.h"
#include "tests/support/subprocess.h"

namespace switchyard {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace websocket = beast::websocket;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;
using boost::system::error_code;

struct Args {
  std::string localnet;
  size_t subscriptions = 10'000;
  size_t connections = 10;
  int seconds = 20;
  int slot_ms = 50;
  size_t changes_per_slot = 500;
  size_t threads = 1;
  int direct_connections = 0;  // 0: as many as the router's upstream connections; -1: none
  std::string json;
};

// One side's subscribers (through the router, or direct) on one io_context thread.
struct Side {
  explicit Side(std::string n) : name(std::move(n)) {}
  std::string name;
  asio::io_context io{1};
  std::atomic<size_t> answered{0};
  std::atomic<bool> recording{false};
  // (account << 32 | slot) → first arrival, in ns of the steady clock. Touched on `io` only.
  absl::flat_hash_map<uint64_t, int64_t> arrivals;
  uint64_t notifications = 0;  // while recording
  uint64_t errors = 0;
};

// A WebSocket client that subscribes to its accounts and records notifications.
class Subscriber : public std::enable_shared_from_this<Subscriber> {
 public:
  Subscriber(Side* side, uint16_t port, std::vector<uint32_t> accounts,
             const std::vector<Pubkey>* keys)
      : side_(side), ws_(side->io), port_(port), accounts_(std::move(accounts)), keys_(keys) {}

  void Start() {
    beast::get_lowest_layer(ws_).async_connect(
        tcp::endpoint(asio::ip::make_address("127.0.0.1"), port_),
        [self = shared_from_this()](error_code ec) {
          if (ec) return self->Fail("connect", ec);
          self->ws_.async_handshake("127.0.0.1", "/", [self](error_code ec) {
            if (ec) return self->Fail("handshake", ec);
            self->ws_.text(true);
            self->Read();
            self->Write(0);
          });
        });
  }

 private:
  void Fail(const char* what, error_code ec) {
    std::cerr << side_->name << ": " << what << ": " << ec.message() << "\n";
    ++side_->errors;
  }

  void Write(size_t i) {
    if (i == accounts_.size()) return;
    out_ = fmt::format(
        R"({{"jsonrpc":"2.0","id":{},"method":"accountSubscribe","params":["{}",{{"encoding":"base64","commitment":"confirmed"}}]}})",
        accounts_[i], (*keys_)[accounts_[i]].ToBase58());
    ws_.async_write(asio::buffer(out_), [self = shared_from_this(), i](error_code ec, size_t) {
      if (ec) return self->Fail("write", ec);
      self->Write(i + 1);
    });
  }

  void Read() {
    ws_.async_read(buffer_, [self = shared_from_this()](error_code ec, size_t size) {
      if (ec) {
        if (ec != asio::error::operation_aborted && ec != websocket::error::closed) {
          self->Fail("read", ec);
        }
        return;
      }
      const int64_t now = Clock::now().time_since_epoch().count();
      self->buffer_.prepare(simdjson::SIMDJSON_PADDING);
      self->OnMessage(static_cast<const char*>(self->buffer_.data().data()), size, now);
      self->buffer_.consume(size);
      self->Read();
    });
  }

  void OnMessage(const char* data, size_t size, int64_t now) {
    simdjson::ondemand::document doc;
    if (parser_.iterate(data, size, size + simdjson::SIMDJSON_PADDING).get(doc)) return;
    simdjson::ondemand::object root;
    if (doc.get_object().get(root)) return;
    uint64_t id = 0;
    uint64_t subscription = 0;
    uint64_t slot = 0;
    bool answer = false;
    bool notification = false;
    for (auto field : root) {
      std::string_view key;
      if (field.unescaped_key().get(key)) return;
      if (key == "id") {
        answer = field.value().get_uint64().get(id) == simdjson::SUCCESS;
      } else if (key == "result") {
        if (field.value().get_uint64().get(subscription)) return;
      } else if (key == "params") {
        simdjson::ondemand::object params;
        if (field.value().get_object().get(params)) return;
        for (auto p : params) {
          std::string_view name;
          if (p.unescaped_key().get(name)) return;
          if (name == "subscription") {
            if (p.value().get_uint64().get(subscription)) return;
            notification = true;
          } else if (name == "result") {
            if (p.value()["context"]["slot"].get_uint64().get(slot)) return;
          }
        }
      } else if (key == "error") {
        ++side_->errors;
        return;
      }
    }
    if (answer) {
      by_subscription_[subscription] = static_cast<uint32_t>(id);
      side_->answered.fetch_add(1, std::memory_order_relaxed);
      return;
    }
    if (!notification || !side_->recording.load(std::memory_order_relaxed)) return;
    auto it = by_subscription_.find(subscription);
    if (it == by_subscription_.end()) return;
    ++side_->notifications;
    side_->arrivals.try_emplace((uint64_t{it->second} << 32) | (slot & 0xffffffffu), now);
  }

  Side* side_;
  websocket::stream<beast::tcp_stream> ws_;
  uint16_t port_;
  std::vector<uint32_t> accounts_;
  const std::vector<Pubkey>* keys_;
  std::string out_;
  beast::flat_buffer buffer_;
  simdjson::ondemand::parser parser_;
  absl::flat_hash_map<uint64_t, uint32_t> by_subscription_;
};

// A blocking keep-alive JSON-RPC client for the generator.
class RpcClient {
 public:
  explicit RpcClient(uint16_t port) : stream_(io_) {
    stream_.connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), port));
  }
  bool Post(const std::string& body) {
    std::optional<std::string> answer = Call(body);
    return answer.has_value() && answer->find("\"error\"") == std::string::npos;
  }

  // The answer's body, or nullopt on a transport error.
  std::optional<std::string> Call(const std::string& body) {
    http::request<http::string_body> request(http::verb::post, "/", 11);
    request.set(http::field::host, "127.0.0.1");
    request.set(http::field::content_type, "application/json");
    request.body() = body;
    request.prepare_payload();
    error_code ec;
    http::write(stream_, request, ec);
    if (ec) return std::nullopt;
    http::response<http::string_body> response;
    http::read(stream_, buffer_, response, ec);
    if (ec) return std::nullopt;
    return std::move(response.body());
  }

  // The localnet's latest blockhash; the all-zero hash when it cannot be read.
  Hash LatestBlockhash() {
    std::optional<std::string> answer =
        Call(R"({"jsonrpc":"2.0","id":1,"method":"getLatestBlockhash"})");
    simdjson::dom::parser parser;
    std::string_view text;
    if (!answer.has_value() ||
        parser.parse(*answer)["result"]["value"]["blockhash"].get_string().get(text) !=
            simdjson::SUCCESS) {
      return Hash();
    }
    return Hash::FromBase58(text).value_or(Hash());
  }

 private:
  asio::io_context io_;
  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
};

// One transfer of 1 lamport from the payer to each of `to` (at most 20 per transaction).
std::string TransferTransaction(const Pubkey& payer, const std::vector<Pubkey>& to,
                                const Hash& blockhash, std::mt19937_64& rng) {
  Transaction tx;
  tx.header = MessageHeader{1, 0, 1};
  tx.recent_blockhash = blockhash;
  tx.static_keys.push_back(payer);
  for (const Pubkey& key : to) tx.static_keys.push_back(key);
  tx.static_keys.push_back(Pubkey());  // the system program
  const uint8_t system = static_cast<uint8_t>(tx.static_keys.size() - 1);
  std::string data;
  AppendU32LE(&data, 2);
  AppendU64LE(&data, 1);
  for (size_t i = 0; i < to.size(); ++i) {
    tx.instructions.push_back(CompiledInstruction{system, {0, static_cast<uint8_t>(i + 1)}, data});
  }
  // localnet does not check signatures (it does check blockhashes); a random signature keeps
  // the transactions unique.
  std::array<uint8_t, 64> signature;
  for (auto& b : signature) b = static_cast<uint8_t>(rng());
  tx.signatures.push_back(Signature(signature));
  return fmt::format(
      R"({{"jsonrpc":"2.0","id":1,"method":"sendTransaction","params":["{}",{{"encoding":"base64","skipPreflight":true}}]}})",
      Base64Encode(EncodeTransaction(tx).value()));
}

// CPU seconds (user + system) of this process's threads whose name starts with `prefix`.
double ThreadCpuSeconds(std::string_view prefix) {
  double ticks = 0;
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task")) {
    std::ifstream comm(task.path() / "comm");
    std::string name;
    std::getline(comm, name);
    if (name.rfind(prefix, 0) != 0) continue;
    std::ifstream stat_file(task.path() / "stat");
    std::string stat((std::istreambuf_iterator<char>(stat_file)), std::istreambuf_iterator<char>());
    // Fields after the parenthesized name: state is field 3; utime and stime are 14 and 15.
    std::istringstream fields(stat.substr(stat.rfind(')') + 2));
    std::string field;
    for (int i = 3; i <= 15 && fields >> field; ++i) {
      if (i == 14 || i == 15) ticks += std::stod(field);
    }
  }
  return ticks / static_cast<double>(sysconf(_SC_CLK_TCK));
}

double Percentile(std::vector<double>& sorted, double p) {
  if (sorted.empty()) return 0;
  const size_t index = std::min(sorted.size() - 1, static_cast<size_t>(p * sorted.size()));
  return sorted[index];
}

int Main(int argc, char** argv) {
  Args args;
  if (argc < 2) {
    std::cerr << "usage: pubsub_load LOCALNET_BINARY [--subscriptions N] [--connections N] "
                 "[--seconds N] [--slot-ms N] [--changes-per-slot N] [--threads N] "
                 "[--json FILE]\n";
    return 2;
  }
  args.localnet = argv[1];
  for (int i = 2; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    const std::string value = argv[i + 1];
    if (flag == "--subscriptions") args.subscriptions = std::stoul(value);
    if (flag == "--connections") args.connections = std::stoul(value);
    if (flag == "--seconds") args.seconds = std::stoi(value);
    if (flag == "--slot-ms") args.slot_ms = std::stoi(value);
    if (flag == "--changes-per-slot") args.changes_per_slot = std::stoul(value);
    if (flag == "--threads") args.threads = std::stoul(value);
    if (flag == "--direct-connections") args.direct_connections = std::stoi(value);
    if (flag == "--json") args.json = value;
  }

  std::mt19937_64 rng(42);
  std::vector<Pubkey> keys(args.subscriptions);
  for (Pubkey& key : keys) {
    std::array<uint8_t, 32> bytes;
    for (auto& b : bytes) b = static_cast<uint8_t>(rng());
    key = Pubkey(bytes);
  }
  std::array<uint8_t, 32> payer_bytes;
  payer_bytes.fill(7);
  const Pubkey payer(payer_bytes);

  const auto dir =
      std::filesystem::temp_directory_path() / fmt::format("switchyard-pubsub-load-{}", getpid());
  std::filesystem::create_directories(dir);
  const std::string ready = (dir / "ready.json").string();
  const pid_t localnet =
      testing::StartProcess({args.localnet, "--port", "0", "--threads", "1", "--ready-file", ready,
                             "--slot-ms", std::to_string(args.slot_ms), "--fund",
                             fmt::format("{}=1000000000000000", payer.ToBase58())});
  const auto started = Clock::now();
  while (!std::filesystem::exists(ready) && Clock::now() - started < std::chrono::seconds(20)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  simdjson::dom::parser json;
  uint64_t http_port = 0;
  if (json.load(ready)["http"].get_uint64().get(http_port)) {
    std::cerr << "localnet did not start\n";
    return 1;
  }
  const uint16_t ws_port = static_cast<uint16_t>(http_port + 1);

  SystemClock clock;
  SnapshotHolder snapshots;
  MetricsRegistry registry;
  ApiMetrics api_metrics(registry);
  PubsubMetrics pubsub_metrics(registry, {"base"});
  RouterOptions options;
  options.upstreams = {{"base", {{fmt::format("http://127.0.0.1:{}", http_port), 1}}}};
  auto context = RouterContext::Create(options, &snapshots, &clock, &api_metrics);
  if (!context.ok()) return 1;
  PubsubServerOptions server_options;
  server_options.max_subscriptions_per_connection =
      (args.subscriptions + args.connections - 1) / args.connections;
  PubsubServer server(server_options, context->get(), &pubsub_metrics);
  HttpServerOptions http_options;
  http_options.threads = args.threads;
  http_options.thread_name = "sy-pubsub";
  HttpServer http(http_options, (*context)->HandlerFactory(), &api_metrics);
  if (!server.Attach(&http).ok() || !http.Start().ok()) return 1;

  Side routed("router");
  Side direct("direct");
  if (args.direct_connections == 0) args.direct_connections = static_cast<int>(args.threads);
  const size_t direct_connections =
      args.direct_connections < 0 ? 0 : static_cast<size_t>(args.direct_connections);
  auto subscribe = [&](Side& side, uint16_t port, size_t connections) {
    for (size_t c = 0; c < connections; ++c) {
      std::vector<uint32_t> mine;
      for (size_t i = c; i < keys.size(); i += connections)
        mine.push_back(static_cast<uint32_t>(i));
      std::make_shared<Subscriber>(&side, port, std::move(mine), &keys)->Start();
    }
  };
  subscribe(routed, server.port(), args.connections);
  subscribe(direct, ws_port, direct_connections);
  std::thread routed_thread([&] { routed.io.run(); });
  std::thread direct_thread([&] { direct.io.run(); });
  const auto subscribing = Clock::now();
  const size_t direct_expected = direct_connections == 0 ? 0 : keys.size();
  while ((routed.answered < keys.size() || direct.answered < direct_expected) &&
         Clock::now() - subscribing < std::chrono::seconds(60)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  const double subscribe_seconds =
      std::chrono::duration<double>(Clock::now() - subscribing).count();
  std::cerr << fmt::format("subscribed: router {} direct {} in {:.2f} s\n", routed.answered.load(),
                           direct.answered.load(), subscribe_seconds);

  // The generator: `changes_per_slot` accounts per slot, 20 per transaction, evenly paced.
  RpcClient rpc(static_cast<uint16_t>(http_port));
  routed.recording = true;
  direct.recording = true;
  const size_t per_tx = 20;
  const double tx_per_second =
      static_cast<double>(args.changes_per_slot) / per_tx * 1000.0 / args.slot_ms;
  const double cpu_start = ThreadCpuSeconds("sy-pubsub");
  const auto load_start = Clock::now();
  const auto load_end = load_start + std::chrono::seconds(args.seconds);
  size_t next_account = 0;
  uint64_t sent = 0;
  uint64_t failed = 0;
  // A blockhash stays valid for 150 slots: the generator takes a new one every 50.
  Hash blockhash = rpc.LatestBlockhash();
  auto blockhash_at = Clock::now();
  while (Clock::now() < load_end) {
    if (Clock::now() - blockhash_at > std::chrono::milliseconds(50 * args.slot_ms)) {
      blockhash = rpc.LatestBlockhash();
      blockhash_at = Clock::now();
    }
    const auto due = load_start + std::chrono::duration_cast<Clock::duration>(
                                      std::chrono::duration<double>(sent / tx_per_second));
    if (Clock::now() < due) {
      std::this_thread::sleep_until(due);
      continue;
    }
    std::vector<Pubkey> to;
    for (size_t i = 0; i < per_tx; ++i) to.push_back(keys[next_account++ % keys.size()]);
    if (!rpc.Post(TransferTransaction(payer, to, blockhash, rng))) ++failed;
    ++sent;
  }
  const double load_seconds = std::chrono::duration<double>(Clock::now() - load_start).count();
  std::this_thread::sleep_for(std::chrono::milliseconds(3 * args.slot_ms + 500));
  routed.recording = false;
  direct.recording = false;
  const double router_cpu = ThreadCpuSeconds("sy-pubsub") - cpu_start;
  routed.io.stop();
  direct.io.stop();
  routed_thread.join();
  direct_thread.join();
  http.Stop();
  kill(localnet, SIGTERM);
  int status = 0;
  waitpid(localnet, &status, 0);
  std::filesystem::remove_all(dir);

  std::vector<double> added_us;
  size_t missing_routed = 0;
  for (const auto& [key, at] : direct.arrivals) {
    auto it = routed.arrivals.find(key);
    if (it == routed.arrivals.end()) {
      ++missing_routed;
      continue;
    }
    added_us.push_back(static_cast<double>(it->second - at) / 1000.0);
  }
  size_t missing_direct = 0;
  for (const auto& [key, at] : routed.arrivals) missing_direct += !direct.arrivals.contains(key);
  std::sort(added_us.begin(), added_us.end());
  double mean = 0;
  for (double v : added_us) mean += v;
  if (!added_us.empty()) mean /= static_cast<double>(added_us.size());

  const double routed_rate = static_cast<double>(routed.notifications) / load_seconds;
  const double direct_rate = static_cast<double>(direct.notifications) / load_seconds;
  std::cout << fmt::format(
      "pubsub load: {} accountSubscribe, {} client connections to the router, {} direct, "
      "router threads {}, slot {} ms, {} changes/slot, {:.1f} s\n",
      args.subscriptions, args.connections, args.direct_connections, args.threads, args.slot_ms,
      args.changes_per_slot, load_seconds);
  std::cout << fmt::format("  transactions sent {} (failed {}), offered {:.0f} changes/s\n", sent,
                           failed, sent * per_tx / load_seconds);
  std::cout << fmt::format("  {:<8} {:>14} {:>14}\n", "side", "notifications", "per second");
  std::cout << fmt::format("  {:<8} {:>14} {:>14.0f}\n", "direct", direct.notifications,
                           direct_rate);
  std::cout << fmt::format("  {:<8} {:>14} {:>14.0f}   ratio {:.3f}\n", "router",
                           routed.notifications, routed_rate,
                           direct_rate > 0 ? routed_rate / direct_rate : 0.0);
  std::cout << fmt::format(
      "  added latency per notification (router - direct, µs, n={}): p50 {:.0f}  p90 {:.0f}  "
      "p99 {:.0f}  max {:.0f}  mean {:.0f}\n",
      added_us.size(), Percentile(added_us, 0.5), Percentile(added_us, 0.9),
      Percentile(added_us, 0.99), added_us.empty() ? 0.0 : added_us.back(), mean);
  std::cout << fmt::format(
      "  missing through the router {}, only through the router {}, client errors {}/{}\n",
      missing_routed, missing_direct, routed.errors, direct.errors);
  const double cpu_us_per_notification =
      routed.notifications > 0 ? router_cpu * 1e6 / static_cast<double>(routed.notifications) : 0;
  std::cout << fmt::format(
      "  router threads' CPU {:.2f} s = {:.1f} µs per notification ({:.0f}% of one core)\n",
      router_cpu, cpu_us_per_notification, 100 * router_cpu / load_seconds);
  std::cout << fmt::format("  router: upstream notifications {}, sent {}, slow consumers {}\n",
                           pubsub_metrics.upstream_notifications.value(),
                           pubsub_metrics.notifications_sent.value(),
                           pubsub_metrics.slow_consumers.value());
  if (!args.json.empty()) {
    std::ofstream out(args.json);
    out << fmt::format(
        R"({{"subscriptions":{},"connections":{},"direct_connections":{},"router_threads":{},"slot_ms":{},)"
        R"("changes_per_slot":{},"seconds":{:.2f},"direct_notifications_per_second":{:.1f},)"
        R"("router_notifications_per_second":{:.1f},"added_latency_us":{{"p50":{:.1f},)"
        R"("p90":{:.1f},"p99":{:.1f},"max":{:.1f},"mean":{:.1f},"n":{}}},)"
        R"("missing_through_router":{},"subscribe_seconds":{:.2f},)"
        R"("router_cpu_us_per_notification":{:.2f}}})"
        "\n",
        args.subscriptions, args.connections, args.direct_connections, args.threads, args.slot_ms,
        args.changes_per_slot, load_seconds, direct_rate, routed_rate, Percentile(added_us, 0.5),
        Percentile(added_us, 0.9), Percentile(added_us, 0.99),
        added_us.empty() ? 0.0 : added_us.back(), mean, added_us.size(), missing_routed,
        subscribe_seconds, cpu_us_per_notification);
  }
  return (direct_connections == 0 || missing_routed == 0) && routed.errors == 0 ? 0 : 1;
}

}  // namespace
}  // namespace switchyard

int main(int argc, char** argv) { return switchyard::Main(argc, argv); }
