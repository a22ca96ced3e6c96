#pragma once

#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "api/metrics/api_metrics.h"

namespace switchyard {

struct HttpServerOptions {
  std::string address = "127.0.0.1";
  uint16_t port = 0;   // 0: any free port (see HttpServer::port())
  size_t threads = 0;  // worker threads, one io_context each; 0: one per usable CPU (affinity)
  size_t max_connections = 10'000;
  size_t max_body_bytes = 1 << 20;  // larger bodies get 413
  size_t max_header_bytes = 16 * 1024;
  size_t max_pipelined = 16;  // requests read ahead of their answers, per connection
  absl::Duration idle_timeout = absl::Seconds(60);    // waiting for the next request
  absl::Duration header_timeout = absl::Seconds(10);  // from its first byte to its headers
  absl::Duration body_timeout = absl::Seconds(30);    // reading the body
  absl::Duration write_timeout = absl::Seconds(30);   // writing one answer
  absl::Duration drain_timeout = absl::Seconds(5);    // Stop() waits this long for answers
};

struct HttpRequest {
  // A body of known length is read into a string whose capacity leaves this many bytes past
  // its end, so that a parser that reads ahead (simdjson) can parse it in place.
  static constexpr size_t kBodySlack = 64;
  std::string target;
  std::string method;  // GET, POST, ...
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;

  // The value of header `name` (case-insensitive), or nullopt.
  std::optional<std::string_view> Header(std::string_view name) const;
};

struct HttpResponse {
  unsigned status = 200;
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;
  std::string content_type = "application/json";
};

// Answers the requests of one worker. Handle is called on the worker's thread; `done` must be
// called exactly once, on the same thread, and may be called after Handle returned.
class RequestHandler {
 public:
  using Done = std::function<void(HttpResponse)>;
  virtual ~RequestHandler() = default;
  virtual void Handle(HttpRequest request, Done done) = 0;
  // Called once on the worker's thread when the server stops: cancel every I/O the handler
  // started, so that the worker runs out of work. Pending `done` calls may still follow.
  virtual void Shutdown() {}
  // The answer to a request the server refuses itself before it reaches Handle: `status` 413
  // (body too large), 431 (headers too large) or 400 (malformed HTTP), `reason` in words. The
  // server sets the status and closes the connection after it. By default a plain-text body.
  virtual HttpResponse LocalAnswer(unsigned status, std::string_view reason) {
    HttpResponse response;
    response.status = status;
    response.body = std::string(reason);
    response.content_type = "text/plain";
    return response;
  }
};

// Builds the handler of each worker, on the thread that calls Start(), with that worker's
// io_context.
using RequestHandlerFactory =
    std::function<std::unique_ptr<RequestHandler>(boost::asio::io_context& io_context)>;

// The HTTP/1.1 front door: keep-alive, pipelining up to a bound, per-phase timeouts, a body
// limit (413), a connection limit, one io_context per worker thread. Owned by the app;
// Start() and Stop() are called from one control thread, never from a worker.
class HttpServer {
 public:
  HttpServer(HttpServerOptions options, RequestHandlerFactory factory, ApiMetrics* metrics);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Takes over a connection whose request asks for a WebSocket Upgrade (the pubsub server):
  // called on the worker's thread with the socket and the request; the server forgets both.
  using UpgradeHandler =
      std::function<void(boost::asio::ip::tcp::socket socket, HttpRequest request)>;
  // Before Start(). Without a handler, Upgrade requests are answered like any other.
  void SetUpgradeHandler(UpgradeHandler handler) { upgrade_handler_ = std::move(handler); }

  // Binds and starts the workers.
  absl::Status Start();
  // Stops accepting, lets connections finish the answers they owe (up to drain_timeout),
  // then stops the workers and joins them.
  void Stop();

  uint16_t port() const { return port_; }
  size_t worker_count() const { return workers_.size(); }
  // The io_context of worker `i`, for components that must live on it.
  boost::asio::io_context& worker_context(size_t i);

  class Session;

 private:
  struct Worker;

  void Accept();
  void OnSessionClosed();

  HttpServerOptions options_;
  RequestHandlerFactory factory_;
  UpgradeHandler upgrade_handler_;
  ApiMetrics* metrics_;
  uint16_t port_ = 0;
  bool started_ = false;
  std::atomic<bool> stopping_{false};
  absl::Mutex mu_;
  size_t live_sessions_ ABSL_GUARDED_BY(mu_) = 0;
  size_t next_worker_ = 0;  // touched only by the accepting worker
  // Last: destroyed first, while everything sessions touch is still alive.
  std::vector<std::unique_ptr<Worker>> workers_;
  std::unique_ptr<boost::asio::ip::tcp::acceptor> acceptor_;
};

}  // namespace switchyard
