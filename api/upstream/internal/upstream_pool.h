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
#include "api/upstream/upstream_integrity.h"

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
  // The connections opened for requests with large answers (SendOptions::large_answer), which
  // are never pipelined: how many are open, and the idle ones, kept apart from `idle` so that
  // the other requests queue on the pipelining connections instead of taking them.
  size_t for_alone = 0;
  std::vector<std::shared_ptr<Connection>> idle_for_alone;
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
  size_t answered_by = SIZE_MAX;  // the endpoint whose answer finished it
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

// Integrity (upstream_cross_check.cc): a sampled answer, its cross-check, a consensus read.
struct UpstreamPool::Sample {
  std::string request;
  std::string method;
  size_t answered_by = SIZE_MAX;
  std::string answer;
};

struct UpstreamPool::CrossCheck {
  std::string request;
  std::string method;
  struct Answer {
    size_t endpoint = SIZE_MAX;
    ComparableAnswer comparable;
  };
  std::vector<Answer> answers;  // [0]: the sampled answer, [1]: its peer's, then tie-breaks
  size_t pending = 0;
};

struct UpstreamPool::Consensus {
  std::string body;
  UpstreamCallback done;
  uint32_t needs = 0;
  std::vector<size_t> endpoints;  // one leg each
  std::vector<std::optional<ComparableAnswer>> answers;
  std::vector<std::string> raw;
  uint32_t answered = 0;
  uint32_t budgeted = 0;  // legs holding the retry budget
  bool finished = false;
  std::string winner;  // the agreed value, once agreed
};

}  // namespace switchyard
