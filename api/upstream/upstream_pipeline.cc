// UpstreamPool's HTTP/1.1 pipelining (docs/architecture.md §11): whether an endpoint pipelines
// (probed or configured), which busy connection a request is queued on, and the rescue of the
// requests behind a slow answer.
#include <algorithm>
#include <chrono>
#include <memory>
#include <vector>

#include "api/upstream/internal/upstream_connection.h"
#include "api/upstream/internal/upstream_pool.h"
#include "api/upstream/upstream.h"
#include "common/clock.h"

namespace switchyard {

using boost::system::error_code;
using SteadyClock = upstream_internal::Clock;

namespace {
// An endpoint found not to pipeline is asked again after this long.
constexpr auto kProbeAgainAfter = std::chrono::seconds(60);
// The probe's time to answer both of its requests.
constexpr auto kProbeTimeout = std::chrono::seconds(2);
// Without health, the oldest exchange on a connection is slow after this long.
constexpr auto kSlowAfterWithoutHealth = std::chrono::milliseconds(50);
}  // namespace

bool UpstreamPool::Pipelining(size_t index, SteadyClock::time_point now) {
  Endpoint& endpoint = *endpoints_[index];
  switch (endpoint.pipeline) {
    case PipelineState::kOn:
      return true;
    case PipelineState::kUnsupported:
      if (now < endpoint.probe_after) return false;
      [[fallthrough]];
    case PipelineState::kUnknown:
      if (endpoint.connections.size() < options_.max_connections_per_endpoint) {
        ProbePipelining(index);
      }
      return false;
    case PipelineState::kOff:
    case PipelineState::kProbing:
      return false;
  }
  return false;
}

SteadyClock::duration UpstreamPool::SlowAfter(size_t index) const {
  if (health_ == nullptr) return kSlowAfterWithoutHealth;
  const auto delay = health_->endpoint(index).hedge_delay();
  return delay > SteadyClock::duration::zero() ? delay : kSlowAfterWithoutHealth;
}

std::shared_ptr<UpstreamPool::Connection> UpstreamPool::PipelineOn(size_t index,
                                                                   SteadyClock::time_point now) {
  Endpoint& endpoint = *endpoints_[index];
  const auto slow_since = now - SlowAfter(index);
  Connection* best = nullptr;
  size_t best_at = 0;
  for (size_t i = 0; i < endpoint.connections.size(); ++i) {
    Connection* c = endpoint.connections[i].get();
    // An idle one is the idle list's (StartOn took none from it: there is none usable).
    if (!c->open() || !c->busy() || c->full() || c->head_since() < slow_since || c->HoldsAlone()) {
      continue;
    }
    if (best == nullptr || (c->writing() && !best->writing()) ||
        (c->writing() == best->writing() && c->depth() < best->depth())) {
      best = c;
      best_at = i;
    }
  }
  if (best == nullptr) return nullptr;
  return endpoint.connections[best_at];
}

void UpstreamPool::SetPipelineState(size_t index, PipelineState state) {
  endpoints_[index]->pipeline = state;
  if (health_ == nullptr) return;
  PipelineStatus status = PipelineStatus::kOff;
  switch (state) {
    case PipelineState::kOff:
      status = PipelineStatus::kOff;
      break;
    case PipelineState::kUnknown:
    case PipelineState::kProbing:
      status = PipelineStatus::kUnknown;
      break;
    case PipelineState::kOn:
      status = PipelineStatus::kOn;
      break;
    case PipelineState::kUnsupported:
      status = PipelineStatus::kUnsupported;
      break;
  }
  health_->endpoint(index).SetPipeline(status);
}

void UpstreamPool::ProbePipelining(size_t index) {
  Endpoint& endpoint = *endpoints_[index];
  SetPipelineState(index, PipelineState::kProbing);
  metrics_->upstream_pipeline_probes.Increment();
  std::shared_ptr<Connection> connection = Open(index, 2);
  const auto deadline = SteadyClock::now() + std::min<SteadyClock::duration>(
                                                 kProbeTimeout, ToChrono(options_.request_timeout));
  struct Probe {
    size_t answers = 0;
    bool failed = false;
  };
  auto probe = std::make_shared<Probe>();
  auto done = [this, index, probe, weak = std::weak_ptr<Connection>(connection)](
                  error_code ec, UpstreamResponse, Connection::End) {
    if (shut_down_ || probe->failed) return;
    Endpoint& endpoint = *endpoints_[index];
    if (ec) {
      probe->failed = true;
    } else if (++probe->answers < 2) {
      return;
    }
    std::shared_ptr<Connection> connection = weak.lock();
    const bool pipelines = !probe->failed && connection && connection->open();
    if (endpoint.pipeline != PipelineState::kProbing) return;
    if (pipelines) {
      SetPipelineState(index, PipelineState::kOn);
      return;
    }
    metrics_->upstream_pipeline_fallbacks.Increment();
    if (health_ != nullptr) health_->endpoint(index).CountPipelineFallback();
    endpoint.probe_after = SteadyClock::now() + kProbeAgainAfter;
    SetPipelineState(index, PipelineState::kUnsupported);
  };
  ArmSweep();
  // Both are queued before the connection is up, so they leave in one write.
  connection->ExchangeRaw(endpoint.probe_request, deadline, done);
  connection->ExchangeRaw(endpoint.probe_request, deadline, std::move(done));
}

void UpstreamPool::RescueFollowers(size_t index, const std::shared_ptr<Connection>& connection,
                                   SteadyClock::time_point now) {
  std::vector<void*> written;
  std::vector<void*> unwritten;
  connection->FollowersOfSlowHead(now - SlowAfter(index), &written, &unwritten);
  std::vector<std::shared_ptr<Request>> requests;
  for (void* tag : unwritten) {
    // Not sent yet: it leaves this connection for another (its callback starts it again).
    Attempt* attempt = static_cast<Attempt*>(tag);
    for (const auto& live : attempt->request->live) {
      if (live.connection.lock() == connection) {
        connection->Cancel(live.ticket, /*move=*/true);
        break;
      }
    }
  }
  for (void* tag : written) requests.push_back(static_cast<Attempt*>(tag)->request);
  for (const std::shared_ptr<Request>& request : requests) {
    // A read already sent waits behind a slow answer: it is hedged on another connection.
    if (request->finished || request->outstanding != 1 || request->attempts != 1 ||
        request->options.policy != RetryPolicy::kSafe || !request->options.hedge ||
        now >= request->deadline || shut_down_) {
      continue;
    }
    if (health_ != nullptr) {
      if (!health_->TryBeginRetry(index)) continue;
      ++request->budget;
    }
    request->tried = 0;  // the same endpoint may take it, on another connection
    if (Launch(request)) {
      metrics_->upstream_pipeline_hedges.Increment();
      if (health_ != nullptr) health_->CountHedge(index);
    } else if (health_ != nullptr) {
      --request->budget;
      health_->EndRetry();
    }
  }
}

}  // namespace switchyard
