#include "api/routing/consistency_gate.h"

#include <algorithm>
#include <utility>
#include <vector>

namespace switchyard {

void ConsistencyGate::Wait(Slot applied_slot, Slot min_slot, absl::Duration now,
                           absl::Duration deadline, Done done) {
  applied_slot_ = std::max(applied_slot_, applied_slot);
  if (applied_slot_ >= min_slot) {
    done(true);
    return;
  }
  if (waiters_.size() >= max_waiters_ || deadline <= now) {
    done(false);
    return;
  }
  const uint64_t id = next_id_++;
  Waiter& waiter = waiters_[id];
  waiter.by_slot = by_slot_.emplace(min_slot, id);
  waiter.by_deadline = by_deadline_.emplace(deadline, id);
  waiter.done = std::move(done);
}

ConsistencyGate::Done ConsistencyGate::Take(uint64_t id) {
  auto it = waiters_.find(id);
  Done done = std::move(it->second.done);
  by_slot_.erase(it->second.by_slot);
  by_deadline_.erase(it->second.by_deadline);
  waiters_.erase(it);
  return done;
}

void ConsistencyGate::OnApplied(Slot applied_slot) {
  applied_slot_ = std::max(applied_slot_, applied_slot);
  // A callback may call Wait again: take each waiter out before calling it.
  while (!by_slot_.empty() && by_slot_.begin()->first <= applied_slot_) {
    Take(by_slot_.begin()->second)(true);
  }
}

void ConsistencyGate::Expire(absl::Duration now) {
  while (!by_deadline_.empty() && by_deadline_.begin()->first <= now) {
    Take(by_deadline_.begin()->second)(false);
  }
}

std::optional<absl::Duration> ConsistencyGate::NextDeadline() const {
  if (by_deadline_.empty()) return std::nullopt;
  return by_deadline_.begin()->first;
}

void ConsistencyGate::Shutdown() {
  std::vector<Done> all;
  all.reserve(waiters_.size());
  for (auto& [id, waiter] : waiters_) all.push_back(std::move(waiter.done));
  waiters_.clear();
  by_slot_.clear();
  by_deadline_.clear();
  for (Done& done : all) done(false);
}

}  // namespace switchyard
