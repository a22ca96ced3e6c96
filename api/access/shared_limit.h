#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "api/access/token_bucket.h"
#include "boost/asio/io_context.hpp"
#include "common/clock.h"
#include "common/metrics.h"

namespace switchyard {

struct SharedLimitOptions {
  std::string url;      // redis://HOST:PORT[/DB]
  size_t replicas = 1;  // while Redis is unreachable each replica allows limit / replicas
  // A token lease unanswered after this long counts as Redis being unreachable.
  absl::Duration timeout = absl::Milliseconds(200);
  // Tokens a replica leased and did not use are given up after this long.
  absl::Duration lease = absl::Seconds(1);
  std::string key_prefix = "switchyard:limit:";
};

class SharedLimitStore;

// One limit shared by every replica through Redis (docs/architecture.md §9, "Shared limits").
// Requests take tokens from a local lease (one atomic compare-and-swap); the Redis thread tops
// the lease up in chunks from a token bucket kept in Redis by a Lua script, before it runs
// out. Redis is therefore never waited for by a request. While Redis is unreachable, the
// bucket is a local one at limit / replicas. Built by SharedLimitStore::Bucket; any thread
// may call Take.
class SharedBucket : public std::enable_shared_from_this<SharedBucket> {
 public:
  // 0 when `cost` tokens were taken at `now_ns`, else the nanoseconds to wait.
  int64_t Take(int64_t now_ns, uint32_t cost);

 private:
  friend class SharedLimitStore;
  SharedBucket(SharedLimitStore* store, std::string redis_key, RateLimit limit, int64_t chunk,
               RateLimit local_share)
      : store_(store),
        redis_key_(std::move(redis_key)),
        limit_(limit),
        chunk_(chunk),
        local_(local_share) {}

  SharedLimitStore* const store_;
  const std::string redis_key_;
  const RateLimit limit_;
  const int64_t chunk_;  // tokens asked of Redis at a time; the lease may go this far below 0
  // Leased tokens not used yet; below 0 for tokens used on credit, which the next lease pays.
  std::atomic<int64_t> credit_{0};
  std::atomic<bool> leasing_{false};       // a lease is asked of Redis
  std::atomic<int64_t> next_lease_ns_{0};  // Redis had no tokens: not before then
  std::atomic<int64_t> leased_at_ns_{0};
  TokenBucket local_;  // the local share, while Redis is unreachable
};

// The Redis side of shared limits: one thread of its own runs hiredis's async client (through
// the Asio adapter of api/redis), leases tokens for the buckets, gives up leases older than
// options.lease, and reconnects with a backoff. Owned by the AccessControl; outlives its
// buckets' users. Any thread may call fallback(); Bucket() is for configuration time.
class SharedLimitStore {
 public:
  static absl::StatusOr<std::unique_ptr<SharedLimitStore>> Start(SharedLimitOptions options,
                                                                 const Clock* clock,
                                                                 MetricsRegistry* registry);
  ~SharedLimitStore();
  SharedLimitStore(const SharedLimitStore&) = delete;
  SharedLimitStore& operator=(const SharedLimitStore&) = delete;

  // The bucket of limit `name` (the same Redis bucket on every replica). Thread-safe.
  std::shared_ptr<SharedBucket> Bucket(const std::string& name, RateLimit limit);

  // Whether Redis is unreachable and the buckets run on their local share.
  bool fallback() const { return fallback_.load(std::memory_order_relaxed); }

  class Connection;  // what the Redis thread owns; in shared_limit.cc
  struct Metrics;

 private:
  friend class SharedBucket;
  SharedLimitStore() = default;
  // From any thread: ask the Redis thread for a lease for `bucket`.
  void RequestLease(SharedBucket* bucket);

  SharedLimitOptions options_;
  const Clock* clock_ = nullptr;
  std::atomic<bool> fallback_{false};
  std::unique_ptr<Metrics> metrics_;
  boost::asio::io_context io_;
  std::unique_ptr<Connection> connection_;
  absl::Mutex mu_;
  std::vector<std::weak_ptr<SharedBucket>> buckets_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

}  // namespace switchyard
