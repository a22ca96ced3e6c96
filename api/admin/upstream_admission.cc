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
};

void UpstreamMonitor::MaybeAdmit(Probe* probe) {
  if (options_.health == nullptr || probe->admitting || stopping_) return;
  TargetHealth* health = options_.health->Find(probe->target->name);
  if (health == nullptr || probe->index >= health->size() ||
      health->endpoint(probe->index).admission() != AdmissionState::kPending) {
    return;
  }
  probe->admitting = true;
  asio::co_spawn(io_context_, Admission::Run(this, probe, health), asio::detached);
}

Task<void> UpstreamMonitor::Admission::Run(UpstreamMonitor* self, Probe* probe,
                                           TargetHealth* health) {
  const IntegrityOptions& integrity = health->integrity();
  EndpointHealth& endpoint = health->endpoint(probe->index);
  auto finish = [&](bool passed, std::string result) {
    probe->admitting = false;
    if (!self->stopping_) endpoint.OnAdmissionCheck(passed, std::move(result));
  };
  // Reachable: the probe that led here succeeded.
  if (!probe->last_ok || !probe->last_slot) {
    finish(false, "unreachable: its last probe failed");
    co_return;
  }
  // Synced: within admission_max_lag of the most advanced endpoint the monitor saw.
  const Slot slot = *probe->last_slot;
  Slot best = slot;
  // The references for the fixed reads: an admitted endpoint when there is one; otherwise
  // every other endpoint that answers its probes, and the endpoint must not be outvoted.
  std::vector<const Probe*> references;
  bool admitted_reference = false;
  for (const auto& other : probe->target->probes) {
    if (other.get() == probe || !other->last_ok || !other->last_slot) continue;
    best = std::max(best, *other->last_slot);
    const bool admitted = health->endpoint(other->index).admission() == AdmissionState::kPassed;
    if (admitted && !admitted_reference) {
      references = {other.get()};
      admitted_reference = true;
    } else if (!admitted_reference) {
      references.push_back(other.get());
    }
  }
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
  size_t compared = 0;
  for (const std::string& read : reads) {
    if (references.empty()) break;
    std::vector<Task<absl::StatusOr<UpstreamResponse>>> asks;
    asks.push_back(SendAsync(*self->upstreams_, probe->pool, read, RetryPolicy::kNever));
    for (const Probe* reference : references) {
      asks.push_back(SendAsync(*self->upstreams_, reference->pool, read, RetryPolicy::kNever));
    }
    std::vector<absl::StatusOr<UpstreamResponse>> answers = co_await AwaitEach(std::move(asks));
    if (self->stopping_) co_return;
    absl::StatusOr<std::string> own = ValueOf(answers[0]);
    if (!own.ok()) {
      finish(false, fmt::format("unreachable: {}: {}", MethodOfRequest(read),
                                std::string(own.status().message())));
      co_return;
    }
    // A reference that could not answer has nothing to compare.
    size_t agree = 0;
    size_t differ = 0;
    const Probe* differing = nullptr;
    std::string differing_value;
    for (size_t i = 0; i < references.size(); ++i) {
      absl::StatusOr<std::string> other = ValueOf(answers[i + 1]);
      if (!other.ok()) continue;
      if (*other == *own) {
        ++agree;
      } else if (++differ == 1) {
        differing = references[i];
        differing_value = *std::move(other);
      }
    }
    if (differ > 0 && (admitted_reference || differ > agree)) {
      finish(false, fmt::format("answers differ: {} answered {} where {} answered {} ({} of {} "
                                "other endpoints answered otherwise)",
                                MethodOfRequest(read), Bounded(*own, 128), differing->url,
                                Bounded(differing_value, 128), differ, agree + differ));
      co_return;
    }
    if (agree + differ > 0) ++compared;
  }
  // Nothing compared: while another endpoint of the target has not had its first probe, it
  // waits for it (or the first probed would be admitted on its own word, whatever it answers).
  // Once every other endpoint has been probed and none answers, it is admitted alone, as the
  // only endpoint of a target is.
  const bool others_unprobed = std::ranges::any_of(
      probe->target->probes,
      [&](const std::unique_ptr<Probe>& other) { return other.get() != probe && !other->probed; });
  if (compared == 0 && others_unprobed) {
    finish(false,
           "waiting for the first probe of another endpoint to compare the fixed reads with");
    co_return;
  }
  // The latency test: admission_latency_requests reads at once; their p95 within the bound.
  std::vector<Task<std::pair<absl::StatusOr<UpstreamResponse>, HealthClock::duration>>> timed;
  for (uint32_t i = 0; i < integrity.admission_latency_requests; ++i) {
    timed.push_back(TimedRead(*self->upstreams_, probe->pool));
  }
  auto results = co_await AwaitEach(std::move(timed));
  if (self->stopping_) co_return;
  std::vector<double> millis;
  size_t failed = 0;
  for (const auto& [response, took] : results) {
    if (!response.ok() || response->status != 200) ++failed;
    millis.push_back(std::chrono::duration<double, std::milli>(took).count());
  }
  std::sort(millis.begin(), millis.end());
  const double p95 = millis[std::min(millis.size() - 1, (millis.size() * 95 + 99) / 100 - 1)];
  const double bound = absl::ToDoubleMilliseconds(integrity.admission_latency_p95);
  if (failed > 0 || p95 > bound) {
    finish(false, fmt::format("slow: p95 {:.1f} ms of {} reads at once (at most {:.0f} ms), "
                              "{} failed",
                              p95, millis.size(), bound, failed));
    co_return;
  }
  finish(true, fmt::format("passed: slot {} (best {}), {} of {} fixed reads equal to {}, p95 "
                           "{:.1f} ms of {} reads at once",
                           slot, best, compared, reads.size(),
                           references.empty()   ? std::string("no other endpoint")
                           : admitted_reference ? references[0]->url
                                                : fmt::format("{} others", references.size()),
                           p95, millis.size()));
}

}  // namespace switchyard
