#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "common/slot.h"

namespace switchyard {

// Why the watcher left an endpoint.
enum class FailoverReason {
  kDead,  // its stream or reads failed, or it stopped answering probes
  kLag,   // it answered, but its slot fell behind the others' or stopped advancing
};

// What the probes of one base-layer endpoint have shown so far.
struct EndpointProbe {
  std::optional<Slot> slot;        // the last slot it answered with; nullopt: never answered
  bool last_answered = false;      // the last probe got a slot
  int rounds_without_advance = 0;  // consecutive probe rounds with no higher slot (or none)
};

// When an endpoint counts as lagging or stalled.
struct FailoverPolicy {
  uint64_t max_lag_slots = 50;  // behind the best other endpoint by more than this: lagging
  int stall_rounds = 3;         // this many rounds without advancing while another advanced
};

// A move to another endpoint, decided from the probes.
struct FailoverPlan {
  size_t target = 0;
  FailoverReason reason = FailoverReason::kLag;
};

// Whether an endpoint is fit to be moved to: it answered the last probe, it advanced within
// the last stall_rounds rounds, and it is at most max_lag_slots behind the best slot seen.
bool EndpointHealthy(const std::vector<EndpointProbe>& probes, size_t index,
                     const FailoverPolicy& policy);

// The move the probes call for while `active` is in use: none while it keeps up; else to the
// first healthy endpoint in list order. The active endpoint is left when it is more than
// max_lag_slots behind the best other one (kLag), or when it has not advanced (kLag) or not
// answered (kDead) for stall_rounds rounds while another endpoint advanced in the last round.
// Never a move when no other endpoint is healthy.
std::optional<FailoverPlan> PlanFromProbes(const std::vector<EndpointProbe>& probes, size_t active,
                                           const FailoverPolicy& policy);

// Where to go when the active endpoint failed on its own (its stream or reads): the first
// healthy endpoint in list order other than `active`, else the one after `active`.
size_t NextEndpointAfterFailure(const std::vector<EndpointProbe>& probes, size_t active,
                                const FailoverPolicy& policy);

}  // namespace switchyard
