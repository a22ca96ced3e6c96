#include "api/upstream/upstream_integrity.h"

#include <algorithm>
#include <array>

#include "absl/strings/numbers.h"
#include "fmt/format.h"
#include "simdjson.h"

namespace switchyard {

namespace {

namespace dom = simdjson::dom;

dom::parser& ThreadParser() {
  thread_local dom::parser parser;
  return parser;
}

constexpr auto kComparableMethods = std::to_array<std::string_view>({
    "getAccountInfo",
    "getBalance",
    "getMultipleAccounts",
    "getProgramAccounts",
    "getTokenAccountBalance",
    "getTokenAccountsByOwner",
    "getTokenAccountsByDelegate",
    "getTokenSupply",
    "getTransaction",
    "getBlock",
    "getBlockTime",
    "getGenesisHash",
    "getMinimumBalanceForRentExemption",
});

constexpr uint32_t kMaxConsensusEndpoints = 16;

}  // namespace

absl::StatusOr<ConsensusRule> ParseConsensusRule(std::string_view text) {
  const size_t slash = text.find('/');
  ConsensusRule rule;
  auto number = [](std::string_view part, uint32_t* out) {
    return absl::SimpleAtoi(absl::string_view(part.data(), part.size()), out);
  };
  if (slash == std::string_view::npos || !number(text.substr(0, slash), &rule.needs) ||
      !number(text.substr(slash + 1), &rule.of)) {
    return absl::InvalidArgumentError(fmt::format("\"{}\" is not K/N", text));
  }
  if (rule.needs < 1 || rule.needs > rule.of || rule.of > kMaxConsensusEndpoints) {
    return absl::InvalidArgumentError(
        fmt::format("\"{}\": K/N needs 1 <= K <= N <= {}", text, kMaxConsensusEndpoints));
  }
  return rule;
}

double IntegrityOptions::max_sample_rate() const {
  double max = sample_rate;
  for (const auto& [method, rate] : sample_rates) max = std::max(max, rate);
  return max;
}

double IntegrityOptions::SampleRateFor(std::string_view method) const {
  if (auto it = sample_rates.find(absl::string_view(method.data(), method.size()));
      it != sample_rates.end()) {
    return it->second;
  }
  return ComparableMethod(method) ? sample_rate : 0;
}

std::optional<ConsensusRule> IntegrityOptions::ConsensusFor(std::string_view method) const {
  if (auto it = consensus_methods.find(absl::string_view(method.data(), method.size()));
      it != consensus_methods.end()) {
    return it->second;
  }
  return std::nullopt;
}

absl::Status ValidateIntegrityOptions(const IntegrityOptions& o) {
  auto bad = [](std::string_view key, std::string_view what) {
    return absl::InvalidArgumentError(fmt::format("integrity.{} {}", key, what));
  };
  if (!(o.sample_rate >= 0 && o.sample_rate <= 1))
    return bad("sample_rate", "must be within [0, 1]");
  for (const auto& [method, rate] : o.sample_rates) {
    if (!(rate >= 0 && rate <= 1)) {
      return bad(fmt::format("sample_rates.\"{}\"", method), "must be within [0, 1]");
    }
  }
  if (o.eject_after == 0) return bad("eject_after", "must be at least 1");
  if (o.window < absl::Seconds(1)) return bad("window_ms", "must be at least 1000");
  if (o.tiebreak_endpoints > kMaxConsensusEndpoints) {
    return bad("tiebreak_endpoints", fmt::format("must be at most {}", kMaxConsensusEndpoints));
  }
  if (o.admission_latency_requests == 0 || o.admission_latency_requests > 10'000) {
    return bad("admission_latency_requests", "must be within 1..10000");
  }
  if (o.admission_latency_p95 <= absl::ZeroDuration()) {
    return bad("admission_latency_p95_ms", "must be positive");
  }
  return absl::OkStatus();
}

bool ComparableMethod(std::string_view method) {
  return std::find(kComparableMethods.begin(), kComparableMethods.end(), method) !=
         kComparableMethods.end();
}

ComparableAnswer ComparableOf(std::string_view body) {
  ComparableAnswer out;
  dom::element root;
  if (ThreadParser().parse(body.data(), body.size()).get(root) != simdjson::SUCCESS) return out;
  dom::object object;
  if (root.get_object().get(object) != simdjson::SUCCESS) return out;
  dom::element result;
  if (object["result"].get(result) != simdjson::SUCCESS) {
    dom::element error;
    if (object["error"].get(error) == simdjson::SUCCESS) out.kind = ComparableAnswer::Kind::kError;
    return out;
  }
  out.kind = ComparableAnswer::Kind::kResult;
  dom::object with_context;
  dom::element context;
  dom::element value;
  if (result.get_object().get(with_context) == simdjson::SUCCESS &&
      with_context["context"].get(context) == simdjson::SUCCESS &&
      with_context["value"].get(value) == simdjson::SUCCESS) {
    uint64_t slot = 0;
    if (context["slot"].get_uint64().get(slot) == simdjson::SUCCESS) out.context_slot = slot;
    out.value = simdjson::minify(value);
    return out;
  }
  out.value = simdjson::minify(result);
  return out;
}

std::string MethodOfRequest(std::string_view body) {
  dom::element root;
  std::string_view method;
  if (ThreadParser().parse(body.data(), body.size()).get(root) != simdjson::SUCCESS ||
      root["method"].get_string().get(method) != simdjson::SUCCESS) {
    return {};
  }
  return std::string(method);
}

std::string Bounded(std::string_view text, size_t limit) {
  if (text.size() <= limit) return std::string(text);
  return fmt::format("{}… ({} more bytes)", text.substr(0, limit), text.size() - limit);
}

}  // namespace switchyard
