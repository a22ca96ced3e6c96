#pragma once

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <functional>
#include <memory>
#include <optional>
#include <thread>

#include "absl/time/time.h"
#include "api/upstream/upstream.h"

namespace switchyard {

// Rounds of probes on a thread and io_context of their own, sent through upstream pools of
// their own (never the request path's): the upstream monitor's and the ER prober's
// (docs/architecture.md §4, the threads table). Start() and Stop() from one control thread; the
// round and every callback of the pools run on the loop's thread.
class ProbeLoop {
 public:
  ProbeLoop() = default;
  ~ProbeLoop() { Stop(); }
  ProbeLoop(const ProbeLoop&) = delete;
  ProbeLoop& operator=(const ProbeLoop&) = delete;

  // Where the pools given to Start are made.
  boost::asio::io_context& io_context() { return io_context_; }
  // The pools, from Start until Stop returns (loop thread only).
  UpstreamSet& upstreams() { return *upstreams_; }
  // Whether Stop has begun; a pool's callback that sees it should do nothing more (loop
  // thread only).
  bool stopping() const { return stopping_; }

  // Takes `upstreams` (made on io_context()) and runs `round` on the loop's thread at once,
  // then again `interval` after each round.
  void Start(std::unique_ptr<UpstreamSet> upstreams, absl::Duration interval,
             std::function<void()> round);
  // Ends the rounds, shuts the pools down (their pending callbacks then see stopping()),
  // joins the thread and frees the pools. Does nothing when not started or already stopped.
  void Stop();

 private:
  void Round();

  boost::asio::io_context io_context_;
  boost::asio::steady_timer timer_{io_context_};
  std::optional<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>> guard_;
  std::unique_ptr<UpstreamSet> upstreams_;
  absl::Duration interval_;
  std::function<void()> round_;
  bool stopping_ = false;  // loop thread only
  std::thread thread_;
};

}  // namespace switchyard
