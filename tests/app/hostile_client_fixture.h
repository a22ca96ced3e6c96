#pragma once

// What the hostile-client tests (hostile_client_http_test.cc, hostile_client_pubsub_test.cc)
// share: serve's memory and open descriptors from /proc, timed getIdentity calls, and the
// fixture that starts a real `switchyard serve` over a localnet base layer. A test target that
// includes this defines SWITCHYARD_BINARY and SWITCHYARD_LOCALNET_BINARY.

#include <sys/resource.h>
#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "fmt/format.h"
#include "gtest/gtest.h"
#include "tests/app/process_test.h"

namespace switchyard::testing {

inline constexpr char kIdentity[] = "11111111111111111111111111111112";
inline constexpr int64_t kMiB = 1024;  // in KiB, as VmRSS is

// serve's resident memory (KiB) and open descriptors, from /proc.
struct ProcStats {
  int64_t rss_kib = -1;
  int64_t fds = -1;
};

inline ProcStats Stats(pid_t pid) {
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
inline void RaiseFileLimit() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0) return;
  limit.rlim_cur = limit.rlim_max;
  setrlimit(RLIMIT_NOFILE, &limit);
}

// getIdentity (answered by the router itself) `count` times on `client`: the latency of each
// in milliseconds; a failed or wrong answer is counted in `failures`.
inline std::vector<double> TimedCalls(HttpClient& client, int count, int* failures) {
  std::vector<double> latencies;
  for (int i = 0; i < count; ++i) {
    const auto start = std::chrono::steady_clock::now();
    auto answer = client.Post("/", Request("getIdentity", "[]"));
    latencies.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
            .count());
    if (answer.result_int() != 200 || answer.body().find(kIdentity) == std::string::npos) {
      ++*failures;
    }
  }
  return latencies;
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
                     std::chrono::milliseconds deadline = std::chrono::seconds(15)) {
    return WaitFor(
        [&] {
          const int64_t value = Metric(series);
          if (good(value)) return true;
          std::this_thread::sleep_for(std::chrono::milliseconds(50));
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
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    return Stats(serve_);
  }

  pid_t serve_ = -1;
  Ports ports_;
};

}  // namespace switchyard::testing
