#pragma once

#include <atomic>
#include <boost/asio/io_context.hpp>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "api/jsonrpc/pubsub_json.h"
#include "api/pubsub/pubsub_metrics.h"
#include "api/rpc/router.h"
#include "api/upstream/pubsub_upstream.h"

namespace boost::asio::ssl {
class context;
}

namespace switchyard {

struct PubsubRouterOptions {
  PubsubUpstreamOptions upstream;
  // Pubsub URLs (ws:// or wss://) per upstream target; a target not named here uses the
  // URLs Solana clients assume for its HTTP endpoints (PubsubUrlFor).
  std::vector<std::pair<std::string, std::vector<std::string>>> endpoints;
  // Failed switch attempts in a row (each retried on the next snapshot) before the
  // subscription is closed with an error.
  int max_switch_failures = 5;
  // Attempts to read one baseline.
  int max_baseline_attempts = 3;
  absl::Duration baseline_retry_delay = absl::Milliseconds(200);
  // Notifications kept per upstream subscription while its baseline is read; older ones are
  // dropped past this (and counted as duplicates: the baseline covers them).
  size_t max_buffered_notifications = 1024;
};

// A client connection as the router sees it. Each client lives on one thread of the pubsub
// server (`thread()`); the router calls the virtual methods on that thread only.
class PubsubClient {
 public:
  explicit PubsubClient(size_t thread) : thread_(thread) {}
  virtual ~PubsubClient() = default;

  size_t thread() const { return thread_; }
  bool closed() const { return closed_.load(std::memory_order_acquire); }

  // A notification to write.
  virtual void Deliver(const std::shared_ptr<const std::string>& message) = 0;
  // The answer to a subscribe call; `id` is set when it succeeded.
  virtual void OnSubscribeAnswer(std::string answer, std::string key, size_t shard,
                                 const PubsubMethod* method, std::optional<uint64_t> id) = 0;
  // Subscription `id` ended: `last` (a final notification or an error) is written and the id
  // is forgotten.
  virtual void OnSubscriptionClosed(uint64_t id, std::shared_ptr<const std::string> last) = 0;

 protected:
  void MarkClosed() { closed_.store(true, std::memory_order_release); }

 private:
  const size_t thread_;
  std::atomic<bool> closed_{false};
};

// One subscribe call of a client.
struct SubscribeRequest {
  const PubsubMethod* method = nullptr;
  SubscribeParams params;
  std::string key;         // method and params: identical calls share one subscription
  std::string request_id;  // raw JSON
};

class PubsubShard;

// Routes pubsub subscriptions to the chain that holds what they watch, and shares them.
//
// Subscriptions are identified by their method and params (the key): every client that asks
// for the same key shares one router subscription, one id and one upstream subscription (as
// Solana's own server shares identical subscriptions). Keys are spread over shards by hash,
// one shard per pubsub thread (PubsubShard, pubsub_shard.h); a shard owns its upstream connections
// (one per target), its subscriptions and their state, so a notification is handled on one thread
// without locks and written to each client by one post to that client's thread.
//
// accountSubscribe follows the account: subscribed on the chain the current snapshot routes
// the account to; when a new snapshot routes it elsewhere, the shard subscribes on the new
// chain, reads a baseline there (the account's value, read after the new subscription is live,
// with getMultipleAccounts batched per shard), and then switches. The notifications that the
// clients get are the upstream's bytes with only the subscription id rewritten; a baseline is
// the read's context and value under accountNotification. "No gap, no duplicate" means, for
// one client subscription:
//   - The stream is a sequence of segments, one per source chain in routing order (and a new
//     segment of the same chain after an upstream reconnect).
//   - The old chain's notifications are delivered until the switch, none after it.
//   - A segment starts with the baseline, delivered only when its value differs from the
//     last value delivered (or, with nothing delivered yet, from the value at subscription).
//   - Then every notification of the chain with a context slot above the baseline's slot,
//     once each, in the chain's order. Slots are compared only within one chain: an ER's
//     slot clock is independent of the base layer's.
//   - States the new chain passed through before the router subscribed there are not replayed
//     (pubsub has no history): the baseline shows the latest of them.
// signatureSubscribe goes to where the router sent the transaction; an unknown signature is
// subscribed on base and every ER, the first final notification wins, the rest are
// unsubscribed. slot/root/program/logs/blockSubscribe go to base.
//
// An upstream connection that is lost is reopened with backoff and every subscription on it
// made again (accounts read a new baseline); if reconnection is given up, or a subscription
// cannot be made again, its clients get a JSON-RPC error naming the subscription and the
// subscription is closed.
//
// Owned by the PubsubServer; created from its control thread, each shard shut down on its own
// thread. Subscribe, Unsubscribe and RemoveClient may be called from any pubsub thread.
class PubsubRouter {
 public:
  static absl::StatusOr<std::unique_ptr<PubsubRouter>> Create(
      PubsubRouterOptions options, RouterContext* context, PubsubMetrics* metrics,
      std::vector<boost::asio::io_context*> threads);
  ~PubsubRouter();

  // Creates the shards (on their threads, which need not run yet) and listens for snapshots.
  void Start();
  // Closes shard `i`'s upstream connections and drops its subscriptions. On shard i's thread
  // (or before the threads run).
  void ShutdownShard(size_t i);

  void Subscribe(std::shared_ptr<PubsubClient> client, SubscribeRequest request);
  void Unsubscribe(std::shared_ptr<PubsubClient> client, size_t shard, uint64_t id);
  // The client is gone: drops it from every subscription.
  void RemoveClient(std::shared_ptr<PubsubClient> client);

  size_t ShardFor(std::string_view key) const;
  size_t thread_count() const { return threads_.size(); }
  boost::asio::io_context& thread(size_t i) { return *threads_[i]; }
  uint64_t NextId() { return next_id_.fetch_add(1, std::memory_order_relaxed); }
  const PubsubRouterOptions& options() const { return options_; }
  RouterContext* context() const { return context_; }
  PubsubMetrics* metrics() const { return metrics_; }
  boost::asio::ssl::context* tls() const { return tls_; }
  // The WebSocket endpoints of `target`: a configured upstream's, or those of an ER discovered
  // from the registry (its RPC address as a ws(s) URL). Empty: no such target.
  std::vector<WsEndpoint> EndpointsOf(std::string_view target) const;

 private:
  PubsubRouter(PubsubRouterOptions options, RouterContext* context, PubsubMetrics* metrics,
               std::vector<boost::asio::io_context*> threads);

  const PubsubRouterOptions options_;
  RouterContext* const context_;
  PubsubMetrics* const metrics_;
  const std::vector<boost::asio::io_context*> threads_;
  std::vector<std::pair<std::string, std::vector<WsEndpoint>>> endpoints_;
  std::unique_ptr<boost::asio::ssl::context> own_tls_;
  boost::asio::ssl::context* tls_ = nullptr;
  std::vector<std::shared_ptr<PubsubShard>> shards_;
  std::atomic<uint64_t> next_id_{1};
};

}  // namespace switchyard
