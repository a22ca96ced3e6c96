#include "localnet/server.h"

#include <array>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/websocket.hpp>
#include <deque>
#include <iterator>
#include <optional>
#include <utility>

#include "common/clock.h"
#include "common/gzip.h"
#include "fmt/format.h"

namespace switchyard::localnet {
namespace {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace websocket = beast::websocket;
using tcp = net::ip::tcp;
using error_code = boost::system::error_code;

class HttpSession : public std::enable_shared_from_this<HttpSession> {
 public:
  HttpSession(tcp::socket socket, RpcService* rpc, ServerLimits limits)
      : stream_(std::move(socket)), rpc_(rpc), limits_(limits), timer_(stream_.get_executor()) {}

  void Run() { Read(); }

 private:
  // Waits, at most the idle timeout, for the first byte of the next request (a pipelined one
  // may be buffered already), then reads the request under the request timeout.
  void Read() {
    parser_.emplace();
    parser_->body_limit(limits_.max_body_bytes);
    parser_->header_limit(16 * 1024);
    if (buffer_.size() > 0) {
      ReadRequest();
      return;
    }
    if (limits_.idle_timeout > absl::ZeroDuration()) {
      stream_.expires_after(ToChrono(limits_.idle_timeout));
    } else {
      stream_.expires_never();
    }
    stream_.async_read_some(buffer_.prepare(4096),
                            [self = shared_from_this()](error_code ec, size_t n) {
                              if (ec) {
                                self->Close();
                                return;
                              }
                              self->buffer_.commit(n);
                              self->ReadRequest();
                            });
  }

  void ReadRequest() {
    stream_.expires_after(ToChrono(limits_.request_timeout));
    http::async_read(stream_, buffer_, *parser_,
                     [self = shared_from_this()](error_code ec, size_t) { self->OnRead(ec); });
  }

  void OnRead(error_code ec) {
    if (ec) {
      if (ec == http::error::body_limit)
        WriteText(http::status::payload_too_large, "", false);
      else
        Close();
      return;
    }
    http::request<http::string_body>& req = parser_->get();
    keep_alive_ = req.keep_alive();
    // Another request came with this one: a server without pipelining answers this one and
    // closes.
    if (limits_.no_pipelining && buffer_.size() > 0) keep_alive_ = false;
    version_ = req.version();
    if (limits_.gzip_min_bytes > 0) {
      const beast::string_view accept = req[http::field::accept_encoding];
      accepts_gzip_ = AcceptsGzip(std::string_view(accept.data(), accept.size()));
    }
    if (req.method() == http::verb::get) {
      if (req.target() == "/gzip-stats" && limits_.gzip_counters != nullptr) {
        WriteResponse(
            "200 OK", "application/json",
            fmt::format(R"({{"answers":{},"bytes":{}}})", limits_.gzip_counters->answers.load(),
                        limits_.gzip_counters->bytes.load()));
        return;
      }
      // Liveness probe, as Solana's /health.
      WriteText(http::status::ok, req.target() == "/health" ? "ok" : "", keep_alive_);
      return;
    }
    if (req.method() != http::verb::post) {
      WriteText(http::status::method_not_allowed, "", keep_alive_);
      return;
    }
    if (req.target() == "/registry" && limits_.registry != nullptr) {
      absl::StatusOr<std::string> applied = limits_.registry->Apply(req.body());
      if (applied.ok()) {
        WriteResponse("200 OK", "application/json", *std::move(applied));
      } else {
        WriteResponse("400 Bad Request", "text/plain", std::string(applied.status().message()));
      }
      return;
    }
    if (req.target() == "/faults" && limits_.runtime_faults != nullptr) {
      absl::StatusOr<std::string> applied = limits_.runtime_faults->Apply(req.body());
      if (applied.ok()) {
        WriteResponse("200 OK", "application/json", *std::move(applied));
      } else {
        WriteResponse("400 Bad Request", "text/plain", std::string(applied.status().message()));
      }
      return;
    }
    body_ = std::move(req.body());
    HttpFault fault = limits_.faults != nullptr ? limits_.faults->Next() : HttpFault{};
    if (fault.kind == HttpFaultKind::kNone && limits_.runtime_faults != nullptr) {
      const absl::Duration delay = limits_.runtime_faults->answer_delay();
      if (delay > absl::ZeroDuration()) fault = {HttpFaultKind::kDelay, delay};
    }
    switch (fault.kind) {
      case HttpFaultKind::kNone:
        break;
      case HttpFaultKind::kTooManyRequests:
        WriteResponse("429 Too Many Requests", "application/json",
                      "{\"jsonrpc\":\"2.0\",\"error\":{\"code\":429,\"message\":\"Too many "
                      "requests\"},\"id\":null}",
                      fmt::format("Retry-After: {}\r\n", limits_.faults->retry_after_seconds()));
        return;
      case HttpFaultKind::kServerError: {
        const auto status = static_cast<http::status>(limits_.faults->server_error_status());
        WriteText(status, std::string(http::obsolete_reason(status)), keep_alive_);
        return;
      }
      case HttpFaultKind::kReset:
        Reset();
        return;
      case HttpFaultKind::kDelay:
        timer_.expires_after(ToChrono(fault.delay));
        timer_.async_wait([self = shared_from_this()](error_code ec) {
          if (ec) {
            self->Close();
            return;
          }
          self->Answer();
        });
        return;
    }
    Answer();
  }

  void Answer() {
    // A delay fault may have used up the deadline set before the read; the answer gets its own.
    stream_.expires_after(ToChrono(limits_.request_timeout));
    rpc_->Handle(body_, [self = shared_from_this()](std::string response) {
      net::dispatch(self->stream_.get_executor(), [self, response = std::move(response)]() mutable {
        self->WriteJson(std::move(response));
      });
    });
  }

  // Responses are written by hand: a fixed header and the body, without Beast's serializer.
  void WriteJson(std::string body) {
    if (!accepts_gzip_ || body.size() < limits_.gzip_min_bytes) {
      WriteResponse("200 OK", "application/json", std::move(body));
      return;
    }
    std::string compressed;
    GzipCompress(body, 1, &compressed);
    if (limits_.gzip_counters != nullptr) {
      limits_.gzip_counters->answers.fetch_add(1, std::memory_order_relaxed);
      limits_.gzip_counters->bytes.fetch_add(compressed.size(), std::memory_order_relaxed);
    }
    WriteResponse("200 OK", "application/json", std::move(compressed),
                  "Content-Encoding: gzip\r\n");
  }

  void WriteText(http::status status, std::string_view body, bool keep_alive) {
    keep_alive_ = keep_alive;
    WriteResponse(
        fmt::format("{} {}", static_cast<int>(status), std::string(http::obsolete_reason(status))),
        "text/plain", std::string(body));
  }

  void WriteResponse(std::string_view status, std::string_view content_type, std::string body,
                     std::string_view extra_headers = {}) {
    const bool http10 = version_ == 10;
    header_.clear();
    fmt::format_to(
        std::back_inserter(header_),
        "HTTP/1.{} {}\r\nContent-Type: {}\r\nContent-Length: {}\r\n{}{}\r\n", http10 ? 0 : 1,
        status, content_type, body.size(), extra_headers,
        keep_alive_ ? (http10 ? "Connection: keep-alive\r\n" : "") : "Connection: close\r\n");
    out_body_ = std::move(body);
    const std::array<net::const_buffer, 2> buffers{net::buffer(header_), net::buffer(out_body_)};
    // The deadline set before the read (or before the answer) covers this write too.
    net::async_write(stream_, buffers, [self = shared_from_this()](error_code ec, size_t) {
      if (ec || !self->keep_alive_) {
        self->Close();
        return;
      }
      self->Read();
    });
  }

  void Close() {
    error_code ec;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ec);
    stream_.close();
  }

  // Cuts the connection with a TCP RST (a zero linger time), as a crashed or overloaded
  // server or a proxy in front of it does.
  void Reset() {
    error_code ec;
    stream_.socket().set_option(net::socket_base::linger(true, 0), ec);
    stream_.close();
  }

  beast::tcp_stream stream_;
  RpcService* const rpc_;
  const ServerLimits limits_;
  net::steady_timer timer_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  std::string header_;
  std::string out_body_;
  std::string body_;
  bool keep_alive_ = true;
  bool accepts_gzip_ = false;  // of the request being answered
  unsigned version_ = 11;
};

class WsSession : public NotificationSink, public std::enable_shared_from_this<WsSession> {
 public:
  WsSession(tcp::socket socket, PubSubHub* hub, ServerLimits limits)
      : ws_(std::move(socket)), hub_(hub), limits_(limits) {}

  void Run() {
    auto timeout = websocket::stream_base::timeout::suggested(beast::role_type::server);
    if (limits_.ws_ping_interval > absl::ZeroDuration()) {
      // The stream pings after half its idle timeout and closes the connection when nothing
      // has arrived by the end of it.
      timeout.idle_timeout = std::chrono::duration_cast<std::chrono::steady_clock::duration>(
          2 * ToChrono(limits_.ws_ping_interval));
      timeout.keep_alive_pings = true;
    } else {
      timeout.idle_timeout = websocket::stream_base::none();
    }
    ws_.set_option(timeout);
    ws_.read_message_max(limits_.max_body_bytes);
    ws_.async_accept([self = shared_from_this()](error_code ec) {
      if (ec) return;
      self->hub_->AddSession(self);
      self->Read();
    });
  }

  void Send(std::string message) override {
    net::dispatch(ws_.get_executor(),
                  [self = shared_from_this(), message = std::move(message)]() mutable {
                    // A closing session writes what it had queued and nothing after it.
                    if (self->closed_ || self->closing_) return;
                    if (self->queue_.size() >= self->limits_.max_ws_queue) {
                      // A consumer this slow would make the queue unbounded: drop it.
                      self->DoClose();
                      return;
                    }
                    self->queue_.push_back(std::move(message));
                    if (self->queue_.size() == 1) self->Write();
                  });
  }

  void Close() override {
    net::dispatch(ws_.get_executor(), [self = shared_from_this()]() { self->DoClose(); });
  }

 private:
  void Read() {
    ws_.async_read(buffer_, [self = shared_from_this()](error_code ec, size_t) {
      if (ec) {
        self->closed_ = true;
        self->hub_->RemoveSession(self.get());
        return;
      }
      std::string text = beast::buffers_to_string(self->buffer_.data());
      self->buffer_.consume(self->buffer_.size());
      self->hub_->HandleMessage(self, text);
      self->Read();
    });
  }

  void Write() {
    ws_.text(true);
    ws_.async_write(net::buffer(queue_.front()),
                    [self = shared_from_this()](error_code ec, size_t) {
                      if (ec) {
                        self->closed_ = true;
                        self->queue_.clear();
                        return;
                      }
                      self->queue_.pop_front();
                      if (!self->queue_.empty()) {
                        self->Write();
                      } else if (self->closing_) {
                        self->Shutdown();
                      }
                    });
  }

  // Stops taking messages; what is queued is still written, then the socket is cut (no close
  // handshake: the fault tests want clients to see the connection drop).
  void DoClose() {
    if (closed_ || closing_) return;
    closing_ = true;
    hub_->RemoveSession(this);
    if (queue_.empty()) Shutdown();
  }

  void Shutdown() {
    closed_ = true;
    error_code ec;
    beast::get_lowest_layer(ws_).socket().shutdown(tcp::socket::shutdown_both, ec);
    beast::get_lowest_layer(ws_).close();
  }

  websocket::stream<beast::tcp_stream> ws_;
  PubSubHub* const hub_;
  const ServerLimits limits_;
  beast::flat_buffer buffer_;
  std::deque<std::string> queue_;
  bool closing_ = false;
  bool closed_ = false;
};

}  // namespace

IoPool::IoPool(int threads) {
  for (int i = 0; i < std::max(1, threads); ++i) {
    contexts_.push_back(std::make_unique<net::io_context>(1));
    guards_.emplace_back(net::make_work_guard(*contexts_.back()));
  }
}

IoPool::~IoPool() { Stop(); }

void IoPool::Start() {
  for (auto& ctx : contexts_) {
    threads_.emplace_back([c = ctx.get()] { c->run(); });
  }
}

void IoPool::Stop() {
  guards_.clear();
  for (auto& ctx : contexts_) ctx->stop();
  for (auto& t : threads_) {
    if (t.joinable()) t.join();
  }
  threads_.clear();
}

net::io_context& IoPool::Next() {
  return *contexts_[next_.fetch_add(1, std::memory_order_relaxed) % contexts_.size()];
}

Listener::Listener(IoPool* pool, Protocol protocol, RpcService* rpc, PubSubHub* hub,
                   ServerLimits limits)
    : pool_(pool), protocol_(protocol), rpc_(rpc), hub_(hub), limits_(limits) {}

// By the time a listener is destroyed, the pool's threads are joined or were never started,
// so the acceptor is closed here directly.
Listener::~Listener() {
  if (acceptor_ != nullptr) {
    error_code ec;
    acceptor_->close(ec);
  }
}

absl::Status Listener::Start(const std::string& address, uint16_t port) {
  error_code ec;
  const net::ip::address addr = net::ip::make_address(address, ec);
  if (ec) return absl::InvalidArgumentError(fmt::format("bad bind address {}", address));
  acceptor_ = std::make_unique<tcp::acceptor>(pool_->First());
  const tcp::endpoint endpoint(addr, port);
  acceptor_->open(endpoint.protocol(), ec);
  if (!ec) acceptor_->set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) acceptor_->bind(endpoint, ec);
  if (!ec) acceptor_->listen(net::socket_base::max_listen_connections, ec);
  if (ec) {
    return absl::UnavailableError(
        fmt::format("cannot listen on {}:{}: {}", address, port, ec.message()));
  }
  port_ = acceptor_->local_endpoint(ec).port();
  return absl::OkStatus();
}

void Listener::Run() { Accept(); }

void Listener::Stop() {
  if (acceptor_ == nullptr) return;
  net::post(acceptor_->get_executor(), [acceptor = acceptor_.get()] {
    error_code ec;
    acceptor->close(ec);
  });
}

void Listener::Accept() {
  acceptor_->async_accept(pool_->Next(), [this](error_code ec, tcp::socket socket) {
    if (ec == net::error::operation_aborted || !acceptor_->is_open()) return;
    if (!ec) {
      error_code ignored;
      socket.set_option(tcp::no_delay(true), ignored);
      // Sessions start on the io_context that owns their socket.
      auto executor = socket.get_executor();
      if (protocol_ == Protocol::kHttp) {
        auto session = std::make_shared<HttpSession>(std::move(socket), rpc_, limits_);
        net::post(executor, [session] { session->Run(); });
      } else {
        auto session = std::make_shared<WsSession>(std::move(socket), hub_, limits_);
        net::post(executor, [session] { session->Run(); });
      }
    }
    Accept();
  });
}

}  // namespace switchyard::localnet
