#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "api/redis/redis_url.h"
#include "boost/asio/any_io_executor.hpp"
#include "boost/asio/io_context.hpp"
#include "common/metrics.h"

namespace switchyard {

struct RedisTierOptions {
  std::string url;                                 // redis://HOST:PORT[/DB]
  absl::Duration timeout = absl::Milliseconds(5);  // a lookup not answered by then is a miss
  absl::Duration connect_timeout = absl::Milliseconds(200);
  size_t max_pending = 10000;     // lookups and stores queued or in flight; beyond: miss/dropped
  uint32_t failures_to_open = 5;  // consecutive failures (errors, timeouts) open the circuit
  absl::Duration open_for = absl::Seconds(2);  // then one trial (a PING); success closes it
  std::string key_prefix = "switchyard:";
};

// The shared tier of the response cache: every replica of the router reads and fills the
// same Redis, so one replica's upstream answer is a hit for the others. Owned by whoever wires
// the cache; any thread may call Get, Put and circuit_open. One Redis thread of its own runs
// hiredis's async client; lookups reach it through a bounded queue, and one sweep timer on it
// answers the lookups past their deadline. A Redis that errs or stalls is a miss, never a
// wait: consecutive failures open a circuit that answers at once until a trial succeeds.
class RedisTier {
 public:
  using Values = std::vector<std::optional<std::string>>;

  // Validates `options` (InvalidArgument names the option) and starts the Redis thread, which
  // connects in the background: a Redis that is down at start is a miss, not an error.
  // `registry` must outlive the tier.
  static absl::StatusOr<std::unique_ptr<RedisTier>> Start(RedisTierOptions options,
                                                          MetricsRegistry* registry);
  // Stops the Redis thread; lookups still open are answered as misses.
  ~RedisTier();
  RedisTier(const RedisTier&) = delete;
  RedisTier& operator=(const RedisTier&) = delete;

  // Looks every key up with one MGET. `done` runs once, posted to `executor`, with one value
  // per key in order (nullopt = miss) within options.timeout, also when Redis is down or slow;
  // at once when the circuit is open or the queue is full. Never blocks the caller.
  void Get(std::vector<std::string> keys, boost::asio::any_io_executor executor,
           std::function<void(Values)> done);
  // SET key value PX ttl, fire and forget; dropped (and counted) when the circuit is open or
  // the queue is full.
  void Put(std::string key, std::string value, absl::Duration ttl);

  bool circuit_open() const { return circuit_open_.load(std::memory_order_acquire); }

  // What the Redis thread owns (the hiredis context, the lookups in flight, the sweep
  // timer, the circuit); defined in redis_tier.cc.
  class Connection;
  // A lookup, store or trial on its way to the Redis thread; defined in redis_tier.cc.
  struct Request;
  struct Metrics;

 private:
  RedisTier();
  // Queues `request` for the Redis thread; false when the queue is full.
  bool Enqueue(Request& request);
  // Takes what callers queued; on the Redis thread.
  std::vector<Request> TakeQueued();
  // `n` taken requests are finished; on the Redis thread.
  void ReleasePending(size_t n);

  boost::asio::io_context io_;
  std::unique_ptr<Metrics> metrics_;
  std::unique_ptr<Connection> connection_;
  std::atomic<bool> circuit_open_{false};
  size_t max_pending_ = 0;
  std::chrono::steady_clock::duration timeout_{};
  std::string key_prefix_;
  absl::Mutex mu_;
  std::vector<Request> queued_ ABSL_GUARDED_BY(mu_);
  size_t pending_ ABSL_GUARDED_BY(mu_) = 0;  // queued, plus taken and not yet finished
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace switchyard
