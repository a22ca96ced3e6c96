#pragma once

#include <boost/asio/io_context.hpp>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "api/metrics/api_metrics.h"
#include "api/upstream/internal/exchange_end.h"
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
  // HTTP/1.1 pipelining (docs/architecture.md §11): with kAuto an endpoint is asked, the first
  // time a request would be pipelined to it and again after a connection broke with requests
  // pipelined, whether it answers two requests sent together in order; kOn takes that as
  // known, kOff never pipelines. A pipelining endpoint keeps up to pipeline_connections
  // connections per worker before a request is queued behind others on one of them (at most
  // pipeline_depth on a connection, never behind an answer slower than the endpoint's hedge
  // delay); beyond, new connections up to max_connections_per_endpoint.
  enum class Pipeline : uint8_t { kOff, kAuto, kOn };
  Pipeline pipeline = Pipeline::kAuto;
  size_t pipeline_depth = 16;
  size_t pipeline_connections = 4;
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
  // An endpoint's pipelining as this pool knows it.
  enum class PipelineState : uint8_t { kOff, kUnknown, kProbing, kOn, kUnsupported };
  struct Choice {
    size_t index = SIZE_MAX;  // SIZE_MAX: none
    bool trial = false;       // a half-open circuit's trial request
  };
  // Round-robin without health; with it, power of two choices among the endpoints in
  // rotation the request has not tried, by latency EWMA × (in flight + 1) / weight; a
  // recovering endpoint beyond its ramp's share only when no other endpoint can take it.
  Choice Choose(Request& request);
  // candidates_: the endpoints `request` has not tried, less those known to be behind its
  // min_slot when any is at it.
  void FillCandidates(const Request& request);
  size_t RoundRobin(size_t exclude);
  // Starts one more attempt of `request` on the endpoint Choose picks; false when none can
  // take it.
  bool Launch(const std::shared_ptr<Request>& request);
  // Sends the attempt on its endpoint: an idle connection, a new one, or a place in the
  // endpoint's wait queue.
  void StartOn(std::shared_ptr<Attempt> attempt);
  void ExchangeOn(std::shared_ptr<Connection> connection, std::shared_ptr<Attempt> attempt);
  // The end of an attempt's exchange on `connection`: an answer, or an error after which the
  // attempt may go again at once (cut by another exchange, or a kept connection found closed).
  void OnExchanged(std::shared_ptr<Attempt> attempt, const std::weak_ptr<Connection>& connection,
                   boost::system::error_code ec, UpstreamResponse response,
                   upstream_internal::ExchangeEnd end);
  using SteadyClock = std::chrono::steady_clock;
  // A connection of endpoint `index` can take another exchange (`connection`) or was closed
  // (null): the first waiter still within its time gets it, or a new connection in its place;
  // a connection left with nothing in flight goes back to the idle list.
  void ServeWaiter(size_t index, std::shared_ptr<Connection> connection);
  // A new connection to endpoint `index`, counted open and reporting to the pool.
  std::shared_ptr<Connection> Open(size_t index, size_t depth);
  // The connection's listener: it closed, or it may take another exchange.
  void OnConnectionEvent(size_t index, const std::shared_ptr<Connection>& connection, bool closed);
  // Whether requests may be queued behind others on endpoint `index`'s connections; starts the
  // probe when that is not known yet.
  bool Pipelining(size_t index, SteadyClock::time_point now);
  // The open connection of endpoint `index` a request is best queued on: one being written
  // (the request leaves with the others), else the least deep; never a full one or one whose
  // oldest exchange is slower than the endpoint's hedge delay. Null when none.
  std::shared_ptr<Connection> PipelineOn(size_t index, SteadyClock::time_point now);
  // Sends two requests together on a new connection of endpoint `index`: both answered in
  // order on a connection left open means the endpoint pipelines.
  void ProbePipelining(size_t index);
  void SetPipelineState(size_t index, PipelineState state);
  // How long the oldest exchange on a connection of endpoint `index` may wait before the
  // requests behind it go elsewhere.
  SteadyClock::duration SlowAfter(size_t index) const;
  // Sweep's part for pipelined connections whose oldest exchange is slow: the requests not
  // written yet move to another connection, the reads written behind it are hedged.
  void RescueFollowers(size_t index, const std::shared_ptr<Connection>& connection,
                       SteadyClock::time_point now);
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
  // Integrity (upstream_cross_check.cc, docs/architecture.md §22).
  struct Sample;
  struct CrossCheck;
  struct Consensus;
  // Whether the answer `result` of `request` is sampled for a cross-check: what the check needs
  // when it is.
  std::optional<Sample> SampleOf(const Request& request, const UpstreamResponse& result);
  // Sends the sampled read to another endpoint in rotation and compares the answers; when they
  // differ, asks more endpoints and tells the health which ones were outside the majority.
  void StartCrossCheck(Sample sample);
  void AskForCheck(const std::shared_ptr<CrossCheck>& check, const std::vector<size_t>& endpoints,
                   bool tiebreak);
  void ComparePair(const std::shared_ptr<CrossCheck>& check);
  void JudgeMajority(const CrossCheck& check);
  // A consensus read (SendOptions::consensus_of).
  void SendConsensus(std::string body, SendOptions options, UpstreamCallback done);
  void OnConsensusLeg(const std::shared_ptr<Consensus>& consensus, size_t leg,
                      absl::StatusOr<UpstreamResponse> result);
  // Every leg answered and no value had enough endpoints behind it: a Consensus Failed error
  // with how the answers split.
  void FailConsensus(const std::shared_ptr<Consensus>& consensus);
  // The endpoints in rotation now but `exclude`, best score first (latency × load / weight).
  std::vector<size_t> InRotation(size_t exclude) const;
  uint64_t NextRandom();
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
  bool pipelined_behind_ = false;  // the last sweep saw requests queued behind others
  std::shared_ptr<HedgeTimer> hedge_timer_;
  // Pending hedges, earliest first (a min-heap on the time).
  std::vector<std::pair<HealthClock::time_point, std::weak_ptr<Request>>> hedges_;
  HealthClock::time_point hedge_armed_at_ = HealthClock::time_point::max();
  std::vector<size_t> candidates_;  // Choose's scratch
  std::vector<size_t> recovering_;  // Choose's scratch: recovering endpoints the ramp refused
  uint64_t random_ = 0x9e3779b97f4a7c15;
  bool shut_down_ = false;
  // The target's integrity options sample its reads (and the pool has more than one endpoint).
  bool sampling_ = false;
  SteadyClock::time_point disagreement_logged_at_{};
  uint64_t disagreements_unlogged_ = 0;
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
