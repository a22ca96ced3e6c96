// UpstreamMonitor's admission of new and recovered endpoints (docs/architecture.md §22).
// clang-format off
// Before Asio: boost/asio/awaitable.hpp uses std::exchange without including <utility>.
#include <utility>
// clang-format on

#include <algorithm>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <chrono>

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

void UpstreamMonitor::MaybeAdmit(Probe* probe) {
  if (options_.health == nullptr || probe->admitting || stopping_) return;
  TargetHealth* health = options_.health->Find(probe->target->name);
  if (health == nullptr || probe->index >= health->size() ||
      health->endpoint(probe->index).admission() != AdmissionState::kPending) {
    return;
  }
  probe->admitting = true;
  asio::co_spawn(io_context_, Admit(probe, health), asio::detached);
}

Task<void> UpstreamMonitor::Admit(Probe* probe, TargetHealth* health) {
  const IntegrityOptions& integrity = health->integrity();
  EndpointHealth& endpoint = health->endpoint(probe->index);
  auto finish = [&](bool passed, std::string result) {
    probe->admitting = false;
    if (!stopping_) endpoint.OnAdmissionCheck(passed, std::move(result));
  };
  // Reachable: the probe that led here succeeded.
  if (!probe->last_ok || !probe->last_slot) {
    finish(false, "unreachable: its last probe failed");
    co_return;
  }
  // Synced: within admission_max_lag of the most advanced endpoint the monitor saw.
  const Slot slot = *probe->last_slot;
  Slot best = slot;
  const Probe* reference = nullptr;
  for (const auto& other : probe->target->probes) {
    if (other.get() == probe || !other->last_ok || !other->last_slot) continue;
    best = std::max(best, *other->last_slot);
    // The reference for the fixed reads: an admitted endpoint, else any that answers.
    const bool admitted = health->endpoint(other->index).admission() == AdmissionState::kPassed;
    if (reference == nullptr || admitted) reference = other.get();
  }
  if (best - slot > integrity.admission_max_lag) {
    finish(false, fmt::format("not synced: slot {} is {} behind the target's best {} (at most {})",
                              slot, best - slot, best, integrity.admission_max_lag));
    co_return;
  }
  // The fixed reads: the same answers as the reference endpoint's.
  std::vector<std::string> reads = {std::string(kGetGenesisHash)};
  for (const std::string& account : integrity.admission_accounts) {
    reads.push_back(BalanceRead(account));
  }
  size_t compared = 0;
  if (reference != nullptr) {
    for (const std::string& read : reads) {
      auto [mine, theirs] =
          co_await AwaitBoth(SendAsync(*upstreams_, probe->pool, read, RetryPolicy::kNever),
                             SendAsync(*upstreams_, reference->pool, read, RetryPolicy::kNever));
      if (stopping_) co_return;
      absl::StatusOr<std::string> own = ValueOf(mine);
      absl::StatusOr<std::string> other = ValueOf(theirs);
      if (!own.ok()) {
        finish(false, fmt::format("unreachable: {}: {}", MethodOfRequest(read),
                                  std::string(own.status().message())));
        co_return;
      }
      if (!other.ok()) continue;  // the reference could not answer: nothing to compare
      if (*own != *other) {
        finish(false, fmt::format("answers differ: {} answered {} where {} answered {}",
                                  MethodOfRequest(read), Bounded(*own, 128), reference->url,
                                  Bounded(*other, 128)));
        co_return;
      }
      ++compared;
    }
  }
  // The latency test: admission_latency_requests reads at once; their p95 within the bound.
  std::vector<Task<std::pair<absl::StatusOr<UpstreamResponse>, HealthClock::duration>>> timed;
  for (uint32_t i = 0; i < integrity.admission_latency_requests; ++i) {
    timed.push_back(TimedRead(*upstreams_, probe->pool));
  }
  auto results = co_await AwaitEach(std::move(timed));
  if (stopping_) co_return;
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
                           reference != nullptr ? reference->url : "no other endpoint", p95,
                           millis.size()));
}

}  // namespace switchyard
