#pragma once

#include <boost/asio/io_context.hpp>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "api/metrics/api_metrics.h"
#include "api/upstream/upstream_client.h"
#include "api/upstream/upstream_health.h"
#include "common/url.h"

namespace boost::asio::ssl {
class context;
}

namespace switchyard {

namespace upstream_internal {
class UpstreamConnection;
}

struct UpstreamEndpoint {
  std::string url;  // http://host:port/path or https://...
  uint32_t weight = 1;
};

// A named group of endpoints: "base", an ER, or any other group (an indexer).
struct UpstreamTarget {
  std::string name;
  std::vector<UpstreamEndpoint> endpoints;
};

struct UpstreamOptions {
  absl::Duration request_timeout = absl::Seconds(10);  // connect + write + read, per attempt
  // A request's deadline, over every attempt, hedge and wait; zero: twice request_timeout.
  absl::Duration request_deadline = absl::ZeroDuration();
  size_t max_connections_per_endpoint = 64;  // per worker
  size_t max_idle_per_endpoint = 64;         // kept-alive connections, per worker
  // Requests that find every connection busy wait for one, in order, up to this many per
  // endpoint and worker (beyond, they fail at once); a wait counts against the timeout.
  size_t max_waiting_per_endpoint = 4096;
  absl::Duration max_idle_time = absl::Seconds(20);
  size_t max_response_bytes = 64 << 20;
  bool verify_tls = true;
};

// An HTTP endpoint's URL (common/url.h): http:// or https:// only.
using ParsedUrl = Url;
absl::StatusOr<ParsedUrl> ParseUpstreamUrl(std::string_view url);

// The endpoints of one target as one worker sees them, with a bounded keep-alive pool per
// endpoint. With a TargetHealth (docs/architecture.md §11) each request goes to an endpoint in
// rotation chosen by latency and load (power of two choices), is retried on another endpoint
// and hedged as its RetryPolicy allows, and every exchange is reported to the health; without
// one (the prober's own pools), endpoints take turns by smooth weighted round-robin. Owned by
// one worker; every call is made on that worker's thread, and callbacks run there.
class UpstreamPool {
 public:
  UpstreamPool(boost::asio::io_context& io_context, std::string name,
               std::vector<UpstreamEndpoint> endpoints, std::vector<ParsedUrl> urls,
               const UpstreamOptions& options, boost::asio::ssl::context* tls, ApiMetrics* metrics,
               TargetHealth* health = nullptr);
  ~UpstreamPool();

  // POSTs `body` (a JSON-RPC request) and calls `done` once, with the HTTP answer or with
  // Unavailable/DeadlineExceeded after the allowed attempts failed.
  void Send(std::string body, SendOptions options, UpstreamCallback done);
  // Closes every connection; later Sends fail.
  void Shutdown();

  const std::string& name() const { return name_; }

  struct Endpoint;
  using Connection = upstream_internal::UpstreamConnection;

 private:
  struct Request;
  struct Attempt;
  struct SweepTimer;
  struct HedgeTimer;
  struct Choice {
    size_t index = SIZE_MAX;  // SIZE_MAX: none
    bool trial = false;       // a half-open circuit's trial request
  };
  // Round-robin without health; with it, power of two choices among the endpoints in
  // rotation the request has not tried, by latency EWMA × (in flight + 1) / weight; a
  // recovering endpoint beyond its ramp's share only when no other endpoint can take it.
  Choice Choose(Request& request);
  size_t RoundRobin(size_t exclude);
  // Starts one more attempt of `request` on the endpoint Choose picks; false when none can
  // take it.
  bool Launch(const std::shared_ptr<Request>& request);
  // Sends the attempt on its endpoint: an idle connection, a new one, or a place in the
  // endpoint's wait queue.
  void StartOn(std::shared_ptr<Attempt> attempt);
  void ExchangeOn(std::shared_ptr<Connection> connection, std::shared_ptr<Attempt> attempt);
  // A connection of endpoint `index` is free (`connection`) or was closed (null): the first
  // waiter still within its time gets it, or a new connection in its place.
  void ServeWaiter(size_t index, std::shared_ptr<Connection> connection);
  // The attempt ended with `result` (an answer, or why there is none) and `outcome`: the
  // request is answered, or tried again elsewhere, or waits for its other attempt.
  void OnAttemptEnd(std::shared_ptr<Attempt> attempt, absl::StatusOr<UpstreamResponse> result,
                    ExchangeOutcome outcome, bool unsent);
  void Finish(const std::shared_ptr<Request>& request, absl::StatusOr<UpstreamResponse> result);
  // A gzip answer stays compressed for a caller that takes it (SendOptions::accept_gzip) when
  // it is a 200 that inflates to more than a node error can be (OutcomeOf scans only small
  // answers); otherwise its body is replaced by the inflated bytes (at most
  // max_response_bytes). Unavailable when it does not inflate.
  absl::Status Decode(const SendOptions& options, UpstreamResponse& response);
  // Why no endpoint can take a request now, for an answer given at once.
  absl::Status NoEndpointStatus() const;
  // Deadlines: one timer per pool, not one per exchange. While any exchange is in flight it
  // fires every tick and times out the connections past their deadline.
  void ArmSweep();
  void Sweep();
  // Hedges: one timer per pool, at the earliest hedge time of the reads in flight.
  void ScheduleHedge(const std::shared_ptr<Request>& request, HealthClock::time_point at);
  void ArmHedge();
  void OnHedgeTimer();

  boost::asio::io_context& io_context_;
  std::string name_;
  std::vector<std::unique_ptr<Endpoint>> endpoints_;
  const UpstreamOptions& options_;
  boost::asio::ssl::context* tls_;
  ApiMetrics* metrics_;
  UpstreamTargetMetrics target_metrics_;
  TargetHealth* health_;
  std::shared_ptr<SweepTimer> sweep_timer_;
  bool sweep_armed_ = false;
  std::shared_ptr<HedgeTimer> hedge_timer_;
  // Pending hedges, earliest first (a min-heap on the time).
  std::vector<std::pair<HealthClock::time_point, std::weak_ptr<Request>>> hedges_;
  HealthClock::time_point hedge_armed_at_ = HealthClock::time_point::max();
  std::vector<size_t> candidates_;  // Choose's scratch
  std::vector<size_t> recovering_;  // Choose's scratch: recovering endpoints the ramp refused
  uint64_t random_ = 0x9e3779b97f4a7c15;
  bool shut_down_ = false;
};

// Targets a set does not hold from the start (the ERs the registry lists): a target's pool is
// made on the first Send to it, with one endpoint and no TargetHealth, and made again when its
// URL changes. Both functions are called on the worker's thread and must be thread-safe.
struct DynamicTargets {
  // Moves whenever a target's URL may have changed; the set resolves again only then.
  std::function<uint64_t()> generation;
  // The HTTP URL of `target`; empty when there is no such target.
  std::function<std::string(std::string_view target)> resolve;
};

// Every target's pool of one worker.
class UpstreamSet : public UpstreamClient {
 public:
  // Fails with InvalidArgument naming a target or URL that cannot be used. With `health`,
  // every target's pool uses its TargetHealth (each target must have one).
  static absl::StatusOr<std::unique_ptr<UpstreamSet>> Create(
      boost::asio::io_context& io_context, const std::vector<UpstreamTarget>& targets,
      const UpstreamOptions& options, boost::asio::ssl::context* tls, ApiMetrics* metrics,
      UpstreamHealth* health = nullptr);

  // Lets Send reach `dynamic` targets besides the ones Create was given.
  void SetDynamicTargets(DynamicTargets dynamic);

  UpstreamPool* Find(std::string_view name);
  bool Has(std::string_view target) const override;
  void Send(std::string_view target, std::string body, SendOptions options,
            UpstreamCallback done) override;
  void Shutdown() override;

 private:
  struct DynamicPool {
    std::string url;
    uint64_t generation = 0;
  };
  // The pool of dynamic target `name` (null: none), made or made again as its URL says.
  UpstreamPool* FindDynamic(std::string_view name, UpstreamPool* held);

  absl::flat_hash_map<std::string, std::unique_ptr<UpstreamPool>> pools_;
  // Set by Create, for the pools of dynamic targets.
  boost::asio::io_context* io_context_ = nullptr;
  const UpstreamOptions* options_ = nullptr;
  boost::asio::ssl::context* tls_ = nullptr;
  ApiMetrics* metrics_ = nullptr;
  DynamicTargets dynamic_targets_;
  absl::flat_hash_map<std::string, DynamicPool> dynamic_;
  // Pools replaced by a URL change: requests in flight on them finish there.
  std::vector<std::unique_ptr<UpstreamPool>> retired_;
};

// A TLS client context with the system's trust store; shared by every worker.
std::unique_ptr<boost::asio::ssl::context> MakeClientTlsContext(bool verify);

}  // namespace switchyard
