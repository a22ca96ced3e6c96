#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "api/upstream/upstream_integrity.h"
#include "common/metrics.h"
#include "common/slot.h"

namespace switchyard {

struct UpstreamTarget;

// What Switchyard knows of each endpoint of each upstream target, shared by every worker and
// the prober (docs/architecture.md §11): whether it is in rotation, how fast it answers, the
// slot it is at, its circuit breaker, and the retry budget of its target. Every worker's
// UpstreamPool asks it which endpoint to use and tells it how each exchange ended; the
// UpstreamMonitor feeds it probes. All of it is thread-safe.

using HealthClock = std::chrono::steady_clock;

enum class EndpointState : uint8_t {
  kHealthy,
  kEjected,     // out of rotation until probes succeed again
  kRecovering,  // probes succeed; live traffic ramps back over ramp_up
};
enum class CircuitState : uint8_t { kClosed, kOpen, kHalfOpen };
std::string_view EndpointStateName(EndpointState state);
std::string_view CircuitStateName(CircuitState state);

// How one exchange with an endpoint ended, as its health counts it.
enum class ExchangeOutcome : uint8_t {
  kOk,               // an answer that says nothing bad of the node (2xx; 4xx other than 429)
  kIoError,          // connect, write or read failed
  kTimeout,          // no answer within the attempt's deadline
  kServerError,      // HTTP 5xx
  kTooManyRequests,  // HTTP 429
  kNodeUnhealthy,    // JSON-RPC -32005: the node is behind or unhealthy
  kNodeBehind,       // JSON-RPC -32016: minimum context slot not reached
  kLostHedge,        // cancelled: the hedge to another endpoint answered first
};
inline constexpr size_t kExchangeOutcomeCount = 8;
std::string_view ExchangeOutcomeName(ExchangeOutcome outcome);
// Whether the outcome counts against the endpoint (every outcome but kOk).
inline bool IsFailure(ExchangeOutcome outcome) { return outcome != ExchangeOutcome::kOk; }

// The [upstream_health] section; every threshold is per endpoint.
struct UpstreamHealthOptions {
  absl::Duration probe_interval = absl::Seconds(1);  // getSlot and getHealth, per endpoint
  // Ejection: K consecutive failed exchanges, an error rate over `window` (with at least
  // `min_requests` in it), probes failing twice in a row, or a slot more than `max_slot_lag`
  // behind the target's most advanced endpoint.
  uint32_t eject_consecutive_failures = 5;
  double eject_error_rate = 0.5;
  absl::Duration window = absl::Seconds(10);
  uint32_t min_requests = 20;
  uint64_t max_slot_lag = 50;
  // Hysteresis: an ejected endpoint stays out at least min_ejection and comes back after
  // recover_probes successful probes in a row (and, when ejected for lag, a lag of at most
  // half of max_slot_lag); it then takes a share of traffic that grows from 10 % to all over
  // ramp_up. A failure while recovering ejects it again (a lost hedge only K in a row).
  absl::Duration min_ejection = absl::Seconds(1);
  uint32_t recover_probes = 2;
  absl::Duration ramp_up = absl::Seconds(3);
  // Choice: the weight of each new latency sample in the EWMA (0 < decay <= 1).
  double latency_decay = 0.2;
  // Circuit breaker: opens when at least circuit_min_requests of the last circuit_window
  // failed at circuit_failure_rate or more; stays open circuit_open, then lets
  // half_open_trials requests through; closes when they all succeed, opens again otherwise.
  double circuit_failure_rate = 0.5;
  uint32_t circuit_min_requests = 10;
  absl::Duration circuit_window = absl::Seconds(5);
  absl::Duration circuit_open = absl::Seconds(5);
  uint32_t half_open_trials = 3;
  // Retries of reads: at most max_attempts endpoints per request, while the target's retries
  // and hedges in flight stay under max(retry_budget_min, retry_budget_ratio × requests in
  // flight).
  uint32_t max_attempts = 3;
  double retry_budget_ratio = 0.2;
  uint32_t retry_budget_min = 10;
  // Hedged reads: after hedge_delay (zero: the endpoint's observed p95, at least
  // hedge_min_delay; 50 ms before it has one) without an answer, the read also goes to
  // another endpoint.
  bool hedge = true;
  absl::Duration hedge_delay = absl::ZeroDuration();
  absl::Duration hedge_min_delay = absl::Milliseconds(5);
};

// InvalidArgument naming the upstream_health key that is out of range.
absl::Status ValidateHealthOptions(const UpstreamHealthOptions& options);

// Whether an endpoint takes pipelined requests, as the pools found (UpstreamOptions::pipeline).
enum class PipelineStatus : uint8_t {
  kOff,          // pipelining is off
  kUnknown,      // not asked yet, or being asked
  kOn,           // it answers requests sent together, in order
  kUnsupported,  // it does not: one exchange per connection
};
std::string_view PipelineStatusName(PipelineStatus status);

// Where an endpoint is in admission (IntegrityOptions::admission): its checks are run by the
// upstream monitor before a new or recovered endpoint takes traffic.
enum class AdmissionState : uint8_t {
  kOff,      // admission is off: every endpoint is in rotation as its health says
  kPending,  // not checked yet, or its last check failed: out of rotation
  kPassed,   // checked and admitted
};
std::string_view AdmissionStateName(AdmissionState state);

// One endpoint as /status shows it. A value type.
struct EndpointStatus {
  std::string url;
  EndpointState state = EndpointState::kHealthy;
  CircuitState circuit = CircuitState::kClosed;
  std::optional<Slot> slot;  // the last probed slot
  uint64_t lag = 0;          // behind the target's most advanced endpoint
  double latency_ewma_ms = 0;
  double p95_ms = 0;
  uint32_t in_flight = 0;
  std::string last_error;
  std::string ejected_reason;  // why it is (or was last) ejected
  uint64_t requests = 0;
  uint64_t failures = 0;
  uint64_t state_changes = 0;
  uint64_t retries = 0;           // its failed reads sent again elsewhere
  uint64_t hedges = 0;            // its slow reads also sent to another endpoint
  uint64_t hedge_wins = 0;        // hedges it answered first
  uint64_t budget_exhausted = 0;  // retries and hedges of its reads the budget refused
  PipelineStatus pipeline = PipelineStatus::kOff;
  uint64_t pipeline_fallbacks = 0;  // probes that found it not pipelining
  // Integrity (docs/architecture.md §22).
  uint64_t integrity_checks = 0;    // sampled cross-checks it took part in and that compared
  uint64_t integrity_skipped = 0;   // ... that could not compare (another slot, an error)
  uint64_t disagreements = 0;       // checks in which its answer and its peer's differed
  uint64_t minority_answers = 0;    // its answer was outside its target's majority
  uint64_t consensus_dissents = 0;  // consensus reads its answer was not among the agreeing ones
  AdmissionState admission = AdmissionState::kOff;
  uint64_t admission_checks = 0;
  uint64_t admission_failures = 0;
  std::string admission_result;  // the last check's outcome
};

struct TargetStatus {
  std::string name;
  bool degraded = false;  // its last endpoint in rotation would have been ejected
  std::optional<Slot> best_slot;
  std::vector<EndpointStatus> endpoints;
};

class TargetHealth;

// One endpoint of one target.
class EndpointHealth {
 public:
  enum class Admission : uint8_t { kNo, kYes, kTrial };

  EndpointHealth(TargetHealth* target, size_t index, std::string url, uint32_t weight,
                 MetricsRegistry* registry);

  // Whether a request may go here at `now`. `draw` in [0, 1) decides whether a recovering
  // endpoint takes this one. kTrial: one of the half-open circuit's trial requests (pass
  // trial = true to End).
  Admission Admit(HealthClock::time_point now, double draw);
  void Begin() { in_flight_.fetch_add(1, std::memory_order_relaxed); }
  // An exchange that ended through no fault of the endpoint and is not counted: a connection
  // it had closed while idle (the exchange goes again), or a hedge cancelled because the
  // attempt it hedged answered first. `trial`: a half-open circuit's trial, given back.
  void Abandon(bool trial = false);
  void End(ExchangeOutcome outcome, HealthClock::duration latency, bool trial,
           HealthClock::time_point now, std::string_view error = {});
  // A 429's Retry-After: no requests here until `until`.
  void AvoidUntil(HealthClock::time_point until);

  // From the prober: the getSlot answer (or why it failed), whether getHealth said ok, and how
  // long getSlot took. The round trip is a latency sample when no live exchange gave one since
  // the last probe: an endpoint the choice stopped using after a slow spell would otherwise keep
  // that spell's latency, and with it stay out of the choice.
  void OnProbe(const absl::StatusOr<Slot>& slot, bool node_healthy, HealthClock::time_point now,
               std::optional<HealthClock::duration> round_trip = std::nullopt);

  // Cheap reads for the choice.
  uint32_t weight() const { return weight_; }
  uint32_t in_flight() const { return in_flight_.load(std::memory_order_relaxed); }
  // EWMA latency in microseconds (zero before the first sample).
  double latency_us() const { return latency_us_.load(std::memory_order_relaxed); }
  // The last probed slot; 0 when unknown.
  Slot slot() const { return slot_.load(std::memory_order_relaxed); }
  // How long a read waits here before it is hedged; zero: not hedged (too few samples yet).
  HealthClock::duration hedge_delay() const {
    return HealthClock::duration(hedge_delay_ns_.load(std::memory_order_relaxed));
  }
  EndpointState state() const { return state_.load(std::memory_order_relaxed); }
  CircuitState circuit() const { return circuit_.load(std::memory_order_relaxed); }
  const std::string& url() const { return url_; }
  size_t index() const { return index_; }

  // What a pool found of its pipelining (the last word of any worker's pool).
  void SetPipeline(PipelineStatus status) { pipeline_.store(status, std::memory_order_relaxed); }
  void CountPipelineFallback() { pipeline_fallbacks_.fetch_add(1, std::memory_order_relaxed); }

  // Integrity (docs/architecture.md §22), from any worker. A sampled cross-check this endpoint
  // took part in: compared, or not (the answers were at different slots, or one was an error).
  void CountCheck(bool compared);
  // Its answer was outside the majority of its target's endpoints (`detail` says how): the
  // IntegrityOptions::eject_after-th time within the window ejects it, the reason
  // "integrity: ...".
  void OnMinority(HealthClock::time_point now, std::string_view detail);
  void CountConsensusDissent();
  // Whether a read may be sent here now without being admitted by the choice (the integrity
  // reads pick their endpoints with this): in rotation, circuit closed, not avoided.
  bool InRotation(HealthClock::time_point now) const;
  // Admission, from the upstream monitor: whether it waits for its checks, and their outcome.
  AdmissionState admission() const { return admission_.load(std::memory_order_relaxed); }
  void OnAdmissionCheck(bool passed, std::string result);

  EndpointStatus Status() const;

 private:
  friend class TargetHealth;
  // A ring of per-second-ish buckets of (requests, failures) over a window.
  struct Window {
    static constexpr size_t kBuckets = 10;
    struct Bucket {
      int64_t epoch = -1;
      uint32_t requests = 0;
      uint32_t failures = 0;
    };
    std::array<Bucket, kBuckets> buckets;
    void Add(int64_t epoch, bool failure);
    // Requests and failures in the buckets no older than kBuckets epochs before `epoch`.
    std::pair<uint64_t, uint64_t> Sum(int64_t epoch) const;
    void Clear() { buckets = {}; }
  };
  // Latency samples in quarter-octave buckets, for the p95.
  static constexpr size_t kLatencyBuckets = 100;
  using LatencyCounts = std::array<uint32_t, kLatencyBuckets>;

  void EjectLocked(HealthClock::time_point now, std::string reason)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void SetStateLocked(EndpointState state) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Ejected to recovering, with the record of the failures that ejected it cleared.
  void StartRecoveryLocked(HealthClock::time_point now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void OpenCircuitLocked(HealthClock::time_point now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void CloseCircuitLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // One sample into the latency EWMA.
  void FoldLatencyLocked(double micros) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Called by TargetHealth::Tick (the prober's thread) once per probe interval.
  void Tick(HealthClock::time_point now, Slot best_slot);
  int64_t Epoch(HealthClock::time_point now, absl::Duration window) const;

  TargetHealth* const target_;
  const UpstreamHealthOptions& options_;
  const size_t index_;
  const std::string url_;
  const uint32_t weight_;

  std::atomic<uint32_t> in_flight_{0};
  std::atomic<double> latency_us_{0};
  std::atomic<Slot> slot_{0};
  std::atomic<int64_t> hedge_delay_ns_{0};
  std::atomic<EndpointState> state_{EndpointState::kHealthy};
  std::atomic<CircuitState> circuit_{CircuitState::kClosed};
  std::atomic<int64_t> avoid_until_ns_{0};  // HealthClock ticks since its epoch
  std::atomic<PipelineStatus> pipeline_{PipelineStatus::kOff};
  std::atomic<uint64_t> pipeline_fallbacks_{0};
  std::atomic<AdmissionState> admission_{AdmissionState::kOff};

  mutable absl::Mutex mu_;
  uint32_t consecutive_failures_ ABSL_GUARDED_BY(mu_) = 0;
  uint32_t probe_failures_ ABSL_GUARDED_BY(mu_) = 0;   // in a row
  uint32_t probe_successes_ ABSL_GUARDED_BY(mu_) = 0;  // in a row
  bool ejected_for_lag_ ABSL_GUARDED_BY(mu_) = false;
  HealthClock::time_point changed_at_ ABSL_GUARDED_BY(mu_);  // of the last state change
  Window errors_ ABSL_GUARDED_BY(mu_);
  Window circuit_errors_ ABSL_GUARDED_BY(mu_);
  HealthClock::time_point circuit_changed_at_ ABSL_GUARDED_BY(mu_);
  uint32_t trials_started_ ABSL_GUARDED_BY(mu_) = 0;
  uint32_t trials_succeeded_ ABSL_GUARDED_BY(mu_) = 0;
  LatencyCounts latency_now_ ABSL_GUARDED_BY(mu_) = {};
  LatencyCounts latency_before_ ABSL_GUARDED_BY(mu_) = {};
  uint64_t lag_ ABSL_GUARDED_BY(mu_) = 0;
  bool probed_ ABSL_GUARDED_BY(mu_) = false;
  uint32_t live_samples_ ABSL_GUARDED_BY(mu_) = 0;  // latency samples since the last probe
  std::string last_error_ ABSL_GUARDED_BY(mu_);
  std::string ejected_reason_ ABSL_GUARDED_BY(mu_);
  uint64_t requests_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t failures_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t state_changes_ ABSL_GUARDED_BY(mu_) = 0;
  std::deque<HealthClock::time_point> minority_at_ ABSL_GUARDED_BY(mu_);  // within the window
  uint64_t admission_checks_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t admission_failures_ ABSL_GUARDED_BY(mu_) = 0;
  std::string admission_result_ ABSL_GUARDED_BY(mu_);

  // Metrics, labelled {target, endpoint}.
  std::array<Counter*, kExchangeOutcomeCount> outcomes_{};
  Histogram* latency_ = nullptr;
  Counter* state_changes_metric_ = nullptr;
  Counter* circuit_opens_ = nullptr;
  Gauge* state_gauge_ = nullptr;  // 0 healthy, 1 ejected, 2 recovering
  Gauge* slot_gauge_ = nullptr;
  Counter* retries_ = nullptr;
  Counter* hedges_ = nullptr;
  Counter* hedge_wins_ = nullptr;
  Counter* budget_exhausted_ = nullptr;
  // Integrity's, registered only when it is on.
  Counter* checks_ = nullptr;
  Counter* checks_skipped_ = nullptr;
  Counter* disagreements_ = nullptr;
  Counter* minority_ = nullptr;
  Counter* consensus_dissents_ = nullptr;
  Counter* admission_passed_ = nullptr;
  Counter* admission_failed_ = nullptr;
};

// Every endpoint of one target, and the target's retry budget.
class TargetHealth {
 public:
  // `integrity` (all off by default) outlives it.
  TargetHealth(const UpstreamTarget& target, const UpstreamHealthOptions& options,
               MetricsRegistry* registry, const IntegrityOptions& integrity = NoIntegrity());
  static const IntegrityOptions& NoIntegrity();

  const std::string& name() const { return name_; }
  const UpstreamHealthOptions& options() const { return options_; }
  const IntegrityOptions& integrity() const { return integrity_; }
  size_t size() const { return endpoints_.size(); }
  EndpointHealth& endpoint(size_t i) { return *endpoints_[i]; }
  const EndpointHealth& endpoint(size_t i) const { return *endpoints_[i]; }

  // The retry budget: a retry or hedge may start while the target's retries and hedges in
  // flight stay under max(retry_budget_min, retry_budget_ratio × requests in flight).
  // `endpoint` is the one whose failed or slow read asks for it (counted there when refused).
  void BeginRequest() { requests_in_flight_.fetch_add(1, std::memory_order_relaxed); }
  void EndRequest() { requests_in_flight_.fetch_sub(1, std::memory_order_relaxed); }
  bool TryBeginRetry(size_t endpoint);
  void EndRetry() { retries_in_flight_.fetch_sub(1, std::memory_order_relaxed); }
  // Counted for the target and for endpoint `endpoint`: a retry of a read it failed, a hedge
  // of a read it was slow with, a hedge it answered first.
  void CountRetry(size_t endpoint) {
    retries_->Increment();
    endpoints_[endpoint]->retries_->Increment();
  }
  void CountHedge(size_t endpoint) {
    hedges_->Increment();
    endpoints_[endpoint]->hedges_->Increment();
  }
  void CountHedgeWin(size_t endpoint) {
    hedge_wins_->Increment();
    endpoints_[endpoint]->hedge_wins_->Increment();
  }
  void CountFastFailure() { fast_failures_->Increment(); }
  // Integrity: endpoints `a` and `b` answered a sampled read differently; a consensus read
  // ended `agreed` or not.
  void CountDisagreement(size_t a, size_t b);
  void CountConsensus(bool agreed);
  // Whether any endpoint passed admission (until one has, none is kept out for it: a target
  // with no admitted endpoint would answer nothing).
  bool any_admitted() const { return admitted_.load(std::memory_order_relaxed) > 0; }

  // The most advanced slot any endpoint was probed at; 0 when none is known.
  Slot best_slot() const { return best_slot_.load(std::memory_order_relaxed); }
  bool degraded() const { return degraded_.load(std::memory_order_relaxed); }

  // Once per probe interval, after the probes: slot lag, p95s, recovery ramps.
  void Tick(HealthClock::time_point now);
  TargetStatus Status() const;

 private:
  friend class EndpointHealth;
  // Whether endpoint `index` may leave rotation (not while it is the last one in it); when it
  // may, its state is set to kEjected under the target's lock.
  bool MayEject(size_t index);

  const std::string name_;
  const UpstreamHealthOptions& options_;
  const IntegrityOptions& integrity_;
  std::vector<std::unique_ptr<EndpointHealth>> endpoints_;
  std::atomic<uint32_t> admitted_{0};  // endpoints in AdmissionState::kPassed
  // Disagreements by pair (a < b: a * size + b), registered only with sampling on.
  std::vector<Counter*> pair_disagreements_;
  Counter* consensus_agreed_ = nullptr;
  Counter* consensus_failed_ = nullptr;
  std::atomic<uint32_t> requests_in_flight_{0};
  std::atomic<uint32_t> retries_in_flight_{0};
  std::atomic<Slot> best_slot_{0};
  std::atomic<bool> degraded_{false};
  std::atomic<int64_t> degraded_since_ns_{0};
  absl::Mutex eject_mu_;  // one ejection decision at a time
  Counter* retries_ = nullptr;
  Counter* hedges_ = nullptr;
  Counter* hedge_wins_ = nullptr;
  Counter* budget_exhausted_ = nullptr;
  Counter* fast_failures_ = nullptr;
  Gauge* degraded_gauge_ = nullptr;
};

// The health of every target. Created once (by RouterContext) from the upstream targets;
// outlives every pool that uses it and the prober.
class UpstreamHealth {
 public:
  UpstreamHealth(const std::vector<UpstreamTarget>& targets, UpstreamHealthOptions options,
                 MetricsRegistry* registry, IntegrityOptions integrity = {});

  const UpstreamHealthOptions& options() const { return options_; }
  const IntegrityOptions& integrity() const { return integrity_; }
  TargetHealth* Find(std::string_view target);
  const TargetHealth* Find(std::string_view target) const;
  void Tick(HealthClock::time_point now);
  std::vector<TargetStatus> Status() const;

 private:
  const UpstreamHealthOptions options_;
  const IntegrityOptions integrity_;
  std::vector<std::unique_ptr<TargetHealth>> targets_;
  absl::flat_hash_map<std::string, TargetHealth*> by_name_;
};

}  // namespace switchyard
