// Routing lag of new delegations through `switchyard serve` with ingest: from a Delegate's
// confirmation on a localnet base layer to the router answering getDelegationStatus with the
// account delegated (and routing its getAccountInfo to the ER). Steady rounds follow each
// other at once; idle rounds wait first (6 s by default: longer than the base's 5 s idle
// timeout, so every kept connection to the base has been closed). Prints p50, p99 and max of
// each.
//
//   switchyard_routing_lag SWITCHYARD LOCALNET [--steady N] [--idle-rounds N] [--idle-ms N]
//                          [--slot-ms N]
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include "fmt/format.h"
#include "tests/support/delegation_lag.h"

namespace switchyard {
namespace {

std::string Summary(std::vector<double> ms) {
  if (ms.empty()) return "n=0";
  std::sort(ms.begin(), ms.end());
  auto at = [&](double p) {
    return ms[std::min(ms.size() - 1, static_cast<size_t>(p * ms.size()))];
  };
  return fmt::format("n={} p50_ms={:.1f} p99_ms={:.1f} max_ms={:.1f}", ms.size(), at(0.5), at(0.99),
                     ms.back());
}

int Main(int argc, char** argv) {
  if (argc < 3) {
    std::cerr << "usage: switchyard_routing_lag SWITCHYARD LOCALNET [--steady N] "
                 "[--idle-rounds N] [--idle-ms N] [--slot-ms N]\n";
    return 2;
  }
  int steady = 100;
  int idle_rounds = 6;
  int idle_ms = 6000;
  int slot_ms = 400;
  for (int i = 3; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    const int value = std::stoi(argv[i + 1]);
    if (flag == "--steady") steady = value;
    if (flag == "--idle-rounds") idle_rounds = value;
    if (flag == "--idle-ms") idle_ms = value;
    if (flag == "--slot-ms") slot_ms = value;
  }
  const auto dir = std::filesystem::temp_directory_path() /
                   ("switchyard-routing-lag-" + std::to_string(getpid()));
  testing::DelegationLagOptions options;
  options.switchyard_binary = argv[1];
  options.localnet_binary = argv[2];
  options.work_dir = dir.string();
  options.max_rounds = steady + idle_rounds + 1;
  options.base_slot_ms = slot_ms;
  int exit_code = 0;
  {
    auto harness = testing::DelegationLagHarness::Start(options);
    if (!harness.ok()) {
      std::cerr << harness.status() << "\n";
      return 1;
    }
    std::vector<double> steady_ms;
    std::vector<double> idle_ms_lags;
    auto run = [&](absl::Duration idle, std::vector<double>* into) {
      absl::StatusOr<absl::Duration> lag = (*harness)->Round(idle);
      if (!lag.ok()) {
        std::cerr << "round failed: " << lag.status() << "\n";
        exit_code = 1;
        return;
      }
      if (into != nullptr) into->push_back(absl::ToDoubleMilliseconds(*lag));
    };
    run(absl::ZeroDuration(), nullptr);  // warm-up: the backfill is done
    for (int i = 0; i < steady && exit_code == 0; ++i) run(absl::ZeroDuration(), &steady_ms);
    for (int i = 0; i < idle_rounds && exit_code == 0; ++i) {
      run(absl::Milliseconds(idle_ms), &idle_ms_lags);
    }
    std::cout << "slot_ms=" << slot_ms << " steady: " << Summary(steady_ms) << "\n"
              << "slot_ms=" << slot_ms << " after " << idle_ms
              << " ms idle: " << Summary(idle_ms_lags) << "\n";
  }
  std::filesystem::remove_all(dir);
  return exit_code;
}

}  // namespace
}  // namespace switchyard

int main(int argc, char** argv) { return switchyard::Main(argc, argv); }
