// UpstreamMonitor's admission of new and recovered endpoints (docs/architecture.md §22).
// clang-format off
// Before Asio: boost/asio/awaitable.hpp uses std::exchange without including <utility>.
#include <utility>
// clang-format on

#include <algorithm>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "api/admin/admin_handler.h"
#include "api/upstream/upstream_await.h"
#include "api/upstream/upstream_integrity.h"
#include "fmt/format.h"

namespace switchyard {

namespace asio = boost::asio;

namespace {

constexpr std::string_view kGetGenesisHash =
    R"({"jsonrpc":"2.0","id":1,"method":"getGenesisHash"})";
constexpr std::string_view kLatencyRead = R"({"jsonrpc":"2.0","id":1,"method":"getSlot"})";

std::string BalanceRead(const std::string& account) {
  return fmt::format(R"({{"jsonrpc":"2.0","id":1,"method":"getBalance","params":["{}"]}})",
                     account);
}

// The comparable value of an answer, or why there is none.
absl::StatusOr<std::string> ValueOf(const absl::StatusOr<UpstreamResponse>& response) {
  if (!response.ok()) return response.status();
  if (response->status != 200) {
    return absl::UnavailableError(fmt::format("HTTP {}", response->status));
  }
  ComparableAnswer answer = ComparableOf(response->body);
  if (answer.kind != ComparableAnswer::Kind::kResult) {
    return absl::UnavailableError(fmt::format("no result: {}", Bounded(response->body, 200)));
  }
  return std::move(answer.value);
}

Task<std::pair<absl::StatusOr<UpstreamResponse>, HealthClock::duration>> TimedRead(
    UpstreamClient& client, std::string pool) {
  const HealthClock::time_point start = HealthClock::now();
  absl::StatusOr<UpstreamResponse> response =
      co_await SendAsync(client, std::move(pool), std::string(kLatencyRead), RetryPolicy::kNever);
  co_return std::make_pair(std::move(response), HealthClock::now() - start);
}

}  // namespace

// The checks of one admission, a coroutine on the monitor's thread: a nested type of
// UpstreamMonitor, so that its header needs no coroutine types.
struct UpstreamMonitor::Admission {
  static Task<void> Run(UpstreamMonitor* self, Probe* probe, TargetHealth* health);

  // What the endpoint is compared with: an admitted endpoint when there is one; otherwise
  // every other endpoint that answers its probes, and the endpoint must not be outvoted.
  struct References {
    std::vector<const Probe*> probes;
    bool admitted = false;  // probes is the one admitted endpoint
    Slot best = 0;          // the most advanced slot the monitor saw on the target
  };
  static References FindReferences(const Probe* probe, TargetHealth* health);
  // The fixed reads, each asked of the endpoint and of its references at once: how many could
  // be compared, or why the endpoint fails (FailedPrecondition with the reason).
  static Task<absl::StatusOr<size_t>> CompareFixedReads(UpstreamMonitor* self, Probe* probe,
                                                        const References& references,
                                                        const std::vector<std::string>& reads);
  // admission_latency_requests reads at once: their p95 and how many failed.
  struct Latency {
    double p95_ms = 0;
    size_t reads = 0;
    size_t failed = 0;
  };
  static Task<Latency> MeasureLatency(UpstreamMonitor* self, Probe* probe, uint32_t requests);
};

void UpstreamMonitor::MaybeAdmit(Probe* probe) {
  if (options_.health == nullptr || probe->admitting || loop_.stopping()) return;
  TargetHealth* health = options_.health->Find(probe->target->name);
  if (health == nullptr || probe->index >= health->size() ||
      health->endpoint(probe->index).admission() != AdmissionState::kPending) {
    return;
  }
  probe->admitting = true;
  asio::co_spawn(loop_.io_context(), Admission::Run(this, probe, health), asio::detached);
}

Task<void> UpstreamMonitor::Admission::Run(UpstreamMonitor* self, Probe* probe,
                                           TargetHealth* health) {
  const IntegrityOptions& integrity = health->integrity();
  EndpointHealth& endpoint = health->endpoint(probe->index);
  auto finish = [&](bool passed, std::string result) {
    probe->admitting = false;
    if (!self->loop_.stopping()) endpoint.OnAdmissionCheck(passed, std::move(result));
  };
  // Reachable: the probe that led here succeeded.
  if (!probe->last_ok || !probe->last_slot) {
    finish(false, "unreachable: its last probe failed");
    co_return;
  }
  // Synced: within admission_max_lag of the most advanced endpoint the monitor saw.
  const Slot slot = *probe->last_slot;
  const References references = FindReferences(probe, health);
  const Slot best = references.best;
  if (best - slot > integrity.admission_max_lag) {
    finish(false, fmt::format("not synced: slot {} is {} behind the target's best {} (at most {})",
                              slot, best - slot, best, integrity.admission_max_lag));
    co_return;
  }
  // The fixed reads: the same answers as the admitted endpoint's, or as most of the others'.
  std::vector<std::string> reads = {std::string(kGetGenesisHash)};
  for (const std::string& account : integrity.admission_accounts) {
    reads.push_back(BalanceRead(account));
  }
  const absl::StatusOr<size_t> compared =
      co_await CompareFixedReads(self, probe, references, reads);
  if (self->loop_.stopping()) co_return;
  if (!compared.ok()) {
    finish(false, std::string(compared.status().message()));
    co_return;
  }
  // Nothing compared: while another endpoint of the target has not had its first probe, it
  // waits for it (or the first probed would be admitted on its own word, whatever it answers).
  // Once every other endpoint has been probed and none answers, it is admitted alone, as the
  // only endpoint of a target is.
  const bool others_unprobed = std::ranges::any_of(
      probe->target->probes,
      [&](const std::unique_ptr<Probe>& other) { return other.get() != probe && !other->probed; });
  if (*compared == 0 && others_unprobed) {
    finish(false,
           "waiting for the first probe of another endpoint to compare the fixed reads with");
    co_return;
  }
  // The latency test: the p95 of reads at once within the bound.
  const Latency latency =
      co_await MeasureLatency(self, probe, integrity.admission_latency_requests);
  if (self->loop_.stopping()) co_return;
  const double bound = absl::ToDoubleMilliseconds(integrity.admission_latency_p95);
  if (latency.failed > 0 || latency.p95_ms > bound) {
    finish(false, fmt::format("slow: p95 {:.1f} ms of {} reads at once (at most {:.0f} ms), "
                              "{} failed",
                              latency.p95_ms, latency.reads, bound, latency.failed));
    co_return;
  }
  const std::vector<const Probe*>& others = references.probes;
  finish(true, fmt::format("passed: slot {} (best {}), {} of {} fixed reads equal to {}, p95 "
                           "{:.1f} ms of {} reads at once",
                           slot, best, *compared, reads.size(),
                           others.empty()        ? std::string("no other endpoint")
                           : references.admitted ? others[0]->url
                                                 : fmt::format("{} others", others.size()),
                           latency.p95_ms, latency.reads));
}

UpstreamMonitor::Admission::References UpstreamMonitor::Admission::FindReferences(
    const Probe* probe, TargetHealth* health) {
  References references;
  references.best = *probe->last_slot;
  for (const auto& other : probe->target->probes) {
    if (other.get() == probe || !other->last_ok || !other->last_slot) continue;
    references.best = std::max(references.best, *other->last_slot);
    const bool admitted = health->endpoint(other->index).admission() == AdmissionState::kPassed;
    if (admitted && !references.admitted) {
      references.probes = {other.get()};
      references.admitted = true;
    } else if (!references.admitted) {
      references.probes.push_back(other.get());
    }
  }
  return references;
}

Task<absl::StatusOr<size_t>> UpstreamMonitor::Admission::CompareFixedReads(
    UpstreamMonitor* self, Probe* probe, const References& references,
    const std::vector<std::string>& reads) {
  size_t compared = 0;
  for (const std::string& read : reads) {
    if (references.probes.empty()) break;
    std::vector<Task<absl::StatusOr<UpstreamResponse>>> asks;
    asks.push_back(SendAsync(self->loop_.upstreams(), probe->pool, read, RetryPolicy::kNever));
    for (const Probe* reference : references.probes) {
      asks.push_back(
          SendAsync(self->loop_.upstreams(), reference->pool, read, RetryPolicy::kNever));
    }
    std::vector<absl::StatusOr<UpstreamResponse>> answers = co_await AwaitEach(std::move(asks));
    if (self->loop_.stopping()) co_return compared;
    absl::StatusOr<std::string> own = ValueOf(answers[0]);
    if (!own.ok()) {
      co_return absl::FailedPreconditionError(fmt::format(
          "unreachable: {}: {}", MethodOfRequest(read), std::string(own.status().message())));
    }
    // A reference that could not answer has nothing to compare.
    size_t agree = 0;
    size_t differ = 0;
    const Probe* differing = nullptr;
    std::string differing_value;
    for (size_t i = 0; i < references.probes.size(); ++i) {
      absl::StatusOr<std::string> other = ValueOf(answers[i + 1]);
      if (!other.ok()) continue;
      if (*other == *own) {
        ++agree;
      } else if (++differ == 1) {
        differing = references.probes[i];
        differing_value = *std::move(other);
      }
    }
    if (differ > 0 && (references.admitted || differ > agree)) {
      co_return absl::FailedPreconditionError(
          fmt::format("answers differ: {} answered {} where {} answered {} ({} of {} other "
                      "endpoints answered otherwise)",
                      MethodOfRequest(read), Bounded(*own, 128), differing->url,
                      Bounded(differing_value, 128), differ, agree + differ));
    }
    if (agree + differ > 0) ++compared;
  }
  co_return compared;
}

Task<UpstreamMonitor::Admission::Latency> UpstreamMonitor::Admission::MeasureLatency(
    UpstreamMonitor* self, Probe* probe, uint32_t requests) {
  std::vector<Task<std::pair<absl::StatusOr<UpstreamResponse>, HealthClock::duration>>> timed;
  for (uint32_t i = 0; i < requests; ++i)
    timed.push_back(TimedRead(self->loop_.upstreams(), probe->pool));
  auto results = co_await AwaitEach(std::move(timed));
  Latency latency;
  std::vector<double> millis;
  for (const auto& [response, took] : results) {
    if (!response.ok() || response->status != 200) ++latency.failed;
    millis.push_back(std::chrono::duration<double, std::milli>(took).count());
  }
  latency.reads = millis.size();
  if (millis.empty()) co_return latency;
  std::sort(millis.begin(), millis.end());
  latency.p95_ms = millis[std::min(millis.size() - 1, (millis.size() * 95 + 99) / 100 - 1)];
  co_return latency;
}

}  // namespace switchyard
