#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace switchyard {

// "K of N": ask N endpoints of the target, answer when K of them agree.
struct ConsensusRule {
  uint32_t needs = 0;
  uint32_t of = 0;
  bool operator==(const ConsensusRule&) const = default;
};
// "K/N" with 1 <= K <= N <= 16; InvalidArgument otherwise.
absl::StatusOr<ConsensusRule> ParseConsensusRule(std::string_view text);

// The [integrity] section (docs/architecture.md §22): sampled cross-checks between the
// endpoints of a target, consensus reads, and the admission of new and recovered endpoints.
// Everything is off by default.
struct IntegrityOptions {
  // Sampled cross-checks: this fraction of a method's reads, once answered, is also sent to
  // another endpoint of the same target and the two answers are compared. `sample_rate` is
  // the fraction for the reads whose answer the slot decides (ComparableMethod); a method in
  // `sample_rates` takes its own fraction, whatever it is.
  double sample_rate = 0;
  absl::flat_hash_map<std::string, double> sample_rates;
  // Two answers that differ are put to at most this many more endpoints of the target; an
  // endpoint whose answer was outside the majority `eject_after` times within `window` is
  // ejected with the reason "integrity".
  uint32_t tiebreak_endpoints = 3;
  uint32_t eject_after = 3;
  absl::Duration window = absl::Seconds(60);
  // How much of each answer a disagreement's log line shows.
  size_t log_answer_bytes = 512;
  // Consensus reads: the methods that always are, and whether a request may ask for one with
  // X-Switchyard-Consensus: K/N.
  absl::flat_hash_map<std::string, ConsensusRule> consensus_methods;
  bool consensus_header = false;
  // Admission: a new or recovered endpoint enters rotation only after it is reachable, its
  // slot is within admission_max_lag of the target's best, its answers to the fixed reads
  // (getGenesisHash, and getBalance of admission_accounts) equal the other endpoints', and of
  // admission_latency_requests reads at once the 95th percentile answered within
  // admission_latency_p95.
  bool admission = false;
  uint64_t admission_max_lag = 10;
  uint32_t admission_latency_requests = 50;
  absl::Duration admission_latency_p95 = absl::Milliseconds(500);
  std::vector<std::string> admission_accounts;

  // Whether any read is sampled; the largest of the fractions.
  bool sampling() const { return max_sample_rate() > 0; }
  double max_sample_rate() const;
  // The fraction of `method`'s reads that is sampled.
  double SampleRateFor(std::string_view method) const;
  // The consensus rule of `method`; nullopt for none.
  std::optional<ConsensusRule> ConsensusFor(std::string_view method) const;
  bool consensus() const { return consensus_header || !consensus_methods.empty(); }
  bool enabled() const { return sampling() || consensus() || admission; }
};

// InvalidArgument naming the integrity key that is out of range.
absl::Status ValidateIntegrityOptions(const IntegrityOptions& options);

// Whether two endpoints serving the same chain at the same slot must give the same answer to
// `method` (account and token reads, finished transactions and blocks, the genesis hash): the
// methods `sample_rate` samples.
bool ComparableMethod(std::string_view method);

// One JSON-RPC answer in the form two endpoints' answers are compared in: what may
// legitimately differ is taken out (the id, the context: its slot and apiVersion).
struct ComparableAnswer {
  enum class Kind : uint8_t {
    kResult,      // a result: `value` holds it
    kError,       // a JSON-RPC error: not compared
    kUnreadable,  // not a single JSON-RPC answer
  };
  Kind kind = Kind::kUnreadable;
  std::optional<uint64_t> context_slot;  // result.context.slot, when it has one
  std::string value;                     // minified JSON of the result (its value, with a context)
};
ComparableAnswer ComparableOf(std::string_view body);

// The "method" of a JSON-RPC request body; empty when it has none.
std::string MethodOfRequest(std::string_view body);

// At most `limit` bytes of `text`, with the number of bytes left out, for a log line.
std::string Bounded(std::string_view text, size_t limit);

}  // namespace switchyard
