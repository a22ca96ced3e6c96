#include "api/upstream/pubsub_upstream.h"

#include <openssl/ssl.h>

#include <algorithm>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/ssl.hpp>
#include <boost/beast/websocket.hpp>
#include <boost/beast/websocket/ssl.hpp>

#include "common/clock.h"
#include "fmt/format.h"

namespace switchyard {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace websocket = beast::websocket;
namespace ssl = asio::ssl;
using tcp = asio::ip::tcp;
using boost::system::error_code;

// The sockets of one connection attempt; replaced on each attempt.
struct PubsubUpstream::Streams {
  explicit Streams(asio::io_context& io_context)
      : resolver(io_context),
        connect_timer(io_context),
        call_timer(io_context),
        retry_timer(io_context) {}

  beast::tcp_stream& Lowest() {
    return plain ? beast::get_lowest_layer(*plain) : beast::get_lowest_layer(*secure);
  }
  template <typename F>
  void With(F&& f) {
    if (plain) {
      f(*plain);
    } else {
      f(*secure);
    }
  }
  void CloseSockets() {
    error_code ignored;
    resolver.cancel();
    connect_timer.cancel();
    if (plain || secure) Lowest().socket().close(ignored);
  }

  tcp::resolver resolver;
  asio::steady_timer connect_timer;
  asio::steady_timer call_timer;
  asio::steady_timer retry_timer;
  std::optional<websocket::stream<beast::tcp_stream>> plain;
  std::optional<websocket::stream<beast::ssl_stream<beast::tcp_stream>>> secure;
  beast::flat_buffer buffer;
};

PubsubUpstream::PubsubUpstream(asio::io_context& io_context, std::string target,
                               std::vector<WsEndpoint> endpoints,
                               const PubsubUpstreamOptions& options, ssl::context* tls,
                               Listener* listener)
    : io_context_(io_context),
      target_(std::move(target)),
      endpoints_(std::move(endpoints)),
      options_(options),
      tls_(tls),
      listener_(listener),
      streams_(std::make_unique<Streams>(io_context)) {}

PubsubUpstream::~PubsubUpstream() = default;

void PubsubUpstream::Start() {
  if (state_ == State::kOpen || state_ == State::kConnecting || state_ == State::kWaiting ||
      state_ == State::kClosed) {
    return;
  }
  failing_since_.reset();
  attempts_ = 0;
  Connect();
}

void PubsubUpstream::Connect() {
  state_ = State::kConnecting;
  const uint64_t generation = ++generation_;
  if (endpoints_.empty()) {
    OnConnectFailed(generation, absl::UnavailableError("no pubsub endpoint"));
    return;
  }
  const WsEndpoint& endpoint = endpoints_[endpoint_index_ % endpoints_.size()];
  if (endpoint.tls && tls_ == nullptr) {
    OnConnectFailed(generation, absl::UnavailableError("wss:// needs a TLS context"));
    return;
  }
  streams_->CloseSockets();
  streams_->plain.reset();
  streams_->secure.reset();
  streams_->buffer.clear();
  if (endpoint.tls) {
    streams_->secure.emplace(io_context_, *tls_);
  } else {
    streams_->plain.emplace(io_context_);
  }
  ArmConnectTimer(generation);
  ResolveAndConnect(generation, endpoint);
}

void PubsubUpstream::ArmConnectTimer(uint64_t generation) {
  streams_->connect_timer.expires_after(ToChrono(options_.connect_timeout));
  streams_->connect_timer.async_wait([self = shared_from_this(), generation](error_code ec) {
    if (ec || generation != self->generation_ || self->state_ != State::kConnecting) return;
    // Cancels whichever step is running; its handler reports the failure.
    error_code ignored;
    self->streams_->resolver.cancel();
    self->streams_->Lowest().socket().close(ignored);
  });
}

void PubsubUpstream::ResolveAndConnect(uint64_t generation, const WsEndpoint& endpoint) {
  streams_->resolver.async_resolve(
      endpoint.host, endpoint.port,
      [self = shared_from_this(), generation, &endpoint](error_code ec,
                                                         tcp::resolver::results_type results) {
        if (generation != self->generation_) return;
        if (ec) {
          return self->OnConnectFailed(
              generation, absl::UnavailableError(fmt::format("resolve: {}", ec.message())));
        }
        asio::async_connect(
            self->streams_->Lowest().socket(), results,
            [self, generation, &endpoint](error_code ec, const tcp::endpoint&) {
              if (generation != self->generation_) return;
              if (ec) {
                return self->OnConnectFailed(
                    generation, absl::UnavailableError(fmt::format("connect: {}", ec.message())));
              }
              self->OnSocketConnected(generation, endpoint);
            });
      });
}

void PubsubUpstream::OnSocketConnected(uint64_t generation, const WsEndpoint& endpoint) {
  error_code ignored;
  streams_->Lowest().socket().set_option(tcp::no_delay(true), ignored);
  if (!streams_->secure) return HandshakeWebsocket(generation, endpoint);
  auto& tls_stream = streams_->secure->next_layer();
  if (!SSL_set_tlsext_host_name(tls_stream.native_handle(), endpoint.host.c_str())) {
    return OnConnectFailed(generation, absl::UnavailableError("TLS SNI"));
  }
  if (options_.verify_tls) {
    tls_stream.set_verify_callback(ssl::host_name_verification(endpoint.host));
  }
  tls_stream.async_handshake(
      ssl::stream_base::client, [self = shared_from_this(), generation, &endpoint](error_code ec) {
        if (generation != self->generation_) return;
        if (ec) {
          return self->OnConnectFailed(
              generation, absl::UnavailableError(fmt::format("TLS handshake: {}", ec.message())));
        }
        self->HandshakeWebsocket(generation, endpoint);
      });
}

void PubsubUpstream::HandshakeWebsocket(uint64_t generation, const WsEndpoint& endpoint) {
  streams_->With([this, generation, &endpoint](auto& ws) {
    ws.set_option(websocket::stream_base::timeout{ToChrono(options_.connect_timeout),
                                                  websocket::stream_base::none(), false});
    ws.read_message_max(options_.max_message_bytes);
    ws.async_handshake(endpoint.HostHeader(), endpoint.path,
                       [self = shared_from_this(), generation](error_code ec) {
                         if (generation != self->generation_) return;
                         if (ec) {
                           return self->OnConnectFailed(
                               generation,
                               absl::UnavailableError(fmt::format("handshake: {}", ec.message())));
                         }
                         self->OnConnected(generation);
                       });
  });
}

void PubsubUpstream::OnConnected(uint64_t generation) {
  if (generation != generation_ || state_ != State::kConnecting) return;
  streams_->connect_timer.cancel();
  streams_->With([this](auto& ws) {
    websocket::stream_base::timeout timeout{ToChrono(options_.connect_timeout),
                                            ToChrono(options_.idle_timeout), true};
    ws.set_option(timeout);
    ws.text(true);
  });
  state_ = State::kOpen;
  attempts_ = 0;
  failing_since_.reset();
  const bool reconnected = ever_opened_;
  ever_opened_ = true;
  Read();
  listener_->OnUpstreamOpen(*this, reconnected);
}

void PubsubUpstream::OnConnectFailed(uint64_t generation, const absl::Status& why) {
  if (generation != generation_ || state_ != State::kConnecting) return;
  streams_->CloseSockets();
  const auto now = std::chrono::steady_clock::now();
  if (!failing_since_) failing_since_ = now;
  ++attempts_;
  ++endpoint_index_;
  if (now - *failing_since_ >= ToChrono(options_.reconnect_give_up)) {
    state_ = State::kFailed;
    FailCalls(absl::UnavailableError(fmt::format("upstream {} unreachable", target_)));
    listener_->OnUpstreamFailed(
        *this, absl::UnavailableError(fmt::format(
                   "pubsub upstream {} unreachable for {}: {}", target_,
                   absl::FormatDuration(options_.reconnect_give_up), std::string(why.message()))));
    return;
  }
  Retry();
}

void PubsubUpstream::Retry() {
  state_ = State::kWaiting;
  absl::Duration backoff = options_.reconnect_initial_backoff;
  for (int i = 1; i < attempts_ && backoff < options_.reconnect_max_backoff; ++i) backoff *= 2;
  backoff = std::min(backoff, options_.reconnect_max_backoff);
  const uint64_t generation = ++generation_;
  streams_->retry_timer.expires_after(ToChrono(backoff));
  streams_->retry_timer.async_wait([self = shared_from_this(), generation](error_code ec) {
    if (ec || generation != self->generation_ || self->state_ != State::kWaiting) return;
    self->Connect();
  });
}

void PubsubUpstream::Lose(const absl::Status& why) {
  if (state_ != State::kOpen) return;
  ++generation_;
  streams_->CloseSockets();
  write_queue_.clear();
  writing_ = false;
  failing_since_ = std::chrono::steady_clock::now();
  attempts_ = 0;
  state_ = State::kWaiting;
  FailCalls(absl::UnavailableError(fmt::format("upstream {} lost", target_)));
  listener_->OnUpstreamLost(*this, why);
  if (state_ == State::kWaiting) Retry();
}

void PubsubUpstream::Close() {
  state_ = State::kClosed;
  ++generation_;
  streams_->CloseSockets();
  streams_->call_timer.cancel();
  streams_->retry_timer.cancel();
  write_queue_.clear();
  calls_.clear();
}

void PubsubUpstream::Read() {
  const uint64_t generation = generation_;
  streams_->With([this, generation](auto& ws) {
    ws.async_read(
        streams_->buffer, [self = shared_from_this(), generation](error_code ec, size_t size) {
          if (generation != self->generation_) return;
          if (ec) {
            return self->Lose(absl::UnavailableError(fmt::format("read: {}", ec.message())));
          }
          self->OnMessage(size);
          if (generation == self->generation_ && self->state_ == State::kOpen) {
            self->Read();
          }
        });
  });
}

void PubsubUpstream::OnMessage(size_t size) {
  beast::flat_buffer& buffer = streams_->buffer;
  // simdjson reads up to SIMDJSON_PADDING bytes past the message: make room for them.
  buffer.prepare(simdjson::SIMDJSON_PADDING);
  const char* data = static_cast<const char*>(buffer.data().data());
  absl::StatusOr<UpstreamMessage> parsed =
      ParseUpstreamMessage(parser_, data, size, size + simdjson::SIMDJSON_PADDING);
  const uint64_t generation = generation_;
  if (parsed.ok() && parsed->kind == UpstreamMessage::Kind::kNotification) {
    listener_->OnUpstreamNotification(*this, std::string_view(data, size), *parsed);
  } else if (parsed.ok()) {
    auto it = calls_.find(*parsed->id);
    if (it != calls_.end()) {
      AnswerCallback done = std::move(it->second.done);
      calls_.erase(it);
      Answer answer;
      answer.result.assign(data + parsed->result_offset, parsed->result_size);
      answer.error.assign(data + parsed->error_offset, parsed->error_size);
      if (done) done(std::move(answer));
    }
  }
  // A callback may have closed the connection (and cleared the buffer with a new attempt).
  if (generation == generation_) buffer.consume(size);
}

void PubsubUpstream::Call(std::string_view method, std::string_view params, AnswerCallback done) {
  if (state_ != State::kOpen) {
    if (done) {
      asio::post(io_context_, [done = std::move(done), target = target_] {
        done(absl::UnavailableError(fmt::format("upstream {} is not connected", target)));
      });
    }
    return;
  }
  const uint64_t id = next_call_id_++;
  write_queue_.push_back(fmt::format(R"({{"jsonrpc":"2.0","id":{},"method":"{}","params":{}}})", id,
                                     method, params.empty() ? "[]" : params));
  if (done) {
    calls_[id] = PendingCall{std::move(done),
                             std::chrono::steady_clock::now() + ToChrono(options_.call_timeout)};
    if (!sweeping_) SweepCalls();
  }
  if (!writing_) WriteNext();
}

void PubsubUpstream::WriteNext() {
  if (write_queue_.empty() || state_ != State::kOpen) {
    writing_ = false;
    return;
  }
  writing_ = true;
  const uint64_t generation = generation_;
  streams_->With([this, generation](auto& ws) {
    ws.async_write(asio::buffer(write_queue_.front()), [self = shared_from_this(), generation](
                                                           error_code ec, size_t) {
      if (generation != self->generation_) return;
      if (ec) {
        return self->Lose(absl::UnavailableError(fmt::format("write: {}", ec.message())));
      }
      self->write_queue_.pop_front();
      self->WriteNext();
    });
  });
}

void PubsubUpstream::FailCalls(const absl::Status& why) {
  auto calls = std::move(calls_);
  calls_.clear();
  for (auto& [id, call] : calls) {
    if (call.done) {
      asio::post(io_context_, [done = std::move(call.done), why] { done(why); });
    }
  }
}

void PubsubUpstream::SweepCalls() {
  sweeping_ = true;
  streams_->call_timer.expires_after(
      std::max(ToChrono(options_.call_timeout) / 4,
               std::chrono::steady_clock::duration(std::chrono::milliseconds(20))));
  streams_->call_timer.async_wait([self = shared_from_this()](error_code ec) {
    self->sweeping_ = false;
    if (ec || self->state_ == State::kClosed) return;
    const auto now = std::chrono::steady_clock::now();
    std::vector<AnswerCallback> expired;
    for (auto it = self->calls_.begin(); it != self->calls_.end();) {
      if (it->second.deadline <= now) {
        expired.push_back(std::move(it->second.done));
        self->calls_.erase(it++);
      } else {
        ++it;
      }
    }
    if (!self->calls_.empty()) self->SweepCalls();
    for (auto& done : expired) {
      done(absl::DeadlineExceededError(
          fmt::format("upstream {} did not answer in time", self->target_)));
    }
  });
}

}  // namespace switchyard
