#include "api/upstream/upstream.h"

#include <algorithm>
#include <array>
#include <boost/asio/basic_waitable_timer.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/beast/core/error.hpp>
#include <chrono>
#include <deque>
#include <optional>

#include "api/upstream/internal/upstream_connection.h"
#include "api/upstream/internal/upstream_pool.h"
#include "common/clock.h"
#include "common/gzip.h"
#include "fmt/format.h"

namespace switchyard {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace ssl = asio::ssl;
using tcp = asio::ip::tcp;
using boost::system::error_code;

using SteadyClock = upstream_internal::Clock;

namespace {
// An idle connection used within this time is handed out without asking the kernel whether
// the peer closed it (see UpstreamConnection::Usable).
constexpr auto kCheckIdleAfter = std::chrono::milliseconds(250);
// The hedge timer's granularity.
constexpr auto kHedgeTick = std::chrono::milliseconds(1);
// A 429 or 503 without Retry-After keeps requests off the endpoint this long.
constexpr auto kDefaultRetryAfter = std::chrono::seconds(1);
// The sweep's tick while requests are queued behind others.
constexpr auto kPipelineTick = std::chrono::milliseconds(2);
// Node errors are looked for only in answers this small: an error answer is short, and a large
// answer is never scanned.
constexpr size_t kNodeErrorScanLimit = 2048;

// The node error a single JSON-RPC answer carries that means "this node cannot answer now".
std::optional<ExchangeOutcome> NodeErrorOf(const std::string& body) {
  if (body.size() > kNodeErrorScanLimit) return std::nullopt;
  const size_t first = body.find_first_not_of(" \t\r\n");
  if (first == std::string::npos || body[first] != '{') return std::nullopt;
  const size_t error = body.find("\"error\"");
  if (error == std::string::npos) return std::nullopt;
  const size_t code = body.find("\"code\"", error);
  if (code == std::string::npos) return std::nullopt;
  const size_t value = body.find_first_not_of(" \t\r\n:", code + 6);
  if (value == std::string::npos) return std::nullopt;
  const std::string_view number = std::string_view(body).substr(value, 6);
  if (number == "-32005") return ExchangeOutcome::kNodeUnhealthy;
  if (number == "-32016") return ExchangeOutcome::kNodeBehind;
  return std::nullopt;
}

// gzip never makes an answer of at most kNodeErrorScanLimit bytes more than this larger: a
// compressed answer beyond kNodeErrorScanLimit + kGzipOverhead is too large to be a node error.
constexpr size_t kGzipOverhead = 64;

ExchangeOutcome OutcomeOf(const UpstreamResponse& response) {
  if (response.status == 429) return ExchangeOutcome::kTooManyRequests;
  if (response.status >= 500) return ExchangeOutcome::kServerError;
  if (response.status == 200) {
    if (std::optional<ExchangeOutcome> node = NodeErrorOf(response.body)) return *node;
  }
  return ExchangeOutcome::kOk;
}
}  // namespace

UpstreamPool::UpstreamPool(asio::io_context& io_context, std::string name,
                           std::vector<UpstreamEndpoint> endpoints, std::vector<ParsedUrl> urls,
                           const UpstreamOptions& options, ssl::context* tls, ApiMetrics* metrics,
                           TargetHealth* health)
    : io_context_(io_context),
      name_(std::move(name)),
      options_(options),
      tls_(tls),
      metrics_(metrics),
      target_metrics_(metrics->ForUpstream(name_)),
      health_(health),
      sweep_timer_(std::make_shared<SweepTimer>(io_context, this)),
      hedge_timer_(std::make_shared<HedgeTimer>(io_context, this)) {
  for (size_t i = 0; i < endpoints.size(); ++i) {
    auto endpoint = std::make_unique<Endpoint>();
    endpoint->url = urls[i];
    endpoint->head = upstream_internal::RequestHeadOf(endpoint->url);
    endpoint->gzip_head = upstream_internal::RequestHeadOf(endpoint->url, /*accept_gzip=*/true);
    endpoint->weight = std::max<uint32_t>(1, endpoints[i].weight);
    switch (options_.pipeline) {
      case UpstreamOptions::Pipeline::kOff:
        endpoint->pipeline = PipelineState::kOff;
        break;
      case UpstreamOptions::Pipeline::kAuto:
        endpoint->pipeline = PipelineState::kUnknown;
        break;
      case UpstreamOptions::Pipeline::kOn:
        endpoint->pipeline = PipelineState::kOn;
        break;
    }
    endpoint->probe_request =
        fmt::format("GET /health HTTP/1.1\r\nHost: {}\r\n\r\n", endpoint->url.HostHeader());
    endpoints_.push_back(std::move(endpoint));
  }
  if (health_ != nullptr && health_->size() != endpoints_.size()) health_ = nullptr;
  sampling_ = health_ != nullptr && endpoints_.size() > 1 && health_->integrity().sampling();
  for (size_t i = 0; i < endpoints_.size(); ++i) SetPipelineState(i, endpoints_[i]->pipeline);
  random_ ^= reinterpret_cast<uintptr_t>(this);
}

UpstreamPool::~UpstreamPool() {
  Shutdown();
  sweep_timer_->pool = nullptr;
  hedge_timer_->pool = nullptr;
}

void UpstreamPool::Shutdown() {
  shut_down_ = true;
  sweep_timer_->timer.cancel();
  hedge_timer_->timer.cancel();
  hedges_.clear();
  for (auto& endpoint : endpoints_) {
    auto waiting = std::move(endpoint->waiting);
    endpoint->waiting.clear();
    for (auto& [attempt, since] : waiting) {
      --attempt->request->outstanding;
      if (!attempt->request->finished) {
        Finish(attempt->request,
               absl::UnavailableError(fmt::format("upstream {} is shutting down", name_)));
      }
    }
    endpoint->idle.clear();
    endpoint->idle_for_alone.clear();
    const std::vector<std::shared_ptr<Connection>> open = endpoint->connections;
    for (const auto& connection : open) connection->Close();
    endpoint->connections.clear();
    endpoint->for_alone = 0;
  }
}

size_t UpstreamPool::RoundRobin(size_t exclude) {
  // Smooth weighted round-robin (nginx): deterministic and evenly interleaved.
  int64_t total = 0;
  Endpoint* best = nullptr;
  size_t best_index = exclude;
  for (size_t i = 0; i < endpoints_.size(); ++i) {
    if (i == exclude) continue;
    Endpoint& e = *endpoints_[i];
    e.current_weight += e.weight;
    total += e.weight;
    if (best == nullptr || e.current_weight > best->current_weight) {
      best = &e;
      best_index = i;
    }
  }
  if (best != nullptr) best->current_weight -= total;
  return best_index;
}

void UpstreamPool::FillCandidates(const Request& request) {
  candidates_.clear();
  bool any_at_slot = false;
  for (size_t i = 0; i < endpoints_.size(); ++i) {
    if (i < 64 && (request.tried & (uint64_t{1} << i)) != 0) continue;
    candidates_.push_back(i);
    if (request.options.min_slot != 0 && health_->endpoint(i).slot() >= request.options.min_slot) {
      any_at_slot = true;
    }
  }
  if (any_at_slot) {
    // Skip endpoints known to be behind the slot the request needs (an unknown slot is kept).
    std::erase_if(candidates_, [&](size_t i) {
      const Slot slot = health_->endpoint(i).slot();
      return slot != 0 && slot < request.options.min_slot;
    });
  }
}

UpstreamPool::Choice UpstreamPool::Choose(Request& request) {
  const size_t n = endpoints_.size();
  const bool first = request.attempts == 0;
  if (request.options.endpoint != SIZE_MAX) {
    // Pinned (an integrity read): that endpoint, once; its caller chose it among those in
    // rotation.
    if (first && request.options.endpoint < n) return {request.options.endpoint, false};
    return {};
  }
  if (health_ == nullptr) {
    if (!first && n > 1) return {RoundRobin(request.last_endpoint), false};
    return {RoundRobin(SIZE_MAX), false};
  }
  auto next_random = [this] {
    random_ ^= random_ << 13;
    random_ ^= random_ >> 7;
    random_ ^= random_ << 17;
    return random_;
  };
  auto draw = [&] { return static_cast<double>(next_random() >> 11) * 0x1.0p-53; };
  const auto now = SteadyClock::now();
  if (n == 1) {
    // Alone: it takes every request its health admits (a second try after an I/O error too).
    const EndpointHealth::Admission admission = health_->endpoint(0).Admit(now, draw());
    if (admission == EndpointHealth::Admission::kNo) return {};
    return {0, admission == EndpointHealth::Admission::kTrial};
  }
  FillCandidates(request);
  auto score = [&](size_t i) {
    const EndpointHealth& e = health_->endpoint(i);
    return (e.latency_us() + 50.0) * (e.in_flight() + 1) / e.weight();
  };
  auto weighted_pick = [&](size_t skip) {
    uint64_t total = 0;
    for (size_t i : candidates_) total += i == skip ? 0 : health_->endpoint(i).weight();
    if (total == 0) return SIZE_MAX;
    uint64_t at = next_random() % total;
    for (size_t i : candidates_) {
      if (i == skip) continue;
      const uint32_t w = health_->endpoint(i).weight();
      if (at < w) return i;
      at -= w;
    }
    return SIZE_MAX;
  };
  recovering_.clear();
  while (!candidates_.empty()) {
    size_t pick = candidates_.front();
    if (candidates_.size() > 1) {
      const size_t a = weighted_pick(SIZE_MAX);
      const size_t b = weighted_pick(a);
      pick = b == SIZE_MAX || score(a) <= score(b) ? a : b;
    }
    const EndpointHealth::Admission admission = health_->endpoint(pick).Admit(now, draw());
    if (admission != EndpointHealth::Admission::kNo) {
      return {pick, admission == EndpointHealth::Admission::kTrial};
    }
    if (health_->endpoint(pick).state() == EndpointState::kRecovering) {
      recovering_.push_back(pick);
    }
    std::erase(candidates_, pick);
  }
  // The ramp keeps a recovering endpoint to its share of the requests other endpoints can take;
  // a request none of them can take goes to it (a draw of 0 is within any share).
  for (size_t i : recovering_) {
    const EndpointHealth::Admission admission = health_->endpoint(i).Admit(now, 0);
    if (admission != EndpointHealth::Admission::kNo) {
      return {i, admission == EndpointHealth::Admission::kTrial};
    }
  }
  return {};
}

absl::Status UpstreamPool::NoEndpointStatus() const {
  size_t open = 0;
  size_t ejected = 0;
  for (size_t i = 0; i < endpoints_.size(); ++i) {
    const EndpointHealth& e = health_->endpoint(i);
    if (e.circuit() != CircuitState::kClosed) ++open;
    if (e.state() == EndpointState::kEjected) ++ejected;
  }
  if (open == endpoints_.size()) {
    return absl::UnavailableError(
        fmt::format("upstream {}: every endpoint's circuit breaker is open", name_));
  }
  return absl::UnavailableError(fmt::format(
      "upstream {}: no endpoint can take the request now ({} of {} circuits open, {} ejected, "
      "the rest rate-limited or recovering)",
      name_, open, endpoints_.size(), ejected));
}

void UpstreamPool::Send(std::string body, SendOptions options, UpstreamCallback done) {
  if (options.consensus_of > 1 && health_ != nullptr && options.policy == RetryPolicy::kSafe) {
    SendConsensus(std::move(body), options, std::move(done));
    return;
  }
  auto request = std::make_shared<Request>();
  request->body = std::move(body);
  request->options = options;
  request->done = std::move(done);
  const absl::Duration deadline = options_.request_deadline > absl::ZeroDuration()
                                      ? options_.request_deadline
                                      : 2 * options_.request_timeout;
  request->deadline = SteadyClock::now() + ToChrono(deadline);
  if (shut_down_ || endpoints_.empty()) {
    auto callback = std::move(request->done);
    callback(absl::UnavailableError(fmt::format("upstream {} is not available", name_)));
    return;
  }
  if (health_ != nullptr) health_->BeginRequest();
  if (!Launch(request)) {
    if (health_ != nullptr) health_->CountFastFailure();
    Finish(request, NoEndpointStatus());
  }
}

bool UpstreamPool::Launch(const std::shared_ptr<Request>& request) {
  const Choice choice = Choose(*request);
  if (choice.index == SIZE_MAX) return false;
  auto attempt = std::make_shared<Attempt>();
  attempt->request = request;
  attempt->index = choice.index;
  attempt->trial = choice.trial;
  attempt->hedge = request->outstanding > 0;
  if (choice.index < 64) request->tried |= uint64_t{1} << choice.index;
  request->last_endpoint = choice.index;
  ++request->attempts;
  ++request->outstanding;
  StartOn(std::move(attempt));
  return true;
}

void UpstreamPool::StartOn(std::shared_ptr<Attempt> attempt) {
  const size_t index = attempt->index;
  Endpoint& endpoint = *endpoints_[index];
  std::shared_ptr<Connection> connection;
  const auto now = SteadyClock::now();
  auto take_idle = [&](std::vector<std::shared_ptr<Connection>>& idle) {
    while (!idle.empty() && !connection) {
      connection = std::move(idle.back());
      idle.pop_back();
      if (connection->busy()) {  // in use again (a waiter took it): not idle any more
        connection.reset();
        continue;
      }
      if (now - connection->idle_since() > ToChrono(options_.max_idle_time) ||
          !connection->Usable(now, kCheckIdleAfter)) {
        connection->Close();  // the listener drops it from the open ones
        connection.reset();
      }
    }
  };
  // A request whose answer may be large is queued behind none and takes a connection of its
  // own (SendOptions::large_answer); the others take the connections that pipeline.
  const bool large = attempt->request->options.large_answer;
  if (large) take_idle(endpoint.idle_for_alone);
  take_idle(endpoint.idle);
  const size_t open = endpoint.connections.size();
  if (!connection && !large &&
      open - endpoint.for_alone >=
          std::min(options_.pipeline_connections, options_.max_connections_per_endpoint) &&
      Pipelining(index, now)) {
    connection = PipelineOn(index, now);
  }
  if (!connection) {
    if (endpoint.connections.size() >= options_.max_connections_per_endpoint) {
      if (endpoint.waiting.size() < options_.max_waiting_per_endpoint) {
        endpoint.waiting.emplace_back(std::move(attempt), now);
        return;
      }
      OnAttemptEnd(std::move(attempt),
                   absl::UnavailableError(fmt::format(
                       "upstream {}: {} connections busy and {} requests waiting", name_,
                       options_.max_connections_per_endpoint, options_.max_waiting_per_endpoint)),
                   ExchangeOutcome::kIoError, /*unsent=*/true);
      return;
    }
    const bool for_alone = large && options_.pipeline != UpstreamOptions::Pipeline::kOff;
    connection = Open(index, options_.pipeline == UpstreamOptions::Pipeline::kOff || for_alone
                                 ? 1
                                 : std::max<size_t>(1, options_.pipeline_depth));
    if (for_alone) {
      connection->set_for_alone();
      ++endpoint.for_alone;
    }
  }
  ExchangeOn(std::move(connection), std::move(attempt));
}

std::shared_ptr<UpstreamPool::Connection> UpstreamPool::Open(size_t index, size_t depth) {
  Endpoint& endpoint = *endpoints_[index];
  auto connection = std::make_shared<Connection>(
      io_context_, endpoint.url, endpoint.head, endpoint.gzip_head, tls_,
      options_.max_response_bytes, options_.verify_tls, depth, &metrics_->upstream_reads,
      [this, index](const std::shared_ptr<Connection>& connection, bool closed) {
        OnConnectionEvent(index, connection, closed);
      });
  endpoint.connections.push_back(connection);
  metrics_->upstream_connections_opened.Increment();
  return connection;
}

void UpstreamPool::OnConnectionEvent(size_t index, const std::shared_ptr<Connection>& connection,
                                     bool closed) {
  Endpoint& endpoint = *endpoints_[index];
  if (!closed) {
    if (!shut_down_) ServeWaiter(index, connection);
    return;
  }
  auto drop = [&](std::vector<std::shared_ptr<Connection>>& list) {
    for (size_t i = 0; i < list.size(); ++i) {
      if (list[i] == connection) {
        list[i] = std::move(list.back());
        list.pop_back();
        return true;
      }
    }
    return false;
  };
  if (drop(endpoint.connections) && connection->for_alone()) --endpoint.for_alone;
  drop(endpoint.idle);
  drop(endpoint.idle_for_alone);
  if (!shut_down_) ServeWaiter(index, nullptr);
}

void UpstreamPool::ExchangeOn(std::shared_ptr<Connection> connection,
                              std::shared_ptr<Attempt> attempt) {
  metrics_->upstream_requests.Increment();
  target_metrics_.requests->Increment();
  if (connection->busy()) metrics_->upstream_pipelined.Increment();
  Request& request = *attempt->request;
  const auto now = SteadyClock::now();
  attempt->started = now;
  if (health_ != nullptr) {
    health_->endpoint(attempt->index).Begin();
    attempt->began = true;
    // A read's first attempt is hedged after its endpoint's hedge delay, when another endpoint
    // may take it.
    if (request.attempts == 1 && request.options.policy == RetryPolicy::kSafe &&
        request.options.hedge && health_->options().hedge && endpoints_.size() > 1) {
      const auto delay = health_->endpoint(attempt->index).hedge_delay();
      if (delay > SteadyClock::duration::zero()) ScheduleHedge(attempt->request, now + delay);
    }
  }
  Request::Live* live = nullptr;
  for (auto& slot : request.live) {
    std::shared_ptr<Connection> held = slot.connection.lock();
    if (!held || !held->open()) {
      live = &slot;
      break;
    }
  }
  Connection* raw = connection.get();
  ArmSweep();
  Attempt* tag = attempt.get();
  const uint64_t ticket = raw->Exchange(
      request.body, std::min(now + ToChrono(options_.request_timeout), request.deadline),
      request.options.accept_gzip,
      [this, attempt, weak = std::weak_ptr<Connection>(connection)](
          error_code ec, UpstreamResponse response, Connection::End end) mutable {
        OnExchanged(std::move(attempt), weak, ec, std::move(response), end);
      },
      attempt, tag, request.options.large_answer);
  if (live != nullptr) *live = Request::Live{connection, ticket};
}

void UpstreamPool::OnExchanged(std::shared_ptr<Attempt> attempt,
                               const std::weak_ptr<Connection>& weak, error_code ec,
                               UpstreamResponse response, upstream_internal::ExchangeEnd end) {
  const size_t index = attempt->index;
  Request& request = *attempt->request;
  // The connection is this attempt's no more.
  for (auto& slot : request.live) {
    if (!slot.connection.owner_before(weak) && !weak.owner_before(slot.connection)) {
      slot = Request::Live();
    }
  }
  if (ec) {
    if (end.pipeline_broken) {
      metrics_->upstream_pipeline_breaks.Increment();
      Endpoint& endpoint = *endpoints_[index];
      // Asked again before more requests are queued behind others on it (configured on
      // too: the endpoint showed it does not pipeline).
      if (endpoint.pipeline == PipelineState::kOn) {
        SetPipelineState(index, PipelineState::kUnknown);
      }
    }
    // Cut because of another request on its connection: it goes again at once, when
    // nothing of it left or it is a read; it is no failure of the endpoint.
    const bool cut = end.behind || end.pipeline_broken;
    if (cut && !request.finished && !shut_down_ && request.moves < 4 &&
        (end.unsent || request.options.policy == RetryPolicy::kSafe)) {
      ++request.moves;
      metrics_->upstream_pipeline_moves.Increment();
      if (attempt->began) health_->endpoint(index).Abandon();
      attempt->began = false;
      StartOn(std::move(attempt));
      return;
    }
    // A read that met a connection closed while idle goes again at once on a new
    // connection to the same endpoint, once; it is no failure of the endpoint. A write
    // (sendTransaction, requestAirdrop) is never sent twice.
    if (end.stale && request.options.policy == RetryPolicy::kSafe && !request.stale_retried &&
        !request.finished && !shut_down_) {
      request.stale_retried = true;
      metrics_->upstream_stale_retries.Increment();
      if (attempt->began) health_->endpoint(index).Abandon();
      attempt->began = false;
      StartOn(std::move(attempt));
      return;
    }
    const bool timed_out = ec == beast::error::timeout;
    std::string why = ec.message();
    if (cut) why = "the connection ended while the request was queued behind another";
    OnAttemptEnd(std::move(attempt),
                 timed_out
                     ? absl::DeadlineExceededError(fmt::format("upstream {} timed out", name_))
                     : absl::UnavailableError(fmt::format("upstream {}: {}", name_, why)),
                 timed_out ? ExchangeOutcome::kTimeout : ExchangeOutcome::kIoError, end.unsent);
    return;
  }
  if (response.gzip) {
    metrics_->upstream_gzip_answers.Increment();
    if (absl::Status decoded = Decode(request.options, response); !decoded.ok()) {
      target_metrics_.errors->Increment();
      OnAttemptEnd(std::move(attempt), std::move(decoded), ExchangeOutcome::kIoError, false);
      return;
    }
  }
  if (response.status < 200 || response.status > 299) target_metrics_.errors->Increment();
  const ExchangeOutcome outcome = OutcomeOf(response);
  OnAttemptEnd(std::move(attempt), std::move(response), outcome, false);
}

absl::Status UpstreamPool::Decode(const SendOptions& options, UpstreamResponse& response) {
  size_t limit = options_.max_response_bytes;
  const bool may_keep = options.accept_gzip && response.status == 200;
  if (may_keep) {
    if (response.body.size() > kNodeErrorScanLimit + kGzipOverhead) return absl::OkStatus();
    limit = kNodeErrorScanLimit;  // a small answer might be a node error: OutcomeOf reads it
  }
  std::string inflated;
  const absl::Status status = GzipInflate(response.body, limit, &inflated);
  if (may_keep && absl::IsResourceExhausted(status)) return absl::OkStatus();  // no node error
  if (!status.ok()) {
    metrics_->upstream_gzip_bad.Increment();
    return absl::UnavailableError(
        fmt::format("upstream {} answered a gzip body that does not inflate: {}", name_,
                    std::string(status.message())));
  }
  metrics_->upstream_gzip_inflated.Increment();
  response.body = std::move(inflated);
  response.gzip = false;
  return absl::OkStatus();
}

void UpstreamPool::OnAttemptEnd(std::shared_ptr<Attempt> attempt,
                                absl::StatusOr<UpstreamResponse> result, ExchangeOutcome outcome,
                                bool unsent) {
  const std::shared_ptr<Request> request = attempt->request;
  --request->outstanding;
  const auto now = SteadyClock::now();
  if (request->finished) {
    // Cancelled: another attempt answered first. It counts against its endpoint only when it
    // had the head start (the slow original of a hedge); a hedge that lost to its original
    // did nothing wrong.
    if (attempt->began) {
      EndpointHealth& health = health_->endpoint(attempt->index);
      if (attempt->started <= request->won_started) {
        health.End(ExchangeOutcome::kLostHedge, now - attempt->started, attempt->trial, now);
      } else {
        health.Abandon(attempt->trial);
      }
    }
    return;
  }
  if (IsFailure(outcome)) {
    metrics_->upstream_failures.Increment();
    if (!result.ok()) target_metrics_.errors->Increment();
  }
  if (attempt->began) {
    EndpointHealth& health = health_->endpoint(attempt->index);
    std::string error;
    if (IsFailure(outcome)) {
      error = result.ok() ? fmt::format("HTTP {}: {}", result->status, ExchangeOutcomeName(outcome))
                          : std::string(result.status().message());
    }
    health.End(outcome, now - attempt->started, attempt->trial, now, error);
    if (result.ok() && (result->status == 429 || result->status == 503) &&
        (result->retry_after_seconds > 0 || result->status == 429)) {
      health.AvoidUntil(now + (result->retry_after_seconds > 0
                                   ? std::chrono::seconds(result->retry_after_seconds)
                                   : kDefaultRetryAfter));
    }
  }
  if (!IsFailure(outcome)) {
    request->won_started = attempt->started;
    request->answered_by = attempt->index;
    if (attempt->hedge && health_ != nullptr) health_->CountHedgeWin(attempt->index);
    Finish(request, std::move(result));
    return;
  }
  // May it go again? Reads on any failure; a write only when no byte of it left.
  const RetryPolicy policy = request->options.policy;
  bool again = policy == RetryPolicy::kSafe ||
               (policy == RetryPolicy::kOtherEndpointOnly && unsent && endpoints_.size() > 1);
  if (shut_down_ || request->options.endpoint != SIZE_MAX) again = false;
  if (again && endpoints_.size() == 1) {
    // Alone: once more on the same endpoint, after an I/O error only.
    again = outcome == ExchangeOutcome::kIoError && !request->alone_retried;
    request->alone_retried = true;
    request->tried = 0;
  }
  const uint32_t max_attempts =
      health_ != nullptr ? health_->options().max_attempts : 2;  // without health: one retry
  if (again && request->attempts >= max_attempts) again = false;
  if (again && now >= request->deadline) again = false;
  if (request->outstanding > 0) {
    // Another attempt (a hedge, or the one it hedged) is still running: it may answer.
    if (!request->fallback) request->fallback = std::move(result);
    return;
  }
  if (again && health_ != nullptr) {
    if (!health_->TryBeginRetry(attempt->index)) {
      again = false;
    } else {
      ++request->budget;
    }
  }
  if (again) {
    metrics_->upstream_retries.Increment();
    if (health_ != nullptr) health_->CountRetry(attempt->index);
    if (Launch(request)) return;
    // No other endpoint can take it: the failure stands.
  }
  Finish(request,
         request->fallback && !result.ok() ? std::move(*request->fallback) : std::move(result));
}

void UpstreamPool::Finish(const std::shared_ptr<Request>& request,
                          absl::StatusOr<UpstreamResponse> result) {
  request->finished = true;
  for (auto& live : request->live) {
    // Attempts still running lost (they end as lost hedges): alone on its connection, the
    // connection is closed; pipelined, its answer is dropped when it comes.
    if (auto connection = live.connection.lock()) connection->Cancel(live.ticket);
    live = Request::Live();
  }
  if (health_ != nullptr) {
    for (; request->budget > 0; --request->budget) health_->EndRetry();
    health_->EndRequest();
  }
  auto done = std::move(request->done);
  request->done = nullptr;
  if (sampling_ && result.ok()) {
    // Checked off the client's path: the client has its answer before the check leaves.
    std::optional<Sample> sample = SampleOf(*request, *result);
    done(std::move(result));
    if (sample) StartCrossCheck(*std::move(sample));
    return;
  }
  done(std::move(result));
}

void UpstreamPool::ServeWaiter(size_t index, std::shared_ptr<Connection> connection) {
  Endpoint& endpoint = *endpoints_[index];
  const auto now = SteadyClock::now();
  // A connection with exchanges in flight takes a waiter only when it pipelines, and only one
  // that may queue behind others, behind others that take followers.
  const bool busy = connection && connection->busy();
  const bool takes =
      !connection || (connection->open() && !connection->full() &&
                      (!busy || (connection->head_since() >= now - SlowAfter(index) &&
                                 !connection->HoldsAlone() && Pipelining(index, now))));
  while (takes && !endpoint.waiting.empty() && !shut_down_) {
    if (busy && endpoint.waiting.front().first->request->options.large_answer) break;
    auto [attempt, since] = std::move(endpoint.waiting.front());
    endpoint.waiting.pop_front();
    if (attempt->request->finished) {
      --attempt->request->outstanding;
      continue;
    }
    if (now - since > ToChrono(options_.request_timeout) || now >= attempt->request->deadline) {
      // Waited its whole time: it fails (or tries another endpoint) without a connection.
      OnAttemptEnd(std::move(attempt),
                   absl::DeadlineExceededError(
                       fmt::format("upstream {}: no connection free within the timeout", name_)),
                   ExchangeOutcome::kTimeout, /*unsent=*/true);
      continue;
    }
    if (connection) {
      ExchangeOn(std::move(connection), std::move(attempt));
    } else {
      StartOn(std::move(attempt));  // a new connection in the closed one's place
    }
    return;
  }
  if (!connection || connection->busy() || !connection->open()) return;
  if (connection->for_alone()) {
    if (!shut_down_ && endpoint.idle_for_alone.size() < options_.max_idle_per_endpoint) {
      endpoint.idle_for_alone.push_back(std::move(connection));
    } else {
      connection->Close();
    }
    return;
  }
  // A pipelining endpoint keeps pipeline_connections: beyond, an idle connection would take
  // the requests that should queue on those (the surplus opened while they were full or slow).
  const bool surplus =
      endpoint.pipeline == PipelineState::kOn &&
      endpoint.connections.size() - endpoint.for_alone > options_.pipeline_connections;
  if (!shut_down_ && !surplus && endpoint.idle.size() < options_.max_idle_per_endpoint) {
    endpoint.idle.push_back(std::move(connection));
  } else {
    connection->Close();
  }
}

void UpstreamPool::ArmSweep() {
  if (sweep_armed_ || shut_down_) return;
  sweep_armed_ = true;
  auto tick = std::clamp<SteadyClock::duration>(ToChrono(options_.request_timeout) / 20,
                                                std::chrono::milliseconds(1),
                                                std::chrono::milliseconds(100));
  if (pipelined_behind_) tick = std::min<SteadyClock::duration>(tick, kPipelineTick);
  sweep_timer_->timer.expires_after(tick);
  sweep_timer_->timer.async_wait([state = sweep_timer_](error_code ec) {
    UpstreamPool* pool = state->pool;
    if (pool == nullptr) return;
    pool->sweep_armed_ = false;
    if (!ec) pool->Sweep();
  });
}

void UpstreamPool::Sweep() {
  const auto now = SteadyClock::now();
  bool busy = false;
  bool behind = false;
  std::vector<std::pair<size_t, std::shared_ptr<Connection>>> due;
  for (size_t index = 0; index < endpoints_.size(); ++index) {
    const auto slow_since = now - SlowAfter(index);
    for (const auto& connection : endpoints_[index]->connections) {
      if (!connection->busy()) continue;
      busy = true;
      if (connection->depth() > 1) behind = true;
      if (connection->NextDeadline() <= now ||
          (connection->depth() > 1 && connection->head_since() < slow_since)) {
        due.emplace_back(index, connection);
      }
    }
  }
  pipelined_behind_ = behind;
  // Each callback may start exchanges (retries, waiters) and so re-arm the sweep itself.
  for (auto& [index, connection] : due) {
    connection->Expire(now);
    if (connection->open()) RescueFollowers(index, connection, now);
  }
  if (busy) ArmSweep();
}

void UpstreamPool::ScheduleHedge(const std::shared_ptr<Request>& request,
                                 HealthClock::time_point at) {
  auto later = [](const auto& a, const auto& b) { return a.first > b.first; };
  hedges_.emplace_back(at, request);
  std::push_heap(hedges_.begin(), hedges_.end(), later);
  if (at < hedge_armed_at_) ArmHedge();
}

void UpstreamPool::ArmHedge() {
  if (hedges_.empty() || shut_down_) return;
  // At most one wake-up per kHedgeTick: hedges due meanwhile go together, a little late,
  // instead of one timer expiry per read.
  hedge_armed_at_ = std::max(hedges_.front().first, SteadyClock::now() + kHedgeTick);
  hedge_timer_->timer.expires_at(hedge_armed_at_);
  hedge_timer_->timer.async_wait([state = hedge_timer_](error_code ec) {
    UpstreamPool* pool = state->pool;
    if (pool == nullptr || ec) return;
    pool->OnHedgeTimer();
  });
}

void UpstreamPool::OnHedgeTimer() {
  hedge_armed_at_ = HealthClock::time_point::max();
  auto later = [](const auto& a, const auto& b) { return a.first > b.first; };
  const auto now = SteadyClock::now();
  while (!hedges_.empty() && hedges_.front().first <= now) {
    std::pop_heap(hedges_.begin(), hedges_.end(), later);
    std::shared_ptr<Request> request = hedges_.back().second.lock();
    hedges_.pop_back();
    // Only a read whose first attempt is still the only one, and within its deadline.
    if (!request || request->finished || request->outstanding != 1 || request->attempts != 1 ||
        now >= request->deadline || shut_down_) {
      continue;
    }
    // The endpoint the first attempt went to is the slow one.
    const size_t slow = request->last_endpoint;
    if (!health_->TryBeginRetry(slow)) continue;
    ++request->budget;
    if (Launch(request)) {
      health_->CountHedge(slow);
    } else {
      --request->budget;
      health_->EndRetry();
    }
  }
  ArmHedge();
}

}  // namespace switchyard
