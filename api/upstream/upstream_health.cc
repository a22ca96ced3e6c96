#include "api/upstream/upstream_health.h"

#include <algorithm>
#include <cmath>

#include "api/upstream/upstream.h"
#include "fmt/format.h"
#include "spdlog/spdlog.h"

namespace switchyard {

namespace {

int64_t Nanos(HealthClock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

HealthClock::duration Chrono(absl::Duration d) {
  return std::chrono::duration_cast<HealthClock::duration>(absl::ToChronoNanoseconds(d));
}

// Outcomes that say the node cannot serve now. A -32016 says only that this request asked for
// a slot the node has not reached: the choice avoids that with the probed slots, and a node
// that falls behind for long is ejected for lag, not for its answers.
bool CountsAgainst(ExchangeOutcome outcome) {
  return outcome != ExchangeOutcome::kOk && outcome != ExchangeOutcome::kNodeBehind;
}

size_t LatencyBucket(double micros) {
  if (micros < 1) return 0;
  const auto bucket = static_cast<size_t>(4 * std::log2(micros));
  return std::min<size_t>(bucket, 99);
}

double LatencyBucketUpperMicros(size_t bucket) {
  return std::exp2(static_cast<double>(bucket + 1) / 4);
}

// The hedge delay of an endpoint with no p95 yet.
constexpr absl::Duration kFirstHedgeDelay = absl::Milliseconds(50);

// 10 % of traffic the moment recovery starts, all of it after ramp_up.
double RampShare(HealthClock::duration since, absl::Duration ramp_up) {
  const double total = static_cast<double>(Chrono(ramp_up).count());
  if (total <= 0) return 1;
  return std::min(1.0, 0.1 + 0.9 * static_cast<double>(since.count()) / total);
}

}  // namespace

std::string_view EndpointStateName(EndpointState state) {
  switch (state) {
    case EndpointState::kHealthy:
      return "healthy";
    case EndpointState::kEjected:
      return "ejected";
    case EndpointState::kRecovering:
      return "recovering";
  }
  return "unknown";
}

std::string_view AdmissionStateName(AdmissionState state) {
  switch (state) {
    case AdmissionState::kOff:
      return "off";
    case AdmissionState::kPending:
      return "pending";
    case AdmissionState::kPassed:
      return "passed";
  }
  return "unknown";
}

std::string_view CircuitStateName(CircuitState state) {
  switch (state) {
    case CircuitState::kClosed:
      return "closed";
    case CircuitState::kOpen:
      return "open";
    case CircuitState::kHalfOpen:
      return "half_open";
  }
  return "unknown";
}

std::string_view ExchangeOutcomeName(ExchangeOutcome outcome) {
  switch (outcome) {
    case ExchangeOutcome::kOk:
      return "ok";
    case ExchangeOutcome::kIoError:
      return "io_error";
    case ExchangeOutcome::kTimeout:
      return "timeout";
    case ExchangeOutcome::kServerError:
      return "http_5xx";
    case ExchangeOutcome::kTooManyRequests:
      return "http_429";
    case ExchangeOutcome::kNodeUnhealthy:
      return "node_unhealthy";
    case ExchangeOutcome::kNodeBehind:
      return "node_behind";
    case ExchangeOutcome::kLostHedge:
      return "lost_hedge";
  }
  return "unknown";
}

absl::Status ValidateHealthOptions(const UpstreamHealthOptions& o) {
  auto bad = [](std::string_view key, std::string_view what) {
    return absl::InvalidArgumentError(fmt::format("upstream_health.{} {}", key, what));
  };
  if (o.probe_interval < absl::Milliseconds(10)) {
    return bad("probe_interval_ms", "must be at least 10");
  }
  if (o.eject_consecutive_failures == 0) {
    return bad("eject_consecutive_failures", "must be at least 1");
  }
  if (!(o.eject_error_rate > 0 && o.eject_error_rate <= 1)) {
    return bad("eject_error_rate", "must be within (0, 1]");
  }
  if (o.window < absl::Milliseconds(100)) return bad("window_ms", "must be at least 100");
  if (o.circuit_window < absl::Milliseconds(100)) {
    return bad("circuit_window_ms", "must be at least 100");
  }
  if (!(o.circuit_failure_rate > 0 && o.circuit_failure_rate <= 1)) {
    return bad("circuit_failure_rate", "must be within (0, 1]");
  }
  if (o.half_open_trials == 0) return bad("half_open_trials", "must be at least 1");
  if (o.recover_probes == 0) return bad("recover_probes", "must be at least 1");
  if (!(o.latency_decay > 0 && o.latency_decay <= 1)) {
    return bad("latency_decay", "must be within (0, 1]");
  }
  if (o.max_attempts == 0 || o.max_attempts > 10) {
    return bad("max_attempts", "must be within 1..10");
  }
  if (!(o.retry_budget_ratio >= 0 && o.retry_budget_ratio <= 1)) {
    return bad("retry_budget_ratio", "must be within [0, 1]");
  }
  if (o.hedge_delay < absl::ZeroDuration()) return bad("hedge_delay_ms", "must not be negative");
  if (o.hedge_min_delay < absl::ZeroDuration()) {
    return bad("hedge_min_delay_ms", "must not be negative");
  }
  if (o.min_ejection < absl::ZeroDuration()) return bad("min_ejection_ms", "must not be negative");
  if (o.ramp_up < absl::ZeroDuration()) return bad("ramp_up_ms", "must not be negative");
  if (o.circuit_open < absl::ZeroDuration()) return bad("circuit_open_ms", "must not be negative");
  return absl::OkStatus();
}

void EndpointHealth::Window::Add(int64_t epoch, bool failure) {
  Bucket& b = buckets[static_cast<size_t>(epoch) % kBuckets];
  if (b.epoch != epoch) b = Bucket{epoch, 0, 0};
  ++b.requests;
  if (failure) ++b.failures;
}

std::pair<uint64_t, uint64_t> EndpointHealth::Window::Sum(int64_t epoch) const {
  uint64_t requests = 0;
  uint64_t failures = 0;
  for (const Bucket& b : buckets) {
    if (b.epoch <= epoch && b.epoch > epoch - static_cast<int64_t>(kBuckets)) {
      requests += b.requests;
      failures += b.failures;
    }
  }
  return {requests, failures};
}

EndpointHealth::EndpointHealth(TargetHealth* target, size_t index, std::string url, uint32_t weight,
                               MetricsRegistry* registry)
    : target_(target),
      options_(target->options()),
      index_(index),
      url_(std::move(url)),
      weight_(std::max<uint32_t>(1, weight)) {
  const MetricLabels labels = {{"target", target->name()}, {"endpoint", url_}};
  for (size_t i = 0; i < kExchangeOutcomeCount; ++i) {
    MetricLabels with_outcome = labels;
    with_outcome.emplace_back("outcome",
                              std::string(ExchangeOutcomeName(static_cast<ExchangeOutcome>(i))));
    outcomes_[i] = &registry->AddCounter("switchyard_upstream_endpoint_exchanges_total",
                                         "Exchanges with each upstream endpoint, by how they ended",
                                         std::move(with_outcome));
  }
  latency_ = &registry->AddHistogram("switchyard_upstream_endpoint_latency_seconds",
                                     "Time to each upstream endpoint's answer",
                                     LatencyBucketsSeconds(), labels);
  state_changes_metric_ = &registry->AddCounter(
      "switchyard_upstream_endpoint_state_changes_total",
      "Changes of an endpoint's state (healthy, ejected, recovering)", labels);
  circuit_opens_ = &registry->AddCounter("switchyard_upstream_endpoint_circuit_opens_total",
                                         "Times an endpoint's circuit breaker opened", labels);
  state_gauge_ = &registry->AddGauge("switchyard_upstream_endpoint_state",
                                     "0 healthy, 1 ejected, 2 recovering", labels);
  slot_gauge_ = &registry->AddGauge("switchyard_upstream_endpoint_slot",
                                    "The slot each endpoint was last probed at", labels);
  retries_ =
      &registry->AddCounter("switchyard_upstream_endpoint_retries_total",
                            "Reads an endpoint failed that were sent again elsewhere", labels);
  hedges_ = &registry->AddCounter(
      "switchyard_upstream_endpoint_hedges_total",
      "Reads an endpoint had not answered after the hedge delay, also sent elsewhere", labels);
  hedge_wins_ = &registry->AddCounter("switchyard_upstream_endpoint_hedge_wins_total",
                                      "Hedged reads an endpoint answered first", labels);
  budget_exhausted_ = &registry->AddCounter(
      "switchyard_upstream_endpoint_retry_budget_exhausted_total",
      "Retries and hedges of an endpoint's reads not sent because the budget was spent", labels);
  if (options_.hedge_delay > absl::ZeroDuration()) {
    hedge_delay_ns_.store(absl::ToInt64Nanoseconds(options_.hedge_delay));
  }
  const IntegrityOptions& integrity = target->integrity();
  if (integrity.sampling()) {
    checks_ = &registry->AddCounter("switchyard_upstream_endpoint_integrity_checks_total",
                                    "Sampled cross-checks an endpoint took part in that compared",
                                    labels);
    checks_skipped_ = &registry->AddCounter(
        "switchyard_upstream_endpoint_integrity_skipped_total",
        "Sampled cross-checks that could not compare (answers at different slots, an error)",
        labels);
    disagreements_ = &registry->AddCounter(
        "switchyard_upstream_endpoint_integrity_disagreements_total",
        "Sampled cross-checks in which an endpoint's answer and its peer's differed", labels);
    minority_ = &registry->AddCounter(
        "switchyard_upstream_endpoint_integrity_minority_total",
        "Times an endpoint's answer was outside the majority of its target's endpoints", labels);
  }
  if (integrity.consensus()) {
    consensus_dissents_ = &registry->AddCounter(
        "switchyard_upstream_endpoint_consensus_dissents_total",
        "Consensus reads in which an endpoint's answer was not among the agreeing ones", labels);
  }
  if (integrity.admission) {
    admission_.store(AdmissionState::kPending, std::memory_order_relaxed);
    MetricLabels passed = labels;
    passed.emplace_back("result", "passed");
    MetricLabels failed = labels;
    failed.emplace_back("result", "failed");
    admission_passed_ = &registry->AddCounter("switchyard_upstream_endpoint_admission_checks_total",
                                              "Admission checks of an endpoint, by result", passed);
    admission_failed_ = &registry->AddCounter("switchyard_upstream_endpoint_admission_checks_total",
                                              "Admission checks of an endpoint, by result", failed);
  }
}

void EndpointHealth::CountCheck(bool compared) {
  Counter* counter = compared ? checks_ : checks_skipped_;
  if (counter != nullptr) counter->Increment();
}

void EndpointHealth::CountConsensusDissent() {
  if (consensus_dissents_ != nullptr) consensus_dissents_->Increment();
}

void EndpointHealth::OnMinority(HealthClock::time_point now, std::string_view detail) {
  if (minority_ != nullptr) minority_->Increment();
  const IntegrityOptions& integrity = target_->integrity();
  absl::MutexLock lock(&mu_);
  minority_at_.push_back(now);
  while (!minority_at_.empty() && now - minority_at_.front() > Chrono(integrity.window)) {
    minority_at_.pop_front();
  }
  if (minority_at_.size() < integrity.eject_after || state_ == EndpointState::kEjected) return;
  last_error_ = fmt::format("integrity: {}", detail);
  EjectLocked(now,
              fmt::format("integrity: its answer was outside its target's majority {} times "
                          "within {}; the last: {}",
                          minority_at_.size(), absl::FormatDuration(integrity.window), detail));
  if (state_ == EndpointState::kEjected) minority_at_.clear();
}

bool EndpointHealth::InRotation(HealthClock::time_point now) const {
  if (avoid_until_ns_.load(std::memory_order_relaxed) > Nanos(now)) return false;
  if (state() == EndpointState::kEjected || circuit() != CircuitState::kClosed) return false;
  return admission() != AdmissionState::kPending || !target_->any_admitted();
}

void EndpointHealth::OnAdmissionCheck(bool passed, std::string result) {
  (passed ? admission_passed_ : admission_failed_)->Increment();
  absl::MutexLock lock(&mu_);
  ++admission_checks_;
  if (!passed) ++admission_failures_;
  if (passed && admission_.load(std::memory_order_relaxed) != AdmissionState::kPassed) {
    admission_.store(AdmissionState::kPassed, std::memory_order_relaxed);
    target_->admitted_.fetch_add(1, std::memory_order_relaxed);
    spdlog::info("upstream {}: endpoint {} admitted: {}", target_->name(), url_, result);
  } else if (!passed && admission_result_ != result) {
    spdlog::warn("upstream {}: endpoint {} not admitted: {}", target_->name(), url_, result);
  }
  admission_result_ = std::move(result);
}

int64_t EndpointHealth::Epoch(HealthClock::time_point now, absl::Duration window) const {
  const int64_t bucket = std::max<int64_t>(1, absl::ToInt64Nanoseconds(window) / Window::kBuckets);
  return Nanos(now) / bucket;
}

EndpointHealth::Admission EndpointHealth::Admit(HealthClock::time_point now, double draw) {
  if (avoid_until_ns_.load(std::memory_order_relaxed) > Nanos(now)) return Admission::kNo;
  if (admission_.load(std::memory_order_relaxed) == AdmissionState::kPending &&
      target_->any_admitted()) {
    return Admission::kNo;
  }
  const EndpointState state = state_.load(std::memory_order_relaxed);
  const CircuitState circuit = circuit_.load(std::memory_order_relaxed);
  if (state == EndpointState::kHealthy && circuit == CircuitState::kClosed) return Admission::kYes;
  absl::MutexLock lock(&mu_);
  if (state_ == EndpointState::kEjected) {
    // With no prober (a router in a test, a prober not started yet) an ejection lasts
    // min_ejection, as an outlier ejection does; with probes, they bring it back.
    if (probed_ || now - changed_at_ < Chrono(options_.min_ejection)) return Admission::kNo;
    StartRecoveryLocked(now);
  }
  if (state_ == EndpointState::kRecovering &&
      draw >= RampShare(now - changed_at_, options_.ramp_up)) {
    return Admission::kNo;
  }
  if (circuit_ == CircuitState::kOpen) {
    if (now - circuit_changed_at_ < Chrono(options_.circuit_open)) return Admission::kNo;
    circuit_.store(CircuitState::kHalfOpen);
    circuit_changed_at_ = now;
    trials_started_ = 0;
    trials_succeeded_ = 0;
  }
  if (circuit_ == CircuitState::kHalfOpen) {
    if (trials_started_ >= options_.half_open_trials) return Admission::kNo;
    ++trials_started_;
    return Admission::kTrial;
  }
  return Admission::kYes;
}

void EndpointHealth::Abandon(bool trial) {
  in_flight_.fetch_sub(1, std::memory_order_relaxed);
  if (!trial) return;
  absl::MutexLock lock(&mu_);
  if (circuit_ == CircuitState::kHalfOpen && trials_started_ > trials_succeeded_) {
    --trials_started_;
  }
}

void EndpointHealth::AvoidUntil(HealthClock::time_point until) {
  avoid_until_ns_.store(Nanos(until), std::memory_order_relaxed);
}

void EndpointHealth::End(ExchangeOutcome outcome, HealthClock::duration latency, bool trial,
                         HealthClock::time_point now, std::string_view error) {
  in_flight_.fetch_sub(1, std::memory_order_relaxed);
  outcomes_[static_cast<size_t>(outcome)]->Increment();
  const double micros = std::chrono::duration<double, std::micro>(latency).count();
  // A lost hedge or a timeout is a latency sample too (a lower bound): without it an endpoint
  // that stopped answering would keep the latency of its good days.
  const bool sample = outcome == ExchangeOutcome::kOk || outcome == ExchangeOutcome::kLostHedge ||
                      outcome == ExchangeOutcome::kTimeout;
  if (outcome == ExchangeOutcome::kOk) latency_->Observe(micros / 1e6);
  const bool failure = CountsAgainst(outcome);
  absl::MutexLock lock(&mu_);
  if (sample) {
    FoldLatencyLocked(micros);
    ++latency_now_[LatencyBucket(micros)];
    ++live_samples_;
  }
  ++requests_;
  if (failure) {
    ++failures_;
    last_error_ = error.empty() ? std::string(ExchangeOutcomeName(outcome)) : std::string(error);
  }
  errors_.Add(Epoch(now, options_.window), failure);
  circuit_errors_.Add(Epoch(now, options_.circuit_window), failure);
  if (trial && circuit_ == CircuitState::kHalfOpen) {
    if (failure) {
      OpenCircuitLocked(now);
    } else if (++trials_succeeded_ >= options_.half_open_trials) {
      CloseCircuitLocked();
    }
  }
  consecutive_failures_ = failure ? consecutive_failures_ + 1 : 0;
  if (!failure) return;
  if (circuit_ == CircuitState::kClosed) {
    const auto [requests, failures] = circuit_errors_.Sum(Epoch(now, options_.circuit_window));
    if (requests >= options_.circuit_min_requests &&
        static_cast<double>(failures) >= options_.circuit_failure_rate * requests) {
      OpenCircuitLocked(now);
    }
  }
  if (state_ == EndpointState::kEjected) return;
  // A lost hedge says only that another endpoint answered first, which under load happens to
  // a sound endpoint every so often: it ejects a recovering endpoint only as it ejects a healthy
  // one, when it keeps losing (the count of failures in a row below).
  if (state_ == EndpointState::kRecovering && outcome != ExchangeOutcome::kLostHedge) {
    EjectLocked(now, fmt::format("failed while recovering: {}", last_error_));
    return;
  }
  if (consecutive_failures_ >= options_.eject_consecutive_failures) {
    EjectLocked(
        now, fmt::format("{} failures in a row, the last: {}", consecutive_failures_, last_error_));
    return;
  }
  const auto [requests, failures] = errors_.Sum(Epoch(now, options_.window));
  if (requests >= options_.min_requests &&
      static_cast<double>(failures) >= options_.eject_error_rate * requests) {
    EjectLocked(now, fmt::format("{} of {} exchanges failed", failures, requests));
  }
}

void EndpointHealth::FoldLatencyLocked(double micros) {
  const double old = latency_us_.load(std::memory_order_relaxed);
  latency_us_.store(old == 0 ? micros : old + options_.latency_decay * (micros - old),
                    std::memory_order_relaxed);
}

void EndpointHealth::OnProbe(const absl::StatusOr<Slot>& slot, bool node_healthy,
                             HealthClock::time_point now,
                             std::optional<HealthClock::duration> round_trip) {
  absl::MutexLock lock(&mu_);
  probed_ = true;
  if (slot.ok()) {
    slot_.store(*slot, std::memory_order_relaxed);
    slot_gauge_->Set(static_cast<int64_t>(*slot));
    if (round_trip && live_samples_ == 0) {
      FoldLatencyLocked(std::chrono::duration<double, std::micro>(*round_trip).count());
    }
  }
  live_samples_ = 0;
  const bool ok = slot.ok() && node_healthy;
  if (!ok) {
    probe_successes_ = 0;
    ++probe_failures_;
    last_error_ = slot.ok() ? "getHealth: the node says it is unhealthy"
                            : fmt::format("probe: {}", std::string(slot.status().message()));
    if (state_ != EndpointState::kEjected && probe_failures_ >= 2) {
      EjectLocked(now, fmt::format("{} probes failed in a row, the last: {}", probe_failures_,
                                   last_error_));
    }
    return;
  }
  probe_failures_ = 0;
  ++probe_successes_;
  if (state_ != EndpointState::kEjected || probe_successes_ < options_.recover_probes ||
      now - changed_at_ < Chrono(options_.min_ejection)) {
    return;
  }
  if (ejected_for_lag_ && lag_ > options_.max_slot_lag / 2) return;
  StartRecoveryLocked(now);
}

void EndpointHealth::StartRecoveryLocked(HealthClock::time_point now) {
  SetStateLocked(EndpointState::kRecovering);
  changed_at_ = now;
  consecutive_failures_ = 0;
  errors_.Clear();
  ejected_for_lag_ = false;
  if (admission_.load(std::memory_order_relaxed) == AdmissionState::kPassed) {
    // A recovered endpoint is admitted again before it takes traffic.
    admission_.store(AdmissionState::kPending, std::memory_order_relaxed);
    target_->admitted_.fetch_sub(1, std::memory_order_relaxed);
  }
  spdlog::info("upstream {}: endpoint {} is recovering", target_->name(), url_);
}

void EndpointHealth::Tick(HealthClock::time_point now, Slot best_slot) {
  absl::MutexLock lock(&mu_);
  const Slot slot = slot_.load(std::memory_order_relaxed);
  lag_ = slot != 0 && best_slot > slot ? best_slot - slot : 0;
  if (lag_ > options_.max_slot_lag && state_ != EndpointState::kEjected) {
    EjectLocked(now, fmt::format("{} slots behind the target's best endpoint", lag_));
    if (state_ == EndpointState::kEjected) ejected_for_lag_ = true;
  }
  if (state_ == EndpointState::kRecovering && now - changed_at_ >= Chrono(options_.ramp_up)) {
    SetStateLocked(EndpointState::kHealthy);
    changed_at_ = now;
  }
  // The p95 of the last two intervals sets the hedge delay.
  if (options_.hedge_delay == absl::ZeroDuration()) {
    uint64_t total = 0;
    std::array<uint64_t, kLatencyBuckets> sum{};
    for (size_t i = 0; i < kLatencyBuckets; ++i) {
      sum[i] = uint64_t{latency_now_[i]} + latency_before_[i];
      total += sum[i];
    }
    // Too few samples (an endpoint that stopped answering, or one not used yet): the last p95
    // stands, or before there is one, kFirstHedgeDelay. A bad endpoint is hedged too.
    int64_t delay = hedge_delay_ns_.load(std::memory_order_relaxed);
    if (delay == 0) {
      delay = std::max(absl::ToInt64Nanoseconds(kFirstHedgeDelay),
                       absl::ToInt64Nanoseconds(options_.hedge_min_delay));
    }
    if (total >= 20) {
      delay = 0;
      const uint64_t rank = (total * 95 + 99) / 100;
      uint64_t seen = 0;
      for (size_t i = 0; i < kLatencyBuckets; ++i) {
        seen += sum[i];
        if (seen >= rank) {
          delay = static_cast<int64_t>(LatencyBucketUpperMicros(i) * 1000);
          break;
        }
      }
      delay = std::max(delay, absl::ToInt64Nanoseconds(options_.hedge_min_delay));
    }
    hedge_delay_ns_.store(delay, std::memory_order_relaxed);
  }
  latency_before_ = latency_now_;
  latency_now_ = {};
}

void EndpointHealth::EjectLocked(HealthClock::time_point now, std::string reason) {
  if (!target_->MayEject(index_)) {
    // The last endpoint in rotation stays: its target degrades and says so.
    if (!target_->degraded_.exchange(true)) {
      spdlog::warn("upstream {}: endpoint {} is failing ({}) but is the last in rotation",
                   target_->name(), url_, reason);
    }
    target_->degraded_gauge_->Set(1);
    target_->degraded_since_ns_.store(Nanos(now), std::memory_order_relaxed);
    return;
  }
  // MayEject stored the new state; the rest of the change is counted here.
  ++state_changes_;
  state_changes_metric_->Increment();
  state_gauge_->Set(static_cast<int64_t>(EndpointState::kEjected));
  changed_at_ = now;
  probe_successes_ = 0;
  ejected_reason_ = reason;
  spdlog::warn("upstream {}: endpoint {} ejected: {}", target_->name(), url_, reason);
}

void EndpointHealth::SetStateLocked(EndpointState state) {
  if (state_ == state) return;
  state_.store(state);
  ++state_changes_;
  state_changes_metric_->Increment();
  state_gauge_->Set(static_cast<int64_t>(state));
}

void EndpointHealth::OpenCircuitLocked(HealthClock::time_point now) {
  if (circuit_ != CircuitState::kOpen) {
    circuit_opens_->Increment();
    spdlog::warn("upstream {}: endpoint {} circuit open: {}", target_->name(), url_, last_error_);
  }
  circuit_.store(CircuitState::kOpen);
  circuit_changed_at_ = now;
  circuit_errors_.Clear();
}

void EndpointHealth::CloseCircuitLocked() {
  circuit_.store(CircuitState::kClosed);
  circuit_errors_.Clear();
  consecutive_failures_ = 0;
}

std::string_view PipelineStatusName(PipelineStatus status) {
  switch (status) {
    case PipelineStatus::kOff:
      return "off";
    case PipelineStatus::kUnknown:
      return "unknown";
    case PipelineStatus::kOn:
      return "on";
    case PipelineStatus::kUnsupported:
      return "unsupported";
  }
  return "off";
}

EndpointStatus EndpointHealth::Status() const {
  EndpointStatus s;
  s.url = url_;
  s.in_flight = in_flight();
  s.latency_ewma_ms = latency_us() / 1000;
  s.p95_ms = static_cast<double>(hedge_delay_ns_.load(std::memory_order_relaxed)) / 1e6;
  s.pipeline = pipeline_.load(std::memory_order_relaxed);
  s.pipeline_fallbacks = pipeline_fallbacks_.load(std::memory_order_relaxed);
  absl::MutexLock lock(&mu_);
  s.state = state_;
  s.circuit = circuit_;
  if (const Slot slot = slot_.load(std::memory_order_relaxed); slot != 0) s.slot = slot;
  s.lag = lag_;
  s.last_error = last_error_;
  s.ejected_reason = ejected_reason_;
  s.requests = requests_;
  s.failures = failures_;
  s.state_changes = state_changes_;
  s.retries = retries_->value();
  s.hedges = hedges_->value();
  s.hedge_wins = hedge_wins_->value();
  s.budget_exhausted = budget_exhausted_->value();
  auto value = [](const Counter* counter) -> uint64_t {
    return counter != nullptr ? counter->value() : 0;
  };
  s.integrity_checks = value(checks_);
  s.integrity_skipped = value(checks_skipped_);
  s.disagreements = value(disagreements_);
  s.minority_answers = value(minority_);
  s.consensus_dissents = value(consensus_dissents_);
  s.admission = admission_.load(std::memory_order_relaxed);
  s.admission_checks = admission_checks_;
  s.admission_failures = admission_failures_;
  s.admission_result = admission_result_;
  return s;
}

const IntegrityOptions& TargetHealth::NoIntegrity() {
  static const IntegrityOptions kOff;
  return kOff;
}

TargetHealth::TargetHealth(const UpstreamTarget& target, const UpstreamHealthOptions& options,
                           MetricsRegistry* registry, const IntegrityOptions& integrity)
    : name_(target.name), options_(options), integrity_(integrity) {
  const MetricLabels labels = {{"target", name_}};
  retries_ = &registry->AddCounter("switchyard_upstream_retries_total",
                                   "Reads sent again to another endpoint after a failure", labels);
  hedges_ =
      &registry->AddCounter("switchyard_upstream_hedges_total",
                            "Reads also sent to a second endpoint after the hedge delay", labels);
  hedge_wins_ = &registry->AddCounter("switchyard_upstream_hedge_wins_total",
                                      "Hedged reads the second endpoint answered first", labels);
  budget_exhausted_ =
      &registry->AddCounter("switchyard_upstream_retry_budget_exhausted_total",
                            "Retries and hedges not sent because the budget was spent", labels);
  fast_failures_ = &registry->AddCounter(
      "switchyard_upstream_fast_failures_total",
      "Requests answered at once because no endpoint could take them", labels);
  degraded_gauge_ =
      &registry->AddGauge("switchyard_upstream_degraded",
                          "1 while the target's last endpoint in rotation fails", labels);
  for (size_t i = 0; i < target.endpoints.size(); ++i) {
    endpoints_.push_back(std::make_unique<EndpointHealth>(this, i, target.endpoints[i].url,
                                                          target.endpoints[i].weight, registry));
  }
  const size_t n = endpoints_.size();
  if (integrity_.sampling()) {
    pair_disagreements_.assign(n * n, nullptr);
    for (size_t a = 0; a < n; ++a) {
      for (size_t b = a + 1; b < n; ++b) {
        pair_disagreements_[a * n + b] = &registry->AddCounter(
            "switchyard_upstream_integrity_disagreements_total",
            "Sampled cross-checks in which two endpoints of a target answered differently",
            {{"target", name_},
             {"endpoint", endpoints_[a]->url()},
             {"peer", endpoints_[b]->url()}});
      }
    }
  }
  if (integrity_.consensus()) {
    consensus_agreed_ = &registry->AddCounter("switchyard_upstream_consensus_reads_total",
                                              "Consensus reads, by whether enough endpoints agreed",
                                              {{"target", name_}, {"outcome", "agreed"}});
    consensus_failed_ = &registry->AddCounter("switchyard_upstream_consensus_reads_total",
                                              "Consensus reads, by whether enough endpoints agreed",
                                              {{"target", name_}, {"outcome", "failed"}});
  }
}

void TargetHealth::CountDisagreement(size_t a, size_t b) {
  const size_t n = endpoints_.size();
  if (a == b || a >= n || b >= n || pair_disagreements_.empty()) return;
  pair_disagreements_[std::min(a, b) * n + std::max(a, b)]->Increment();
  endpoints_[a]->disagreements_->Increment();
  endpoints_[b]->disagreements_->Increment();
}

void TargetHealth::CountConsensus(bool agreed) {
  Counter* counter = agreed ? consensus_agreed_ : consensus_failed_;
  if (counter != nullptr) counter->Increment();
}

bool TargetHealth::TryBeginRetry(size_t endpoint) {
  const uint32_t requests = requests_in_flight_.load(std::memory_order_relaxed);
  const auto allowed = std::max<uint32_t>(
      options_.retry_budget_min,
      static_cast<uint32_t>(options_.retry_budget_ratio * static_cast<double>(requests)));
  if (retries_in_flight_.fetch_add(1, std::memory_order_relaxed) >= allowed) {
    retries_in_flight_.fetch_sub(1, std::memory_order_relaxed);
    budget_exhausted_->Increment();
    endpoints_[endpoint]->budget_exhausted_->Increment();
    return false;
  }
  return true;
}

bool TargetHealth::MayEject(size_t index) {
  absl::MutexLock lock(&eject_mu_);
  for (size_t i = 0; i < endpoints_.size(); ++i) {
    if (i != index && endpoints_[i]->state() != EndpointState::kEjected) {
      // Claimed under the lock: two endpoints failing together cannot both leave.
      endpoints_[index]->state_.store(EndpointState::kEjected);
      return true;
    }
  }
  return false;
}

void TargetHealth::Tick(HealthClock::time_point now) {
  Slot best = 0;
  for (const auto& endpoint : endpoints_) best = std::max(best, endpoint->slot());
  best_slot_.store(best, std::memory_order_relaxed);
  for (auto& endpoint : endpoints_) endpoint->Tick(now, best);
  if (degraded_.load(std::memory_order_relaxed) &&
      Nanos(now) - degraded_since_ns_.load(std::memory_order_relaxed) >
          absl::ToInt64Nanoseconds(options_.window)) {
    degraded_.store(false, std::memory_order_relaxed);
    degraded_gauge_->Set(0);
  }
}

TargetStatus TargetHealth::Status() const {
  TargetStatus s;
  s.name = name_;
  s.degraded = degraded();
  if (const Slot best = best_slot(); best != 0) s.best_slot = best;
  for (const auto& endpoint : endpoints_) s.endpoints.push_back(endpoint->Status());
  return s;
}

UpstreamHealth::UpstreamHealth(const std::vector<UpstreamTarget>& targets,
                               UpstreamHealthOptions options, MetricsRegistry* registry,
                               IntegrityOptions integrity)
    : options_(std::move(options)), integrity_(std::move(integrity)) {
  for (const UpstreamTarget& target : targets) {
    targets_.push_back(std::make_unique<TargetHealth>(target, options_, registry, integrity_));
    by_name_[target.name] = targets_.back().get();
  }
}

TargetHealth* UpstreamHealth::Find(std::string_view target) {
  auto it = by_name_.find(std::string(target));
  return it == by_name_.end() ? nullptr : it->second;
}

const TargetHealth* UpstreamHealth::Find(std::string_view target) const {
  auto it = by_name_.find(std::string(target));
  return it == by_name_.end() ? nullptr : it->second;
}

void UpstreamHealth::Tick(HealthClock::time_point now) {
  for (auto& target : targets_) target->Tick(now);
}

std::vector<TargetStatus> UpstreamHealth::Status() const {
  std::vector<TargetStatus> out;
  for (const auto& target : targets_) out.push_back(target->Status());
  return out;
}

}  // namespace switchyard
