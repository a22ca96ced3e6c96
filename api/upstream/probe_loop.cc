#include "api/upstream/probe_loop.h"

#include <boost/asio/post.hpp>
#include <utility>

#include "common/clock.h"

namespace switchyard {

void ProbeLoop::Start(std::unique_ptr<UpstreamSet> upstreams, absl::Duration interval,
                      std::function<void()> round) {
  upstreams_ = std::move(upstreams);
  interval_ = interval;
  round_ = std::move(round);
  guard_.emplace(io_context_.get_executor());
  boost::asio::post(io_context_, [this] { Round(); });
  thread_ = std::thread([this] { io_context_.run(); });
}

void ProbeLoop::Stop() {
  if (!thread_.joinable()) return;
  boost::asio::post(io_context_, [this] {
    stopping_ = true;
    timer_.cancel();
    upstreams_->Shutdown();
    guard_.reset();
  });
  thread_.join();
  upstreams_.reset();
}

void ProbeLoop::Round() {
  if (stopping_) return;
  round_();
  timer_.expires_after(ToChrono(interval_));
  timer_.async_wait([this](boost::system::error_code ec) {
    if (!ec) Round();
  });
}

}  // namespace switchyard
