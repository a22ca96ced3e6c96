#include "api/consistency_gate.h"

#include <chrono>

namespace switchyard {

void ConsistencyGate::Wait(Slot applied_slot, Slot min_slot, absl::Duration max_wait, Done done) {
  applied_slot_ = std::max(applied_slot_, applied_slot);
  if (applied_slot_ >= min_slot) {
    done(true);
    return;
  }
  if (waiters_.size() >= max_waiters_ || max_wait <= absl::ZeroDuration()) {
    done(false);
    return;
  }
  auto waiter = std::make_shared<Waiter>(io_context_);
  waiter->done = std::move(done);
  auto it = waiters_.emplace(min_slot, waiter);
  waiter->timer.expires_after(std::chrono::duration_cast<std::chrono::steady_clock::duration>(
      absl::ToChronoNanoseconds(max_wait)));
  waiter->timer.async_wait(
      [this, it, weak = std::weak_ptr<Waiter>(waiter)](boost::system::error_code ec) {
        auto waiter = weak.lock();
        if (ec || !waiter || !waiter->done) return;
        Done done = std::move(waiter->done);
        waiters_.erase(it);
        done(false);
      });
}

void ConsistencyGate::OnApplied(Slot applied_slot) {
  applied_slot_ = std::max(applied_slot_, applied_slot);
  while (!waiters_.empty() && waiters_.begin()->first <= applied_slot_) {
    std::shared_ptr<Waiter> waiter = std::move(waiters_.begin()->second);
    waiters_.erase(waiters_.begin());
    waiter->timer.cancel();
    Done done = std::move(waiter->done);
    if (done) done(true);
  }
}

void ConsistencyGate::Shutdown() {
  Waiters waiters = std::move(waiters_);
  waiters_.clear();
  for (auto& [slot, waiter] : waiters) {
    waiter->timer.cancel();
    Done done = std::move(waiter->done);
    if (done) done(false);
  }
}

}  // namespace switchyard
