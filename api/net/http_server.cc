#include "api/net/http_server.h"

#include <pthread.h>
#include <sys/socket.h>

#include <boost/asio/bind_executor.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/websocket/rfc6455.hpp>
#include <chrono>
#include <deque>

#include "absl/strings/ascii.h"
#include "common/clock.h"
#include "common/cpu.h"
#include "fmt/format.h"

namespace switchyard {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using boost::system::error_code;

std::optional<std::string_view> HttpRequest::Header(std::string_view name) const {
  for (const auto& [key, value] : headers) {
    if (key.size() == name.size() &&
        std::equal(key.begin(), key.end(), name.begin(), [](char a, char b) {
          return absl::ascii_tolower(static_cast<unsigned char>(a)) ==
                 absl::ascii_tolower(static_cast<unsigned char>(b));
        })) {
      return std::string_view(value);
    }
  }
  return std::nullopt;
}

namespace {

// The worker the calling thread is, set once when a worker thread starts.
thread_local const HttpServer* tls_server = nullptr;
thread_local size_t tls_worker = 0;

using ReusePort = asio::detail::socket_option::boolean<SOL_SOCKET, SO_REUSEPORT>;

}  // namespace

ConnectionSlot& ConnectionSlot::operator=(ConnectionSlot&& other) noexcept {
  if (this != &other) {
    if (server_ != nullptr) server_->ReleaseUpgraded();
    server_ = std::exchange(other.server_, nullptr);
  }
  return *this;
}

ConnectionSlot::~ConnectionSlot() {
  if (server_ != nullptr) server_->ReleaseUpgraded();
}

struct HttpServer::Worker {
  asio::io_context io_context{1};
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> guard;
  std::unique_ptr<RequestHandler> handler;
  // Touched only on this worker's thread once it runs.
  std::vector<std::unique_ptr<tcp::acceptor>> acceptors;  // one per listener
  std::vector<std::weak_ptr<Session>> sessions;
  std::vector<std::weak_ptr<UpgradedConnection>> upgraded;
  std::thread thread;
};

// One client connection. Lives on one worker's thread; every member is touched only there.
class HttpServer::Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket socket, const HttpServerOptions& options, RequestHandler* handler,
          ApiMetrics* metrics, HttpServer* server)
      : socket_(std::move(socket)),
        options_(options),
        handler_(handler),
        metrics_(metrics),
        server_(server),
        read_timer_(socket_.get_executor()),
        write_timer_(socket_.get_executor()) {}

  ~Session() {
    metrics_->connections_open.Add(-1);
    server_->OnSessionClosed();
  }

  void Start() { ReadNext(); }
  void ForceClose() { Close(); }

  // Stops reading; the connection closes once the answers it owes are written.
  void Drain() {
    read_closed_ = true;
    if (phase_ == Phase::kIdle) {
      error_code ignored;
      socket_.cancel(ignored);
    }
    if (queue_.empty() && !writing_) Close();
  }

 private:
  enum class Phase { kNone, kIdle, kHeader, kBody };
  struct Pending {
    std::optional<http::response<http::string_body>> response;
    bool keep_alive = true;
  };

  void ArmReadTimer(absl::Duration timeout) {
    read_timer_.expires_after(ToChrono(timeout));
    read_timer_.async_wait([self = shared_from_this()](error_code ec) {
      if (ec) return;
      self->metrics_->http_timeouts.Increment();
      self->Close();
    });
  }

  // The idle wait has no deadline while answers are owed: the upstream deadlines bound them.
  void UpdateIdleTimer() {
    if (phase_ != Phase::kIdle) return;
    if (queue_.empty()) {
      ArmReadTimer(options_.idle_timeout);
    } else {
      read_timer_.cancel();
    }
  }

  void ReadNext() {
    if (read_closed_ || closed_ || phase_ != Phase::kNone) return;
    if (queue_.size() >= options_.max_pipelined) return;  // resumed by WriteNext
    if (buffer_.size() > 0) {
      ReadHeader();
      return;
    }
    phase_ = Phase::kIdle;
    UpdateIdleTimer();
    socket_.async_read_some(buffer_.prepare(4096),
                            [self = shared_from_this()](error_code ec, size_t n) {
                              self->phase_ = Phase::kNone;
                              if (ec) {
                                self->read_closed_ = true;
                                if (self->queue_.empty()) self->Close();
                                return;
                              }
                              self->buffer_.commit(n);
                              self->ReadHeader();
                            });
  }

  void ReadHeader() {
    phase_ = Phase::kHeader;
    parser_.emplace();
    parser_->body_limit(options_.max_body_bytes);
    parser_->header_limit(static_cast<uint32_t>(options_.max_header_bytes));
    ArmReadTimer(options_.header_timeout);
    http::async_read_header(
        socket_, buffer_, *parser_,
        [self = shared_from_this()](error_code ec, size_t) { self->OnHeader(ec); });
  }

  void OnHeader(error_code ec) {
    if (ec) {
      OnReadError(ec);
      return;
    }
    if (server_->upgrade_handler_ && queue_.empty() && !writing_ &&
        beast::websocket::is_upgrade(parser_->get())) {
      HandOver();
      return;
    }
    phase_ = Phase::kBody;
    ArmReadTimer(options_.body_timeout);
    // A client that asks may wait for "100 Continue" before it sends the body (curl does for
    // bodies over 1 KiB). Sent only when no answer is being written; otherwise the client
    // sends the body after its own wait.
    if (!writing_ && queue_.empty() && !parser_->is_done() &&
        absl::AsciiStrToLower(std::string(parser_->get()[http::field::expect])) == "100-continue") {
      writing_ = true;
      static constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
      asio::async_write(socket_, asio::buffer(kContinue.data(), kContinue.size()),
                        [self = shared_from_this()](error_code ec, size_t) {
                          self->writing_ = false;
                          if (ec) return self->Close();
                          self->WriteNext();
                        });
    }
    http::async_read(socket_, buffer_, *parser_,
                     [self = shared_from_this()](error_code ec, size_t) { self->OnBody(ec); });
  }

  void OnReadError(error_code ec) {
    phase_ = Phase::kNone;
    read_timer_.cancel();
    if (ec == http::error::body_limit) {
      metrics_->http_body_too_large.Increment();
      QueueLocal(
          413, fmt::format("request body exceeds the limit of {} bytes", options_.max_body_bytes));
    } else if (ec == http::error::header_limit) {
      metrics_->http_bad_requests.Increment();
      QueueLocal(431, "request headers too large");
    } else if (ec != http::error::end_of_stream && ec != asio::error::eof &&
               ec != asio::error::operation_aborted && !closed_) {
      metrics_->http_bad_requests.Increment();
      QueueLocal(400, "malformed HTTP request");
    } else {
      read_closed_ = true;
      if (queue_.empty() && !writing_) Close();
    }
  }

  // Gives the connection to the upgrade handler (bytes read past the request, which a client
  // does not send before the handshake answer, are dropped).
  void HandOver() {
    phase_ = Phase::kNone;
    read_timer_.cancel();
    write_timer_.cancel();
    closed_ = true;
    read_closed_ = true;
    HttpRequest request;
    request.method = std::string(parser_->get().method_string());
    request.target = std::string(parser_->get().target());
    for (const auto& field : parser_->get()) {
      request.headers.emplace_back(std::string(field.name_string()), std::string(field.value()));
    }
    parser_.reset();
    server_->Upgrade(std::move(socket_), std::move(request));
  }

  // Queues an answer the server makes itself, after which the connection closes.
  void QueueLocal(unsigned status, std::string_view reason) {
    read_closed_ = true;
    HttpResponse answer = handler_->LocalAnswer(status, reason);
    auto& pending = queue_.emplace_back();
    pending.keep_alive = false;
    pending.response.emplace(static_cast<http::status>(status), 11);
    pending.response->set(http::field::content_type, answer.content_type);
    for (auto& [name, value] : answer.headers) pending.response->set(name, value);
    pending.response->body() = std::move(answer.body);
    pending.response->keep_alive(false);
    pending.response->prepare_payload();
    WriteNext();
  }

  void OnBody(error_code ec) {
    if (ec) {
      OnReadError(ec);
      return;
    }
    phase_ = Phase::kNone;
    read_timer_.cancel();
    metrics_->http_requests.Increment();
    http::request<http::string_body> message = parser_->release();
    parser_.reset();
    const bool keep_alive = message.keep_alive();
    const unsigned version = message.version();
    queue_.emplace_back();
    Pending* pending = &queue_.back();
    pending->keep_alive = keep_alive;
    if (!keep_alive) read_closed_ = true;

    HttpRequest request;
    request.method = std::string(message.method_string());
    request.target = std::string(message.target());
    for (const auto& field : message) {
      request.headers.emplace_back(std::string(field.name_string()), std::string(field.value()));
    }
    request.body = std::move(message.body());
    handler_->Handle(std::move(request), [self = shared_from_this(), pending, keep_alive,
                                          version](HttpResponse answer) {
      auto& response = pending->response.emplace(static_cast<http::status>(answer.status), version);
      response.set(http::field::content_type, answer.content_type);
      for (auto& [name, value] : answer.headers) response.set(name, value);
      response.body() = std::move(answer.body);
      response.keep_alive(keep_alive);
      response.prepare_payload();
      self->WriteNext();
    });
    ReadNext();
  }

  void WriteNext() {
    if (writing_ || closed_ || queue_.empty() || !queue_.front().response) return;
    writing_ = true;
    write_timer_.expires_after(ToChrono(options_.write_timeout));
    write_timer_.async_wait([self = shared_from_this()](error_code ec) {
      if (ec) return;
      self->metrics_->http_timeouts.Increment();
      self->Close();
    });
    http::async_write(socket_, *queue_.front().response,
                      [self = shared_from_this()](error_code ec, size_t) { self->OnWritten(ec); });
  }

  void OnWritten(error_code ec) {
    writing_ = false;
    write_timer_.cancel();
    if (ec) {
      Close();
      return;
    }
    const bool keep_alive = queue_.front().keep_alive;
    queue_.pop_front();
    if (!keep_alive) {
      error_code ignored;
      socket_.shutdown(tcp::socket::shutdown_send, ignored);
      Close();
      return;
    }
    if (queue_.empty() && read_closed_ && phase_ == Phase::kNone) {
      Close();
      return;
    }
    WriteNext();
    UpdateIdleTimer();
    ReadNext();
  }

  void Close() {
    if (closed_) return;
    closed_ = true;
    read_timer_.cancel();
    write_timer_.cancel();
    error_code ignored;
    socket_.close(ignored);
  }

  tcp::socket socket_;
  const HttpServerOptions& options_;
  RequestHandler* handler_;
  ApiMetrics* metrics_;
  HttpServer* server_;
  asio::steady_timer read_timer_;
  asio::steady_timer write_timer_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  std::deque<Pending> queue_;  // deque: pointers to elements stay valid across push/pop
  Phase phase_ = Phase::kNone;
  bool writing_ = false;
  bool read_closed_ = false;
  bool closed_ = false;
};

HttpServer::HttpServer(HttpServerOptions options, RequestHandlerFactory factory,
                       ApiMetrics* metrics)
    : options_(std::move(options)), factory_(std::move(factory)), metrics_(metrics) {
  size_t threads = options_.threads;
  if (threads == 0) threads = UsableCpuCount();
  for (size_t i = 0; i < threads; ++i) workers_.push_back(std::make_unique<Worker>());
  listeners_.push_back(Listener{options_.port, 0, false});
}

HttpServer::~HttpServer() { Stop(); }

void HttpServer::SetUpgradeHandler(UpgradeHandler* handler, size_t max_connections) {
  upgrade_handler_ = handler;
  max_upgraded_ = max_connections;
}

size_t HttpServer::AddUpgradeListener(uint16_t port) {
  listeners_.push_back(Listener{port, 0, true});
  return listeners_.size() - 1;
}

uint16_t HttpServer::port(size_t listener) const {
  return listener < listeners_.size() ? listeners_[listener].port : 0;
}

asio::io_context& HttpServer::worker_context(size_t i) { return workers_[i]->io_context; }

std::optional<size_t> HttpServer::worker_of_this_thread() const {
  if (tls_server != this) return std::nullopt;
  return tls_worker;
}

size_t HttpServer::http_connections() const {
  absl::MutexLock lock(&mu_);
  return live_sessions_;
}

size_t HttpServer::upgraded_connections() const {
  absl::MutexLock lock(&mu_);
  return live_upgraded_;
}

// Every worker gets its own acceptor on the listener's port. With several workers they share
// the port through SO_REUSEPORT; a fixed port is first bound alone, since another process's
// SO_REUSEPORT listener on it would otherwise split the connections with this one instead of
// failing the bind. Port 0: the first acceptor takes a free port and the others join it.
absl::Status HttpServer::Bind(size_t index) {
  Listener& listener = listeners_[index];
  error_code ec;
  const asio::ip::address address = asio::ip::make_address(options_.address, ec);
  if (ec) return absl::InvalidArgumentError(fmt::format("bad listen address {}", options_.address));
  auto failed = [&] {
    return absl::UnavailableError(fmt::format("cannot listen on {}:{}: {}", options_.address,
                                              listener.requested_port, ec.message()));
  };
  const bool shared = workers_.size() > 1;
  uint16_t port = listener.requested_port;
  if (shared && port != 0) {
    tcp::acceptor probe(workers_[0]->io_context);
    probe.open(address.is_v6() ? tcp::v6() : tcp::v4(), ec);
    if (!ec) probe.set_option(asio::socket_base::reuse_address(true), ec);
    if (!ec) probe.bind(tcp::endpoint(address, port), ec);
    if (ec) return failed();
  }
  for (auto& worker : workers_) {
    auto acceptor = std::make_unique<tcp::acceptor>(worker->io_context);
    const tcp::endpoint endpoint(address, port);
    acceptor->open(endpoint.protocol(), ec);
    if (!ec) acceptor->set_option(asio::socket_base::reuse_address(true), ec);
    if (!ec && shared) acceptor->set_option(ReusePort(true), ec);
    if (!ec) acceptor->bind(endpoint, ec);
    if (!ec) acceptor->listen(asio::socket_base::max_listen_connections, ec);
    if (!ec && port == 0) port = acceptor->local_endpoint(ec).port();
    if (ec) return failed();
    worker->acceptors.push_back(std::move(acceptor));
  }
  listener.port = port;
  return absl::OkStatus();
}

absl::Status HttpServer::Start() {
  if (started_) return absl::FailedPreconditionError("HttpServer already started");
  for (size_t i = 0; i < listeners_.size(); ++i) {
    if (listeners_[i].upgrade && upgrade_handler_ == nullptr) {
      return absl::FailedPreconditionError("an upgrade listener needs an upgrade handler");
    }
    if (absl::Status s = Bind(i); !s.ok()) return s;
  }
  for (auto& worker : workers_) {
    worker->handler = factory_(worker->io_context);
    worker->guard.emplace(worker->io_context.get_executor());
  }
  started_ = true;
  for (size_t w = 0; w < workers_.size(); ++w) {
    for (size_t l = 0; l < listeners_.size(); ++l) {
      asio::post(workers_[w]->io_context, [this, w, l] { Accept(w, l); });
    }
  }
  for (size_t w = 0; w < workers_.size(); ++w) {
    workers_[w]->thread = std::thread([this, w] {
      tls_server = this;
      tls_worker = w;
      // Named for top -H and for the load harness's CPU accounting.
      pthread_setname_np(pthread_self(),
                         fmt::format("{}-{}", options_.thread_name, w).substr(0, 15).c_str());
      workers_[w]->io_context.run();
    });
  }
  return absl::OkStatus();
}

// The accepted socket is already on the worker's io_context: it is served right here.
void HttpServer::Accept(size_t worker, size_t listener) {
  workers_[worker]->acceptors[listener]->async_accept(
      [this, worker, listener](error_code ec, tcp::socket socket) {
        if (ec == asio::error::operation_aborted || stopping_) return;
        if (!ec) OnAccepted(worker, listener, std::move(socket));
        Accept(worker, listener);
      });
}

void HttpServer::OnAccepted(size_t worker, size_t listener, tcp::socket socket) {
  if (accept_observer_) accept_observer_(worker, socket);
  if (listeners_[listener].upgrade) {
    Upgrade(worker, std::move(socket), std::nullopt);
    return;
  }
  if (!AdmitHttp()) {
    metrics_->connections_rejected.Increment();
    error_code ignored;
    socket.close(ignored);
    return;
  }
  metrics_->connections_accepted.Increment();
  metrics_->connections_open.Add(1);
  StartSession(*workers_[worker], std::move(socket));
}

bool HttpServer::AdmitHttp() {
  absl::MutexLock lock(&mu_);
  if (live_sessions_ >= options_.max_connections) return false;
  ++live_sessions_;
  return true;
}

void HttpServer::StartSession(Worker& worker, tcp::socket socket) {
  error_code ignored;
  socket.set_option(tcp::no_delay(true), ignored);
  auto session =
      std::make_shared<Session>(std::move(socket), options_, worker.handler.get(), metrics_, this);
  std::erase_if(worker.sessions, [](const auto& weak) { return weak.expired(); });
  worker.sessions.push_back(session);
  if (stopping_) {
    session->Drain();
  } else {
    session->Start();
  }
}

void HttpServer::Upgrade(tcp::socket socket, HttpRequest request) {
  Upgrade(tls_worker, std::move(socket), std::move(request));
}

void HttpServer::Upgrade(size_t worker, tcp::socket socket, std::optional<HttpRequest> request) {
  bool admitted = false;
  if (!stopping_) {
    absl::MutexLock lock(&mu_);
    if (live_upgraded_ < max_upgraded_) {
      ++live_upgraded_;
      admitted = true;
    }
  }
  if (!admitted) {
    if (!stopping_) upgrade_handler_->OnRefused();  // counted before the client sees the close
    error_code ignored;
    socket.close(ignored);
    return;
  }
  std::shared_ptr<UpgradedConnection> connection =
      upgrade_handler_->Adopt(worker, std::move(socket), std::move(request), ConnectionSlot(this));
  if (!connection) return;
  Worker& w = *workers_[worker];
  std::erase_if(w.upgraded, [](const auto& weak) { return weak.expired(); });
  w.upgraded.push_back(std::move(connection));
}

void HttpServer::OnSessionClosed() {
  absl::MutexLock lock(&mu_);
  --live_sessions_;
}

void HttpServer::ReleaseUpgraded() {
  absl::MutexLock lock(&mu_);
  --live_upgraded_;
}

void HttpServer::Stop() {
  if (stopped_) return;
  if (!started_) {
    // No worker ran (Start was not called or failed): the upgrade handler stops here.
    if (upgrade_handler_ != nullptr) {
      for (size_t i = 0; i < workers_.size(); ++i) upgrade_handler_->Shutdown(i);
      upgrade_handler_->Stopped();
    }
    stopped_ = true;
    return;
  }
  started_ = false;
  stopped_ = true;
  stopping_ = true;
  for (auto& worker : workers_) {
    asio::post(worker->io_context, [w = worker.get()] {
      error_code ignored;
      for (auto& acceptor : w->acceptors) acceptor->close(ignored);
      for (auto& weak : w->sessions) {
        if (auto session = weak.lock()) session->Drain();
      }
      for (auto& weak : w->upgraded) {
        if (auto connection = weak.lock()) connection->Drain();
      }
    });
  }
  {
    absl::MutexLock lock(&mu_);
    auto drained = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return live_sessions_ == 0 && live_upgraded_ == 0;
    };
    mu_.AwaitWithTimeout(absl::Condition(&drained), options_.drain_timeout);
  }
  // Whatever is left is cut off; each worker then runs out of work and its thread returns.
  for (size_t i = 0; i < workers_.size(); ++i) {
    asio::post(workers_[i]->io_context, [this, i, w = workers_[i].get()] {
      for (auto& weak : w->sessions) {
        if (auto session = weak.lock()) session->ForceClose();
      }
      for (auto& weak : w->upgraded) {
        if (auto connection = weak.lock()) connection->Close();
      }
      w->sessions.clear();
      w->upgraded.clear();
      if (w->handler) w->handler->Shutdown();
      if (upgrade_handler_ != nullptr) upgrade_handler_->Shutdown(i);
      w->guard.reset();
    });
  }
  for (auto& worker : workers_) {
    if (worker->thread.joinable()) worker->thread.join();
  }
  for (auto& worker : workers_) worker->acceptors.clear();
  if (upgrade_handler_ != nullptr) upgrade_handler_->Stopped();
}

}  // namespace switchyard
