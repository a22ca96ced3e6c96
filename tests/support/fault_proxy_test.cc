#include "tests/support/fault_proxy.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <simdjson.h>

#include <chrono>
#include <filesystem>
#include <optional>
#include <string>
#include <thread>

#include "tests/localnet/test_clients.h"
#include "tests/support/localnet_process.h"
#include "tests/support/subprocess.h"
#include "tests/support/temp_dir.h"

namespace switchyard::testing {
namespace {

using localnet::testing::HttpAnswer;
using localnet::testing::HttpClient;
using localnet::testing::WsClient;
using std::chrono::milliseconds;
namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;

constexpr char kGetSlot[] = R"({"jsonrpc":"2.0","id":1,"method":"getSlot"})";
constexpr char kSystemProgram[] = "11111111111111111111111111111111";
constexpr uint64_t kLag = 20;

std::optional<uint64_t> U64At(const std::string& json, const char* key) {
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  if (parser.parse(json).get(doc) != simdjson::SUCCESS) return std::nullopt;
  uint64_t value = 0;
  if (doc.at_pointer(key).get_uint64().get(value) != simdjson::SUCCESS) return std::nullopt;
  return value;
}

// One request on a connection of its own, to any target.
std::optional<HttpAnswer> Call(uint16_t port, http::verb verb, const std::string& target,
                               const std::string& body, milliseconds timeout = milliseconds(2000)) {
  net::io_context ioc;
  beast::tcp_stream stream(ioc);
  stream.expires_after(timeout);
  http::request<http::string_body> req(verb, target, 11);
  req.set(http::field::host, "127.0.0.1");
  req.set(http::field::content_type, "application/json");
  req.body() = body;
  req.prepare_payload();
  http::response<http::string_body> res;
  beast::flat_buffer buffer;
  boost::system::error_code result = net::error::timed_out;
  stream.async_connect(
      tcp::endpoint(net::ip::make_address("127.0.0.1"), port), [&](boost::system::error_code ec) {
        if (ec) {
          result = ec;
          return;
        }
        http::async_write(stream, req, [&](boost::system::error_code ec, size_t) {
          if (ec) {
            result = ec;
            return;
          }
          http::async_read(stream, buffer, res,
                           [&](boost::system::error_code ec, size_t) { result = ec; });
        });
      });
  ioc.run();
  if (result) return std::nullopt;
  return HttpAnswer{res.result_int(), std::string(res[http::field::retry_after]), res.body()};
}

class FaultProxyTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir();
    localnet_ = new LocalnetProcess(StartLocalnetProcess(
        SWITCHYARD_LOCALNET_BINARY, dir_->Sub("localnet.ready"), {"--slot-ms", "20"}));
  }
  static void TearDownTestSuite() {
    if (localnet_->pid > 0) {
      kill(localnet_->pid, SIGTERM);
      WaitProcess(localnet_->pid);
    }
    delete localnet_;
    delete dir_;
  }

  void SetUp() override {
    ASSERT_GT(localnet_->http_port, 0) << "the localnet did not start";
    auto proxy = FaultProxy::Start("http://127.0.0.1:" + std::to_string(localnet_->http_port));
    ASSERT_TRUE(proxy.ok()) << proxy.status();
    proxy_ = std::move(*proxy);
  }

  // Waits (at most 5 s) for the localnet to pass `slot`, so that a lag has room below it.
  void WaitForSlotAbove(uint64_t slot) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (DirectSlot() <= slot && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(milliseconds(20));
    }
    ASSERT_GT(DirectSlot(), slot);
  }

  uint64_t DirectSlot() {
    std::optional<std::string> answer = direct_.Post(kGetSlot);
    EXPECT_TRUE(answer.has_value());
    return U64At(answer.value_or("{}"), "/result").value_or(0);
  }

  static TempDir* dir_;
  static LocalnetProcess* localnet_;
  std::unique_ptr<FaultProxy> proxy_;
  HttpClient direct_{localnet_->http_port};
};

TempDir* FaultProxyTest::dir_ = nullptr;
LocalnetProcess* FaultProxyTest::localnet_ = nullptr;

TEST_F(FaultProxyTest, PassForwardsGetSlotOnOneKeptAliveConnection) {
  HttpClient client(proxy_->port());
  const uint64_t before = DirectSlot();
  std::optional<std::string> first = client.Post(kGetSlot);
  std::optional<std::string> second = client.Post(kGetSlot);
  const uint64_t after = DirectSlot();
  ASSERT_TRUE(first.has_value());
  ASSERT_TRUE(second.has_value());
  const std::optional<uint64_t> slot = U64At(*first, "/result");
  ASSERT_TRUE(slot.has_value()) << *first;
  EXPECT_GE(*slot, before);
  EXPECT_LE(*slot, after);
  EXPECT_EQ(client.connections(), 1);
  EXPECT_EQ(proxy_->connections(), 1u);
  EXPECT_EQ(proxy_->requests(), 2u);
}

TEST_F(FaultProxyTest, StatusAnswersTheStatusAndKeepsTheConnection) {
  proxy_->Set({.mode = FaultMode::kStatus, .status = 503});
  HttpClient client(proxy_->port());
  for (int i = 0; i < 2; ++i) {
    HttpAnswer answer;
    ASSERT_FALSE(client.Exchange(kGetSlot, milliseconds(2000), &answer));
    EXPECT_EQ(answer.status, 503u);
    EXPECT_EQ(answer.body.find("jsonrpc"), std::string::npos) << answer.body;
  }
  EXPECT_EQ(client.connections(), 1);
  EXPECT_EQ(proxy_->requests(), 2u);
}

TEST_F(FaultProxyTest, TooManyAnswers429WithRetryAfter) {
  proxy_->Set({.mode = FaultMode::kTooMany, .retry_after_seconds = 2});
  HttpClient client(proxy_->port());
  HttpAnswer answer;
  ASSERT_FALSE(client.Exchange(kGetSlot, milliseconds(2000), &answer));
  EXPECT_EQ(answer.status, 429u);
  EXPECT_EQ(answer.retry_after, "2");
}

TEST_F(FaultProxyTest, DelayHoldsEachAnswer) {
  proxy_->Set({.mode = FaultMode::kDelay, .delay = absl::Milliseconds(200)});
  HttpClient client(proxy_->port());
  const auto start = std::chrono::steady_clock::now();
  std::optional<std::string> answer = client.Post(kGetSlot);
  const auto elapsed = std::chrono::steady_clock::now() - start;
  ASSERT_TRUE(answer.has_value());
  EXPECT_TRUE(U64At(*answer, "/result").has_value()) << *answer;
  EXPECT_GE(elapsed, milliseconds(200));
  EXPECT_LT(elapsed, milliseconds(1500));
}

TEST_F(FaultProxyTest, DelayOfOneConnectionDoesNotHoldAnother) {
  proxy_->Set({.mode = FaultMode::kDelay, .delay = absl::Milliseconds(600)});
  std::thread slow([&] { HttpClient(proxy_->port()).Post(kGetSlot); });
  // The slow request is in: switch so that the next one is not delayed.
  const auto deadline = std::chrono::steady_clock::now() + milliseconds(2000);
  while (proxy_->requests() < 1 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(milliseconds(5));
  }
  proxy_->Set({.mode = FaultMode::kPass});
  const auto start = std::chrono::steady_clock::now();
  std::optional<std::string> answer = HttpClient(proxy_->port()).Post(kGetSlot);
  const auto elapsed = std::chrono::steady_clock::now() - start;
  slow.join();
  ASSERT_TRUE(answer.has_value());
  EXPECT_LT(elapsed, milliseconds(400));
}

TEST_F(FaultProxyTest, LagReportsGetSlotAndContextSlotsBehind) {
  WaitForSlotAbove(3 * kLag);
  proxy_->Set({.mode = FaultMode::kLag, .lag_slots = kLag});
  HttpClient client(proxy_->port());
  const uint64_t before = DirectSlot();
  std::optional<std::string> slot_answer = client.Post(kGetSlot);
  std::optional<std::string> balance_answer =
      client.Post(std::string(R"({"jsonrpc":"2.0","id":2,"method":"getBalance","params":[")") +
                  kSystemProgram + R"("]})");
  const uint64_t after = DirectSlot();
  ASSERT_TRUE(slot_answer.has_value());
  ASSERT_TRUE(balance_answer.has_value());
  const std::optional<uint64_t> slot = U64At(*slot_answer, "/result");
  ASSERT_TRUE(slot.has_value()) << *slot_answer;
  EXPECT_GE(*slot, before - kLag);
  EXPECT_LE(*slot, after - kLag);
  const std::optional<uint64_t> context = U64At(*balance_answer, "/result/context/slot");
  ASSERT_TRUE(context.has_value()) << *balance_answer;
  EXPECT_GE(*context, before - kLag);
  EXPECT_LE(*context, after - kLag);
}

TEST_F(FaultProxyTest, LagAnswersMinContextSlotAboveTheLaggedSlotWithMinus32016) {
  WaitForSlotAbove(3 * kLag);
  proxy_->Set({.mode = FaultMode::kLag, .lag_slots = kLag});
  HttpClient client(proxy_->port());
  const uint64_t before = DirectSlot();
  const auto request = [](uint64_t min) {
    return std::string(R"({"jsonrpc":"2.0","id":7,"method":"getBalance","params":[")") +
           kSystemProgram + R"(",{"minContextSlot":)" + std::to_string(min) + "}]}";
  };
  std::optional<std::string> refused = client.Post(request(before));
  std::optional<std::string> accepted = client.Post(request(before - 2 * kLag));
  const uint64_t after = DirectSlot();
  ASSERT_TRUE(refused.has_value());
  EXPECT_EQ(U64At(*refused, "/id"), 7u);
  simdjson::dom::parser parser;
  int64_t code = 0;
  ASSERT_EQ(parser.parse(*refused).at_pointer("/error/code").get_int64().get(code),
            simdjson::SUCCESS)
      << *refused;
  EXPECT_EQ(code, -32016);
  const std::optional<uint64_t> lagged = U64At(*refused, "/error/data/contextSlot");
  ASSERT_TRUE(lagged.has_value()) << *refused;
  EXPECT_GE(*lagged, before - kLag);
  EXPECT_LE(*lagged, after - kLag);
  ASSERT_TRUE(accepted.has_value());
  EXPECT_TRUE(U64At(*accepted, "/result/context/slot").has_value()) << *accepted;
}

TEST_F(FaultProxyTest, ResetCutsTheConnectionBeforeAnyAnswerByte) {
  proxy_->Set({.mode = FaultMode::kReset});
  HttpClient client(proxy_->port());
  HttpAnswer answer;
  const boost::system::error_code ec = client.ExchangeOnce(kGetSlot, milliseconds(2000), &answer);
  EXPECT_EQ(ec, net::error::connection_reset) << ec.message();
  EXPECT_EQ(answer.status, 0u);
  EXPECT_TRUE(answer.body.empty());
  EXPECT_EQ(proxy_->requests(), 1u);
}

TEST_F(FaultProxyTest, ResetCutsConnectionsOpenAtTheSwitch) {
  HttpClient client(proxy_->port());
  ASSERT_TRUE(client.Post(kGetSlot).has_value());
  proxy_->Set({.mode = FaultMode::kReset});
  EXPECT_TRUE(client.WaitForClose(milliseconds(1000)).has_value());
}

TEST_F(FaultProxyTest, BlackHoleNeverAnswersAndPassAnswersAgainOnANewConnection) {
  proxy_->Set({.mode = FaultMode::kBlackHole});
  HttpClient held(proxy_->port());
  HttpAnswer answer;
  EXPECT_EQ(held.ExchangeOnce(kGetSlot, milliseconds(300), &answer), beast::error::timeout);
  EXPECT_EQ(answer.status, 0u);
  proxy_->Set({.mode = FaultMode::kPass});
  std::optional<std::string> again = HttpClient(proxy_->port()).Post(kGetSlot);
  ASSERT_TRUE(again.has_value());
  EXPECT_TRUE(U64At(*again, "/result").has_value()) << *again;
}

TEST_F(FaultProxyTest, BlackHoleStopsAnsweringConnectionsOpenAtTheSwitch) {
  HttpClient client(proxy_->port());
  ASSERT_TRUE(client.Post(kGetSlot).has_value());
  proxy_->Set({.mode = FaultMode::kBlackHole});
  HttpAnswer answer;
  EXPECT_EQ(client.ExchangeOnce(kGetSlot, milliseconds(300), &answer), beast::error::timeout);
  EXPECT_EQ(proxy_->requests(), 2u);
}

class FaultProxyWebSocketTest : public FaultProxyTest {
 protected:
  void SetUp() override {
    ASSERT_GT(localnet_->http_port, 0) << "the localnet did not start";
    // The localnet serves pubsub on its HTTP port + 1.
    auto proxy = FaultProxy::Start("http://127.0.0.1:" + std::to_string(localnet_->http_port + 1));
    ASSERT_TRUE(proxy.ok()) << proxy.status();
    proxy_ = std::move(*proxy);
  }

  // Subscribes to slots through the proxy and waits for the first notification.
  void Subscribe(WsClient* ws) {
    ASSERT_TRUE(ws->ok());
    ASSERT_TRUE(ws->Send(R"({"jsonrpc":"2.0","id":1,"method":"slotSubscribe"})"));
    std::optional<std::string> confirmation = ws->Read(milliseconds(2000));
    ASSERT_TRUE(confirmation.has_value());
    EXPECT_TRUE(U64At(*confirmation, "/result").has_value()) << *confirmation;
    std::optional<std::string> notification = ws->Read(milliseconds(2000));
    ASSERT_TRUE(notification.has_value());
    EXPECT_NE(notification->find("slotNotification"), std::string::npos) << *notification;
  }
};

TEST_F(FaultProxyWebSocketTest, SlotSubscribeThroughTheProxyIsNotified) {
  WsClient ws(proxy_->port());
  Subscribe(&ws);
  EXPECT_EQ(proxy_->requests(), 1u);  // the upgrade
}

TEST_F(FaultProxyWebSocketTest, BlackHoleHoldsThePumpAndPassResumesIt) {
  WsClient ws(proxy_->port());
  Subscribe(&ws);
  proxy_->Set({.mode = FaultMode::kBlackHole});
  // What was on its way at the switch may still come.
  for (int i = 0; i < 5 && ws.Read(milliseconds(100)).has_value(); ++i) {
  }
  EXPECT_FALSE(ws.Read(milliseconds(400)).has_value());  // 20 slots at 20 ms
  EXPECT_FALSE(ws.closed());
  proxy_->Set({.mode = FaultMode::kPass});
  std::optional<std::string> resumed = ws.Read(milliseconds(2000));
  ASSERT_TRUE(resumed.has_value());
  EXPECT_NE(resumed->find("slotNotification"), std::string::npos) << *resumed;
}

TEST_F(FaultProxyWebSocketTest, ResetCutsThePump) {
  WsClient ws(proxy_->port());
  Subscribe(&ws);
  proxy_->Set({.mode = FaultMode::kReset});
  const auto deadline = std::chrono::steady_clock::now() + milliseconds(1000);
  while (!ws.closed() && std::chrono::steady_clock::now() < deadline) ws.Read(milliseconds(100));
  EXPECT_TRUE(ws.closed());
}

TEST_F(FaultProxyTest, BinarySwitchesItsFaultThroughTheControlEndpoint) {
  const std::string ready = dir_->Sub("proxy.ready");
  const pid_t pid = StartProcess({SWITCHYARD_FAULT_PROXY_BINARY, "--upstream",
                                  "http://127.0.0.1:" + std::to_string(localnet_->http_port),
                                  "--port", "0", "--ready-file", ready});
  ASSERT_GT(pid, 0);
  struct Stop {
    pid_t pid;
    ~Stop() {
      kill(pid, SIGTERM);
      WaitProcess(pid);
    }
  } stop{pid};
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (!std::filesystem::exists(ready) && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(milliseconds(10));
  }
  simdjson::dom::parser parser;
  uint64_t port = 0;
  ASSERT_TRUE(std::filesystem::exists(ready)) << "the proxy did not become ready";
  ASSERT_EQ(parser.load(ready)["http"].get_uint64().get(port), simdjson::SUCCESS);
  const auto p = static_cast<uint16_t>(port);
  std::optional<HttpAnswer> set =
      Call(p, http::verb::post, "/_fault", R"({"mode":"status","status":502})");
  ASSERT_TRUE(set.has_value());
  EXPECT_EQ(set->status, 200u) << set->body;
  std::optional<HttpAnswer> rpc = Call(p, http::verb::post, "/", kGetSlot);
  ASSERT_TRUE(rpc.has_value());
  EXPECT_EQ(rpc->status, 502u);
  std::optional<HttpAnswer> bad = Call(p, http::verb::post, "/_fault", R"({"mode":"sleep"})");
  ASSERT_TRUE(bad.has_value());
  EXPECT_EQ(bad->status, 400u);
  // The control path is answered under a black hole too, and can end it.
  ASSERT_TRUE(Call(p, http::verb::post, "/_fault", R"({"mode":"black_hole"})").has_value());
  EXPECT_FALSE(Call(p, http::verb::post, "/", kGetSlot, milliseconds(300)).has_value());
  std::optional<HttpAnswer> state = Call(p, http::verb::get, "/_fault", "");
  ASSERT_TRUE(state.has_value());
  EXPECT_NE(state->body.find(R"("mode":"black_hole")"), std::string::npos) << state->body;
  EXPECT_EQ(U64At(state->body, "/requests"), 2u) << state->body;
  ASSERT_TRUE(Call(p, http::verb::post, "/_fault", R"({"mode":"pass"})").has_value());
  std::optional<HttpAnswer> passed = Call(p, http::verb::post, "/", kGetSlot);
  ASSERT_TRUE(passed.has_value());
  EXPECT_EQ(passed->status, 200u);
  EXPECT_TRUE(U64At(passed->body, "/result").has_value()) << passed->body;
}

}  // namespace
}  // namespace switchyard::testing
