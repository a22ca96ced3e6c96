#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <cstddef>
#include <functional>
#include <map>
#include <memory>

#include "absl/time/time.h"
#include "common/slot.h"

namespace switchyard {

// Holds requests until the applied slot reaches the slot they require, or a deadline passes,
// without holding a thread. One per worker; every call is made on the worker's thread
// (OnApplied is posted there by the snapshot listener).
class ConsistencyGate {
 public:
  // Called with true once the slot is reached, false at the deadline or at Shutdown.
  using Done = std::function<void(bool reached)>;

  ConsistencyGate(boost::asio::io_context& io_context, size_t max_waiters)
      : io_context_(io_context), max_waiters_(max_waiters) {}

  // Waits for `min_slot` when `applied_slot` is below it; `done` may run before Wait returns
  // (the slot is reached already, or the gate is full: false).
  void Wait(Slot applied_slot, Slot min_slot, absl::Duration max_wait, Done done);
  void OnApplied(Slot applied_slot);
  void Shutdown();
  size_t waiting() const { return waiters_.size(); }

 private:
  struct Waiter {
    explicit Waiter(boost::asio::io_context& io_context) : timer(io_context) {}
    boost::asio::steady_timer timer;
    Done done;
  };
  using Waiters = std::multimap<Slot, std::shared_ptr<Waiter>>;

  boost::asio::io_context& io_context_;
  const size_t max_waiters_;
  Waiters waiters_;
  Slot applied_slot_ = 0;
};

}  // namespace switchyard
