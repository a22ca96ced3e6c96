// Hostile clients against a real `switchyard serve` (over a localnet base layer): thousands of
// idle connections up to [api] max_connections, slowloris headers and bodies, pipelined floods
// that never read, a WebSocket subscriber that never reads, oversized frames, messages and
// bodies, subscription churn, and invalid UTF-8 and deep nesting in every position of a
// request. Each test also bounds serve's memory and open descriptors (from /proc) while the
// clients are there and after they leave.

#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <boost/asio/connect.hpp>
#include <boost/asio/read_until.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/websocket.hpp>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <memory>
#include <mutex>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "common/base58.h"
#include "fmt/format.h"
#include "gtest/gtest.h"
#include "tests/app/process_test.h"

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

constexpr char kIdentity[] = "11111111111111111111111111111112";
constexpr char kClock[] = "SysvarC1ock11111111111111111111111111111111";
constexpr int64_t kMiB = 1024;  // in KiB, as VmRSS is

// serve's resident memory (KiB) and open descriptors, from /proc.
struct ProcStats {
  int64_t rss_kib = -1;
  int64_t fds = -1;
};

ProcStats Stats(pid_t pid) {
  ProcStats stats;
  if (std::optional<std::string> status = ReadFile(fmt::format("/proc/{}/status", pid))) {
    const size_t at = status->find("VmRSS:");
    if (at != std::string::npos) stats.rss_kib = std::stoll(status->substr(at + 6));
  }
  std::error_code ec;
  int64_t fds = 0;
  for (std::filesystem::directory_iterator it(fmt::format("/proc/{}/fd", pid), ec), end;
       !ec && it != end; it.increment(ec)) {
    ++fds;
  }
  if (!ec) stats.fds = fds;
  return stats;
}

// The descriptors this process may open, raised to its hard limit.
void RaiseFileLimit() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0) return;
  limit.rlim_cur = limit.rlim_max;
  setrlimit(RLIMIT_NOFILE, &limit);
}

double Percentile(std::vector<double> samples, double p) {
  if (samples.empty()) return 1e9;
  std::sort(samples.begin(), samples.end());
  const size_t index = std::min(samples.size() - 1, static_cast<size_t>(p * samples.size()));
  return samples[index];
}

// getIdentity (answered by the router itself) `count` times on `client`: the latency of each
// in milliseconds; a failed or wrong answer is counted in `failures`.
std::vector<double> TimedCalls(HttpClient& client, int count, int* failures) {
  std::vector<double> latencies;
  for (int i = 0; i < count; ++i) {
    const auto start = SteadyClock::now();
    auto answer = client.Post("/", Request("getIdentity", "[]"));
    latencies.push_back(
        std::chrono::duration<double, std::milli>(SteadyClock::now() - start).count());
    if (answer.result_int() != 200 || answer.body().find(kIdentity) == std::string::npos) {
      ++*failures;
    }
  }
  return latencies;
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

struct Ports {
  uint16_t api = 0;
  uint16_t admin = 0;
  uint16_t pubsub = 0;
};

class HostileClientTest : public ProcessTest {
 protected:
  static void SetUpTestSuite() { RaiseFileLimit(); }

  // serve with [api] lines `api` and [pubsub] lines `pubsub` on two workers, over a localnet
  // base layer that makes a slot every `slot_ms`.
  Ports StartServe(const std::string& api, const std::string& pubsub = "", int slot_ms = 400) {
    const uint16_t base = StartLocalnet("base", {"--slot-ms", std::to_string(slot_ms)});
    const std::string config =
        WriteFile("serve.toml",
                  fmt::format("[api]\nlisten = \"127.0.0.1:0\"\nthreads = 2\n{}\n"
                              "[admin]\nlisten = \"127.0.0.1:0\"\n"
                              "[router]\nidentity = \"{}\"\n"
                              "[upstreams.base]\nendpoints = [{{url = \"http://127.0.0.1:{}\"}}]\n"
                              "[pubsub]\n{}\n",
                              api, kIdentity, base, pubsub));
    const std::string ready = dir_.Sub("serve.ready");
    serve_ = Start({SWITCHYARD_BINARY, "serve", "--config", config, "--data-dir", dir_.Sub("data"),
                    "--ready-file", ready});
    const std::string text = WaitForReadyFile(ready);
    return {static_cast<uint16_t>(JsonInt(text, "api")),
            static_cast<uint16_t>(JsonInt(text, "admin")),
            static_cast<uint16_t>(JsonInt(text, "pubsub"))};
  }

  int64_t Metric(const std::string& series) {
    std::optional<HttpAnswer> metrics = HttpGet(ports_.admin, "/metrics");
    return metrics ? MetricValue(metrics->body, series) : -2;
  }

  bool WaitForMetric(const std::string& series, const std::function<bool(int64_t)>& good,
                     std::chrono::milliseconds deadline = 15s) {
    return WaitFor(
        [&] {
          const int64_t value = Metric(series);
          if (good(value)) return true;
          std::this_thread::sleep_for(50ms);
          return false;
        },
        deadline);
  }

  // Baseline stats once serve has answered a few requests.
  ProcStats WarmBaseline() {
    HttpClient client(ports_.api);
    int failures = 0;
    TimedCalls(client, 50, &failures);
    EXPECT_EQ(failures, 0);
    std::this_thread::sleep_for(200ms);
    return Stats(serve_);
  }

  pid_t serve_ = -1;
  Ports ports_;
};

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
  EXPECT_LT(peak.rss_kib - base.rss_kib, 96 * kMiB)
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
  EXPECT_LT(after.rss_kib - base.rss_kib, 64 * kMiB)
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
  EXPECT_LT(peak.rss_kib - base.rss_kib, 16 * kMiB);
  EXPECT_LE(after.fds, base.fds + 5);
  EXPECT_LT(after.rss_kib - base.rss_kib, 16 * kMiB);
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
  const int64_t read1 = Metric("switchyard_api_http_requests_total");
  std::this_thread::sleep_for(300ms);
  const int64_t read2 = Metric("switchyard_api_http_requests_total");
  EXPECT_EQ(read1, read2) << "serve kept reading a client that does not read";
  EXPECT_LT(read2 - read_before, begun) << "serve read every request the client wrote";

  // Others are served meanwhile; serve's memory stays bounded.
  HttpClient other(ports_.api);
  int failures = 0;
  const double p99 = Percentile(TimedCalls(other, 100, &failures), 0.99);
  EXPECT_EQ(failures, 0);
  EXPECT_LT(p99, 50.0);
  const ProcStats peak = Stats(serve_);
  EXPECT_LT(peak.rss_kib - base.rss_kib, 32 * kMiB);

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
  EXPECT_LT(after.rss_kib - base.rss_kib, 32 * kMiB);
  RecordProperty("flood_begun", begun);
  RecordProperty("p99_ms", std::to_string(p99));
  RecordProperty("rss_kib", fmt::format("{} {} {}", base.rss_kib, peak.rss_kib, after.rss_kib));
}

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
  EXPECT_LT(peak.rss_kib - base.rss_kib, 32 * kMiB)
      << "RSS KiB before " << base.rss_kib << ", peak " << peak.rss_kib;
  EXPECT_LE(after.fds, base.fds + 6) << "fds before " << base.fds << ", peak " << peak.fds;
  EXPECT_LT(after.rss_kib - base.rss_kib, 32 * kMiB);
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
  EXPECT_LT(after.rss_kib - base.rss_kib, 16 * kMiB);
  EXPECT_LE(after.fds, base.fds + 6);
  RecordProperty("rss_kib", fmt::format("{} {}", base.rss_kib, after.rss_kib));
}

// --- 6. subscription churn ---

TEST_F(HostileClientTest, SubscriptionChurnIsAnsweredEveryTimeAndLeavesNoUpstreamSubscription) {
  constexpr int kConnections = 4;
  constexpr int kWindow = 32;  // subscriptions in flight per connection
  constexpr auto kDuration = 3s;
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
  const auto start = SteadyClock::now();
  const auto end = start + kDuration;
  std::vector<std::thread> threads;
  for (int c = 0; c < kConnections; ++c) {
    threads.emplace_back([&, c] {
      WsClient client(ports_.pubsub);
      if (!client.connected()) {
        failures[c] = "connect";
        return;
      }
      auto subscribe = [&](int slot) {
        return client.Send(fmt::format(
            R"({{"jsonrpc":"2.0","id":{},"method":"accountSubscribe","params":["{}"]}})", 2 * slot,
            account(c, slot)));
      };
      for (int slot = 0; slot < kWindow; ++slot) subscribe(slot);
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
          if (SteadyClock::now() < end) {
            subscribe(slot);
          } else {
            --in_flight;
          }
        }
      }
    });
  }
  ProcStats peak = base;
  while (SteadyClock::now() < end) {
    const ProcStats now = Stats(serve_);
    peak.rss_kib = std::max(peak.rss_kib, now.rss_kib);
    peak.fds = std::max(peak.fds, now.fds);
    std::this_thread::sleep_for(200ms);
  }
  for (std::thread& t : threads) t.join();
  const double seconds = std::chrono::duration<double>(SteadyClock::now() - start).count();
  for (int c = 0; c < kConnections; ++c) EXPECT_EQ(failures[c], "") << "connection " << c;
  EXPECT_EQ(errors.load(), 0);
  EXPECT_EQ(subscribed.load(), unsubscribed.load());
  const double rate = subscribed.load() / seconds;
  EXPECT_GT(rate, 10'000.0) << subscribed.load() << " subscriptions in " << seconds << " s";

  // Every subscription left: none upstream, none counted for clients, memory back.
  EXPECT_TRUE(WaitForMetric(
      upstream_series, [](int64_t v) { return v == 0; }, 15s))
      << Metric(upstream_series);
  EXPECT_TRUE(WaitForMetric(
      client_series, [](int64_t v) { return v == 0; }, 5s));
  ASSERT_TRUE(
      WaitForMetric("switchyard_pubsub_connections_open", [](int64_t v) { return v == 0; }));
  const ProcStats after = Stats(serve_);
  EXPECT_LT(peak.rss_kib - base.rss_kib, 64 * kMiB);
  EXPECT_LT(after.rss_kib - base.rss_kib, 64 * kMiB);
  // The upstream pubsub connections the churn opened stay for later subscriptions: a few.
  EXPECT_LE(after.fds, base.fds + 16) << "fds before " << base.fds << ", peak " << peak.fds;
  RecordProperty("subscriptions_per_second", std::to_string(rate));
  RecordProperty("rss_kib", fmt::format("{} {} {}", base.rss_kib, peak.rss_kib, after.rss_kib));
  RecordProperty("fds", fmt::format("{} {} {}", base.fds, peak.fds, after.fds));
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
  EXPECT_LT(after.rss_kib - base.rss_kib, 16 * kMiB);
  EXPECT_LE(after.fds, base.fds + 6);
  RecordProperty("rss_kib", fmt::format("{} {}", base.rss_kib, after.rss_kib));
}

}  // namespace
}  // namespace switchyard::testing
