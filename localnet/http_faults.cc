#include "localnet/http_faults.h"

#include <optional>

#include "fmt/format.h"
#include "simdjson.h"

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

RuntimeFaults::RuntimeFaults(const FaultOptions& options)
    : slot_lag_(options.slot_lag), lie_lamports_(options.lie_lamports) {}

absl::StatusOr<std::string> RuntimeFaults::Apply(std::string_view body) {
  simdjson::dom::parser parser;
  simdjson::dom::object object;
  if (parser.parse(body.data(), body.size()).get_object().get(object) != simdjson::SUCCESS) {
    return absl::InvalidArgumentError("the body must be a JSON object");
  }
  std::optional<uint64_t> slot_lag;
  std::optional<uint64_t> lie_lamports;
  std::optional<uint64_t> delay_ms;
  for (auto [key, value] : object) {
    uint64_t number = 0;
    if (value.get_uint64().get(number) != simdjson::SUCCESS) {
      return absl::InvalidArgumentError(
          fmt::format("\"{}\" must be a non-negative integer", std::string_view(key)));
    }
    if (key == "slot_lag") {
      slot_lag = number;
    } else if (key == "lie_lamports") {
      lie_lamports = number;
    } else if (key == "delay_ms") {
      if (number > 3'600'000) return absl::InvalidArgumentError("\"delay_ms\" is over an hour");
      delay_ms = number;
    } else {
      return absl::InvalidArgumentError(fmt::format(
          "unknown fault \"{}\" (slot_lag, lie_lamports, delay_ms)", std::string_view(key)));
    }
  }
  if (slot_lag) slot_lag_.store(*slot_lag, std::memory_order_relaxed);
  if (lie_lamports) lie_lamports_.store(*lie_lamports, std::memory_order_relaxed);
  if (delay_ms) delay_ms_.store(static_cast<int64_t>(*delay_ms), std::memory_order_relaxed);
  return Json();
}

std::string RuntimeFaults::Json() const {
  return fmt::format(R"({{"slot_lag":{},"lie_lamports":{},"delay_ms":{}}})", slot_lag(),
                     lie_lamports(), delay_ms_.load(std::memory_order_relaxed));
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
