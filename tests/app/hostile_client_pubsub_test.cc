// Hostile pubsub clients against a real `switchyard serve` (over a localnet base layer): a
// WebSocket subscriber that never reads, oversized frames, messages and bodies, and
// subscription churn. Each test also bounds serve's memory and open descriptors (from /proc)
// while the clients are there and after they leave.

#include <sys/socket.h>
#include <sys/time.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <boost/asio/read_until.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/websocket.hpp>
#include <chrono>
#include <cstdint>
#include <optional>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "common/base58.h"
#include "fmt/format.h"
#include "gtest/gtest.h"
#include "tests/app/hostile_client_fixture.h"
#include "tests/support/sanitizer.h"

namespace switchyard::testing {
namespace {

using namespace std::chrono_literals;
namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using boost::system::error_code;
using SteadyClock = std::chrono::steady_clock;

constexpr char kClock[] = "SysvarC1ock11111111111111111111111111111111";

// --- 4. a WebSocket subscriber that never reads ---

TEST_F(HostileClientTest, WebSocketClientThatNeverReadsIsDisconnectedAndOthersKeepNotifications) {
  ports_ = StartServe("", "max_send_queue_messages = 512\nmax_send_queue_bytes = 262144",
                      /*slot_ms=*/2);
  ASSERT_GT(ports_.pubsub, 0);
  const ProcStats base = WarmBaseline();
  const int64_t slow_before = Metric("switchyard_pubsub_slow_consumers_total");

  // A good client reads slot notifications all along.
  WsClient good(ports_.pubsub);
  ASSERT_TRUE(good.connected());
  ASSERT_TRUE(good.Send(R"({"jsonrpc":"2.0","id":1,"method":"slotSubscribe"})"));
  ASSERT_TRUE(good.ReadAnswer().has_value());
  std::atomic<int64_t> notifications{0};
  std::atomic<bool> good_failed{false};
  std::atomic<bool> stopping{false};
  std::thread reader([&] {
    while (!stopping) {
      std::optional<std::string> message = good.Read();
      if (!message) {
        if (!stopping) good_failed = true;
        return;
      }
      if (message->find("slotNotification") != std::string::npos) ++notifications;
    }
  });

  // The hostile one subscribes to slots and to the clock (changed every slot) and never reads.
  WsClient hostile(ports_.pubsub, /*rcvbuf=*/4096);
  ASSERT_TRUE(hostile.connected());
  ASSERT_TRUE(hostile.Send(R"({"jsonrpc":"2.0","id":1,"method":"slotSubscribe"})"));
  ASSERT_TRUE(hostile.Send(fmt::format(
      R"({{"jsonrpc":"2.0","id":2,"method":"accountSubscribe","params":["{}",{{"encoding":"base64"}}]}})",
      kClock)));
  ProcStats peak = base;
  const bool cut = WaitFor(
      [&] {
        const ProcStats now = Stats(serve_);
        peak.rss_kib = std::max(peak.rss_kib, now.rss_kib);
        peak.fds = std::max(peak.fds, now.fds);
        std::this_thread::sleep_for(100ms);
        return Metric("switchyard_pubsub_slow_consumers_total") == slow_before + 1;
      },
      40s);
  EXPECT_TRUE(cut) << "the client that never reads was not disconnected";

  // Its connection is gone: what the kernel held drains, then the stream ends.
  bool ended = false;
  for (int i = 0; i < 100'000 && !ended; ++i) ended = !hostile.Read().has_value();
  EXPECT_TRUE(ended);
  EXPECT_TRUE(
      WaitForMetric("switchyard_pubsub_connections_open", [](int64_t v) { return v == 1; }));

  // The good client was never cut and still gets notifications.
  const int64_t seen = notifications.load();
  EXPECT_TRUE(WaitFor([&] { return notifications.load() >= seen + 20; }, 10s))
      << notifications.load() - seen;
  EXPECT_FALSE(good_failed.load());
  stopping = true;
  good.Shutdown();
  reader.join();
  ASSERT_TRUE(
      WaitForMetric("switchyard_pubsub_connections_open", [](int64_t v) { return v == 0; }));
  const ProcStats after = Stats(serve_);
  EXPECT_LT(peak.rss_kib - base.rss_kib, MemoryBoundKib(32 * kMiB))
      << "RSS KiB before " << base.rss_kib << ", peak " << peak.rss_kib;
  EXPECT_LE(after.fds, base.fds + 6) << "fds before " << base.fds << ", peak " << peak.fds;
  EXPECT_LT(after.rss_kib - base.rss_kib, MemoryBoundKib(32 * kMiB));
  RecordProperty("rss_kib", fmt::format("{} {} {}", base.rss_kib, peak.rss_kib, after.rss_kib));
  RecordProperty("fds", fmt::format("{} {} {}", base.fds, peak.fds, after.fds));
}

// --- 5. oversized frames, messages and bodies ---

// A client frame (masked, with a zero mask) of `opcode` (its FIN bit included) that announces
// `length` bytes and carries `sent` of them (spaces).
std::string Frame(uint8_t opcode, uint64_t length, uint64_t sent) {
  std::string frame = {static_cast<char>(opcode)};
  if (length < 126) {  // the shortest form of the length, as the protocol requires
    frame += static_cast<char>(0x80 | length);
  } else if (length < 65536) {
    frame += static_cast<char>(0x80 | 126);
    for (int shift = 8; shift >= 0; shift -= 8) frame += static_cast<char>(length >> shift);
  } else {
    frame += static_cast<char>(0x80 | 127);
    for (int shift = 56; shift >= 0; shift -= 8) frame += static_cast<char>(length >> shift);
  }
  frame += std::string(4, '\0');
  frame += std::string(sent, ' ');
  return frame;
}

// A WebSocket handshake over a bare socket, then `frames`: the first bytes serve answers (its
// close frame), as they came.
std::string SendFrames(uint16_t port, const std::string& frames) {
  asio::io_context io;
  tcp::socket socket(io);
  error_code ec;
  socket.connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), port), ec);
  if (ec) return "connect failed";
  timeval tv{5, 0};
  setsockopt(socket.native_handle(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  const std::string handshake =
      "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
      "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n";
  asio::write(socket, asio::buffer(handshake), ec);
  std::string in;
  const size_t head = asio::read_until(socket, asio::dynamic_buffer(in), "\r\n\r\n", ec);
  if (ec || in.find(" 101 ") == std::string::npos) return "handshake failed: " + in;
  in.erase(0, head);
  asio::write(socket, asio::buffer(frames), ec);
  while (in.size() < 4) {
    char scratch[64];
    const size_t n = socket.read_some(asio::buffer(scratch), ec);
    if (ec) break;
    in.append(scratch, n);
  }
  return in;
}

TEST_F(HostileClientTest, OversizedFramesMessagesAndBodiesAreClosedWith1009Or413AndCounted) {
  ports_ = StartServe("max_body_bytes = 65536", "max_message_bytes = 4096");
  ASSERT_GT(ports_.pubsub, 0);
  const ProcStats base = WarmBaseline();
  const int64_t oversized = Metric("switchyard_pubsub_client_oversized_messages_total");
  ASSERT_GE(oversized, 0);

  // Within the limit: answered.
  {
    WsClient client(ports_.pubsub);
    ASSERT_TRUE(client.connected());
    std::string padded = R"({"jsonrpc":"2.0","id":1,"method":"slotSubscribe")";
    padded += std::string(4000 - padded.size() - 1, ' ') + "}";
    ASSERT_TRUE(client.Send(padded));
    std::optional<std::string> answer = client.ReadAnswer();
    ASSERT_TRUE(answer.has_value()) << client.error().message();
    EXPECT_NE(answer->find("\"result\""), std::string::npos) << *answer;
  }
  // One frame over the limit, a message over it in 1 KiB frames, and a frame header that
  // announces 1 GiB and nothing after it: closed with 1009.
  std::string fragments = Frame(0x01, 1024, 1024);
  for (int i = 0; i < 8; ++i) fragments += Frame(0x00, 1024, 1024);
  fragments += Frame(0x80, 1024, 1024);
  for (const std::string& frames :
       {Frame(0x81, 10'000, 10'000), fragments, Frame(0x81, 1ull << 30, 0)}) {
    const std::string close_frame = SendFrames(ports_.pubsub, frames);
    ASSERT_GE(close_frame.size(), 4u) << close_frame;
    EXPECT_EQ(static_cast<uint8_t>(close_frame[0]), 0x88);
    EXPECT_EQ((static_cast<uint8_t>(close_frame[2]) << 8) | static_cast<uint8_t>(close_frame[3]),
              1009);
  }
  EXPECT_TRUE(WaitForMetric(
      "switchyard_pubsub_client_oversized_messages_total",
      [&](int64_t v) { return v == oversized + 3; }, 5s))
      << Metric("switchyard_pubsub_client_oversized_messages_total") - oversized;

  // HTTP: a body over max_body_bytes with its length, a length of 1 GB announced and not sent,
  // and chunks that add up over it: 413, the connection closed, counted.
  const int64_t too_large = Metric("switchyard_api_http_body_too_large_total");
  const std::string big(100'000, ' ');
  const std::vector<std::string> requests = {
      fmt::format("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\n\r\n{}", big.size(), big),
      "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1000000000\r\n\r\n",
      fmt::format("POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
                  "{:x}\r\n{}\r\n{:x}\r\n{}\r\n0\r\n\r\n",
                  50'000, big.substr(0, 50'000), 50'000, big.substr(0, 50'000)),
  };
  for (const std::string& request : requests) {
    asio::io_context io;
    tcp::socket socket(io);
    error_code ec;
    socket.connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), ports_.api), ec);
    ASSERT_FALSE(ec);
    timeval tv{5, 0};
    setsockopt(socket.native_handle(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    asio::write(socket, asio::buffer(request), ec);  // may be cut short by the close
    beast::flat_buffer buffer;
    http::response<http::string_body> answer;
    http::read(socket, buffer, answer, ec);
    ASSERT_FALSE(ec) << ec.message() << " for " << request.substr(0, 60);
    EXPECT_EQ(answer.result_int(), 413u) << request.substr(0, 60);
    EXPECT_FALSE(answer.keep_alive());
    http::response<http::string_body> next;
    http::read(socket, buffer, next, ec);
    EXPECT_TRUE(ec == http::error::end_of_stream || ec == asio::error::eof ||
                ec == asio::error::connection_reset)
        << ec.message();
  }
  EXPECT_TRUE(WaitForMetric(
      "switchyard_api_http_body_too_large_total", [&](int64_t v) { return v == too_large + 3; },
      5s));
  ASSERT_TRUE(WaitForMetric("switchyard_api_connections_open", [](int64_t v) { return v == 0; }));
  const ProcStats after = Stats(serve_);
  EXPECT_LT(after.rss_kib - base.rss_kib, MemoryBoundKib(16 * kMiB));
  EXPECT_LE(after.fds, base.fds + 6);
  RecordProperty("rss_kib", fmt::format("{} {}", base.rss_kib, after.rss_kib));
}

// --- 6. subscription churn ---

TEST_F(HostileClientTest, SubscriptionChurnIsAnsweredEveryTimeAndLeavesNoUpstreamSubscription) {
  constexpr int kConnections = 4;
  constexpr int kWindow = 32;  // subscriptions in flight per connection
  // Each connection makes this many subscriptions, a fixed amount of churn: the rate it reaches
  // is recorded, not asserted (a loaded machine is slower, and speed is the bench's to check).
  constexpr int kPerConnection = 8'000;
  ports_ = StartServe("", "", /*slot_ms=*/50);
  ASSERT_GT(ports_.pubsub, 0);
  const ProcStats base = WarmBaseline();
  const std::string upstream_series =
      R"(switchyard_pubsub_upstream_subscriptions{method="account",target="base"})";
  const std::string client_series = R"(switchyard_pubsub_client_subscriptions{method="account"})";
  ASSERT_EQ(Metric(upstream_series), 0);

  // Each slot of each window has its own account: subscribe, unsubscribe the id it gets, again.
  auto account = [](int connection, int slot) {
    std::array<uint8_t, 32> bytes{};
    bytes[0] = 7;
    bytes[1] = static_cast<uint8_t>(connection);
    bytes[2] = static_cast<uint8_t>(slot);
    return Base58Encode(bytes);
  };
  std::atomic<int64_t> subscribed{0}, unsubscribed{0}, errors{0};
  std::vector<std::string> failures(kConnections);
  std::atomic<int> finished{0};
  const auto start = SteadyClock::now();
  std::vector<std::thread> threads;
  for (int c = 0; c < kConnections; ++c) {
    threads.emplace_back([&, c] {
      struct Done {
        std::atomic<int>& finished;
        ~Done() { ++finished; }
      } done{finished};
      WsClient client(ports_.pubsub);
      if (!client.connected()) {
        failures[c] = "connect";
        return;
      }
      int made = 0;
      auto subscribe = [&](int slot) {
        return client.Send(fmt::format(
            R"({{"jsonrpc":"2.0","id":{},"method":"accountSubscribe","params":["{}"]}})", 2 * slot,
            account(c, slot)));
      };
      for (int slot = 0; slot < kWindow; ++slot, ++made) subscribe(slot);
      int in_flight = kWindow;
      const std::regex answer(R"("result":(true|[0-9]+),"id":([0-9]+))");
      while (in_flight > 0) {
        std::optional<std::string> message = client.ReadAnswer();
        std::smatch m;
        if (!message || !std::regex_search(*message, m, answer)) {
          ++errors;
          failures[c] = message ? *message : client.error().message();
          return;
        }
        const int id = std::stoi(m[2]);
        const int slot = id / 2;
        if (id % 2 == 0) {
          ++subscribed;
          client.Send(fmt::format(
              R"({{"jsonrpc":"2.0","id":{},"method":"accountUnsubscribe","params":[{}]}})",
              2 * slot + 1, std::string(m[1])));
        } else {
          ++unsubscribed;
          if (made < kPerConnection) {
            subscribe(slot);
            ++made;
          } else {
            --in_flight;
          }
        }
      }
    });
  }
  ProcStats peak = base;
  while (finished.load() < kConnections) {
    const ProcStats now = Stats(serve_);
    peak.rss_kib = std::max(peak.rss_kib, now.rss_kib);
    peak.fds = std::max(peak.fds, now.fds);
    std::this_thread::sleep_for(200ms);
  }
  for (std::thread& t : threads) t.join();
  const double seconds = std::chrono::duration<double>(SteadyClock::now() - start).count();
  for (int c = 0; c < kConnections; ++c) EXPECT_EQ(failures[c], "") << "connection " << c;
  EXPECT_EQ(errors.load(), 0);
  EXPECT_EQ(subscribed.load(), int64_t{kConnections} * kPerConnection);
  EXPECT_EQ(unsubscribed.load(), subscribed.load());
  const double rate = subscribed.load() / seconds;

  // Every subscription left: none upstream, none counted for clients, memory back.
  EXPECT_TRUE(WaitForMetric(
      upstream_series, [](int64_t v) { return v == 0; }, 15s))
      << Metric(upstream_series);
  EXPECT_TRUE(WaitForMetric(
      client_series, [](int64_t v) { return v == 0; }, 5s));
  ASSERT_TRUE(
      WaitForMetric("switchyard_pubsub_connections_open", [](int64_t v) { return v == 0; }));
  const ProcStats after = Stats(serve_);
  EXPECT_LT(peak.rss_kib - base.rss_kib, MemoryBoundKib(64 * kMiB));
  EXPECT_LT(after.rss_kib - base.rss_kib, MemoryBoundKib(64 * kMiB));
  // The upstream pubsub connections the churn opened stay for later subscriptions: a few.
  EXPECT_LE(after.fds, base.fds + 16) << "fds before " << base.fds << ", peak " << peak.fds;
  RecordProperty("subscriptions_per_second", std::to_string(rate));
  RecordProperty("rss_kib", fmt::format("{} {} {}", base.rss_kib, peak.rss_kib, after.rss_kib));
  RecordProperty("fds", fmt::format("{} {} {}", base.fds, peak.fds, after.fds));
}

}  // namespace
}  // namespace switchyard::testing
