#include "api/upstream/upstream.h"

#include <algorithm>
#include <boost/asio/basic_waitable_timer.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/beast/core/error.hpp>
#include <chrono>
#include <deque>

#include "api/upstream/internal/upstream_connection.h"
#include "common/clock.h"
#include "fmt/format.h"

namespace switchyard {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace ssl = asio::ssl;
using tcp = asio::ip::tcp;
using boost::system::error_code;

using SteadyClock = upstream_internal::Clock;

absl::StatusOr<ParsedUrl> ParseUpstreamUrl(std::string_view url) {
  absl::StatusOr<Url> parsed = ParseUrl(url);
  if (parsed.ok() && parsed->websocket()) {
    return absl::InvalidArgumentError(fmt::format("upstream URL {} is not http(s)://", url));
  }
  return parsed;
}

struct UpstreamPool::Endpoint {
  ParsedUrl url;
  std::string head;  // upstream_internal::RequestHeadOf(url)
  uint32_t weight = 1;
  int64_t current_weight = 0;
  size_t open = 0;
  std::vector<std::shared_ptr<Connection>> idle;
  std::vector<std::weak_ptr<Connection>> all;  // to cut off in-flight ones at Shutdown
  // Attempts waiting for a connection, oldest first, with the time they started waiting.
  std::deque<std::pair<std::shared_ptr<Attempt>, std::chrono::steady_clock::time_point>> waiting;
};

namespace {
// An idle connection used within this time is handed out without asking the kernel whether
// the peer closed it (see UpstreamConnection::Usable).
constexpr auto kCheckIdleAfter = std::chrono::milliseconds(250);
}  // namespace

struct UpstreamPool::SweepTimer {
  SweepTimer(asio::io_context& io_context, UpstreamPool* pool)
      : timer(io_context.get_executor()), pool(pool) {}
  asio::basic_waitable_timer<SteadyClock, asio::wait_traits<SteadyClock>,
                             asio::io_context::executor_type>
      timer;
  UpstreamPool* pool;  // null once the pool is gone (a cancelled wait may still run)
};

struct UpstreamPool::Attempt {
  std::string body;
  RetryPolicy policy = RetryPolicy::kSafe;
  UpstreamCallback done;
  int tries = 0;
  size_t last_endpoint = SIZE_MAX;
  bool stale_retried = false;
};

UpstreamPool::UpstreamPool(asio::io_context& io_context, std::string name,
                           std::vector<UpstreamEndpoint> endpoints, std::vector<ParsedUrl> urls,
                           const UpstreamOptions& options, ssl::context* tls, ApiMetrics* metrics)
    : io_context_(io_context),
      name_(std::move(name)),
      options_(options),
      tls_(tls),
      metrics_(metrics),
      target_metrics_(metrics->ForUpstream(name_)),
      sweep_timer_(std::make_shared<SweepTimer>(io_context, this)) {
  for (size_t i = 0; i < endpoints.size(); ++i) {
    auto endpoint = std::make_unique<Endpoint>();
    endpoint->url = urls[i];
    endpoint->head = upstream_internal::RequestHeadOf(endpoint->url);
    endpoint->weight = std::max<uint32_t>(1, endpoints[i].weight);
    endpoints_.push_back(std::move(endpoint));
  }
}

UpstreamPool::~UpstreamPool() {
  Shutdown();
  sweep_timer_->pool = nullptr;
}

void UpstreamPool::Shutdown() {
  shut_down_ = true;
  sweep_timer_->timer.cancel();
  for (auto& endpoint : endpoints_) {
    auto waiting = std::move(endpoint->waiting);
    endpoint->waiting.clear();
    for (auto& [attempt, since] : waiting) {
      auto done = std::move(attempt->done);
      done(absl::UnavailableError(fmt::format("upstream {} is shutting down", name_)));
    }
    endpoint->idle.clear();
    for (auto& weak : endpoint->all) {
      if (auto connection = weak.lock()) connection->Close();
    }
    endpoint->all.clear();
  }
}

size_t UpstreamPool::PickEndpoint(size_t exclude) {
  // Smooth weighted round-robin (nginx): deterministic and evenly interleaved.
  int64_t total = 0;
  Endpoint* best = nullptr;
  size_t best_index = exclude;
  for (size_t i = 0; i < endpoints_.size(); ++i) {
    if (i == exclude) continue;
    Endpoint& e = *endpoints_[i];
    e.current_weight += e.weight;
    total += e.weight;
    if (best == nullptr || e.current_weight > best->current_weight) {
      best = &e;
      best_index = i;
    }
  }
  if (best != nullptr) best->current_weight -= total;
  return best_index;
}

void UpstreamPool::Send(std::string body, RetryPolicy policy, UpstreamCallback done) {
  auto attempt = std::make_shared<Attempt>();
  attempt->body = std::move(body);
  attempt->policy = policy;
  attempt->done = std::move(done);
  Run(std::move(attempt));
}

void UpstreamPool::Run(std::shared_ptr<Attempt> attempt) {
  if (shut_down_ || endpoints_.empty()) {
    auto done = std::move(attempt->done);
    done(absl::UnavailableError(fmt::format("upstream {} is not available", name_)));
    return;
  }
  const size_t index = PickEndpoint(attempt->last_endpoint);
  attempt->last_endpoint = index;
  ++attempt->tries;
  StartOn(index, std::move(attempt));
}

void UpstreamPool::StartOn(size_t index, std::shared_ptr<Attempt> attempt) {
  Endpoint& endpoint = *endpoints_[index];
  std::shared_ptr<Connection> connection;
  const auto now = SteadyClock::now();
  while (!endpoint.idle.empty() && !connection) {
    connection = std::move(endpoint.idle.back());
    endpoint.idle.pop_back();
    if (now - connection->idle_since() > ToChrono(options_.max_idle_time) ||
        !connection->Usable(now, kCheckIdleAfter)) {
      connection->Close();
      connection.reset();
      --endpoint.open;
    }
  }
  if (!connection) {
    if (endpoint.open >= options_.max_connections_per_endpoint) {
      if (endpoint.waiting.size() < options_.max_waiting_per_endpoint) {
        endpoint.waiting.emplace_back(std::move(attempt), now);
        return;
      }
      Fail(std::move(attempt),
           absl::UnavailableError(fmt::format(
               "upstream {}: {} connections busy and {} requests waiting", name_,
               options_.max_connections_per_endpoint, options_.max_waiting_per_endpoint)));
      return;
    }
    connection = std::make_shared<Connection>(io_context_, endpoint.url, endpoint.head, tls_,
                                              options_.max_response_bytes, options_.verify_tls);
    ++endpoint.open;
    if (endpoint.all.size() > 2 * endpoint.open + 16) {
      std::erase_if(endpoint.all, [](const auto& weak) { return weak.expired(); });
    }
    endpoint.all.push_back(connection);
  }
  ExchangeOn(index, std::move(connection), std::move(attempt));
}

void UpstreamPool::ExchangeOn(size_t index, std::shared_ptr<Connection> connection,
                              std::shared_ptr<Attempt> attempt) {
  metrics_->upstream_requests.Increment();
  target_metrics_.requests->Increment();
  Connection* raw = connection.get();
  ArmSweep();
  raw->Exchange(
      attempt->body, SteadyClock::now() + ToChrono(options_.request_timeout),
      [this, index, attempt, connection = std::move(connection)](
          error_code ec, UpstreamResponse response, bool keep_alive, bool stale) mutable {
        Endpoint& endpoint = *endpoints_[index];
        if (ec) {
          --endpoint.open;
          // A read that met a connection closed while idle goes again at once on a new
          // connection to the same endpoint, once; it is no failure of the endpoint. A write
          // (sendTransaction, requestAirdrop) is never sent twice.
          if (stale && attempt->policy == RetryPolicy::kSafe && !attempt->stale_retried &&
              !shut_down_) {
            attempt->stale_retried = true;
            metrics_->upstream_stale_retries.Increment();
            StartOn(index, std::move(attempt));
            ServeWaiter(index, nullptr);
            return;
          }
          ServeWaiter(index, nullptr);
          Fail(std::move(attempt),
               ec == beast::error::timeout
                   ? absl::DeadlineExceededError(fmt::format("upstream {} timed out", name_))
                   : absl::UnavailableError(fmt::format("upstream {}: {}", name_, ec.message())));
          return;
        }
        if (keep_alive && !shut_down_) {
          ServeWaiter(index, std::move(connection));
        } else {
          connection->Close();
          --endpoint.open;
          ServeWaiter(index, nullptr);
        }
        if (response.status < 200 || response.status > 299) target_metrics_.errors->Increment();
        auto done = std::move(attempt->done);
        done(std::move(response));
      });
}

void UpstreamPool::ServeWaiter(size_t index, std::shared_ptr<Connection> connection) {
  Endpoint& endpoint = *endpoints_[index];
  const auto now = SteadyClock::now();
  while (!endpoint.waiting.empty() && !shut_down_) {
    auto [attempt, since] = std::move(endpoint.waiting.front());
    endpoint.waiting.pop_front();
    if (now - since > ToChrono(options_.request_timeout)) {
      // Waited its whole timeout: it fails (or tries another endpoint) without a connection.
      Fail(std::move(attempt), absl::DeadlineExceededError(fmt::format(
                                   "upstream {}: no connection free within the timeout", name_)));
      continue;
    }
    if (connection) {
      ExchangeOn(index, std::move(connection), std::move(attempt));
    } else {
      StartOn(index, std::move(attempt));  // a new connection in the closed one's place
    }
    return;
  }
  if (!connection) return;
  if (!shut_down_ && endpoint.idle.size() < options_.max_idle_per_endpoint) {
    endpoint.idle.push_back(std::move(connection));
  } else {
    connection->Close();
    --endpoint.open;
  }
}

void UpstreamPool::ArmSweep() {
  if (sweep_armed_ || shut_down_) return;
  sweep_armed_ = true;
  const auto tick = std::clamp<SteadyClock::duration>(ToChrono(options_.request_timeout) / 20,
                                                      std::chrono::milliseconds(1),
                                                      std::chrono::milliseconds(100));
  sweep_timer_->timer.expires_after(tick);
  sweep_timer_->timer.async_wait([state = sweep_timer_](error_code ec) {
    UpstreamPool* pool = state->pool;
    if (pool == nullptr) return;
    pool->sweep_armed_ = false;
    if (!ec) pool->Sweep();
  });
}

void UpstreamPool::Sweep() {
  const auto now = SteadyClock::now();
  bool busy = false;
  std::vector<std::shared_ptr<Connection>> expired;
  for (auto& endpoint : endpoints_) {
    for (auto& weak : endpoint->all) {
      std::shared_ptr<Connection> connection = weak.lock();
      if (!connection || !connection->busy()) continue;
      if (connection->Expired(now)) {
        expired.push_back(std::move(connection));
      } else {
        busy = true;
      }
    }
  }
  // Each callback may start exchanges (retries, waiters) and so re-arm the sweep itself.
  for (auto& connection : expired) connection->TimeOut();
  if (busy) ArmSweep();
}

void UpstreamPool::Fail(std::shared_ptr<Attempt> attempt, absl::Status status) {
  metrics_->upstream_failures.Increment();
  target_metrics_.errors->Increment();
  const bool another = endpoints_.size() > 1;
  const bool retry =
      attempt->tries == 1 && (attempt->policy == RetryPolicy::kSafe ||
                              (attempt->policy == RetryPolicy::kOtherEndpointOnly && another));
  if (retry && !shut_down_) {
    metrics_->upstream_retries.Increment();
    if (attempt->policy == RetryPolicy::kSafe && !another) attempt->last_endpoint = SIZE_MAX;
    Run(std::move(attempt));
    return;
  }
  auto done = std::move(attempt->done);
  done(std::move(status));
}

absl::StatusOr<std::unique_ptr<UpstreamSet>> UpstreamSet::Create(
    asio::io_context& io_context, const std::vector<UpstreamTarget>& targets,
    const UpstreamOptions& options, ssl::context* tls, ApiMetrics* metrics) {
  auto set = std::make_unique<UpstreamSet>();
  for (const UpstreamTarget& target : targets) {
    if (target.endpoints.empty()) {
      return absl::InvalidArgumentError(fmt::format("upstream {} has no endpoints", target.name));
    }
    std::vector<ParsedUrl> urls;
    for (const UpstreamEndpoint& endpoint : target.endpoints) {
      absl::StatusOr<ParsedUrl> url = ParseUpstreamUrl(endpoint.url);
      if (!url.ok()) return url.status();
      if (url->tls && tls == nullptr) {
        return absl::InvalidArgumentError(fmt::format("upstream {} needs TLS", endpoint.url));
      }
      urls.push_back(*std::move(url));
    }
    set->pools_[target.name] = std::make_unique<UpstreamPool>(
        io_context, target.name, target.endpoints, std::move(urls), options, tls, metrics);
  }
  return set;
}

UpstreamPool* UpstreamSet::Find(std::string_view name) {
  auto it = pools_.find(std::string(name));
  return it == pools_.end() ? nullptr : it->second.get();
}

bool UpstreamSet::Has(std::string_view target) const {
  return pools_.contains(std::string(target));
}

void UpstreamSet::Send(std::string_view target, std::string body, RetryPolicy policy,
                       UpstreamCallback done) {
  UpstreamPool* pool = Find(target);
  if (pool == nullptr) {
    done(absl::NotFoundError(fmt::format("no upstream named {}", target)));
    return;
  }
  pool->Send(std::move(body), policy, std::move(done));
}

void UpstreamSet::Shutdown() {
  for (auto& [name, pool] : pools_) pool->Shutdown();
}

std::unique_ptr<ssl::context> MakeClientTlsContext(bool verify) {
  auto context = std::make_unique<ssl::context>(ssl::context::tls_client);
  error_code ec;
  context->set_default_verify_paths(ec);
  context->set_verify_mode(verify ? ssl::verify_peer : ssl::verify_none, ec);
  return context;
}

}  // namespace switchyard
