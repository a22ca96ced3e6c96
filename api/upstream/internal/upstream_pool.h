#pragma once
// The parts of UpstreamPool that its source files share (upstream.cc: choice, attempts,
// retries, hedges and deadlines; upstream_pipeline.cc: pipelining).

#include <array>
#include <boost/asio/basic_waitable_timer.hpp>
#include <boost/asio/io_context.hpp>
#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "api/upstream/internal/upstream_connection.h"
#include "api/upstream/upstream.h"

namespace switchyard {

struct UpstreamPool::Endpoint {
  ParsedUrl url;
  std::string head;       // upstream_internal::RequestHeadOf(url)
  std::string gzip_head;  // ... with Accept-Encoding: gzip
  uint32_t weight = 1;
  int64_t current_weight = 0;
  // Every open connection, and those of them with nothing in flight (most recent last).
  std::vector<std::shared_ptr<Connection>> connections;
  std::vector<std::shared_ptr<Connection>> idle;
  PipelineState pipeline = PipelineState::kOff;
  upstream_internal::Clock::time_point probe_after;  // when an unsupported endpoint is asked again
  std::string probe_request;                         // GET /health, sent twice together
  // Attempts waiting for a connection, oldest first, with the time they started waiting.
  std::deque<std::pair<std::shared_ptr<Attempt>, std::chrono::steady_clock::time_point>> waiting;
};

struct UpstreamPool::SweepTimer {
  SweepTimer(boost::asio::io_context& io_context, UpstreamPool* pool)
      : timer(io_context.get_executor()), pool(pool) {}
  boost::asio::basic_waitable_timer<upstream_internal::Clock,
                                    boost::asio::wait_traits<upstream_internal::Clock>,
                                    boost::asio::io_context::executor_type>
      timer;
  UpstreamPool* pool;  // null once the pool is gone (a cancelled wait may still run)
};

struct UpstreamPool::HedgeTimer : SweepTimer {
  using SweepTimer::SweepTimer;
};

// One request and every attempt made for it.
struct UpstreamPool::Request {
  std::string body;
  SendOptions options;
  UpstreamCallback done;
  upstream_internal::Clock::time_point deadline;
  uint64_t tried = 0;  // endpoints an attempt went to (bit i: endpoint i; i < 64)
  size_t last_endpoint = SIZE_MAX;
  uint32_t attempts = 0;     // started, hedges included
  uint32_t outstanding = 0;  // attempts not ended yet
  uint32_t budget = 0;       // retries and hedges holding the target's budget
  bool stale_retried = false;
  bool alone_retried = false;
  bool finished = false;
  upstream_internal::Clock::time_point won_started =
      upstream_internal::Clock::time_point::max();  // the winner's start
  // A failed attempt's result, kept while another attempt may still answer better.
  std::optional<absl::StatusOr<UpstreamResponse>> fallback;
  // Attempts in flight, to cancel the ones still running when one answers: at most two run
  // at once (the first and its hedge; a retry starts only when none runs).
  struct Live {
    std::weak_ptr<Connection> connection;
    uint64_t ticket = 0;
  };
  std::array<Live, 2> live;
  uint32_t moves = 0;  // times it went again because of another request on its connection
};

// One attempt of a request, on one endpoint.
struct UpstreamPool::Attempt {
  std::shared_ptr<Request> request;
  size_t index = 0;
  bool trial = false;
  bool hedge = false;
  bool began = false;  // the endpoint's health counts it in flight
  upstream_internal::Clock::time_point started;
};

}  // namespace switchyard
