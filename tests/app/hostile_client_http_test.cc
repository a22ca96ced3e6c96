// Hostile HTTP clients against a real `switchyard serve` (over a localnet base layer): thousands
// of idle connections up to [api] max_connections, slowloris headers and bodies, pipelined
// floods that never read, and invalid UTF-8 and deep nesting in every position of a request
// (over HTTP and pubsub). Each test also bounds serve's memory and open descriptors (from
// /proc) while the clients are there and after they leave.

#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <boost/asio/write.hpp>
#include <boost/beast/websocket.hpp>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <regex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

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
namespace websocket = beast::websocket;
using tcp = asio::ip::tcp;
using boost::system::error_code;
using SteadyClock = std::chrono::steady_clock;

double Percentile(std::vector<double> samples, double p) {
  if (samples.empty()) return 1e9;
  std::sort(samples.begin(), samples.end());
  const size_t index = std::min(samples.size() - 1, static_cast<size_t>(p * samples.size()));
  return samples[index];
}

// A blocking TCP connection to 127.0.0.1:`port` as a bare descriptor (-1 on failure), with a
// receive buffer of `rcvbuf` bytes when it is positive.
int ConnectRaw(uint16_t port, int rcvbuf = 0) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  if (rcvbuf > 0) setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf));
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(port);
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

// Whether the peer closed `fd` (EOF or reset) within `timeout`; bytes it sent first are read
// and dropped.
bool ClosedByPeer(int fd, std::chrono::milliseconds timeout) {
  const auto end = SteadyClock::now() + timeout;
  char scratch[4096];
  while (SteadyClock::now() < end) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 50) <= 0) continue;
    const ssize_t n = recv(fd, scratch, sizeof(scratch), MSG_DONTWAIT);
    if (n == 0) return true;
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) return true;
  }
  return false;
}

// Descriptors closed at the end of a scope.
struct Fds {
  std::vector<int> fds;
  ~Fds() { CloseAll(); }
  void CloseAll() {
    for (int fd : fds) close(fd);
    fds.clear();
  }
};

// The JSON-RPC error code of an answer, or 0 when it has none.
int64_t ErrorCode(const std::string& answer) {
  std::smatch m;
  if (!std::regex_search(answer, m, std::regex(R"("code":(-?[0-9]+))"))) return 0;
  return std::stoll(m[1]);
}

// --- 1. idle connections up to max_connections ---

TEST_F(HostileClientTest, IdleConnectionsUpToTheLimitThenTheNextIsRefusedAndOthersAreServed) {
  constexpr int kMax = 3000;
  constexpr int kActive = 4;
  ports_ = StartServe(fmt::format("max_connections = {}\nidle_timeout_ms = 120000", kMax));
  ASSERT_GT(ports_.api, 0);
  const ProcStats base = WarmBaseline();
  ASSERT_TRUE(WaitForMetric("switchyard_api_connections_open", [](int64_t v) { return v == 0; }));

  std::vector<std::unique_ptr<HttpClient>> active;
  for (int i = 0; i < kActive; ++i) {
    active.push_back(std::make_unique<HttpClient>(ports_.api));
    ASSERT_TRUE(active.back()->connected());
  }
  Fds idle;
  for (int i = 0; i < kMax - kActive; ++i) {
    const int fd = ConnectRaw(ports_.api);
    ASSERT_GE(fd, 0) << "connection " << i << ": " << strerror(errno);
    idle.fds.push_back(fd);
  }
  ASSERT_TRUE(WaitForMetric(
      "switchyard_api_connections_open", [&](int64_t v) { return v == kMax; }, 30s))
      << Metric("switchyard_api_connections_open");

  // The next connection: accepted by the kernel, closed by serve at once, counted.
  const int64_t rejected = Metric("switchyard_api_connections_rejected_total");
  const int refused = ConnectRaw(ports_.api);
  ASSERT_GE(refused, 0);
  EXPECT_TRUE(ClosedByPeer(refused, 5s));
  close(refused);
  EXPECT_TRUE(WaitForMetric(
      "switchyard_api_connections_rejected_total", [&](int64_t v) { return v == rejected + 1; },
      5s));

  // The open active connections are answered meanwhile, from four threads at once.
  std::vector<std::vector<double>> latencies(kActive);
  std::atomic<int> failures{0};
  {
    std::vector<std::thread> threads;
    for (int i = 0; i < kActive; ++i) {
      threads.emplace_back([&, i] {
        int f = 0;
        latencies[i] = TimedCalls(*active[i], 250, &f);
        failures += f;
      });
    }
    for (std::thread& t : threads) t.join();
  }
  std::vector<double> all;
  for (const auto& l : latencies) all.insert(all.end(), l.begin(), l.end());
  const double p99 = Percentile(all, 0.99);
  EXPECT_EQ(failures.load(), 0);
  EXPECT_LT(p99, 50.0) << "p99 ms with " << kMax << " connections open";
  const ProcStats peak = Stats(serve_);
  EXPECT_GE(peak.fds, base.fds + kMax - 10);
  EXPECT_LT(peak.rss_kib - base.rss_kib, MemoryBoundKib(96 * kMiB))
      << "RSS KiB before " << base.rss_kib << ", with the connections " << peak.rss_kib;

  // They leave: the descriptors go, memory comes back near the baseline, and a new connection is
  // admitted again.
  idle.CloseAll();
  active.clear();
  ASSERT_TRUE(WaitForMetric("switchyard_api_connections_open", [](int64_t v) { return v == 0; }));
  HttpClient again(ports_.api);
  int again_failures = 0;
  TimedCalls(again, 5, &again_failures);
  EXPECT_EQ(again_failures, 0);
  const ProcStats after = Stats(serve_);
  EXPECT_LE(after.fds, base.fds + 5) << "fds before " << base.fds << ", peak " << peak.fds;
  EXPECT_LT(after.rss_kib - base.rss_kib, MemoryBoundKib(64 * kMiB))
      << "RSS KiB before " << base.rss_kib << ", peak " << peak.rss_kib << ", after "
      << after.rss_kib;
  RecordProperty("p99_ms", std::to_string(p99));
  RecordProperty("rss_kib", fmt::format("{} {} {}", base.rss_kib, peak.rss_kib, after.rss_kib));
  RecordProperty("fds", fmt::format("{} {} {}", base.fds, peak.fds, after.fds));
}

// --- 2. slowloris ---

TEST_F(HostileClientTest, SlowlorisHeadersAndBodiesAreCutByTheirTimeoutsAndOthersAreServed) {
  constexpr int kEach = 16;
  constexpr auto kHeaderTimeout = 500ms;
  constexpr auto kBodyTimeout = 800ms;
  ports_ = StartServe(fmt::format("header_timeout_ms = {}\nbody_timeout_ms = {}",
                                  kHeaderTimeout.count(), kBodyTimeout.count()));
  ASSERT_GT(ports_.api, 0);
  const ProcStats base = WarmBaseline();
  const int64_t timeouts = Metric("switchyard_api_http_timeouts_total");
  ASSERT_GE(timeouts, 0);

  // Header slowlorises send one byte of an endless header every 50 ms; body ones send their
  // headers whole, then one byte of a 100000-byte body every 50 ms.
  struct Slow {
    int fd = -1;
    bool body = false;
    size_t sent = 0;
    SteadyClock::time_point start;
    std::optional<std::chrono::milliseconds> closed_after;
  };
  std::vector<Slow> slow(2 * kEach);
  Fds fds;
  const std::string header = "POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ";
  const std::string body_head =
      "POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
      "Content-Length: 100000\r\n\r\n";
  for (size_t i = 0; i < slow.size(); ++i) {
    slow[i].fd = ConnectRaw(ports_.api);
    ASSERT_GE(slow[i].fd, 0);
    fds.fds.push_back(slow[i].fd);
    slow[i].body = i >= kEach;
    slow[i].start = SteadyClock::now();
    if (slow[i].body) {
      ASSERT_EQ(send(slow[i].fd, body_head.data(), body_head.size(), MSG_NOSIGNAL),
                static_cast<ssize_t>(body_head.size()));
    }
  }
  std::atomic<bool> done{false};
  std::thread drip([&] {
    const auto end = SteadyClock::now() + 10s;
    while (SteadyClock::now() < end) {
      bool open = false;
      for (Slow& s : slow) {
        if (s.closed_after) continue;
        char scratch[512];
        const ssize_t n = recv(s.fd, scratch, sizeof(scratch), MSG_DONTWAIT);
        const bool gone = n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK);
        const char byte = s.body ? ' ' : (s.sent < header.size() ? header[s.sent] : 'a');
        if (gone || send(s.fd, &byte, 1, MSG_NOSIGNAL | MSG_DONTWAIT) != 1) {
          s.closed_after =
              std::chrono::duration_cast<std::chrono::milliseconds>(SteadyClock::now() - s.start);
          continue;
        }
        ++s.sent;
        open = true;
      }
      if (!open) break;
      std::this_thread::sleep_for(50ms);
    }
    done = true;
  });

  // Meanwhile two well-behaved clients are answered.
  std::vector<double> latencies;
  int failures = 0;
  ProcStats peak = base;
  {
    HttpClient a(ports_.api), b(ports_.api);
    while (!done) {
      for (HttpClient* c : {&a, &b}) {
        std::vector<double> l = TimedCalls(*c, 10, &failures);
        latencies.insert(latencies.end(), l.begin(), l.end());
      }
      const ProcStats now = Stats(serve_);
      peak.rss_kib = std::max(peak.rss_kib, now.rss_kib);
      peak.fds = std::max(peak.fds, now.fds);
      std::this_thread::sleep_for(20ms);
    }
  }
  drip.join();
  const double p99 = Percentile(latencies, 0.99);
  EXPECT_EQ(failures, 0);
  EXPECT_GT(latencies.size(), 100u);
  EXPECT_LT(p99, 50.0);
  for (size_t i = 0; i < slow.size(); ++i) {
    const auto timeout = slow[i].body ? kBodyTimeout : kHeaderTimeout;
    ASSERT_TRUE(slow[i].closed_after.has_value()) << "slowloris " << i << " never cut";
    EXPECT_GE(*slow[i].closed_after, timeout - 50ms) << "slowloris " << i;
    EXPECT_LE(*slow[i].closed_after, timeout + 2500ms) << "slowloris " << i;
  }
  EXPECT_TRUE(WaitForMetric(
      "switchyard_api_http_timeouts_total", [&](int64_t v) { return v >= timeouts + 2 * kEach; },
      5s))
      << Metric("switchyard_api_http_timeouts_total") - timeouts;
  fds.CloseAll();
  ASSERT_TRUE(WaitForMetric("switchyard_api_connections_open", [](int64_t v) { return v == 0; }));
  const ProcStats after = Stats(serve_);
  EXPECT_LT(peak.rss_kib - base.rss_kib, MemoryBoundKib(16 * kMiB));
  EXPECT_LE(after.fds, base.fds + 5);
  EXPECT_LT(after.rss_kib - base.rss_kib, MemoryBoundKib(16 * kMiB));
  RecordProperty("p99_ms", std::to_string(p99));
  RecordProperty("rss_kib", fmt::format("{} {} {}", base.rss_kib, peak.rss_kib, after.rss_kib));
}

// --- 3. pipelined floods ---

// A client that writes up to `count` pipelined getIdentity calls (ids 1..count) without
// reading, as far as the kernel takes them.
class Flood {
 public:
  Flood(uint16_t port, int count) : socket_(io_) {
    for (int i = 1; i <= count; ++i) {
      const std::string body =
          fmt::format(R"({{"jsonrpc":"2.0","id":{},"method":"getIdentity"}})", i);
      bytes_ += fmt::format(
          "POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
          "Content-Length: {}\r\n\r\n{}",
          body.size(), body);
      ends_.push_back(bytes_.size());
    }
    error_code ec;
    socket_.open(tcp::v4(), ec);
    socket_.set_option(asio::socket_base::receive_buffer_size(8192), ec);
    socket_.connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), port), ec);
    connected_ = !ec;
    socket_.non_blocking(true, ec);
  }
  bool connected() const { return connected_; }

  // Writes until nothing more goes for `quiet`; the number of requests begun.
  int WriteUntilStalled(std::chrono::milliseconds quiet) {
    auto last_progress = SteadyClock::now();
    while (written_ < bytes_.size() && SteadyClock::now() - last_progress < quiet) {
      error_code ec;
      const size_t n =
          socket_.write_some(asio::buffer(bytes_.data() + written_, bytes_.size() - written_), ec);
      if (n > 0) {
        written_ += n;
        last_progress = SteadyClock::now();
      } else {
        std::this_thread::sleep_for(5ms);
      }
    }
    return begun();
  }
  // Requests of which at least one byte went.
  int begun() const {
    if (written_ == 0) return 0;
    const size_t ended = std::lower_bound(ends_.begin(), ends_.end(), written_) - ends_.begin();
    return 1 + static_cast<int>(std::min(ended, ends_.size() - 1));
  }
  bool stalled() const { return written_ < bytes_.size(); }

  // Finishes the request begun last (from another thread) and reads the answers of the
  // `expected` first requests: how many came, in order, with the id of each.
  int ReadAnswers(int expected, std::chrono::seconds deadline) {
    error_code ec;
    socket_.non_blocking(false, ec);
    timeval tv{static_cast<time_t>(deadline.count()), 0};
    setsockopt(socket_.native_handle(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    const size_t end = ends_[expected - 1];
    std::thread finish([&] {
      error_code ignored;
      asio::write(socket_, asio::buffer(bytes_.data() + written_, end - written_), ignored);
    });
    beast::flat_buffer buffer;
    int in_order = 0;
    for (int i = 1; i <= expected; ++i) {
      http::response<http::string_body> answer;
      http::read(socket_, buffer, answer, ec);
      if (ec || answer.result_int() != 200 ||
          answer.body().find(fmt::format("\"id\":{}}}", i)) == std::string::npos) {
        break;
      }
      ++in_order;
    }
    finish.join();
    return in_order;
  }

  void Close() {
    error_code ignored;
    socket_.close(ignored);
  }

 private:
  asio::io_context io_;
  tcp::socket socket_;
  std::string bytes_;
  std::vector<size_t> ends_;  // of each request in bytes_
  size_t written_ = 0;
  bool connected_ = false;
};

TEST_F(HostileClientTest, PipelinedFloodIsReadNoFurtherThanMaxPipelinedAndAnsweredInOrder) {
  constexpr int kRequests = 200'000;  // more than the kernel buffers (42000 here)
  constexpr auto kWriteTimeout = 4000ms;
  ports_ =
      StartServe(fmt::format("max_pipelined = 16\nwrite_timeout_ms = {}", kWriteTimeout.count()));
  ASSERT_GT(ports_.api, 0);
  const ProcStats base = WarmBaseline();
  const int64_t read_before = Metric("switchyard_api_http_requests_total");

  // The flood: the kernel takes what it buffers, then serve stops reading.
  Flood flood(ports_.api, kRequests);
  ASSERT_TRUE(flood.connected());
  const int begun = flood.WriteUntilStalled(300ms);
  ASSERT_TRUE(flood.stalled()) << "serve read all " << kRequests << " requests unanswered";
  EXPECT_GT(begun, 1000);
  // Serve answers what it read until the kernel takes no more of its answers, then reads no
  // further: its request count stands still. A sanitized serve answers a hundred times slower
  // and takes up to a minute to fill those buffers, so there the count is given that long to
  // stop; unsanitized, it must already stand.
  int64_t read1 = 0;
  int64_t read2 = Metric("switchyard_api_http_requests_total");
  const auto settle_until = std::chrono::steady_clock::now() + (kSanitized ? 120s : 0s);
  do {
    read1 = read2;
    std::this_thread::sleep_for(300ms);
    read2 = Metric("switchyard_api_http_requests_total");
  } while (read1 != read2 && std::chrono::steady_clock::now() < settle_until);
  EXPECT_EQ(read1, read2) << "serve kept reading a client that does not read";
  EXPECT_LT(read2 - read_before, begun) << "serve read every request the client wrote";

  // Others are served meanwhile; serve's memory stays bounded.
  HttpClient other(ports_.api);
  int failures = 0;
  const double p99 = Percentile(TimedCalls(other, 100, &failures), 0.99);
  EXPECT_EQ(failures, 0);
  EXPECT_LT(p99, 50.0);
  const ProcStats peak = Stats(serve_);
  EXPECT_LT(peak.rss_kib - base.rss_kib, MemoryBoundKib(32 * kMiB));

  // The client reads at last (within the write timeout): every answer, in order.
  EXPECT_EQ(flood.ReadAnswers(begun, 20s), begun);
  flood.Close();

  // A second flood never reads: cut by the write timeout, counted.
  const int64_t timeouts = Metric("switchyard_api_http_timeouts_total");
  Flood stuck(ports_.api, kRequests);
  ASSERT_TRUE(stuck.connected());
  stuck.WriteUntilStalled(300ms);
  const auto stall = SteadyClock::now();
  EXPECT_TRUE(WaitForMetric(
      "switchyard_api_http_timeouts_total", [&](int64_t v) { return v == timeouts + 1; }, 15s));
  EXPECT_GE(SteadyClock::now() - stall, kWriteTimeout - 1000ms);
  EXPECT_TRUE(WaitForMetric("switchyard_api_connections_open", [](int64_t v) { return v == 1; }));
  stuck.Close();
  const ProcStats after = Stats(serve_);
  EXPECT_LE(after.fds, base.fds + 6);
  EXPECT_LT(after.rss_kib - base.rss_kib, MemoryBoundKib(32 * kMiB));
  RecordProperty("flood_begun", begun);
  RecordProperty("p99_ms", std::to_string(p99));
  RecordProperty("rss_kib", fmt::format("{} {} {}", base.rss_kib, peak.rss_kib, after.rss_kib));
}

// --- 7. invalid UTF-8 and deep nesting ---

std::string Nested(int depth, std::string_view inner = "1") {
  return std::string(depth, '[') + std::string(inner) + std::string(depth, ']');
}

struct BadRequest {
  std::string name;
  std::string body;
  std::vector<int64_t> codes;  // acceptable error codes
};

std::vector<BadRequest> BadRequests() {
  const std::string bad = "\xff\xfe\xc3\x28";  // not UTF-8
  const std::vector<int64_t> parse = {-32700};
  const std::vector<int64_t> invalid = {-32600};
  return {
      {"utf8 method", fmt::format(R"({{"jsonrpc":"2.0","id":1,"method":"get{}"}})", bad), parse},
      {"utf8 params",
       fmt::format(R"({{"jsonrpc":"2.0","id":1,"method":"getBalance","params":["{}"]}})", bad),
       parse},
      {"utf8 id", fmt::format(R"({{"jsonrpc":"2.0","id":"{}","method":"getIdentity"}})", bad),
       parse},
      {"utf8 key", fmt::format(R"({{"jsonrpc":"2.0","id":1,"{}":1,"method":"getIdentity"}})", bad),
       parse},
      {"utf8 batch element",
       fmt::format(R"([{{"jsonrpc":"2.0","id":1,"method":"getIdentity"}},"{}"])", bad), parse},
      {"deep params",
       fmt::format(R"({{"jsonrpc":"2.0","id":1,"method":"getBalance","params":{}}})", Nested(100)),
       parse},
      {"very deep params",
       fmt::format(R"({{"jsonrpc":"2.0","id":1,"method":"getBalance","params":{}}})",
                   Nested(100'000)),
       parse},
      {"deep id", fmt::format(R"({{"jsonrpc":"2.0","id":{},"method":"getIdentity"}})", Nested(100)),
       parse},
      {"deep method", fmt::format(R"({{"jsonrpc":"2.0","id":1,"method":{}}})", Nested(100)), parse},
      {"deep batch", Nested(100'000, R"({"jsonrpc":"2.0","id":1,"method":"getIdentity"})"), parse},
      {"nested method", R"({"jsonrpc":"2.0","id":1,"method":[["getIdentity"]]})", invalid},
      {"nested params of getBalance",
       fmt::format(R"({{"jsonrpc":"2.0","id":1,"method":"getBalance","params":[{}]}})",
                   Nested(10, "\"x\"")),
       {-32602}},
  };
}

TEST_F(HostileClientTest, InvalidUtf8AndDeepNestingGetJsonRpcErrorsAndTheConnectionStays) {
  ports_ = StartServe("");
  ASSERT_GT(ports_.api, 0);
  const ProcStats base = WarmBaseline();
  const int64_t errors = Metric("switchyard_api_rpc_errors_total");
  const int64_t accepted = Metric("switchyard_api_connections_accepted_total");

  // HTTP: one keep-alive connection for every case.
  HttpClient client(ports_.api, 10s);
  ASSERT_TRUE(client.connected());
  const std::vector<BadRequest> cases = BadRequests();
  for (const BadRequest& bad : cases) {
    auto answer = client.Post("/", bad.body);
    ASSERT_EQ(answer.result_int(), 200u) << bad.name << ": " << answer.body();
    const int64_t code = ErrorCode(answer.body());
    EXPECT_TRUE(std::find(bad.codes.begin(), bad.codes.end(), code) != bad.codes.end())
        << bad.name << ": " << answer.body();
  }
  // A structured id within the depth limit is the router's to echo (its calls pass ids through
  // as they are, see the router tests): answered, the id as it came.
  auto structured = client.Post("/", R"({"jsonrpc":"2.0","id":[[1]],"method":"getIdentity"})");
  EXPECT_NE(structured.body().find(R"("id":[[1]])"), std::string::npos) << structured.body();
  EXPECT_NE(structured.body().find(kIdentity), std::string::npos) << structured.body();
  // A batch with a nested element: the good one answered, the other an invalid request.
  auto batch = client.Post(
      "/", fmt::format(R"([{{"jsonrpc":"2.0","id":1,"method":"getIdentity"}},{}])", Nested(5)));
  ASSERT_EQ(batch.result_int(), 200u);
  EXPECT_NE(batch.body().find(kIdentity), std::string::npos) << batch.body();
  EXPECT_EQ(ErrorCode(batch.body()), -32600) << batch.body();
  auto good = client.Post("/", Request("getIdentity", "[]"));
  EXPECT_NE(good.body().find(kIdentity), std::string::npos) << good.body();
  EXPECT_EQ(Metric("switchyard_api_connections_accepted_total"), accepted + 1)
      << "the connection was not kept";
  EXPECT_GE(Metric("switchyard_api_rpc_errors_total"), errors + static_cast<int64_t>(cases.size()));

  // Pubsub: the same requests as binary messages (a text message must be UTF-8 by the
  // protocol) on one connection; each answered with an error, the connection kept.
  const int64_t bad_messages = Metric("switchyard_pubsub_client_bad_messages_total");
  WsClient ws(ports_.pubsub);
  ASSERT_TRUE(ws.connected());
  std::vector<BadRequest> pubsub_cases = {
      {"utf8 params",
       fmt::format(R"({{"jsonrpc":"2.0","id":1,"method":"accountSubscribe","params":["{}"]}})",
                   "\xff\xfe"),
       {-32700}},
      {"deep params",
       fmt::format(R"({{"jsonrpc":"2.0","id":1,"method":"accountSubscribe","params":{}}})",
                   Nested(100'000)),
       {-32700}},
      {"batch", R"([{"jsonrpc":"2.0","id":1,"method":"slotSubscribe"}])", {-32600}},
      {"nested params",
       fmt::format(R"({{"jsonrpc":"2.0","id":1,"method":"accountSubscribe","params":[{}]}})",
                   Nested(10, "\"x\"")),
       {-32602}},
  };
  for (const BadRequest& bad : cases) {
    if (bad.name.find("params") == std::string::npos) pubsub_cases.push_back(bad);
  }
  int64_t parse_errors = 0;
  for (const BadRequest& bad : pubsub_cases) {
    ASSERT_TRUE(ws.Send(bad.body, /*binary=*/true)) << bad.name;
    std::optional<std::string> answer = ws.ReadAnswer();
    ASSERT_TRUE(answer.has_value()) << bad.name << ": " << ws.error().message();
    const int64_t code = ErrorCode(*answer);
    EXPECT_TRUE(std::find(bad.codes.begin(), bad.codes.end(), code) != bad.codes.end())
        << bad.name << ": " << *answer;
    if (code == -32700 || code == -32600) ++parse_errors;
  }
  ASSERT_TRUE(ws.Send(R"({"jsonrpc":"2.0","id":9,"method":"slotSubscribe"})"));
  std::optional<std::string> subscribed = ws.ReadAnswer();
  ASSERT_TRUE(subscribed.has_value());
  EXPECT_NE(subscribed->find("\"result\""), std::string::npos) << *subscribed;
  EXPECT_GE(Metric("switchyard_pubsub_client_bad_messages_total"), bad_messages + parse_errors);

  // Invalid UTF-8 in a text message breaks the WebSocket protocol: closed with 1007, counted.
  ASSERT_TRUE(ws.Send(R"({"jsonrpc":"2.0","id":[[1]],"method":"getIdentity"})"));
  std::optional<std::string> echoed = ws.ReadAnswer();
  ASSERT_TRUE(echoed.has_value());
  EXPECT_EQ(ErrorCode(*echoed), -32601) << *echoed;
  EXPECT_NE(echoed->find(R"("id":[[1]])"), std::string::npos) << *echoed;
  const int64_t protocol_errors = Metric("switchyard_pubsub_client_protocol_errors_total");
  ws.Send(cases[0].body, /*binary=*/false);
  EXPECT_FALSE(ws.ReadAnswer().has_value());
  EXPECT_EQ(ws.error(), websocket::error::closed) << ws.error().message();
  EXPECT_EQ(ws.ws().reason().code, websocket::close_code::bad_payload);
  EXPECT_TRUE(WaitForMetric(
      "switchyard_pubsub_client_protocol_errors_total",
      [&](int64_t v) { return v == protocol_errors + 1; }, 5s));

  const ProcStats after = Stats(serve_);
  EXPECT_LT(after.rss_kib - base.rss_kib, MemoryBoundKib(16 * kMiB));
  EXPECT_LE(after.fds, base.fds + 6);
  RecordProperty("rss_kib", fmt::format("{} {}", base.rss_kib, after.rss_kib));
}

}  // namespace
}  // namespace switchyard::testing
