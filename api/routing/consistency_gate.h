#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>

#include "absl/container/flat_hash_map.h"
#include "absl/time/time.h"
#include "common/slot.h"

namespace switchyard {

// Holds requests until the applied slot reaches the slot they require, or their deadline
// passes, without holding a thread and without a timer of its own: the owner calls Expire
// when NextDeadline() is due (the request pipeline arms one timer for it). One per worker;
// every call is made on the worker's thread. Deadlines are on the caller's monotonic clock.
class ConsistencyGate {
 public:
  // Called with true once the slot is reached, false at the deadline or at Shutdown.
  using Done = std::function<void(bool reached)>;

  explicit ConsistencyGate(size_t max_waiters) : max_waiters_(max_waiters) {}

  // Waits for `min_slot` when `applied_slot` is below it; `done` may run before Wait returns
  // (the slot is reached already: true; the gate is full or `deadline` is not after `now`:
  // false).
  void Wait(Slot applied_slot, Slot min_slot, absl::Duration now, absl::Duration deadline,
            Done done);
  // Wakes the waiters whose slot `applied_slot` reaches, lowest slot first.
  void OnApplied(Slot applied_slot);
  // Fails the waiters whose deadline is at or before `now`, earliest first.
  void Expire(absl::Duration now);
  // The earliest deadline of a waiter; nullopt when nobody waits.
  std::optional<absl::Duration> NextDeadline() const;
  // Fails every waiter.
  void Shutdown();
  size_t waiting() const { return waiters_.size(); }

 private:
  struct Waiter {
    std::multimap<Slot, uint64_t>::iterator by_slot;
    std::multimap<absl::Duration, uint64_t>::iterator by_deadline;
    Done done;
  };
  // Removes waiter `id` and returns its callback.
  Done Take(uint64_t id);

  const size_t max_waiters_;
  uint64_t next_id_ = 0;
  absl::flat_hash_map<uint64_t, Waiter> waiters_;
  std::multimap<Slot, uint64_t> by_slot_;
  std::multimap<absl::Duration, uint64_t> by_deadline_;
  Slot applied_slot_ = 0;
};

}  // namespace switchyard
