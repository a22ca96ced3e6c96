#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "api/access/address_buckets.h"
#include "api/access/shared_limit.h"
#include "api/access/token_bucket.h"
#include "api/jsonrpc/jsonrpc.h"
#include "boost/asio/ip/address.hpp"
#include "common/clock.h"
#include "common/metrics.h"

namespace switchyard {

// One API key: the secret a client sends, the name it is known by in metrics and logs (the
// secret never is), what it may call and how much.
struct ApiKeyOptions {
  std::string name;
  std::string key;
  std::vector<std::string> allowed_methods;  // empty: every method
  std::vector<std::string> denied_methods;   // wins over allowed_methods
  RateLimit requests;            // JSON-RPC calls (a batch element is one); shared with Redis
  RateLimit ws_messages;         // pubsub messages over all the key's connections on this replica
  size_t max_subscriptions = 0;  // over all the key's connections on this replica; 0: no bound
};

struct AccessOptions {
  bool keys_required = false;       // no valid key: HTTP 401 (else an anonymous client)
  std::vector<ApiKeyOptions> keys;  // from the configuration
  // Reads the key file: at Create and at every Reload. Null: no key file.
  std::function<absl::StatusOr<std::vector<ApiKeyOptions>>()> load_key_file;
  RateLimit address_requests;  // per client address (an IPv6 client by its /64)
  size_t max_addresses = 1'000'000;
  RateLimit ws_messages_per_connection;
  // Shares each key's `requests` limit among the replicas; empty: each replica its own.
  std::string redis_url;
  size_t replicas = 1;
  absl::Duration redis_timeout = absl::Milliseconds(200);

  bool enabled() const {
    return keys_required || !keys.empty() || load_key_file != nullptr ||
           address_requests.enabled() || ws_messages_per_connection.enabled();
  }
};

// Where a request's API key is: an `x-api-key` header, `api-key=` in the query, or the whole
// path (`/KEY`, as RPC providers give their URLs). nullopt: the request carries none.
std::optional<std::string_view> FindApiKey(std::string_view target,
                                           std::optional<std::string_view> header);

// Checks that `keys` are usable: names and keys unique, names fit for metric labels, keys of
// at least 8 characters from [A-Za-z0-9_-]; InvalidArgument names the entry (by its name).
absl::Status ValidateApiKeys(const std::vector<ApiKeyOptions>& keys);

// API keys and rate limits at the edge (docs/architecture.md §9). Owned by the RouterContext;
// any thread may call it. A request is judged against the key table current when it arrives;
// Reload swaps the table while connections stay up (a worker sees the new one at its next
// request, with one atomic load when nothing changed). Limits: a lock-free token bucket per
// key (or a Redis-shared one, SharedBucket), sharded buckets per client address.
class AccessControl {
 public:
  // One key of the table. Immutable but for its buckets and counters.
  struct Key {
    std::string name;
    absl::flat_hash_set<std::string> allowed;  // empty: all
    absl::flat_hash_set<std::string> denied;
    std::shared_ptr<TokenBucket> requests;  // when not shared
    std::shared_ptr<SharedBucket> shared;   // with Redis
    std::shared_ptr<TokenBucket> ws_messages;
    size_t max_subscriptions = 0;
    std::shared_ptr<std::atomic<int64_t>> subscriptions;  // held now, over its connections
    Counter* allowed_calls = nullptr;
    Counter* limited_calls = nullptr;
    Counter* denied_calls = nullptr;

    bool Allows(std::string_view method) const;
  };
  struct Table {
    absl::flat_hash_map<std::string, std::unique_ptr<Key>> by_secret;
    Key anonymous;  // a client without a key, when keys are not required
  };

  enum class Verdict { kAllowed, kUnauthorized, kLimited };
  struct Admission {
    Verdict verdict = Verdict::kAllowed;
    int64_t retry_after_seconds = 0;  // kLimited
  };

  // Validates `options` and reads the key file; InvalidArgument names what is wrong.
  static absl::StatusOr<std::unique_ptr<AccessControl>> Create(AccessOptions options,
                                                               const Clock* clock,
                                                               MetricsRegistry* registry);
  ~AccessControl();

  // Reads the key file again and swaps the table in; on an error keeps the table it has (and
  // says so in the log). Buckets of keys whose name and limit stay are kept.
  absl::Status Reload();

  // What a worker holds: the table it last saw. One per worker thread; not thread-safe.
  class View {
   public:
    explicit View(AccessControl* owner) : owner_(owner) {}
    const std::shared_ptr<const Table>& table();

    // Judges an HTTP request of `calls` (a batch element counts one): its key, its
    // address's and its key's limits. Calls to methods the key may not call get their error
    // (-32403) in RpcCall::error and count as denied.
    Admission AdmitHttp(std::string_view target, std::optional<std::string_view> key_header,
                        const boost::asio::ip::address& peer, std::vector<RpcCall>* calls);

   private:
    AccessControl* owner_;
    uint64_t generation_ = 0;
    std::shared_ptr<const Table> table_;
  };

  // The key of a WebSocket handshake, or null (anonymous when keys are not required;
  // `*unauthorized` is set when the handshake must be refused with 401). The table is kept
  // by the caller as long as it uses the key.
  const Key* AdmitWebSocket(const std::shared_ptr<const Table>& table, std::string_view target,
                            std::optional<std::string_view> key_header, bool* unauthorized);
  std::shared_ptr<const Table> CurrentTable() const;

  const AccessOptions& options() const { return options_; }
  int64_t NowNanos() const { return absl::ToInt64Nanoseconds(clock_->Monotonic()); }

  // Counters of the pubsub side.
  Counter& ws_unauthorized() { return *ws_unauthorized_; }
  Counter& ws_limited_messages() { return *ws_limited_messages_; }
  Counter& ws_subscription_limit() { return *ws_subscription_limit_; }

 private:
  AccessControl(AccessOptions options, const Clock* clock, MetricsRegistry* registry);
  absl::StatusOr<std::shared_ptr<const Table>> BuildTable(const std::vector<ApiKeyOptions>& keys);

  struct KeyCounters {
    Counter* allowed;
    Counter* limited;
    Counter* denied;
  };
  // Counters and buckets by key name, kept over reloads.
  KeyCounters CountersFor(const std::string& name) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const AccessOptions options_;
  const Clock* const clock_;
  MetricsRegistry* const registry_;
  std::unique_ptr<SharedLimitStore> shared_;
  std::unique_ptr<AddressBuckets> addresses_;
  Counter* unauthorized_;
  Counter* address_limited_;
  Counter* ws_unauthorized_;
  Counter* ws_limited_messages_;
  Counter* ws_subscription_limit_;
  Counter* reloads_;
  Counter* reload_failures_;
  Gauge* keys_gauge_;

  std::atomic<uint64_t> generation_{1};
  mutable absl::Mutex mu_;
  std::shared_ptr<const Table> table_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, KeyCounters> counters_ ABSL_GUARDED_BY(mu_);
  // The buckets of each key name with the limit they were made for.
  struct KeyBuckets {
    RateLimit requests;
    RateLimit ws_messages;
    std::shared_ptr<SharedBucket> shared;
    std::shared_ptr<TokenBucket> local;
    std::shared_ptr<TokenBucket> ws;
    std::shared_ptr<std::atomic<int64_t>> subscriptions;
  };
  absl::flat_hash_map<std::string, KeyBuckets> buckets_ ABSL_GUARDED_BY(mu_);
};

}  // namespace switchyard
