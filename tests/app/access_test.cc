// API keys and rate limits of `switchyard serve`, over real sockets: keys on each carrier, a
// key revoked by SIGHUP while a keep-alive connection stays open, methods per key, limits per
// key and per address measured under load, the WebSocket handshake and subscribe limit, and
// the limit shared by two replicas through a real Redis, with Redis killed mid-run.

#include <signal.h>

#include <atomic>
#include <boost/asio/connect.hpp>
#include <boost/beast/websocket.hpp>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "fmt/format.h"
#include "gtest/gtest.h"
#include "tests/app/process_test.h"
#include "tests/support/redis_server.h"

namespace switchyard::testing {
namespace {

using namespace std::chrono_literals;
namespace beast = boost::beast;
namespace http = beast::http;
namespace websocket = beast::websocket;
using tcp = boost::asio::ip::tcp;

constexpr char kKeyA[] = "key-a-0123456789abcdef";
constexpr char kKeyB[] = "key-b-0123456789abcdef";
constexpr char kIdentity[] = "11111111111111111111111111111112";

using Client = HttpClient;

std::string Call(const std::string& method) { return Request(method, "[]"); }

// A metric's value from the admin /metrics text, -1 when absent.
double Metric(uint16_t admin_port, const std::string& series) {
  auto metrics = HttpGet(admin_port, "/metrics");
  if (!metrics) return -1;
  std::istringstream text(metrics->body);
  for (std::string line; std::getline(text, line);) {
    if (line.rfind(series + " ", 0) != 0) continue;
    double value = 0;
    if (absl::SimpleAtod(line.substr(series.size() + 1), &value)) return value;
  }
  return -1;
}

struct Ports {
  uint16_t api = 0;
  uint16_t admin = 0;
  uint16_t pubsub = 0;
};

// Calls getIdentity (answered by the router itself) from `threads` connections for `duration`
// and counts the answers: 200 and 429.
struct LoadResult {
  int64_t allowed = 0;
  int64_t limited = 0;
  int64_t other = 0;
};
LoadResult Load(std::vector<uint16_t> ports, int threads, std::chrono::milliseconds duration,
                const std::string& target, const std::string& body) {
  std::atomic<int64_t> allowed{0}, limited{0}, other{0};
  const auto end = std::chrono::steady_clock::now() + duration;
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, port = ports[t % ports.size()]] {
      Client client(port);
      while (std::chrono::steady_clock::now() < end) {
        const auto answer = client.Post(target, body);
        if (answer.result_int() == 200) {
          ++allowed;
        } else if (answer.result_int() == 429) {
          ++limited;
          // A client that honours Retry-After would wait; this one keeps the load on, at a
          // bounded pace.
          std::this_thread::sleep_for(1ms);
        } else {
          ++other;
          return;
        }
      }
    });
  }
  for (std::thread& worker : workers) worker.join();
  return {allowed.load(), limited.load(), other.load()};
}

class AccessTest : public ProcessTest {
 protected:
  // Starts serve with `access` (TOML sections) and a base upstream that is never reached.
  Ports StartServe(const std::string& name, const std::string& access) {
    const std::string config =
        WriteFile(name + ".toml", fmt::format("[api]\nlisten = \"127.0.0.1:0\"\n"
                                              "[admin]\nlisten = \"127.0.0.1:0\"\n"
                                              "[router]\nidentity = \"{}\"\n"
                                              "[upstreams.base]\n"
                                              "endpoints = [{{url = \"http://127.0.0.1:1\"}}]\n{}",
                                              kIdentity, access));
    const std::string ready = dir_.Sub(name + ".ready");
    last_pid_ = Start({SWITCHYARD_BINARY, "serve", "--config", config, "--data-dir",
                       dir_.Sub(name + "-data"), "--ready-file", ready});
    const std::string ports = WaitForReadyFile(ready);
    return {static_cast<uint16_t>(JsonInt(ports, "api")),
            static_cast<uint16_t>(JsonInt(ports, "admin")),
            static_cast<uint16_t>(JsonInt(ports, "pubsub"))};
  }

  std::string KeyFile(const std::string& keys) { return WriteFile("keys.toml", keys); }

  pid_t last_pid_ = -1;
};

std::string KeyEntry(const std::string& name, const std::string& key,
                     const std::string& more = "") {
  return fmt::format("[[keys]]\nname = \"{}\"\nkey = \"{}\"\n{}\n", name, key, more);
}

TEST_F(AccessTest, KeyOnEachCarrierWrongKeyIs401AndSighupRevokesOnAnOpenConnection) {
  const std::string keys = KeyFile(KeyEntry("game-a", kKeyA) + KeyEntry("game-b", kKeyB));
  const Ports ports = StartServe(
      "serve", fmt::format("[access]\nkeys_required = true\nkeys_file = \"{}\"\n", keys));
  ASSERT_GT(ports.api, 0);
  Client client(ports.api);
  ASSERT_TRUE(client.connected());

  // The three carriers.
  auto by_path = client.Post(fmt::format("/{}", kKeyA), Call("getIdentity"));
  EXPECT_EQ(by_path.result_int(), 200u) << by_path.body();
  EXPECT_NE(by_path.body().find(kIdentity), std::string::npos) << by_path.body();
  auto by_query = client.Post(fmt::format("/?api-key={}", kKeyA), Call("getIdentity"));
  EXPECT_EQ(by_query.result_int(), 200u) << by_query.body();
  auto by_header = client.Post("/", Call("getIdentity"), {{"x-api-key", kKeyB}});
  EXPECT_EQ(by_header.result_int(), 200u) << by_header.body();

  // No key, and a wrong one: 401 with a JSON-RPC error, CORS headers on it.
  auto none = client.Post("/", Call("getIdentity"), {{"Origin", "https://app.example"}});
  EXPECT_EQ(none.result_int(), 401u);
  EXPECT_EQ(
      none.body(),
      R"({"jsonrpc":"2.0","error":{"code":-32401,"message":"A valid API key is required"},"id":1})");
  EXPECT_EQ(none[http::field::access_control_allow_origin], "*");
  auto wrong = client.Post("/not-a-key-at-all", Call("getIdentity"));
  EXPECT_EQ(wrong.result_int(), 401u);
  EXPECT_NE(wrong.body().find("-32401"), std::string::npos) << wrong.body();

  // Revoke game-a in the file, SIGHUP: the same open connection gets 401 for it, game-b goes on.
  WriteFile("keys.toml", KeyEntry("game-b", kKeyB));
  ASSERT_EQ(kill(last_pid_, SIGHUP), 0);
  ASSERT_TRUE(WaitFor(
      [&] {
        return client.Post(fmt::format("/{}", kKeyA), Call("getIdentity")).result_int() == 401;
      },
      5s));
  auto kept = client.Post(fmt::format("/{}", kKeyB), Call("getIdentity"));
  EXPECT_EQ(kept.result_int(), 200u) << kept.body();

  // The key's name is in the metrics, the secret nowhere.
  auto metrics = HttpGet(ports.admin, "/metrics");
  ASSERT_TRUE(metrics.has_value());
  EXPECT_GE(
      Metric(ports.admin, R"(switchyard_api_key_calls_total{key="game-a",outcome="allowed"})"), 2);
  EXPECT_GE(Metric(ports.admin, "switchyard_api_unauthorized_total"), 3);
  EXPECT_EQ(metrics->body.find(kKeyA), std::string::npos);
  EXPECT_EQ(metrics->body.find(kKeyB), std::string::npos);
}

TEST_F(AccessTest, AllowedAndDeniedMethodsPerKey) {
  const Ports ports = StartServe(
      "serve", "[access]\nkeys_required = true\n" +
                   KeyEntry("only-identity", kKeyA, "allowed_methods = [\"getIdentity\"]") +
                   KeyEntry("no-identity", kKeyB, "denied_methods = [\"getIdentity\"]"));
  Client client(ports.api);
  auto ok = client.Post(fmt::format("/{}", kKeyA), Call("getIdentity"));
  EXPECT_EQ(ok.result_int(), 200u);
  EXPECT_NE(ok.body().find(kIdentity), std::string::npos) << ok.body();
  auto refused = client.Post(fmt::format("/{}", kKeyA), Call("getRoutes"));
  EXPECT_EQ(refused.result_int(), 200u);
  EXPECT_EQ(
      refused.body(),
      R"({"jsonrpc":"2.0","error":{"code":-32403,"message":"getRoutes is not allowed for this API key"},"id":1})");
  // In a batch, the denied call gets its error and the other its answer.
  auto batch = client.Post(
      fmt::format("/{}", kKeyB),
      R"([{"jsonrpc":"2.0","id":1,"method":"getIdentity"},{"jsonrpc":"2.0","id":2,"method":"getRoutes"}])");
  EXPECT_EQ(batch.result_int(), 200u);
  EXPECT_NE(batch.body().find(R"("code":-32403)"), std::string::npos) << batch.body();
  EXPECT_NE(batch.body().find(R"("id":2)"), std::string::npos) << batch.body();
  EXPECT_EQ(batch.body().find(kIdentity), std::string::npos) << batch.body();
  EXPECT_EQ(Metric(ports.admin,
                   R"(switchyard_api_key_calls_total{key="only-identity",outcome="denied"})"),
            1);
  EXPECT_EQ(
      Metric(ports.admin, R"(switchyard_api_key_calls_total{key="no-identity",outcome="denied"})"),
      1);
}

// Let through over `seconds` at `rate` with `burst`: the fraction must match within 10 %.
void ExpectRate(const LoadResult& result, double rate, double burst, double seconds) {
  const double expected = rate * seconds + burst;
  EXPECT_EQ(result.other, 0);
  EXPECT_GT(result.limited, 0) << "the load did not reach the limit";
  EXPECT_NEAR(static_cast<double>(result.allowed), expected, expected * 0.1)
      << "allowed " << result.allowed << ", limited " << result.limited;
}

TEST_F(AccessTest, KeyLimitHoldsAcrossWorkersUnderLoad) {
  const Ports ports =
      StartServe("serve", "[access]\nkeys_required = true\n" +
                              KeyEntry("metered", kKeyA, "requests_per_second = 200\nburst = 20"));
  const auto start = std::chrono::steady_clock::now();
  const LoadResult result =
      Load({ports.api}, 4, 3s, fmt::format("/{}", kKeyA), Call("getIdentity"));
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ExpectRate(result, 200, 20, seconds);
  EXPECT_EQ(
      Metric(ports.admin, R"(switchyard_api_key_calls_total{key="metered",outcome="limited"})"),
      static_cast<double>(result.limited));
  // 429 carries Retry-After and a JSON-RPC error.
  Client client(ports.api);
  http::response<http::string_body> limited;
  for (int i = 0; i < 1000 && limited.result_int() != 429; ++i) {
    limited = client.Post(fmt::format("/{}", kKeyA), Call("getIdentity"));
  }
  ASSERT_EQ(limited.result_int(), 429u);
  EXPECT_EQ(limited[http::field::retry_after], "1");
  EXPECT_EQ(limited.body(),
            R"({"jsonrpc":"2.0","error":{"code":-32429,"message":"Rate limit exceeded"},"id":1})");
}

TEST_F(AccessTest, AddressLimitUnderLoadAndBatchElementsCountOneEach) {
  const Ports ports =
      StartServe("serve", "[access]\naddress_requests_per_second = 150\naddress_burst = 15\n");
  const auto start = std::chrono::steady_clock::now();
  const LoadResult result = Load({ports.api}, 4, 3s, "/", Call("getIdentity"));
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ExpectRate(result, 150, 15, seconds);
  EXPECT_GE(Metric(ports.admin, "switchyard_api_address_limited_calls_total"),
            static_cast<double>(result.limited));

  // A batch of 10 takes 10 tokens: after the bucket refills (15), one batch passes, the next
  // is refused whole, with one error per element.
  std::this_thread::sleep_for(200ms);
  Client client(ports.api);
  std::string batch = "[";
  for (int i = 0; i < 10; ++i) {
    batch +=
        fmt::format(R"({}{{"jsonrpc":"2.0","id":{},"method":"getIdentity"}})", i ? "," : "", i);
  }
  batch += "]";
  EXPECT_EQ(client.Post("/", batch).result_int(), 200u);
  auto second = client.Post("/", batch);
  EXPECT_EQ(second.result_int(), 429u);
  size_t errors = 0;
  for (size_t at = second.body().find("-32429"); at != std::string::npos;
       at = second.body().find("-32429", at + 1)) {
    ++errors;
  }
  EXPECT_EQ(errors, 10u) << second.body();
}

// The HTTP status of the answer to a WebSocket handshake to `port` at `target` (101: accepted;
// 0: the exchange failed).
unsigned HandshakeStatus(uint16_t port, const std::string& target) {
  boost::asio::io_context io;
  tcp::socket socket(io);
  boost::system::error_code ec;
  socket.connect(tcp::endpoint(boost::asio::ip::make_address("127.0.0.1"), port), ec);
  if (ec) return 0;
  http::request<http::empty_body> request(http::verb::get, target, 11);
  request.set(http::field::host, "127.0.0.1");
  request.set(http::field::connection, "Upgrade");
  request.set(http::field::upgrade, "websocket");
  request.set(http::field::sec_websocket_version, "13");
  request.set(http::field::sec_websocket_key, "dGhlIHNhbXBsZSBub25jZQ==");
  http::write(socket, request, ec);
  if (ec) return 0;
  beast::flat_buffer buffer;
  http::response_parser<http::string_body> parser;
  http::read_header(socket, buffer, parser, ec);
  return ec ? 0 : parser.get().result_int();
}

TEST_F(AccessTest, WebSocketHandshakeNeedsAKeyAndTheKeySubscriptionLimitHolds) {
  const Ports ports =
      StartServe("serve", "[access]\nkeys_required = true\n" +
                              KeyEntry("subscriber", kKeyA, "max_subscriptions = 1"));
  ASSERT_GT(ports.pubsub, 0);
  EXPECT_EQ(HandshakeStatus(ports.pubsub, "/"), 401u);
  EXPECT_EQ(HandshakeStatus(ports.pubsub, "/wrong-key-0123456789"), 401u);
  EXPECT_EQ(HandshakeStatus(ports.api, "/"), 401u);  // an Upgrade on the HTTP port
  EXPECT_EQ(HandshakeStatus(ports.pubsub, fmt::format("/{}", kKeyA)), 101u);
  boost::asio::io_context io;
  websocket::stream<tcp::socket> ws(io);
  ws.next_layer().connect(tcp::endpoint(boost::asio::ip::make_address("127.0.0.1"), ports.pubsub));
  ws.handshake("127.0.0.1", fmt::format("/?api-key={}", kKeyA));
  // The first subscribe is on its way (to an upstream that is not there); a second one is
  // over the key's limit at once.
  ws.write(boost::asio::buffer(std::string(
      R"({"jsonrpc":"2.0","id":1,"method":"accountSubscribe","params":["11111111111111111111111111111112"]})")));
  ws.write(boost::asio::buffer(std::string(
      R"({"jsonrpc":"2.0","id":2,"method":"accountSubscribe","params":["SysvarC1ock11111111111111111111111111111111"]})")));
  beast::flat_buffer buffer;
  ws.read(buffer);
  const std::string answer = beast::buffers_to_string(buffer.data());
  EXPECT_NE(answer.find(R"("code":-32429)"), std::string::npos) << answer;
  EXPECT_NE(answer.find(R"("id":2)"), std::string::npos) << answer;
  EXPECT_NE(answer.find("maximum of 1 subscriptions"), std::string::npos) << answer;
  EXPECT_EQ(Metric(ports.admin, "switchyard_pubsub_key_subscription_limit_total"), 1);
  EXPECT_EQ(Metric(ports.admin, "switchyard_pubsub_unauthorized_total"), 3);
}

// Sends `count` messages on a WebSocket to `path` of `port` and reads as many answers; returns
// how many of them were -32429 (over a message limit).
int CountLimitedMessages(uint16_t port, const std::string& path, int count) {
  boost::asio::io_context io;
  websocket::stream<tcp::socket> ws(io);
  ws.next_layer().connect(tcp::endpoint(boost::asio::ip::make_address("127.0.0.1"), port));
  ws.handshake("127.0.0.1", path);
  for (int i = 0; i < count; ++i) {
    // Not a pubsub method: answered by the router itself, so the limit is all that differs.
    ws.write(boost::asio::buffer(fmt::format(R"({{"jsonrpc":"2.0","id":{},"method":"nope"}})", i)));
  }
  int limited = 0;
  for (int i = 0; i < count; ++i) {
    beast::flat_buffer buffer;
    ws.read(buffer);
    const std::string answer = beast::buffers_to_string(buffer.data());
    if (answer.find(R"("code":-32429)") != std::string::npos) {
      ++limited;
    } else {
      EXPECT_NE(answer.find(R"("code":-32601)"), std::string::npos) << answer;
    }
  }
  return limited;
}

// Messages over a connection's bucket, and over a key's bucket shared by its connections, are
// answered -32429 and counted; the first ones, within the burst, are served.
TEST_F(AccessTest, WebSocketMessageLimitsPerConnectionAndPerKey) {
  const Ports ports = StartServe(
      "serve", "[access]\nws_messages_per_second = 1\nws_messages_burst = 4\n" +
                   KeyEntry("chatty", kKeyA, "ws_messages_per_second = 1\nws_messages_burst = 6"));
  ASSERT_GT(ports.pubsub, 0);
  // Without a key: the connection's burst of 4, at 1 per second after it.
  EXPECT_EQ(CountLimitedMessages(ports.pubsub, "/", 10), 6);
  // A new connection has its own bucket.
  EXPECT_EQ(CountLimitedMessages(ports.pubsub, "/", 3), 0);
  // With the key, two connections share the key's burst of 6 (each within its own 4).
  EXPECT_EQ(CountLimitedMessages(ports.pubsub, fmt::format("/?api-key={}", kKeyA), 4), 0);
  EXPECT_EQ(CountLimitedMessages(ports.pubsub, fmt::format("/?api-key={}", kKeyA), 4), 2);
  EXPECT_EQ(Metric(ports.admin, "switchyard_pubsub_limited_messages_total"), 8);
}

TEST_F(AccessTest, TwoReplicasShareTheKeyLimitThroughRedisAndFallBackToTheirShare) {
  RedisServer redis(FreePort());
  ASSERT_TRUE(redis.Start());
  const std::string access =
      fmt::format("[access]\nkeys_required = true\nredis = \"{}\"\nreplicas = 2\n", redis.url()) +
      KeyEntry("shared", kKeyA, "requests_per_second = 200\nburst = 20");
  const Ports a = StartServe("a", access);
  const Ports b = StartServe("b", access);
  ASSERT_GT(a.api, 0);
  ASSERT_GT(b.api, 0);
  const std::string target = fmt::format("/{}", kKeyA);

  auto start = std::chrono::steady_clock::now();
  const LoadResult shared = Load({a.api, b.api}, 4, 3s, target, Call("getIdentity"));
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ExpectRate(shared, 200, 20, seconds);
  EXPECT_EQ(Metric(a.admin, "switchyard_api_limit_redis_fallback"), 0);
  EXPECT_GT(Metric(a.admin, "switchyard_api_limit_redis_leases_total"), 0);

  // Redis gone: each replica enforces its share, 100/s (burst 10), and says so.
  redis.Kill();
  ASSERT_TRUE(WaitFor(
      [&] {
        return Metric(a.admin, "switchyard_api_limit_redis_fallback") == 1 &&
               Metric(b.admin, "switchyard_api_limit_redis_fallback") == 1;
      },
      5s));
  std::this_thread::sleep_for(200ms);  // the local buckets refill
  start = std::chrono::steady_clock::now();
  const LoadResult alone_a = Load({a.api}, 2, 3s, target, Call("getIdentity"));
  seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ExpectRate(alone_a, 100, 10, seconds);
  EXPECT_GE(Metric(b.admin, "switchyard_api_limit_redis_fallbacks_total"), 1);
}

}  // namespace
}  // namespace switchyard::testing
