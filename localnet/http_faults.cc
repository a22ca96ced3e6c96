#include "localnet/http_faults.h"

#include "fmt/format.h"

namespace switchyard::localnet {
namespace {

// SplitMix64: a well-mixed 64-bit value for each (seed, index).
uint64_t Mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

}  // namespace

HttpFaultInjector::HttpFaultInjector(const FaultOptions& options)
    : options_(options),
      enabled_(options.http_429_rate > 0 || options.http_5xx_rate > 0 || options.reset_rate > 0 ||
               options.delay_rate > 0) {}

HttpFault HttpFaultInjector::Next() {
  if (!enabled_) return {};
  const uint64_t n = counter_.fetch_add(1, std::memory_order_relaxed);
  const double draw =
      static_cast<double>(Mix(Mix(options_.seed) ^ n) >> 11) * (1.0 / 9007199254740992.0);
  double bound = options_.http_429_rate;
  if (draw < bound) return {HttpFaultKind::kTooManyRequests, {}};
  bound += options_.http_5xx_rate;
  if (draw < bound) return {HttpFaultKind::kServerError, {}};
  bound += options_.reset_rate;
  if (draw < bound) return {HttpFaultKind::kReset, {}};
  bound += options_.delay_rate;
  if (draw < bound) return {HttpFaultKind::kDelay, options_.delay};
  return {};
}

absl::Status ValidateHttpFaults(const FaultOptions& options) {
  const std::pair<const char*, double> rates[] = {{"--fault-429-rate", options.http_429_rate},
                                                  {"--fault-5xx-rate", options.http_5xx_rate},
                                                  {"--fault-reset-rate", options.reset_rate},
                                                  {"--fault-delay-rate", options.delay_rate}};
  double sum = 0;
  for (const auto& [name, rate] : rates) {
    if (!(rate >= 0 && rate <= 1)) {
      return absl::InvalidArgumentError(fmt::format("{} must be within [0, 1]", name));
    }
    sum += rate;
  }
  if (sum > 1 + 1e-9) {
    return absl::InvalidArgumentError("the HTTP fault rates add up to more than 1");
  }
  if (options.server_error_status < 500 || options.server_error_status > 599) {
    return absl::InvalidArgumentError("--fault-5xx-status must be within 500..599");
  }
  if (options.delay < absl::ZeroDuration()) {
    return absl::InvalidArgumentError("--fault-delay-ms must not be negative");
  }
  return absl::OkStatus();
}

}  // namespace switchyard::localnet
