#include "api/upstream/upstream.h"

#include <openssl/ssl.h>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <chrono>
#include <deque>
#include <optional>

#include "absl/strings/numbers.h"
#include "common/clock.h"
#include "common/socket_liveness.h"
#include "fmt/format.h"

namespace switchyard {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace ssl = asio::ssl;
using tcp = asio::ip::tcp;
using boost::system::error_code;

// One keep-alive connection to one endpoint. Lives on one worker's thread.
class UpstreamPool::Connection : public std::enable_shared_from_this<UpstreamPool::Connection> {
 public:
  // `stale`: the exchange failed in transport (not by its timeout) on a connection that had
  // served an earlier one, before a byte of the answer arrived: the peer had closed it idle.
  using Callback = std::function<void(error_code, UpstreamResponse, bool keep_alive, bool stale)>;

  Connection(asio::io_context& io_context, const ParsedUrl& url, ssl::context* tls,
             size_t max_response_bytes, bool verify_tls)
      : url_(url),
        resolver_(io_context),
        resolve_timer_(io_context),
        max_response_bytes_(max_response_bytes),
        verify_tls_(verify_tls) {
    if (url.tls && tls != nullptr) {
      tls_stream_.emplace(io_context, *tls);
    } else {
      plain_.emplace(io_context);
    }
  }

  bool connected() const { return connected_; }
  std::chrono::steady_clock::time_point idle_since() const { return idle_since_; }
  // An idle connection that may be handed out: connected, and not closed by the peer since.
  bool Usable() { return connected_ && IdleSocketIsOpen(Lowest().socket().native_handle()); }

  void Exchange(const std::string& body, absl::Duration timeout, Callback done) {
    done_ = std::move(done);
    reused_ = connected_;
    Lowest().expires_after(ToChrono(timeout));
    request_.emplace(http::verb::post, url_.path, 11);
    request_->set(http::field::host, url_.host);
    request_->set(http::field::content_type, "application/json");
    request_->keep_alive(true);
    request_->body() = body;
    request_->prepare_payload();
    if (connected_) {
      Write();
      return;
    }
    error_code literal;
    const asio::ip::address address = asio::ip::make_address(url_.host, literal);
    uint32_t port = 0;
    if (!literal && absl::SimpleAtoi(url_.port, &port) && port <= 65535) {
      // An address needs no lookup (and no trip through the resolver's thread).
      Lowest().async_connect(tcp::endpoint(address, static_cast<uint16_t>(port)),
                             [self = shared_from_this()](error_code ec) { self->OnConnected(ec); });
      return;
    }
    resolve_timer_.expires_after(ToChrono(timeout));
    resolve_timer_.async_wait([self = shared_from_this()](error_code ec) {
      if (!ec) self->resolver_.cancel();
    });
    resolver_.async_resolve(
        url_.host, url_.port,
        [self = shared_from_this()](error_code ec, tcp::resolver::results_type results) {
          self->resolve_timer_.cancel();
          if (ec) return self->Finish(ec);
          self->Lowest().async_connect(
              results, [self](error_code ec, const tcp::endpoint&) { self->OnConnected(ec); });
        });
  }

  void Close() {
    error_code ignored;
    resolver_.cancel();
    resolve_timer_.cancel();
    Lowest().socket().close(ignored);
    connected_ = false;
  }

 private:
  beast::tcp_stream& Lowest() { return plain_ ? *plain_ : beast::get_lowest_layer(*tls_stream_); }

  void OnConnected(error_code ec) {
    if (ec) return Finish(ec);
    Lowest().socket().set_option(tcp::no_delay(true), ec);
    if (!tls_stream_) {
      connected_ = true;
      return Write();
    }
    if (!SSL_set_tlsext_host_name(tls_stream_->native_handle(), url_.host.c_str())) {
      return Finish(asio::error::invalid_argument);
    }
    if (verify_tls_) tls_stream_->set_verify_callback(ssl::host_name_verification(url_.host));
    tls_stream_->async_handshake(ssl::stream_base::client,
                                 [self = shared_from_this()](error_code ec) {
                                   if (ec) return self->Finish(ec);
                                   self->connected_ = true;
                                   self->Write();
                                 });
  }

  template <typename F>
  void WithStream(F&& f) {
    if (plain_) {
      f(*plain_);
    } else {
      f(*tls_stream_);
    }
  }

  void Write() {
    WithStream([this](auto& stream) {
      http::async_write(stream, *request_, [self = shared_from_this()](error_code ec, size_t) {
        if (ec) return self->Finish(ec);
        self->Read();
      });
    });
  }

  void Read() {
    parser_.emplace();
    parser_->body_limit(max_response_bytes_);
    WithStream([this](auto& stream) {
      http::async_read(stream, buffer_, *parser_,
                       [self = shared_from_this()](error_code ec, size_t) {
                         if (ec) return self->Finish(ec);
                         auto message = self->parser_->release();
                         UpstreamResponse response;
                         response.status = message.result_int();
                         response.body = std::move(message.body());
                         self->idle_since_ = std::chrono::steady_clock::now();
                         self->Lowest().expires_never();
                         Callback done = std::move(self->done_);
                         done(error_code(), std::move(response), message.keep_alive(), false);
                       });
    });
  }

  void Finish(error_code ec) {
    const bool stale = reused_ && ec != beast::error::timeout && (!parser_ || !parser_->got_some());
    Close();
    parser_.reset();
    Callback done = std::move(done_);
    if (done) done(ec, UpstreamResponse(), false, stale);
  }

  ParsedUrl url_;
  tcp::resolver resolver_;
  asio::steady_timer resolve_timer_;
  size_t max_response_bytes_;
  bool verify_tls_;
  std::optional<beast::tcp_stream> plain_;
  std::optional<beast::ssl_stream<beast::tcp_stream>> tls_stream_;
  beast::flat_buffer buffer_;
  std::optional<http::request<http::string_body>> request_;
  std::optional<http::response_parser<http::string_body>> parser_;
  Callback done_;
  bool connected_ = false;
  bool reused_ = false;  // the exchange in flight began on an open connection
  std::chrono::steady_clock::time_point idle_since_;
};

absl::StatusOr<ParsedUrl> ParseUpstreamUrl(std::string_view url) {
  absl::StatusOr<Url> parsed = ParseUrl(url);
  if (parsed.ok() && parsed->websocket()) {
    return absl::InvalidArgumentError(fmt::format("upstream URL {} is not http(s)://", url));
  }
  return parsed;
}

struct UpstreamPool::Endpoint {
  ParsedUrl url;
  uint32_t weight = 1;
  int64_t current_weight = 0;
  size_t open = 0;
  std::vector<std::shared_ptr<Connection>> idle;
  std::vector<std::weak_ptr<Connection>> all;  // to cut off in-flight ones at Shutdown
  // Attempts waiting for a connection, oldest first, with the time they started waiting.
  std::deque<std::pair<std::shared_ptr<Attempt>, std::chrono::steady_clock::time_point>> waiting;
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
      target_metrics_(metrics->ForUpstream(name_)) {
  for (size_t i = 0; i < endpoints.size(); ++i) {
    auto endpoint = std::make_unique<Endpoint>();
    endpoint->url = urls[i];
    endpoint->weight = std::max<uint32_t>(1, endpoints[i].weight);
    endpoints_.push_back(std::move(endpoint));
  }
}

UpstreamPool::~UpstreamPool() { Shutdown(); }

void UpstreamPool::Shutdown() {
  shut_down_ = true;
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
  const auto now = std::chrono::steady_clock::now();
  while (!endpoint.idle.empty() && !connection) {
    connection = std::move(endpoint.idle.back());
    endpoint.idle.pop_back();
    if (now - connection->idle_since() > ToChrono(options_.max_idle_time) ||
        !connection->Usable()) {
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
    connection = std::make_shared<Connection>(io_context_, endpoint.url, tls_,
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
  raw->Exchange(
      attempt->body, options_.request_timeout,
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
  const auto now = std::chrono::steady_clock::now();
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
