// Integrity's sampled cross-checks (docs/architecture.md §22) under steady load: three
// in-process localnet endpoints of one target serving the same genesis, and one worker's
// UpstreamSet keeping `--concurrency` getBalance reads in flight.
//
//  1. Extra upstream load: upstream exchanges per client read with sampling off (the baseline,
//     measured in the same run) and at `--rate`; the extra load is their difference.
//  2. Time to ejection: at `--rate`, one endpoint starts lying about lamports; the time until
//     its health says ejected, over `--rounds` rounds (fresh health each round).
//
//   switchyard_integrity_bench [--rate 0.01] [--seconds 5] [--concurrency 32] [--rounds 5]
//                              [--eject-after 3]
#include <algorithm>
#include <array>
#include <boost/asio/io_context.hpp>
#include <chrono>
#include <functional>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "api/metrics/api_metrics.h"
#include "api/upstream/upstream.h"
#include "common/clock.h"
#include "common/metrics.h"
#include "fmt/format.h"
#include "localnet/localnet.h"

namespace switchyard {
namespace {

using Clock = std::chrono::steady_clock;

struct Flags {
  double rate = 0.01;
  double seconds = 5;
  int concurrency = 32;
  int rounds = 5;
  uint32_t eject_after = 3;
};

Pubkey Account(int i) {
  std::array<uint8_t, 32> bytes;
  bytes.fill(0x6b);
  bytes[0] = static_cast<uint8_t>(i);
  return Pubkey(bytes);
}
constexpr int kAccounts = 64;

class Bench {
 public:
  explicit Bench(const Flags& flags) : flags_(flags) {
    for (int i = 0; i < 3; ++i) {
      localnet::LocalnetOptions options;
      options.port = 0;
      options.io_threads = 1;
      options.slot_interval = absl::Hours(1);  // one slot: every answer is comparable
      for (int a = 0; a < kAccounts; ++a) {
        options.genesis_accounts.emplace_back(Account(a), 1000 + static_cast<uint64_t>(a));
      }
      chains_.push_back(std::make_unique<localnet::Localnet>(options, &clock_));
    }
  }

  bool Start() {
    for (auto& chain : chains_) {
      if (absl::Status started = chain->Start(); !started.ok()) {
        std::cerr << "localnet: " << started << "\n";
        return false;
      }
    }
    return true;
  }
  void Stop() {
    for (auto& chain : chains_) chain->Stop();
  }

  struct Run {
    uint64_t reads = 0;
    uint64_t exchanges = 0;
    double seconds = 0;
    double eject_ms = -1;  // -1: not ejected (or not asked)
    uint64_t checks = 0;
  };

  // Steady load for `seconds` at sample rate `rate`; with `lie`, endpoint 2 starts lying at
  // once and the run ends when it is ejected (or after `seconds`).
  Run Load(double rate, bool lie) {
    MetricsRegistry registry;
    ApiMetrics metrics(registry);
    UpstreamTarget target{"base", {}};
    for (auto& chain : chains_) {
      target.endpoints.push_back({"http://127.0.0.1:" + std::to_string(chain->http_port()), 1});
    }
    UpstreamHealthOptions health_options;
    health_options.hedge = false;  // hedges would add load of their own
    health_options.min_ejection = absl::Hours(1);
    IntegrityOptions integrity;
    integrity.sample_rate = rate;
    integrity.eject_after = flags_.eject_after;
    UpstreamHealth health({target}, health_options, &registry, integrity);
    UpstreamOptions options;
    boost::asio::io_context io_context;
    auto set = UpstreamSet::Create(io_context, {target}, options, nullptr, &metrics, &health);
    if (!set.ok()) {
      std::cerr << set.status() << "\n";
      return {};
    }
    for (auto& chain : chains_)
      chain->runtime_faults().Apply(R"({"lie_lamports":0})").IgnoreError();
    Run run;
    const auto start = Clock::now();
    const auto end = start + std::chrono::duration_cast<Clock::duration>(
                                 std::chrono::duration<double>(flags_.seconds));
    if (lie) chains_[2]->runtime_faults().Apply(R"({"lie_lamports":1})").IgnoreError();
    TargetHealth& base = *health.Find("base");
    uint64_t next = 0;
    int in_flight = 0;
    bool stop = false;
    std::function<void()> issue = [&] {
      const int account = static_cast<int>(next++ % kAccounts);
      const std::string body =
          fmt::format(R"({{"jsonrpc":"2.0","id":{},"method":"getBalance","params":["{}"]}})", next,
                      Account(account).ToBase58());
      ++in_flight;
      (*set)->Send("base", body, RetryPolicy::kSafe, [&](absl::StatusOr<UpstreamResponse>) {
        --in_flight;
        ++run.reads;
        const auto now = Clock::now();
        if (lie && run.eject_ms < 0 && base.endpoint(2).state() == EndpointState::kEjected) {
          run.eject_ms = std::chrono::duration<double, std::milli>(now - start).count();
          stop = true;
        }
        if (now >= end) stop = true;
        if (!stop) issue();
      });
    };
    for (int i = 0; i < flags_.concurrency; ++i) issue();
    while (in_flight > 0 || !stop) {
      io_context.run_for(std::chrono::milliseconds(5));
      if (in_flight == 0 && !stop) issue();
    }
    run.seconds = std::chrono::duration<double>(Clock::now() - start).count();
    // The last cross-checks finish: their exchanges are part of the load.
    const auto drain = Clock::now() + std::chrono::milliseconds(200);
    while (Clock::now() < drain) io_context.run_for(std::chrono::milliseconds(5));
    run.exchanges = metrics.upstream_requests.value();
    for (size_t i = 0; i < base.size(); ++i)
      run.checks += base.endpoint(i).Status().integrity_checks;
    (*set)->Shutdown();
    io_context.run_for(std::chrono::milliseconds(20));
    if (lie) chains_[2]->runtime_faults().Apply(R"({"lie_lamports":0})").IgnoreError();
    return run;
  }

 private:
  const Flags flags_;
  SystemClock clock_;
  std::vector<std::unique_ptr<localnet::Localnet>> chains_;
};

int Main(int argc, char** argv) {
  Flags flags;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    const std::string value = argv[i + 1];
    if (flag == "--rate")
      flags.rate = std::stod(value);
    else if (flag == "--seconds")
      flags.seconds = std::stod(value);
    else if (flag == "--concurrency")
      flags.concurrency = std::stoi(value);
    else if (flag == "--rounds")
      flags.rounds = std::stoi(value);
    else if (flag == "--eject-after")
      flags.eject_after = static_cast<uint32_t>(std::stoul(value));
    else {
      std::cerr << "unknown flag " << flag << "\n";
      return 2;
    }
  }
  Bench bench(flags);
  if (!bench.Start()) return 1;
  const Bench::Run off = bench.Load(0, false);
  const Bench::Run on = bench.Load(flags.rate, false);
  const double per_read_off = static_cast<double>(off.exchanges) / static_cast<double>(off.reads);
  const double per_read_on = static_cast<double>(on.exchanges) / static_cast<double>(on.reads);
  std::cout << fmt::format("{:<22} {:>10} {:>12} {:>10} {:>16} {:>8}\n", "run", "reads",
                           "exchanges", "reads/s", "exchanges/read", "checks");
  for (const auto& [name, run] : {std::pair<std::string, const Bench::Run&>{"sampling off", off},
                                  {fmt::format("sampling {:g} %", flags.rate * 100), on}}) {
    std::cout << fmt::format("{:<22} {:>10} {:>12} {:>10.0f} {:>16.5f} {:>8}\n", name, run.reads,
                             run.exchanges, static_cast<double>(run.reads) / run.seconds,
                             static_cast<double>(run.exchanges) / static_cast<double>(run.reads),
                             run.checks);
  }
  std::cout << fmt::format("extra upstream load: {:.3f} % (exchanges per read, on / off - 1)\n",
                           (per_read_on / per_read_off - 1) * 100);
  std::vector<double> eject_ms;
  int not_ejected = 0;
  for (int round = 0; round < flags.rounds; ++round) {
    const Bench::Run lie = bench.Load(flags.rate, true);
    if (lie.eject_ms < 0) {
      ++not_ejected;
    } else {
      eject_ms.push_back(lie.eject_ms);
    }
    std::cout << fmt::format("lie round {}: {} reads, {}\n", round + 1, lie.reads,
                             lie.eject_ms < 0
                                 ? std::string("not ejected within the run")
                                 : fmt::format("ejected after {:.0f} ms", lie.eject_ms));
  }
  std::sort(eject_ms.begin(), eject_ms.end());
  if (!eject_ms.empty()) {
    std::cout << fmt::format(
        "time from the lie to ejection at {:g} %: n={} min_ms={:.0f} median_ms={:.0f} "
        "max_ms={:.0f} (not ejected: {})\n",
        flags.rate * 100, eject_ms.size(), eject_ms.front(), eject_ms[eject_ms.size() / 2],
        eject_ms.back(), not_ejected);
  }
  bench.Stop();
  return 0;
}

}  // namespace
}  // namespace switchyard

int main(int argc, char** argv) { return switchyard::Main(argc, argv); }
