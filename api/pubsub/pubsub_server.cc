#include "api/pubsub/pubsub_server.h"

#include <pthread.h>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/post.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/websocket.hpp>
#include <deque>

#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/notification.h"
#include "api/jsonrpc/jsonrpc.h"
#include "api/jsonrpc/pubsub_json.h"
#include "common/clock.h"
#include "common/cpu.h"
#include "fmt/format.h"
#include "spdlog/spdlog.h"

namespace switchyard {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace websocket = beast::websocket;
using tcp = asio::ip::tcp;
using boost::system::error_code;

struct PubsubServer::Worker {
  asio::io_context io_context{1};
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> guard;
  std::vector<std::weak_ptr<Session>> sessions;  // touched only on this worker's thread
  std::thread thread;
};

// One client connection. Lives on one worker's thread; every member is touched only there.
class PubsubServer::Session : public PubsubClient, public std::enable_shared_from_this<Session> {
 public:
  Session(size_t thread, tcp::socket socket, PubsubServer* server)
      : PubsubClient(thread),
        ws_(std::move(socket)),
        server_(server),
        options_(server->options_),
        metrics_(server->metrics_) {}

  ~Session() override { server_->OnSessionClosed(); }

  void Start(std::optional<HttpRequest> upgrade) {
    ws_.set_option(websocket::stream_base::timeout{ToChrono(options_.handshake_timeout),
                                                   ToChrono(options_.idle_timeout), true});
    ws_.read_message_max(options_.max_message_bytes);
    auto on_accept = [self = shared_from_this()](error_code ec) {
      if (ec) return self->Close();
      self->Read();
    };
    if (!upgrade) {
      ws_.async_accept(std::move(on_accept));
      return;
    }
    http::request<http::empty_body> request;
    request.method_string(upgrade->method);
    request.target(upgrade->target);
    request.version(11);
    for (const auto& [name, value] : upgrade->headers) request.insert(name, value);
    ws_.async_accept(request, std::move(on_accept));
  }

  void Close() {
    if (closed()) return;
    MarkClosed();
    error_code ignored;
    beast::get_lowest_layer(ws_).socket().close(ignored);
    queue_.clear();
    queued_bytes_ = 0;
    for (const auto& [id, held] : subscriptions_) {
      metrics_->ClientSubscriptions(held.method->label).Add(-1);
    }
    subscriptions_.clear();
    by_key_.clear();
    server_->router_->RemoveClient(shared_from_this());
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
    by_key_.erase(it->second.key);
    subscriptions_.erase(it);
  }

  void Read() {
    ws_.async_read(buffer_, [self = shared_from_this()](error_code ec, size_t size) {
      if (ec) return self->Close();
      if (self->closed()) return;
      const auto* data = static_cast<const char*>(self->buffer_.data().data());
      self->OnMessage(std::string_view(data, size));
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
      ++in_flight_;
      SubscribeRequest request;
      request.method = method;
      request.params = *std::move(params);
      request.key = std::move(key);
      request.request_id = id;
      server_->router_->Subscribe(shared_from_this(), std::move(request));
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
      server_->router_->Unsubscribe(shared_from_this(), it->second.shard, *sub);
      Forget(*sub);
      return Answer(RpcResultResponse(id, "true"));
    }
    return Answer(RpcErrorResponse(
        id,
        MakeRpcStatus(RpcErrorKind::kMethodNotFound,
                      fmt::format("Method not found: {} is not a pubsub method", call.method))));
  }

  void Send(std::shared_ptr<const std::string> message) {
    if (closed()) return;
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
                    [self = shared_from_this()](error_code ec, size_t) {
                      self->writing_ = false;
                      if (ec) return self->Close();
                      if (self->closed() || self->queue_.empty()) return;
                      self->queued_bytes_ -= self->queue_.front()->size();
                      self->queue_.pop_front();
                      if (!self->queue_.empty()) self->Write();
                    });
  }

  websocket::stream<beast::tcp_stream> ws_;
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
};

PubsubServer::PubsubServer(PubsubServerOptions options, RouterContext* context,
                           PubsubMetrics* metrics)
    : options_(std::move(options)), context_(context), metrics_(metrics) {
  size_t threads = options_.threads;
  if (threads == 0) threads = UsableCpuCount();
  for (size_t i = 0; i < threads; ++i) workers_.push_back(std::make_unique<Worker>());
}

PubsubServer::~PubsubServer() { Stop(); }

absl::Status PubsubServer::Start() {
  if (started_) return absl::FailedPreconditionError("PubsubServer already started");
  std::vector<asio::io_context*> contexts;
  for (auto& worker : workers_) contexts.push_back(&worker->io_context);
  absl::StatusOr<std::unique_ptr<PubsubRouter>> router =
      PubsubRouter::Create(options_.router, context_, metrics_, std::move(contexts));
  if (!router.ok()) return router.status();
  router_ = *std::move(router);
  if (options_.port) {
    error_code ec;
    const asio::ip::address address = asio::ip::make_address(options_.address, ec);
    if (ec)
      return absl::InvalidArgumentError(fmt::format("bad listen address {}", options_.address));
    acceptor_ = std::make_unique<tcp::acceptor>(workers_[0]->io_context);
    const tcp::endpoint endpoint(address, *options_.port);
    acceptor_->open(endpoint.protocol(), ec);
    if (!ec) acceptor_->set_option(asio::socket_base::reuse_address(true), ec);
    if (!ec) acceptor_->bind(endpoint, ec);
    if (!ec) acceptor_->listen(asio::socket_base::max_listen_connections, ec);
    if (ec) {
      return absl::UnavailableError(fmt::format("cannot listen on {}:{}: {}", options_.address,
                                                *options_.port, ec.message()));
    }
    port_ = acceptor_->local_endpoint().port();
  }
  router_->Start();
  for (auto& worker : workers_) worker->guard.emplace(worker->io_context.get_executor());
  started_ = true;
  if (acceptor_) asio::post(workers_[0]->io_context, [this] { Accept(); });
  for (size_t i = 0; i < workers_.size(); ++i) {
    workers_[i]->thread = std::thread([w = workers_[i].get(), i] {
      // Named for top -H and for the load harness's CPU accounting.
      pthread_setname_np(pthread_self(), fmt::format("sy-pubsub-{}", i).c_str());
      w->io_context.run();
    });
  }
  return absl::OkStatus();
}

bool PubsubServer::Admit() {
  if (stopping_) return false;
  if (live_sessions_.fetch_add(1) >= options_.max_connections) {
    live_sessions_.fetch_sub(1);
    metrics_->connections_rejected.Increment();
    return false;
  }
  metrics_->connections_accepted.Increment();
  metrics_->connections_open.Add(1);
  return true;
}

void PubsubServer::OnSessionClosed() {
  live_sessions_.fetch_sub(1);
  metrics_->connections_open.Add(-1);
}

void PubsubServer::Accept() {
  const size_t index = next_worker_.fetch_add(1) % workers_.size();
  acceptor_->async_accept(workers_[index]->io_context,
                          [this, index](error_code ec, tcp::socket socket) {
                            if (ec == asio::error::operation_aborted || stopping_) return;
                            if (!ec) {
                              if (Admit()) {
                                Adopt(index, std::move(socket), std::nullopt);
                              } else {
                                error_code ignored;
                                socket.close(ignored);
                              }
                            }
                            Accept();
                          });
}

void PubsubServer::Adopt(size_t index, tcp::socket socket, std::optional<HttpRequest> upgrade) {
  Worker* worker = workers_[index].get();
  asio::post(worker->io_context, [this, index, worker, socket = std::move(socket),
                                  upgrade = std::move(upgrade)]() mutable {
    error_code ignored;
    socket.set_option(tcp::no_delay(true), ignored);
    if (options_.socket_send_buffer_bytes > 0) {
      socket.set_option(asio::socket_base::send_buffer_size(options_.socket_send_buffer_bytes),
                        ignored);
    }
    auto session = std::make_shared<Session>(index, std::move(socket), this);
    std::erase_if(worker->sessions, [](const auto& weak) { return weak.expired(); });
    worker->sessions.push_back(session);
    if (stopping_) return session->Close();
    session->Start(std::move(upgrade));
  });
}

HttpServer::UpgradeHandler PubsubServer::UpgradeHandler() {
  return [this](tcp::socket socket, HttpRequest request) {
    if (!started_ || !Admit()) {
      error_code ignored;
      socket.close(ignored);
      return;
    }
    metrics_->connections_upgraded.Increment();
    // The socket belongs to an HTTP worker's io_context: move its descriptor to one of ours.
    error_code ec;
    const tcp::endpoint local = socket.local_endpoint(ec);
    const tcp::socket::native_handle_type handle = ec ? -1 : socket.release(ec);
    if (ec || handle < 0) {
      socket.close(ec);
      OnSessionClosed();
      return;
    }
    const size_t index = next_worker_.fetch_add(1) % workers_.size();
    tcp::socket adopted(workers_[index]->io_context);
    adopted.assign(local.protocol(), handle, ec);
    if (ec) {
      OnSessionClosed();
      return;
    }
    Adopt(index, std::move(adopted), std::move(request));
  };
}

void PubsubServer::Stop() {
  if (!started_) return;
  started_ = false;
  stopping_ = true;
  if (acceptor_) {
    absl::Notification closed;
    asio::post(workers_[0]->io_context, [this, &closed] {
      error_code ignored;
      acceptor_->close(ignored);
      closed.Notify();
    });
    closed.WaitForNotificationWithTimeout(absl::Seconds(5));
  }
  router_->Shutdown();
  for (auto& worker : workers_) {
    asio::post(worker->io_context, [w = worker.get()] {
      for (auto& weak : w->sessions) {
        if (auto session = weak.lock()) session->Close();
      }
      w->sessions.clear();
      w->guard.reset();
    });
  }
  for (auto& worker : workers_) {
    if (worker->thread.joinable()) worker->thread.join();
  }
  acceptor_.reset();
  router_.reset();
}

}  // namespace switchyard
