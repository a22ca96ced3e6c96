#include "api/access/shared_limit.h"

#include <algorithm>
#include <chrono>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "api/redis/asio_hiredis.h"
#include "api/redis/redis_url.h"
#include "boost/asio/post.hpp"
#include "boost/asio/steady_timer.hpp"
#include "fmt/format.h"
#include "hiredis/async.h"
#include "hiredis/hiredis.h"
#include "spdlog/spdlog.h"

namespace switchyard {

namespace net = boost::asio;

namespace {

// A token bucket kept in Redis (a hash: tokens `t`, refilled up to `at`, in µs of Redis's own
// clock, so that replicas' clocks do not matter). Takes up to ARGV[3] tokens and returns
// {granted, ms until the rest would be there}.
constexpr char kLeaseScript[] = R"lua(
local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000000 + tonumber(clock[2])
local rate = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local want = tonumber(ARGV[3])
local state = redis.call('HMGET', KEYS[1], 't', 'at')
local tokens = tonumber(state[1])
local at = tonumber(state[2])
if tokens == nil or at == nil then
  tokens = burst
  at = now
end
if now > at then tokens = math.min(burst, tokens + (now - at) * rate / 1000000) end
local granted = math.max(0, math.min(want, math.floor(tokens)))
tokens = tokens - granted
redis.call('HSET', KEYS[1], 't', string.format('%.6f', tokens), 'at', string.format('%.0f', now))
redis.call('PEXPIRE', KEYS[1], math.ceil(burst / rate * 1000) + 1000)
local wait = 0
if granted < want then
  wait = math.max(1, math.ceil((math.min(want - granted, burst) - tokens) * 1000 / rate))
end
return {granted, wait}
)lua";

constexpr std::chrono::milliseconds kTick{20};
constexpr int64_t kFirstBackoffNs = 10'000'000;
constexpr int64_t kMaxBackoffNs = 1'000'000'000;

int64_t Nanos(absl::Duration d) { return absl::ToInt64Nanoseconds(d); }

}  // namespace

struct SharedLimitStore::Metrics {
  explicit Metrics(MetricsRegistry& r)
      : leases(r.AddCounter("switchyard_api_limit_redis_leases_total",
                            "Token leases asked of Redis for the shared limits")),
        errors(r.AddCounter("switchyard_api_limit_redis_errors_total",
                            "Failed leases and lost or refused connections to the Redis of the "
                            "shared limits")),
        fallbacks(r.AddCounter("switchyard_api_limit_redis_fallbacks_total",
                               "Times the shared limits fell back to the local share (limit / "
                               "replicas) because Redis was unreachable")),
        fallback(r.AddGauge("switchyard_api_limit_redis_fallback",
                            "1 while Redis is unreachable and each shared limit is enforced "
                            "locally at limit / replicas")) {}
  Counter& leases;
  Counter& errors;
  Counter& fallbacks;
  Gauge& fallback;
};

int64_t SharedBucket::Take(int64_t now_ns, uint32_t cost) {
  if (store_->fallback()) return local_.Take(now_ns, cost);
  int64_t credit = credit_.load(std::memory_order_relaxed);
  while (credit - static_cast<int64_t>(cost) >= -chunk_) {
    if (credit_.compare_exchange_weak(credit, credit - cost, std::memory_order_relaxed)) {
      if (credit - static_cast<int64_t>(cost) <= chunk_ / 2 &&
          !leasing_.load(std::memory_order_relaxed) &&
          now_ns >= next_lease_ns_.load(std::memory_order_relaxed) &&
          !leasing_.exchange(true, std::memory_order_acq_rel)) {
        store_->RequestLease(this);
      }
      return 0;
    }
  }
  if (!leasing_.load(std::memory_order_relaxed) &&
      now_ns >= next_lease_ns_.load(std::memory_order_relaxed) &&
      !leasing_.exchange(true, std::memory_order_acq_rel)) {
    store_->RequestLease(this);
  }
  const int64_t refill = static_cast<int64_t>(1e9 * cost / limit_.per_second);
  return std::max(refill, next_lease_ns_.load(std::memory_order_relaxed) - now_ns);
}

class SharedLimitStore::Connection {
 public:
  Connection(SharedLimitStore& store, RedisEndpoint endpoint)
      : store_(store), endpoint_(std::move(endpoint)), tick_(store.io_) {}

  void Begin() {
    Connect(Now());
    Tick();
  }

  void Shutdown() {
    stopping_ = true;
    tick_.cancel();
    if (ac_ != nullptr) redisAsyncFree(std::exchange(ac_, nullptr));
    store_.io_.stop();
  }

  void Lease(std::shared_ptr<SharedBucket> bucket) {
    if (ac_ == nullptr || !connected_ || stopping_) {
      bucket->leasing_.store(false, std::memory_order_release);
      return;
    }
    const int64_t want =
        std::max<int64_t>(1, bucket->chunk_ - bucket->credit_.load(std::memory_order_relaxed));
    auto* pending = new Pending{bucket, want, Now(), ac_};
    const std::string rate = fmt::format("{}", bucket->limit_.per_second);
    const std::string burst = fmt::format("{}", bucket->limit_.effective_burst());
    store_.metrics_->leases.Increment();
    if (redisAsyncCommand(ac_, &Connection::OnReply, pending, "EVAL %s 1 %b %s %s %lld",
                          kLeaseScript, bucket->redis_key_.data(), bucket->redis_key_.size(),
                          rate.c_str(), burst.c_str(), static_cast<long long>(want)) != REDIS_OK) {
      bucket->leasing_.store(false, std::memory_order_release);
      delete pending;
      store_.metrics_->errors.Increment();
      return;
    }
    in_flight_.insert(pending);
  }

 private:
  struct Pending {
    std::shared_ptr<SharedBucket> bucket;
    int64_t want = 0;
    int64_t sent_ns = 0;
    redisAsyncContext* ac = nullptr;
  };

  static Connection* Of(const redisAsyncContext* c) { return static_cast<Connection*>(c->data); }
  static void OnConnect(const redisAsyncContext* c, int status) { Of(c)->HandleConnect(c, status); }
  static void OnDisconnect(const redisAsyncContext* c, int) { Of(c)->HandleDisconnect(c); }
  static void OnReply(redisAsyncContext* c, void* reply, void* privdata) {
    Of(c)->HandleReply(c, static_cast<redisReply*>(reply), static_cast<Pending*>(privdata));
  }

  int64_t Now() const { return Nanos(store_.clock_->Monotonic()); }

  void Connect(int64_t now) {
    redisAsyncContext* ac = redisAsyncConnect(endpoint_.host.c_str(), endpoint_.port);
    if (ac == nullptr || ac->err != 0) {
      Unreachable(ac == nullptr ? "out of memory" : ac->errstr, now);
      if (ac != nullptr) redisAsyncFree(ac);
      return;
    }
    ac->data = this;
    if (absl::Status attached = AttachToAsio(ac, store_.io_); !attached.ok()) {
      redisAsyncFree(ac);
      Unreachable(std::string(attached.message()), now);
      return;
    }
    redisAsyncSetConnectCallback(ac, &Connection::OnConnect);
    redisAsyncSetDisconnectCallback(ac, &Connection::OnDisconnect);
    if (endpoint_.db != 0) redisAsyncCommand(ac, nullptr, nullptr, "SELECT %d", endpoint_.db);
    ac_ = ac;
    connected_ = false;
    connect_deadline_ = now + Nanos(store_.options_.timeout);
  }

  void HandleConnect(const redisAsyncContext* c, int status) {
    if (c != ac_) return;
    if (status != REDIS_OK) {
      ac_ = nullptr;  // hiredis frees it when this returns
      Unreachable(c->errstr, Now());
      return;
    }
    connected_ = true;
    backoff_ns_ = kFirstBackoffNs;
    if (store_.fallback_.exchange(false)) {
      store_.metrics_->fallback.Set(0);
      spdlog::info("limits: Redis {}:{} reachable; limits are shared again", endpoint_.host,
                   endpoint_.port);
    }
  }

  void HandleDisconnect(const redisAsyncContext* c) {
    if (c != ac_) return;
    ac_ = nullptr;  // hiredis frees it when this returns
    Unreachable(c->errstr[0] != '\0' ? c->errstr : "closed by Redis", Now());
  }

  void HandleReply(redisAsyncContext* c, redisReply* reply, Pending* raw) {
    if (raw == nullptr) return;  // SELECT
    std::unique_ptr<Pending> pending(raw);
    in_flight_.erase(raw);
    SharedBucket& bucket = *pending->bucket;
    const int64_t now = Now();
    const bool ok = reply != nullptr && reply->type == REDIS_REPLY_ARRAY && reply->elements == 2 &&
                    reply->element[0]->type == REDIS_REPLY_INTEGER &&
                    reply->element[1]->type == REDIS_REPLY_INTEGER;
    if (ok) {
      const int64_t granted = reply->element[0]->integer;
      bucket.credit_.fetch_add(granted, std::memory_order_relaxed);
      bucket.leased_at_ns_.store(now, std::memory_order_relaxed);
      if (granted < pending->want) {
        bucket.next_lease_ns_.store(now + reply->element[1]->integer * 1'000'000,
                                    std::memory_order_relaxed);
      }
    } else if (c == ac_ && !stopping_) {
      store_.metrics_->errors.Increment();
      if (reply != nullptr && reply->type == REDIS_REPLY_ERROR) {
        spdlog::warn("limits: Redis {}:{} refused a lease: {}", endpoint_.host, endpoint_.port,
                     std::string_view(reply->str, reply->len));
        // Not from inside hiredis's callback: the context is freed by a later handler.
        net::post(store_.io_, [this, c] {
          if (c == ac_) Drop("an error reply");
        });
      }
    }
    bucket.leasing_.store(false, std::memory_order_release);
  }

  // Drops the current context (never from inside a hiredis callback): its leases in flight are
  // answered with no reply.
  void Drop(std::string_view why) {
    if (ac_ == nullptr) return;
    redisAsyncContext* ac = std::exchange(ac_, nullptr);
    redisAsyncFree(ac);
    Unreachable(why, Now());
  }

  void Unreachable(std::string_view why, int64_t now) {
    connected_ = false;
    store_.metrics_->errors.Increment();
    next_connect_ns_ = now + backoff_ns_;
    backoff_ns_ = std::min(backoff_ns_ * 2, kMaxBackoffNs);
    if (stopping_ || store_.fallback_.exchange(true)) return;
    store_.metrics_->fallback.Set(1);
    store_.metrics_->fallbacks.Increment();
    spdlog::warn(
        "limits: Redis {}:{} unreachable ({}); each shared limit is enforced here at "
        "limit / {} until it is back",
        endpoint_.host, endpoint_.port, why, store_.options_.replicas);
  }

  void Tick() {
    const int64_t now = Now();
    if (ac_ != nullptr && !connected_ && now >= connect_deadline_) Drop("connect timed out");
    const int64_t timeout = Nanos(store_.options_.timeout);
    for (const Pending* pending : in_flight_) {
      if (pending->ac == ac_ && now - pending->sent_ns > timeout) {
        Drop("no answer in time");
        break;
      }
    }
    if (ac_ == nullptr && now >= next_connect_ns_) Connect(now);
    ExpireLeases(now);
    tick_.expires_after(kTick);
    tick_.async_wait([this](boost::system::error_code ec) {
      if (!ec && !stopping_) Tick();
    });
  }

  // Tokens leased longer ago than options.lease and not used are given up, so that a replica
  // that went quiet does not keep a share of the limit.
  void ExpireLeases(int64_t now) {
    const int64_t lease = Nanos(store_.options_.lease);
    absl::MutexLock lock(&store_.mu_);
    std::erase_if(store_.buckets_, [&](const std::weak_ptr<SharedBucket>& weak) {
      std::shared_ptr<SharedBucket> bucket = weak.lock();
      if (!bucket) return true;
      if (now - bucket->leased_at_ns_.load(std::memory_order_relaxed) > lease) {
        int64_t credit = bucket->credit_.load(std::memory_order_relaxed);
        while (credit > 0 && !bucket->credit_.compare_exchange_weak(credit, 0)) {
        }
      }
      return false;
    });
  }

  SharedLimitStore& store_;
  const RedisEndpoint endpoint_;
  net::steady_timer tick_;
  redisAsyncContext* ac_ = nullptr;
  bool connected_ = false;
  bool stopping_ = false;
  int64_t connect_deadline_ = 0;
  int64_t next_connect_ns_ = 0;
  int64_t backoff_ns_ = kFirstBackoffNs;
  absl::flat_hash_set<Pending*> in_flight_;
};

absl::StatusOr<std::unique_ptr<SharedLimitStore>> SharedLimitStore::Start(
    SharedLimitOptions options, const Clock* clock, MetricsRegistry* registry) {
  absl::StatusOr<RedisEndpoint> endpoint = ParseRedisUrl(options.url);
  if (!endpoint.ok()) return endpoint.status();
  if (options.replicas == 0) return absl::InvalidArgumentError("replicas must be at least 1");
  if (options.timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("the Redis timeout must be positive");
  }
  std::unique_ptr<SharedLimitStore> store(new SharedLimitStore());
  store->options_ = std::move(options);
  store->clock_ = clock;
  store->metrics_ = std::make_unique<Metrics>(*registry);
  store->connection_ = std::make_unique<Connection>(*store, *std::move(endpoint));
  SharedLimitStore* raw = store.get();
  net::post(store->io_, [raw] { raw->connection_->Begin(); });
  store->thread_ = std::thread([raw] {
    auto work = net::make_work_guard(raw->io_);
    raw->io_.run();
  });
  return store;
}

SharedLimitStore::~SharedLimitStore() {
  net::post(io_, [this] { connection_->Shutdown(); });
  if (thread_.joinable()) thread_.join();
}

std::shared_ptr<SharedBucket> SharedLimitStore::Bucket(const std::string& name, RateLimit limit) {
  const double replicas = static_cast<double>(options_.replicas);
  const RateLimit share{limit.per_second / replicas,
                        std::max(1.0, limit.effective_burst() / replicas)};
  // A chunk is about 50 ms of a replica's share: small against the limit, few round trips.
  const int64_t chunk =
      std::max<int64_t>(1, static_cast<int64_t>(limit.per_second / replicas / 20));
  std::shared_ptr<SharedBucket> bucket(
      new SharedBucket(this, options_.key_prefix + name, limit, chunk, share));
  absl::MutexLock lock(&mu_);
  buckets_.push_back(bucket);
  return bucket;
}

void SharedLimitStore::RequestLease(SharedBucket* bucket) {
  net::post(io_, [this, self = bucket->shared_from_this()]() mutable {
    connection_->Lease(std::move(self));
  });
}

}  // namespace switchyard
