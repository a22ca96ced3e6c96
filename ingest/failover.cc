#include "ingest/failover.h"

#include <algorithm>

namespace switchyard {
namespace {

// The best slot any endpoint but `except` answered with (0 when none did).
Slot BestSlotExcept(const std::vector<EndpointProbe>& probes, std::optional<size_t> except) {
  Slot best = 0;
  for (size_t i = 0; i < probes.size(); ++i) {
    if (except && i == *except) continue;
    if (probes[i].slot) best = std::max(best, *probes[i].slot);
  }
  return best;
}

}  // namespace

bool EndpointHealthy(const std::vector<EndpointProbe>& probes, size_t index,
                     const FailoverPolicy& policy) {
  const EndpointProbe& probe = probes[index];
  if (!probe.last_answered || !probe.slot) return false;
  if (probe.rounds_without_advance >= policy.stall_rounds) return false;
  const Slot best = BestSlotExcept(probes, std::nullopt);
  return best - *probe.slot <= policy.max_lag_slots;
}

std::optional<FailoverPlan> PlanFromProbes(const std::vector<EndpointProbe>& probes, size_t active,
                                           const FailoverPolicy& policy) {
  if (active >= probes.size()) return std::nullopt;
  std::optional<size_t> target;
  for (size_t i = 0; i < probes.size(); ++i) {
    if (i != active && EndpointHealthy(probes, i, policy)) {
      target = i;
      break;
    }
  }
  if (!target) return std::nullopt;
  const EndpointProbe& current = probes[active];
  const Slot best_other = BestSlotExcept(probes, active);
  if (current.last_answered && current.slot && best_other > *current.slot &&
      best_other - *current.slot > policy.max_lag_slots) {
    return FailoverPlan{*target, FailoverReason::kLag};
  }
  bool another_advanced = false;
  for (size_t i = 0; i < probes.size(); ++i) {
    if (i != active && probes[i].last_answered && probes[i].rounds_without_advance == 0) {
      another_advanced = true;
    }
  }
  if (another_advanced && current.rounds_without_advance >= policy.stall_rounds) {
    return FailoverPlan{*target,
                        current.last_answered ? FailoverReason::kLag : FailoverReason::kDead};
  }
  return std::nullopt;
}

size_t NextEndpointAfterFailure(const std::vector<EndpointProbe>& probes, size_t active,
                                const FailoverPolicy& policy) {
  for (size_t i = 0; i < probes.size(); ++i) {
    if (i != active && EndpointHealthy(probes, i, policy)) return i;
  }
  return probes.empty() ? 0 : (active + 1) % probes.size();
}

}  // namespace switchyard
