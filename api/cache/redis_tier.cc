#include "api/cache/redis_tier.h"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdint>
#include <deque>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "api/redis/asio_hiredis.h"
#include "boost/asio/post.hpp"
#include "boost/asio/steady_timer.hpp"
#include "common/clock.h"
#include "fmt/format.h"
#include "hiredis/async.h"
#include "hiredis/hiredis.h"
#include "spdlog/spdlog.h"

namespace switchyard {

namespace net = boost::asio;
using SteadyClock = std::chrono::steady_clock;
using TimePoint = SteadyClock::time_point;

namespace {

constexpr std::chrono::milliseconds kFirstBackoff{10};
constexpr std::chrono::milliseconds kMaxBackoff{1000};

absl::Status BadOption(std::string_view name, std::string_view what) {
  return absl::InvalidArgumentError(fmt::format("RedisTierOptions.{} {}", name, what));
}

void PostValues(const net::any_io_executor& executor, std::function<void(RedisTier::Values)> done,
                RedisTier::Values values) {
  net::post(executor, [done = std::move(done), values = std::move(values)]() mutable {
    done(std::move(values));
  });
}

}  // namespace

struct RedisTier::Metrics {
  explicit Metrics(MetricsRegistry& r)
      : get_requests(r.AddCounter("switchyard_cache_redis_requests_total",
                                  "Lookups (one MGET each) and stores (SET) asked of the shared "
                                  "Redis tier of the response cache",
                                  {{"op", "get"}})),
        set_requests(r.AddCounter("switchyard_cache_redis_requests_total",
                                  "Lookups (one MGET each) and stores (SET) asked of the shared "
                                  "Redis tier of the response cache",
                                  {{"op", "set"}})),
        errors(AddError(r, "error")),
        timeouts(AddError(r, "timeout")),
        dropped(AddError(r, "dropped")),
        circuit_open_answers(AddError(r, "circuit_open")),
        get_latency(r.AddHistogram("switchyard_cache_redis_latency_seconds",
                                   "Time from sending a command to Redis to its reply",
                                   LatencyBucketsSeconds(), {{"op", "get"}})),
        set_latency(r.AddHistogram("switchyard_cache_redis_latency_seconds",
                                   "Time from sending a command to Redis to its reply",
                                   LatencyBucketsSeconds(), {{"op", "set"}})),
        circuit_open(r.AddGauge("switchyard_cache_redis_circuit_open",
                                "1 while the circuit to Redis is open (lookups are misses at "
                                "once, stores are dropped)")) {}

  static Counter& AddError(MetricsRegistry& r, std::string kind) {
    return r.AddCounter("switchyard_cache_redis_errors_total",
                        "Lookups answered as misses and stores lost, by cause: error (an error "
                        "reply or no connection; also each lost connection), timeout (no reply "
                        "by the deadline), dropped (the queue was full), circuit_open",
                        {{"kind", std::move(kind)}});
  }

  Counter& get_requests;
  Counter& set_requests;
  Counter& errors;
  Counter& timeouts;
  Counter& dropped;
  Counter& circuit_open_answers;
  Histogram& get_latency;
  Histogram& set_latency;
  Gauge& circuit_open;
};

struct RedisTier::Request {
  enum class Kind { kGet, kSet, kTrial };
  Kind kind = Kind::kGet;
  std::vector<std::string> keys;  // with the key prefix; one for a store
  std::string value;
  int64_t ttl_ms = 0;
  net::any_io_executor executor;
  std::function<void(Values)> done;
  TimePoint deadline;
  TimePoint sent_at;
  bool sent = false;
};

class RedisTier::Connection {
 public:
  Connection(RedisTier& tier, RedisTierOptions options, RedisEndpoint endpoint)
      : tier_(tier),
        options_(std::move(options)),
        endpoint_(std::move(endpoint)),
        sweep_(tier.io_) {}

  void Begin() {
    Connect(SteadyClock::now());
    ArmSweep();
  }

  void Drain() {
    const TimePoint now = SteadyClock::now();
    for (Request& request : tier_.TakeQueued()) Admit(std::move(request), now);
    ArmSweep();
  }

  void Shutdown() {
    stopping_ = true;
    for (Request& request : tier_.TakeQueued()) Answer(request, std::nullopt);
    FailInFlight(nullptr);
    if (ac_ != nullptr) {
      redisAsyncContext* ac = std::exchange(ac_, nullptr);
      redisAsyncFree(ac);
    }
    for (redisAsyncContext* ac : std::exchange(retiring_, {})) redisAsyncFree(ac);
    ++arm_generation_;
    sweep_.cancel();
    tier_.io_.stop();
  }

 private:
  enum class State { kDisconnected, kConnecting, kConnected };

  static Connection* Of(const redisAsyncContext* c) { return static_cast<Connection*>(c->data); }

  static void OnConnect(const redisAsyncContext* c, int status) {
    Of(c)->HandleConnect(const_cast<redisAsyncContext*>(c), status);
  }
  static void OnDisconnect(const redisAsyncContext* c, int) {
    Of(c)->HandleDisconnect(const_cast<redisAsyncContext*>(c));
  }
  static void OnReply(redisAsyncContext* c, void* reply, void* privdata) {
    Connection* self = Of(c);
    if (c != self->ac_) return;  // a context being retired: its requests were answered
    self->HandleReply(reinterpret_cast<uintptr_t>(privdata), static_cast<redisReply*>(reply));
  }

  void Connect(TimePoint now) {
    redisAsyncContext* ac = redisAsyncConnect(endpoint_.host.c_str(), endpoint_.port);
    if (ac == nullptr || ac->err != 0) {
      NoteConnectionLost(ac == nullptr ? "out of memory" : ac->errstr, now);
      if (ac != nullptr) redisAsyncFree(ac);
      return;
    }
    ac->data = this;
    if (absl::Status attached = AttachToAsio(ac, tier_.io_); !attached.ok()) {
      redisAsyncFree(ac);
      NoteConnectionLost(std::string(attached.message()), now);
      return;
    }
    redisAsyncSetConnectCallback(ac, &Connection::OnConnect);
    redisAsyncSetDisconnectCallback(ac, &Connection::OnDisconnect);
    ac_ = ac;
    state_ = State::kConnecting;
    connect_deadline_ = now + ToChrono(options_.connect_timeout);
  }

  void HandleConnect(redisAsyncContext* c, int status) {
    if (c != ac_) {
      if (status != REDIS_OK) retiring_.erase(c);  // hiredis frees it now
      return;
    }
    const TimePoint now = SteadyClock::now();
    if (status != REDIS_OK) {
      ac_ = nullptr;  // hiredis frees it when this returns
      FailInFlight(&tier_.metrics_->errors);
      NoteConnectionLost(c->errstr, now);
      ArmSweep();
      return;
    }
    state_ = State::kConnected;
    backoff_ = kFirstBackoff;
    if (lost_) {
      spdlog::info("cache: Redis {}:{} connected", endpoint_.host, endpoint_.port);
      lost_ = false;
    }
    if (endpoint_.db != 0)
      redisAsyncCommand(ac_, &Connection::OnReply, nullptr, "SELECT %d", endpoint_.db);
    // In the order they came (the map has none): a store then a lookup of its key must reach
    // Redis in that order.
    std::vector<uint64_t> waiting;
    for (const auto& [deadline, id] : deadlines_) {
      if (auto it = in_flight_.find(id); it != in_flight_.end() && !it->second.sent) {
        waiting.push_back(id);
      }
    }
    for (uint64_t id : waiting) {
      if (auto it = in_flight_.find(id); it != in_flight_.end() && ac_ != nullptr) {
        Send(id, it->second, now);
      }
    }
    ArmSweep();
  }

  void HandleDisconnect(redisAsyncContext* c) {
    if (c != ac_) {
      retiring_.erase(c);
      return;
    }
    ac_ = nullptr;  // hiredis frees it when this returns
    FailInFlight(&tier_.metrics_->errors);
    NoteConnectionLost(c->errstr[0] != '\0' ? c->errstr : "closed by Redis", SteadyClock::now());
    ArmSweep();
  }

  // The connection is gone, or never came: it counts as a failure, and the next attempt
  // waits for the backoff (or for the circuit's trial).
  void NoteConnectionLost(std::string_view why, TimePoint now) {
    state_ = State::kDisconnected;
    tier_.metrics_->errors.Increment();
    if (!lost_ && !stopping_) {
      spdlog::warn("cache: Redis {}:{} unavailable ({}); lookups are misses until it is back",
                   endpoint_.host, endpoint_.port, why);
      lost_ = true;
    }
    next_connect_at_ = now + backoff_;
    backoff_ = std::min<SteadyClock::duration>(backoff_ * 2, kMaxBackoff);
    Failure(now);
  }

  // Drops the current context on our own initiative. hiredis may be inside one of its
  // callbacks for it, so it is freed from a later handler (unless hiredis frees it first).
  void Retire() {
    if (ac_ == nullptr) return;
    redisAsyncContext* ac = std::exchange(ac_, nullptr);
    state_ = State::kDisconnected;
    retiring_.insert(ac);
    net::post(tier_.io_, [this, ac] {
      if (retiring_.erase(ac) > 0) redisAsyncFree(ac);
    });
  }

  void Admit(Request request, TimePoint now) {
    if (stopping_) return Answer(request, std::nullopt);
    if (request.deadline <= now) {
      tier_.metrics_->timeouts.Increment();
      return Answer(request, std::nullopt);
    }
    if (open_) {
      tier_.metrics_->circuit_open_answers.Increment();
      return Answer(request, std::nullopt);
    }
    if (state_ == State::kDisconnected) {
      tier_.metrics_->errors.Increment();
      Failure(now);
      return Answer(request, std::nullopt);
    }
    Track(std::move(request), now);
  }

  void Track(Request request, TimePoint now) {
    const uint64_t id = next_id_++;
    deadlines_.emplace_back(request.deadline, id);
    Request& tracked = in_flight_.emplace(id, std::move(request)).first->second;
    if (state_ == State::kConnected) Send(id, tracked, now);
  }

  void Send(uint64_t id, Request& request, TimePoint now) {
    request.sent = true;
    request.sent_at = now;
    void* privdata = reinterpret_cast<void*>(static_cast<uintptr_t>(id));
    int sent = REDIS_ERR;
    switch (request.kind) {
      case Request::Kind::kGet: {
        std::vector<const char*> argv;
        std::vector<size_t> lengths;
        argv.reserve(request.keys.size() + 1);
        lengths.reserve(request.keys.size() + 1);
        argv.push_back("MGET");
        lengths.push_back(4);
        for (const std::string& key : request.keys) {
          argv.push_back(key.data());
          lengths.push_back(key.size());
        }
        sent = redisAsyncCommandArgv(ac_, &Connection::OnReply, privdata,
                                     static_cast<int>(argv.size()), argv.data(), lengths.data());
        break;
      }
      case Request::Kind::kSet:
        sent =
            redisAsyncCommand(ac_, &Connection::OnReply, privdata, "SET %b %b PX %lld",
                              request.keys[0].data(), request.keys[0].size(), request.value.data(),
                              request.value.size(), static_cast<long long>(request.ttl_ms));
        break;
      case Request::Kind::kTrial:
        sent = redisAsyncCommand(ac_, &Connection::OnReply, privdata, "PING");
        break;
    }
    if (sent != REDIS_OK) Finish(id, /*failed=*/true, std::nullopt, now);
  }

  void HandleReply(uint64_t id, redisReply* reply) {
    const TimePoint now = SteadyClock::now();
    if (id == 0) {  // SELECT
      if (reply == nullptr || reply->type == REDIS_REPLY_ERROR) {
        spdlog::warn("cache: Redis {}:{} refused SELECT {}: {}", endpoint_.host, endpoint_.port,
                     endpoint_.db, reply != nullptr ? reply->str : "no reply");
        Retire();
        FailInFlight(&tier_.metrics_->errors);
        NoteConnectionLost("SELECT failed", now);
        ArmSweep();
      }
      return;
    }
    auto it = in_flight_.find(id);
    if (it == in_flight_.end()) return;  // answered already (past its deadline)
    if (reply == nullptr) {
      // The context is going away; the disconnect counts as the failure.
      Request request = std::move(it->second);
      in_flight_.erase(it);
      if (request.kind == Request::Kind::kTrial) return;
      tier_.metrics_->errors.Increment();
      Answer(request, std::nullopt);
      return;
    }
    const Request& request = it->second;
    const double seconds = std::chrono::duration<double>(now - request.sent_at).count();
    std::optional<Values> values;
    bool ok = reply->type != REDIS_REPLY_ERROR;
    switch (request.kind) {
      case Request::Kind::kGet:
        tier_.metrics_->get_latency.Observe(seconds);
        ok = ok && reply->type == REDIS_REPLY_ARRAY && reply->elements == request.keys.size();
        if (ok) {
          values.emplace();
          values->reserve(reply->elements);
          for (size_t i = 0; i < reply->elements; ++i) {
            const redisReply* element = reply->element[i];
            if (element->type == REDIS_REPLY_STRING) {
              values->emplace_back(std::string(element->str, element->len));
            } else {
              values->emplace_back(std::nullopt);
            }
          }
        }
        break;
      case Request::Kind::kSet:
        tier_.metrics_->set_latency.Observe(seconds);
        ok = ok && reply->type == REDIS_REPLY_STATUS;
        break;
      case Request::Kind::kTrial:
        ok = ok && reply->type == REDIS_REPLY_STATUS;
        break;
    }
    Finish(id, !ok, std::move(values), now);
    ArmSweep();
  }

  // Answers tracked request `id` (`values` for a hit, else all-miss) and counts the outcome.
  void Finish(uint64_t id, bool failed, std::optional<Values> values, TimePoint now) {
    auto it = in_flight_.find(id);
    if (it == in_flight_.end()) return;
    Request request = std::move(it->second);
    in_flight_.erase(it);
    if (failed && request.kind != Request::Kind::kTrial) tier_.metrics_->errors.Increment();
    if (request.kind == Request::Kind::kTrial) trial_in_flight_ = false;
    // The circuit moves first, so that a caller answered sees where it stands.
    if (failed) {
      Failure(now);
    } else {
      Success();
    }
    Answer(request, std::move(values));
  }

  // Runs a lookup's `done` (a store has none) and gives its place in the queue back.
  void Answer(Request& request, std::optional<Values> values) {
    if (request.kind == Request::Kind::kTrial) return;
    tier_.ReleasePending(1);  // first: a caller answered may ask again at once
    if (request.kind == Request::Kind::kGet) {
      if (!values) values.emplace(request.keys.size());
      PostValues(request.executor, std::move(request.done), std::move(*values));
    }
  }

  // Answers every tracked request as a miss, counted in `counter` (none at shutdown).
  void FailInFlight(Counter* counter) {
    auto in_flight = std::exchange(in_flight_, {});
    deadlines_.clear();
    trial_in_flight_ = false;
    for (auto& [id, request] : in_flight) {
      if (request.kind == Request::Kind::kTrial) continue;
      if (counter != nullptr) counter->Increment();
      Answer(request, std::nullopt);
    }
  }

  void Failure(TimePoint now) {
    ++failures_;
    if (open_ || failures_ >= options_.failures_to_open) Open(now);
  }

  void Success() {
    failures_ = 0;
    if (!open_) return;
    open_ = false;
    tier_.circuit_open_.store(false, std::memory_order_release);
    tier_.metrics_->circuit_open.Set(0);
    spdlog::info("cache: circuit to Redis {}:{} closed", endpoint_.host, endpoint_.port);
  }

  // Opens (or, after a failed trial, re-opens) the circuit. The connection goes too: a Redis
  // that stalls would otherwise keep every command sent since in hiredis's buffers.
  void Open(TimePoint now) {
    if (!open_) {
      spdlog::warn(
          "cache: circuit to Redis {}:{} open after {} consecutive failures; lookups "
          "are misses for {}",
          endpoint_.host, endpoint_.port, failures_, absl::FormatDuration(options_.open_for));
    }
    open_ = true;
    tier_.circuit_open_.store(true, std::memory_order_release);
    tier_.metrics_->circuit_open.Set(1);
    open_until_ = now + ToChrono(options_.open_for);
    Retire();
    FailInFlight(&tier_.metrics_->circuit_open_answers);
  }

  // One PING, on a new connection when there is none; its reply closes the circuit.
  void StartTrial(TimePoint now) {
    trial_in_flight_ = true;
    if (state_ == State::kDisconnected) Connect(now);
    if (!trial_in_flight_) return;  // the connect failed at once and re-opened the circuit
    Request trial;
    trial.kind = Request::Kind::kTrial;
    trial.deadline = now + ToChrono(options_.timeout + options_.connect_timeout);
    Track(std::move(trial), now);
  }

  void Sweep() {
    const TimePoint now = SteadyClock::now();
    while (!deadlines_.empty() && deadlines_.front().first <= now) {
      const uint64_t id = deadlines_.front().second;
      deadlines_.pop_front();
      auto it = in_flight_.find(id);
      if (it == in_flight_.end()) continue;
      Request request = std::move(it->second);
      in_flight_.erase(it);
      if (request.kind == Request::Kind::kTrial) trial_in_flight_ = false;
      Failure(now);
      if (request.kind != Request::Kind::kTrial) {
        tier_.metrics_->timeouts.Increment();
        Answer(request, std::nullopt);
      }
    }
    if (state_ == State::kConnecting && now >= connect_deadline_) {
      Retire();
      FailInFlight(&tier_.metrics_->errors);
      NoteConnectionLost("connect timed out", now);
    }
    if (open_ && !trial_in_flight_ && now >= open_until_) {
      StartTrial(now);
    } else if (!open_ && state_ == State::kDisconnected && now >= next_connect_at_) {
      Connect(now);
    }
    ArmSweep();
  }

  // Points the one sweep timer at the next thing due: the first deadline, the connect's
  // deadline, the trial or the reconnect.
  void ArmSweep() {
    if (stopping_) return;
    while (!deadlines_.empty() && !in_flight_.contains(deadlines_.front().second)) {
      deadlines_.pop_front();
    }
    TimePoint next = TimePoint::max();
    if (!deadlines_.empty()) next = deadlines_.front().first;
    if (state_ == State::kConnecting) next = std::min(next, connect_deadline_);
    if (open_ && !trial_in_flight_) next = std::min(next, open_until_);
    if (!open_ && state_ == State::kDisconnected) next = std::min(next, next_connect_at_);
    if (next == TimePoint::max() || (armed_ && next >= armed_at_)) return;
    armed_ = true;
    armed_at_ = next;
    const uint64_t generation = ++arm_generation_;
    sweep_.expires_at(next);
    sweep_.async_wait([this, generation](boost::system::error_code) {
      if (generation != arm_generation_) return;
      armed_ = false;
      Sweep();
    });
  }

  RedisTier& tier_;
  const RedisTierOptions options_;
  const RedisEndpoint endpoint_;
  redisAsyncContext* ac_ = nullptr;
  State state_ = State::kDisconnected;
  bool stopping_ = false;
  bool lost_ = false;  // warned that Redis is unavailable
  // Contexts dropped by us and not yet freed.
  absl::flat_hash_set<redisAsyncContext*> retiring_;
  absl::flat_hash_map<uint64_t, Request> in_flight_;  // tracked: sent, or waiting for the connect
  std::deque<std::pair<TimePoint, uint64_t>> deadlines_;  // in the order of the requests
  uint64_t next_id_ = 1;                                  // 0 is the SELECT
  uint32_t failures_ = 0;                                 // consecutive
  bool open_ = false;
  bool trial_in_flight_ = false;
  TimePoint open_until_;
  TimePoint connect_deadline_;
  TimePoint next_connect_at_;
  SteadyClock::duration backoff_ = kFirstBackoff;
  net::steady_timer sweep_;
  bool armed_ = false;
  TimePoint armed_at_;
  uint64_t arm_generation_ = 0;
};

RedisTier::RedisTier() = default;

absl::StatusOr<std::unique_ptr<RedisTier>> RedisTier::Start(RedisTierOptions options,
                                                            MetricsRegistry* registry) {
  absl::StatusOr<RedisEndpoint> endpoint = ParseRedisUrl(options.url);
  if (!endpoint.ok()) return endpoint.status();
  if (options.timeout <= absl::ZeroDuration()) return BadOption("timeout", "must be positive");
  if (options.connect_timeout <= absl::ZeroDuration()) {
    return BadOption("connect_timeout", "must be positive");
  }
  if (options.max_pending == 0) return BadOption("max_pending", "must be at least 1");
  if (options.failures_to_open == 0) return BadOption("failures_to_open", "must be at least 1");
  if (options.open_for <= absl::ZeroDuration()) return BadOption("open_for", "must be positive");
  if (registry == nullptr) return absl::InvalidArgumentError("RedisTier needs a metrics registry");

  std::unique_ptr<RedisTier> tier(new RedisTier());
  tier->metrics_ = std::make_unique<Metrics>(*registry);
  tier->max_pending_ = options.max_pending;
  tier->timeout_ = ToChrono(options.timeout);
  tier->key_prefix_ = options.key_prefix;
  tier->connection_ = std::make_unique<Connection>(*tier, std::move(options), *std::move(endpoint));
  RedisTier* raw = tier.get();
  net::post(tier->io_, [raw] { raw->connection_->Begin(); });
  tier->thread_ = std::thread([raw] {
    auto work = net::make_work_guard(raw->io_);
    raw->io_.run();
  });
  return tier;
}

RedisTier::~RedisTier() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  net::post(io_, [this] { connection_->Shutdown(); });
  if (thread_.joinable()) thread_.join();
}

void RedisTier::Get(std::vector<std::string> keys, net::any_io_executor executor,
                    std::function<void(Values)> done) {
  metrics_->get_requests.Increment();
  if (keys.empty()) return PostValues(executor, std::move(done), {});
  if (circuit_open()) {
    metrics_->circuit_open_answers.Increment();
    return PostValues(executor, std::move(done), Values(keys.size()));
  }
  Request request;
  request.kind = Request::Kind::kGet;
  request.keys = std::move(keys);
  for (std::string& key : request.keys) key.insert(0, key_prefix_);
  request.executor = std::move(executor);
  request.done = std::move(done);
  request.deadline = SteadyClock::now() + timeout_;
  if (!Enqueue(request)) {
    metrics_->dropped.Increment();
    PostValues(request.executor, std::move(request.done), Values(request.keys.size()));
  }
}

void RedisTier::Put(std::string key, std::string value, absl::Duration ttl) {
  metrics_->set_requests.Increment();
  if (circuit_open()) {
    metrics_->circuit_open_answers.Increment();
    return;
  }
  Request request;
  request.kind = Request::Kind::kSet;
  request.keys.push_back(key_prefix_ + key);
  request.value = std::move(value);
  request.ttl_ms = std::max<int64_t>(1, absl::ToInt64Milliseconds(ttl));
  request.deadline = SteadyClock::now() + timeout_;
  if (!Enqueue(request)) metrics_->dropped.Increment();
}

bool RedisTier::Enqueue(Request& request) {
  bool first = false;
  {
    absl::MutexLock lock(&mu_);
    if (stopping_ || pending_ >= max_pending_) return false;
    ++pending_;
    queued_.push_back(std::move(request));
    first = queued_.size() == 1;
  }
  if (first) net::post(io_, [this] { connection_->Drain(); });
  return true;
}

std::vector<RedisTier::Request> RedisTier::TakeQueued() {
  absl::MutexLock lock(&mu_);
  return std::exchange(queued_, {});
}

void RedisTier::ReleasePending(size_t n) {
  absl::MutexLock lock(&mu_);
  pending_ -= n;
}

}  // namespace switchyard
