#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "api/access/access_control.h"
#include "api/cache/redis_tier.h"
#include "api/cache/response_cache.h"
#include "api/jsonrpc/jsonrpc.h"
#include "api/metrics/api_metrics.h"
#include "api/net/http_server.h"
#include "api/routing/er_directory.h"
#include "api/routing/lookup_table_cache.h"
#include "api/routing/route_decision.h"
#include "api/routing/signature_memory.h"
#include "api/upstream/upstream.h"
#include "common/clock.h"
#include "common/pubkey.h"
#include "engine/snapshot.h"
#include "engine/state_store.h"

namespace boost::asio {
class thread_pool;
namespace ssl {
class context;
}
}  // namespace boost::asio

namespace switchyard {

struct RouterOptions {
  RpcCodecOptions codec;
  // Where requests go. RouterContext::Create fills er_by_identity and er_targets from
  // `ers`; set base, default_er, method_rules and the limits here. The request path decides
  // with the ErDirectory's current table, which adds the ERs the registry lists.
  RoutingTable routing;
  std::vector<ErRoute> ers;
  ErDirectoryOptions er_directory;
  // Discovered ERs (not in `ers`) get upstream pools of their own on first use, one endpoint
  // each, with these options' limits.
  bool discovered_ers = false;
  std::vector<UpstreamTarget> upstreams;  // base, every ER target and every other group
  UpstreamOptions upstream;
  UpstreamHealthOptions health;  // [upstream_health]
  IntegrityOptions integrity;    // [integrity]: cross-checks, consensus reads, admission
  CacheOptions cache;            // [cache]
  AccessOptions access;          // [access] and [[keys]]: API keys and rate limits
  // getIdentity.
  Pubkey identity;
  std::string fqdn;
  size_t signature_memory_size = 100'000;
  size_t lookup_table_cache_size = 10'000;
  absl::Duration lookup_table_ttl = absl::Seconds(60);
  // consistency.max_wait_ms
  absl::Duration max_gate_wait = absl::Milliseconds(500);
  size_t max_gate_waiters = 10'000;  // per worker; more are answered 412 at once
  // Owner verification (docs/architecture.md §10) is always on in limbo. Outside limbo,
  // verify_owner turns it on for the single-account reads (getAccountInfo, getBalance,
  // getTokenAccountBalance) and verify_owner_multiple for getMultipleAccounts.
  bool verify_owner = true;
  bool verify_owner_multiple = false;
  // A request whose client accepts gzip and whose one call is a plain forward the router does
  // not read (docs/architecture.md §9) asks its upstream for gzip, and a compressed answer goes
  // to the client as it came, never inflated.
  bool upstream_gzip = true;
  // Adaptive upstream batching (docs/architecture.md §11): a plain read to a target that
  // already has at least upstream_batch_after calls of this worker in flight waits for the end
  // of the worker's current turn and leaves with the other such reads as one upstream
  // JSON-RPC batch of at most upstream_batch_max calls. An idle target's reads never wait.
  // upstream_batch_max below 2 turns it off.
  size_t upstream_batch_max = 16;
  size_t upstream_batch_after = 1;
};

class Router;

// What the workers' routers share: options, the snapshot holder, the signature memory, the
// lookup-table cache and the TLS context. Owned by the app; outlives the HttpServer.
class RouterContext {
 public:
  // Fills routing.er_by_identity and routing.er_targets from `ers`, checks that every target
  // the routing names has an upstream and that no upstream takes a name the metrics use for
  // something else ("router", "split", "fanout"), and registers the per-call series on the
  // metrics' registry. InvalidArgument names the bad key.
  static absl::StatusOr<std::unique_ptr<RouterContext>> Create(RouterOptions options,
                                                               SnapshotHolder* snapshots,
                                                               const Clock* clock,
                                                               ApiMetrics* metrics);

  // For HttpServer: one Router per worker.
  RequestHandlerFactory HandlerFactory();
  // A worker's UpstreamSet over the configured targets, on `io_context`; with the endpoint
  // health when `with_health`. Create() checked every URL, so it cannot fail; if it did, the
  // set is empty and answers every send with an error.
  std::unique_ptr<UpstreamSet> NewUpstreamSet(boost::asio::io_context& io_context,
                                              bool with_health) const;

  const RouterOptions& options() const { return options_; }
  SignatureMemory& signatures() { return signatures_; }
  LookupTableCache& lookup_tables() { return lookup_tables_; }
  SnapshotHolder* snapshots() const { return snapshots_; }
  ApiMetrics* metrics() const { return metrics_; }
  RpcCallMetrics* call_metrics() const { return call_metrics_.get(); }
  const Clock* clock() const { return clock_; }
  boost::asio::ssl::context* tls() const { return tls_.get(); }
  // Every endpoint's health, shared by the workers' pools; the UpstreamMonitor probes into it.
  UpstreamHealth* health() const { return health_.get(); }
  // The response cache (null when it and coalescing are both off) and its shared tier (null
  // without [cache] redis).
  ResponseCache* cache() const { return cache_.get(); }
  RedisTier* redis() const { return redis_.get(); }
  // API keys and rate limits; null when both are off.
  AccessControl* access() const { return access_.get(); }
  // The ERs: configured, discovered and probed (docs/architecture.md §20).
  ErDirectory* ers() const { return ers_.get(); }

  // The history of the folded state (owned by the app; outlives this), for
  // getDelegationHistory and getDelegationStatus at a slot. Its reads block on the disk, so
  // they run on a thread of this context's own (`history-N`), never on an API worker; without
  // one those calls are answered with an error. Call before HandlerFactory's routers serve.
  void AttachHistory(HistoryReader* history);
  HistoryReader* history() const { return history_; }
  boost::asio::thread_pool* history_pool() const { return history_pool_.get(); }
  ~RouterContext();

 private:
  RouterContext(RouterOptions options, SnapshotHolder* snapshots, const Clock* clock,
                ApiMetrics* metrics);
  // Drops the cached answers each snapshot publish makes wrong (router_cache.cc).
  void InvalidateCacheOnPublish();

  RouterOptions options_;
  SnapshotHolder* snapshots_;
  const Clock* clock_;
  ApiMetrics* metrics_;
  std::unique_ptr<RpcCallMetrics> call_metrics_;
  SignatureMemory signatures_;
  LookupTableCache lookup_tables_;
  std::unique_ptr<boost::asio::ssl::context> tls_;
  std::unique_ptr<UpstreamHealth> health_;
  std::unique_ptr<ResponseCache> cache_;
  uint64_t cache_listener_id_ = 0;  // 0: none
  std::unique_ptr<RedisTier> redis_;
  std::unique_ptr<AccessControl> access_;
  std::unique_ptr<ErDirectory> ers_;
  HistoryReader* history_ = nullptr;
  std::unique_ptr<boost::asio::thread_pool> history_pool_;
};

}  // namespace switchyard
