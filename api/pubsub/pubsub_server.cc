#include "api/pubsub/pubsub_server.h"

#include <boost/asio/post.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/websocket.hpp>
#include <deque>

#include "absl/container/flat_hash_map.h"
#include "api/access/access_control.h"
#include "api/jsonrpc/jsonrpc.h"
#include "api/jsonrpc/pubsub_json.h"
#include "api/net/websocket_accept.h"
#include "common/clock.h"
#include "fmt/format.h"
#include "spdlog/spdlog.h"

namespace switchyard {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace websocket = beast::websocket;
using tcp = asio::ip::tcp;
using boost::system::error_code;

// One client connection over `Stream`: beast::tcp_stream (plain) or TlsStream (its handshake
// done). Lives on one worker's thread; every member is touched only there.
template <typename Stream>
class PubsubServer::Session : public PubsubClient,
                              public UpgradedConnection,
                              public std::enable_shared_from_this<Session<Stream>> {
 public:
  Session(size_t thread, tcp::socket socket, PubsubServer* server, ConnectionSlot slot)
      : PubsubClient(thread),
        ws_(std::move(socket)),
        server_(server),
        options_(server->options_),
        metrics_(server->metrics_),
        slot_(std::move(slot)) {}

  Session(size_t thread, std::unique_ptr<TlsConnection> connection, PubsubServer* server,
          ConnectionSlot slot)
      : PubsubClient(thread),
        tls_context_(std::move(connection->context)),
        ws_(std::move(connection->stream)),
        server_(server),
        options_(server->options_),
        metrics_(server->metrics_),
        slot_(std::move(slot)) {}

  ~Session() override { metrics_->connections_open.Add(-1); }

  void Start(std::optional<HttpRequest> upgrade) {
    ws_.set_option(websocket::stream_base::timeout{ToChrono(options_.handshake_timeout),
                                                   ToChrono(options_.idle_timeout), true});
    ws_.read_message_max(options_.max_message_bytes);
    auto on_accept = [self = this->shared_from_this()](error_code ec) {
      if (ec) return self->Close();
      self->open_ = true;
      if (self->draining_) return self->SendClose();
      self->Read();
    };
    AccessControl* access = server_->context_->access();
    if (access == nullptr) {
      AcceptWebSocket(ws_, upgrade, server_->server_->cors(), std::move(on_accept));
      return;
    }
    connection_messages_.Configure(access->options().ws_messages_per_connection);
    auto admit = [this, access](const beast::http::request<beast::http::empty_body>& request)
        -> std::optional<HandshakeRefusal> {
      access_table_ = access->CurrentTable();
      std::optional<std::string_view> header;
      if (auto it = request.find("x-api-key"); it != request.end()) {
        header = std::string_view(it->value().data(), it->value().size());
      }
      bool unauthorized = false;
      key_ = access->AdmitWebSocket(
          access_table_, std::string_view(request.target().data(), request.target().size()), header,
          &unauthorized);
      if (!unauthorized) return std::nullopt;
      return HandshakeRefusal{401,
                              RpcErrorResponse("null", MakeRpcStatus(RpcErrorKind::kUnauthorized)),
                              "application/json"};
    };
    AcceptWebSocket(ws_, upgrade, server_->server_->cors(), std::move(admit), std::move(on_accept));
  }

  void Close() override {
    if (closed()) return;
    MarkClosed();
    error_code ignored;
    beast::get_lowest_layer(ws_).socket().close(ignored);
    queue_.clear();
    queued_bytes_ = 0;
    for (const auto& [id, held] : subscriptions_) {
      metrics_->ClientSubscriptions(held.method->label).Add(-1);
    }
    if (key_ != nullptr) {
      key_->subscriptions->fetch_sub(static_cast<int64_t>(subscriptions_.size()),
                                     std::memory_order_relaxed);
    }
    subscriptions_.clear();
    by_key_.clear();
    server_->router_->RemoveClient(this->shared_from_this());
  }

  // The client gets a close frame (going away) once the message being written is out; the
  // connection closes when it answers, or when the HttpServer cuts it.
  void Drain() override {
    if (closed() || draining_) return;
    draining_ = true;
    while (queue_.size() > (writing_ ? 1 : 0)) {
      queued_bytes_ -= queue_.back()->size();
      queue_.pop_back();
    }
    if (!open_) return;  // the handshake's answer sends the close frame
    if (!writing_) SendClose();
  }

  void Deliver(const std::shared_ptr<const std::string>& message) override { Send(message); }

  void OnSubscribeAnswer(std::string answer, std::string key, size_t shard,
                         const PubsubMethod* method, std::optional<uint64_t> id) override {
    if (closed()) return;
    if (in_flight_ > 0) --in_flight_;
    if (id && !subscriptions_.contains(*id)) {
      subscriptions_[*id] = Held{shard, method, key};
      by_key_[std::move(key)] = *id;
      metrics_->ClientSubscriptions(method->label).Add(1);
      if (key_ != nullptr) key_->subscriptions->fetch_add(1, std::memory_order_relaxed);
    }
    Send(std::make_shared<const std::string>(std::move(answer)));
  }

  void OnSubscriptionClosed(uint64_t id, std::shared_ptr<const std::string> last) override {
    if (closed()) return;
    Forget(id);
    if (last) Send(last);
  }

 private:
  struct Held {
    size_t shard = 0;
    const PubsubMethod* method = nullptr;
    std::string key;
  };

  void Forget(uint64_t id) {
    auto it = subscriptions_.find(id);
    if (it == subscriptions_.end()) return;
    metrics_->ClientSubscriptions(it->second.method->label).Add(-1);
    if (key_ != nullptr) key_->subscriptions->fetch_sub(1, std::memory_order_relaxed);
    by_key_.erase(it->second.key);
    subscriptions_.erase(it);
  }

  void Read() {
    ws_.async_read(buffer_, [self = this->shared_from_this()](error_code ec, size_t size) {
      if (ec) {
        // Beast has sent the close frame with the code that fits (1009, 1007, 1002).
        if (ec == websocket::error::message_too_big) {
          self->metrics_->client_oversized_messages.Increment();
        } else if (ec == websocket::condition::protocol_violation) {
          self->metrics_->client_protocol_errors.Increment();
        }
        return self->Close();
      }
      if (self->closed()) return;
      const auto* data = static_cast<const char*>(self->buffer_.data().data());
      if (!self->draining_) self->OnMessage(std::string_view(data, size));
      self->buffer_.consume(size);
      if (!self->closed()) self->Read();
    });
  }

  void Answer(std::string text) { Send(std::make_shared<const std::string>(std::move(text))); }

  void OnMessage(std::string_view text) {
    metrics_->client_messages.Increment();
    absl::StatusOr<RpcBody> body = ParseRpcBody(text, RpcCodecOptions{});
    if (!body.ok()) {
      metrics_->client_bad_messages.Increment();
      return Answer(RpcErrorResponse("null", body.status()));
    }
    if (body->batch) {
      metrics_->client_bad_messages.Increment();
      return Answer(
          RpcErrorResponse("null", MakeRpcStatus(RpcErrorKind::kInvalidRequest,
                                                 "batch requests are not supported over pubsub")));
    }
    const RpcCall& call = body->calls[0];
    if (!call.error.ok()) {
      metrics_->client_bad_messages.Increment();
      return Answer(RpcErrorResponse(call.id_or_null(), call.error));
    }
    if (key_ != nullptr && OverMessageLimit()) {
      server_->context_->access()->ws_limited_messages().Increment();
      if (call.is_notification()) return;
      return Answer(RpcErrorResponse(call.id_or_null(), MakeRpcStatus(RpcErrorKind::kRateLimited)));
    }
    if (call.is_notification()) return;  // nothing to answer
    const std::string id(call.id_or_null());
    if (const PubsubMethod* method = FindSubscribeMethod(call.method)) {
      absl::StatusOr<SubscribeParams> params = ParseSubscribeParams(*method, call.params);
      if (!params.ok()) return Answer(RpcErrorResponse(id, params.status()));
      std::string key = fmt::format("{}:{}", method->subscribe, params->params);
      if (auto it = by_key_.find(key); it != by_key_.end()) {
        return Answer(RpcResultResponse(id, std::to_string(it->second)));
      }
      if (subscriptions_.size() + in_flight_ >= options_.max_subscriptions_per_connection) {
        metrics_->subscription_limit_rejections.Increment();
        return Answer(RpcErrorResponse(
            id, MakeRpcStatus(RpcErrorKind::kInvalidRequest,
                              fmt::format("this connection has the maximum of {} subscriptions",
                                          options_.max_subscriptions_per_connection))));
      }
      if (key_ != nullptr && key_->max_subscriptions > 0 &&
          key_->subscriptions->load(std::memory_order_relaxed) + static_cast<int64_t>(in_flight_) >=
              static_cast<int64_t>(key_->max_subscriptions)) {
        server_->context_->access()->ws_subscription_limit().Increment();
        return Answer(RpcErrorResponse(
            id, MakeRpcStatus(RpcErrorKind::kRateLimited,
                              fmt::format("this API key has the maximum of {} subscriptions",
                                          key_->max_subscriptions))));
      }
      ++in_flight_;
      SubscribeRequest request;
      request.method = method;
      request.params = *std::move(params);
      request.key = std::move(key);
      request.request_id = id;
      server_->router_->Subscribe(this->shared_from_this(), std::move(request));
      return;
    }
    if (FindUnsubscribeMethod(call.method) != nullptr) {
      absl::StatusOr<uint64_t> sub = ParseUnsubscribeParams(call.params);
      if (!sub.ok()) return Answer(RpcErrorResponse(id, sub.status()));
      auto it = subscriptions_.find(*sub);
      if (it == subscriptions_.end()) {
        return Answer(RpcErrorResponse(
            id, MakeRpcStatus(RpcErrorKind::kInvalidParams, "Invalid subscription id.")));
      }
      server_->router_->Unsubscribe(this->shared_from_this(), it->second.shard, *sub);
      Forget(*sub);
      return Answer(RpcResultResponse(id, "true"));
    }
    return Answer(RpcErrorResponse(
        id,
        MakeRpcStatus(RpcErrorKind::kMethodNotFound,
                      fmt::format("Method not found: {} is not a pubsub method", call.method))));
  }

  // Takes one message from the connection's bucket and the key's.
  bool OverMessageLimit() {
    const int64_t now = server_->context_->access()->NowNanos();
    if (connection_messages_.enabled() && connection_messages_.Take(now, 1) > 0) return true;
    return key_->ws_messages && key_->ws_messages->Take(now, 1) > 0;
  }

  void SendClose() {
    ws_.async_close(websocket::close_code::going_away,
                    [self = this->shared_from_this()](error_code) { self->Close(); });
  }

  void Send(std::shared_ptr<const std::string> message) {
    if (closed() || draining_) return;
    if (queue_.size() >= options_.max_send_queue_messages ||
        queued_bytes_ + message->size() > options_.max_send_queue_bytes) {
      // The client does not read: keeping its messages would grow without a bound.
      metrics_->slow_consumers.Increment();
      spdlog::warn("pubsub: disconnecting a slow consumer ({} messages, {} bytes queued)",
                   queue_.size(), queued_bytes_);
      return Close();
    }
    queued_bytes_ += message->size();
    queue_.push_back(std::move(message));
    if (!writing_) Write();
  }

  void Write() {
    writing_ = true;
    ws_.text(true);
    ws_.async_write(asio::buffer(*queue_.front()),
                    [self = this->shared_from_this()](error_code ec, size_t) {
                      self->writing_ = false;
                      if (ec) return self->Close();
                      if (self->closed() || self->queue_.empty()) return;
                      self->queued_bytes_ -= self->queue_.front()->size();
                      self->queue_.pop_front();
                      if (self->draining_) return self->SendClose();
                      if (!self->queue_.empty()) self->Write();
                    });
  }

  std::shared_ptr<asio::ssl::context> tls_context_;  // TLS: what ws_ was made with, before it
  websocket::stream<Stream> ws_;
  PubsubServer* const server_;
  const PubsubServerOptions& options_;
  PubsubMetrics* const metrics_;
  beast::flat_buffer buffer_;
  std::deque<std::shared_ptr<const std::string>> queue_;
  size_t queued_bytes_ = 0;
  bool writing_ = false;
  size_t in_flight_ = 0;  // subscribe calls not answered yet
  absl::flat_hash_map<uint64_t, Held> subscriptions_;
  absl::flat_hash_map<std::string, uint64_t> by_key_;
  bool open_ = false;      // the handshake is done
  bool draining_ = false;  // the HttpServer stops: a close frame, then nothing more
  ConnectionSlot slot_;    // counts this connection against the HttpServer's limit
  // With access control: the key table of the handshake, which keeps key_ alive, the key
  // (the anonymous one for a client without a key) and the connection's message bucket.
  std::shared_ptr<const AccessControl::Table> access_table_;
  const AccessControl::Key* key_ = nullptr;
  TokenBucket connection_messages_;
};

PubsubServer::PubsubServer(PubsubServerOptions options, RouterContext* context,
                           PubsubMetrics* metrics)
    : options_(std::move(options)), context_(context), metrics_(metrics) {}

PubsubServer::~PubsubServer() = default;

absl::Status PubsubServer::Attach(HttpServer* server) {
  if (router_) return absl::FailedPreconditionError("PubsubServer already attached");
  std::vector<asio::io_context*> contexts;
  for (size_t i = 0; i < server->worker_count(); ++i)
    contexts.push_back(&server->worker_context(i));
  absl::StatusOr<std::unique_ptr<PubsubRouter>> router =
      PubsubRouter::Create(options_.router, context_, metrics_, std::move(contexts));
  if (!router.ok()) return router.status();
  router_ = *std::move(router);
  router_->Start();
  server_ = server;
  server->SetUpgradeHandler(this, options_.max_connections);
  if (options_.port) listener_ = server->AddUpgradeListener(*options_.port);
  return absl::OkStatus();
}

uint16_t PubsubServer::port() const {
  return server_ != nullptr && listener_ ? server_->port(*listener_) : 0;
}

std::shared_ptr<UpgradedConnection> PubsubServer::Adopt(size_t worker, tcp::socket socket,
                                                        std::optional<HttpRequest> upgrade,
                                                        ConnectionSlot slot) {
  metrics_->connections_accepted.Increment();
  if (upgrade) metrics_->connections_upgraded.Increment();
  metrics_->connections_open.Add(1);
  error_code ignored;
  socket.set_option(tcp::no_delay(true), ignored);
  if (options_.socket_send_buffer_bytes > 0) {
    socket.set_option(asio::socket_base::send_buffer_size(options_.socket_send_buffer_bytes),
                      ignored);
  }
  auto session = std::make_shared<Session<beast::tcp_stream>>(worker, std::move(socket), this,
                                                              std::move(slot));
  session->Start(std::move(upgrade));
  return session;
}

std::shared_ptr<UpgradedConnection> PubsubServer::AdoptTls(
    size_t worker, std::unique_ptr<TlsConnection> connection, std::optional<HttpRequest> upgrade,
    ConnectionSlot slot) {
  metrics_->connections_accepted.Increment();
  if (upgrade) metrics_->connections_upgraded.Increment();
  metrics_->connections_open.Add(1);
  if (options_.socket_send_buffer_bytes > 0) {
    error_code ignored;
    beast::get_lowest_layer(connection->stream)
        .socket()
        .set_option(asio::socket_base::send_buffer_size(options_.socket_send_buffer_bytes),
                    ignored);
  }
  auto session =
      std::make_shared<Session<TlsStream>>(worker, std::move(connection), this, std::move(slot));
  session->Start(std::move(upgrade));
  return session;
}

void PubsubServer::OnRefused() { metrics_->connections_rejected.Increment(); }

void PubsubServer::Shutdown(size_t worker) {
  if (router_) router_->ShutdownShard(worker);
}

// Every worker has stopped: the shards and their connections go while the io_contexts they
// live on still exist.
void PubsubServer::Stopped() { router_.reset(); }

}  // namespace switchyard
