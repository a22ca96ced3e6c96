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
#include "api/net/cors.h"
#include "api/net/regions.h"
#include "api/net/tls.h"

namespace switchyard {

// gzip on the HTTP layer (docs/architecture.md §9): answers of at least `min_bytes` are
// compressed at `level` for a client whose Accept-Encoding takes gzip, and request bodies sent
// with Content-Encoding: gzip are inflated (within max_body_bytes, measured inflated). Off: no
// answer is compressed and an encoded request body gets 415.
struct GzipOptions {
  bool enabled = false;
  int level = 1;  // 1 (fastest) .. 9 (smallest)
  size_t min_bytes = 1024;
};

struct HttpServerOptions {
  std::string address = "127.0.0.1";
  uint16_t port = 0;   // 0: any free port (see HttpServer::port())
  size_t threads = 0;  // worker threads, one io_context each; 0: one per usable CPU (affinity)
  size_t max_connections = 10'000;
  size_t max_body_bytes = 1 << 20;  // larger bodies get 413
  size_t max_header_bytes = 16 * 1024;
  // Requests read ahead of their answers, per connection: from what reads brought in; an empty
  // socket is not read again while an answer is owed (docs/architecture.md §9).
  size_t max_pipelined = 16;
  absl::Duration idle_timeout = absl::Seconds(60);    // waiting for the next request
  absl::Duration header_timeout = absl::Seconds(10);  // from its first byte to its headers
  absl::Duration body_timeout = absl::Seconds(30);    // reading the body
  absl::Duration write_timeout = absl::Seconds(30);   // writing one answer
  absl::Duration drain_timeout = absl::Seconds(5);    // Stop() waits this long for answers
  std::string thread_name = "sy-net";  // workers are named "<thread_name>-<i>" (top -H)
  // Browser access: the server answers preflights itself, adds the CORS headers to every
  // answer (its own 400/413/431 included) and checks the Origin of WebSocket handshakes.
  // Off by default.
  CorsOptions cors;
  GzipOptions gzip;
  // A certificate and key: every listener of the server speaks TLS only (HTTPS, WSS), and a
  // plain-HTTP request there is answered 400. Neither: plain TCP.
  TlsOptions tls;
  // Regional entry points: GET /_redirect and /_getlink answered by the server. Off (no
  // regions) by default.
  RegionOptions regions;
};

struct HttpRequest {
  // A body of known length is read into a string whose capacity leaves this many bytes past
  // its end, so that a parser that reads ahead (simdjson) can parse it in place.
  static constexpr size_t kBodySlack = 64;
  std::string target;
  std::string method;  // GET, POST, ...
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
  // The address of the client at the other end of the connection (unspecified when the
  // socket could not tell).
  boost::asio::ip::address peer;
  // gzip is on and the client's Accept-Encoding takes it: an answer may be compressed, and a
  // handler may give one that already is (HttpResponse::gzip).
  bool accepts_gzip = false;

  // The value of header `name` (case-insensitive), or nullopt.
  std::optional<std::string_view> Header(std::string_view name) const;
};

struct HttpResponse {
  unsigned status = 200;
  // With `gzip`, the body is gzip already (an upstream's bytes passed through, only for a
  // request that accepts_gzip): it is sent as it is with Content-Encoding: gzip.
  std::string body;
  bool gzip = false;
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
  // (body too large), 431 (headers too large), 400 (malformed HTTP) or 403 (a WebSocket
  // handshake from an origin CORS does not allow), `reason` in words. The
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

// A connection that left HTTP (a WebSocket), as the server sees it: it drains and closes it at
// Stop. Lives on one worker's thread; the server calls it only there.
class UpgradedConnection {
 public:
  virtual ~UpgradedConnection() = default;
  // Stop: end the connection cleanly (a close handshake). The server waits up to
  // drain_timeout, then calls Close().
  virtual void Drain() = 0;
  virtual void Close() = 0;
};

class HttpServer;

// One admitted connection of the upgrade limit; the count drops when the slot is destroyed.
// Move-only; any thread may destroy it.
class ConnectionSlot {
 public:
  ConnectionSlot() = default;
  ConnectionSlot(ConnectionSlot&& other) noexcept
      : server_(std::exchange(other.server_, nullptr)) {}
  ConnectionSlot& operator=(ConnectionSlot&& other) noexcept;
  ~ConnectionSlot();

 private:
  friend class HttpServer;
  explicit ConnectionSlot(HttpServer* server) : server_(server) {}
  HttpServer* server_ = nullptr;
};

// Serves the connections that leave HTTP: a WebSocket Upgrade on the HTTP port, and every
// connection of an upgrade listener (AddUpgradeListener). One object for every worker; it must
// outlive the server.
class UpgradeHandler {
 public:
  virtual ~UpgradeHandler() = default;
  // Takes over `socket` on the thread of worker `worker`, where the connection then lives (the
  // socket is already on that worker's io_context). `upgrade` is the Upgrade request an HTTP
  // session read (bytes read past it are dropped: a client sends none before the handshake
  // answer), or nullopt for a connection of an upgrade listener, which reads its handshake
  // itself. The connection keeps `slot` as long as it lives. Returns the connection, or null
  // when it refused it.
  virtual std::shared_ptr<UpgradedConnection> Adopt(size_t worker,
                                                    boost::asio::ip::tcp::socket socket,
                                                    std::optional<HttpRequest> upgrade,
                                                    ConnectionSlot slot) = 0;
  // The same for a connection of a TLS listener, its TLS handshake done. By default refused.
  virtual std::shared_ptr<UpgradedConnection> AdoptTls(
      size_t /*worker*/, std::unique_ptr<TlsConnection> /*connection*/,
      std::optional<HttpRequest> /*upgrade*/, ConnectionSlot /*slot*/) {
    return nullptr;
  }
  // A connection was refused (and closed) because the upgrade limit is reached.
  virtual void OnRefused() {}
  // Called once on each worker's thread when the server stops, after the worker's
  // connections are closed: cancel every I/O the handler runs on that worker.
  virtual void Shutdown(size_t /*worker*/) {}
  // Called once on the control thread when every worker has stopped, while their io_contexts
  // still exist: release what lives on them.
  virtual void Stopped() {}
};

// The front door of the API: HTTP/1.1 with keep-alive, pipelining up to a bound, per-phase
// timeouts and a body limit (413), and the connections that leave HTTP (WebSocket, through an
// UpgradeHandler), all on one pool of worker threads, one io_context each. Each worker accepts
// on its own acceptor of every listener (SO_REUSEPORT when there are several workers, so the
// kernel spreads connections), and a connection lives on the worker that accepted it, also
// after an Upgrade: nothing is posted to another worker. Admission counts HTTP connections
// against max_connections and upgraded ones against the upgrade limit. Owned by the app;
// Start() and Stop() are called from one control thread, never from a worker.
class HttpServer {
 public:
  HttpServer(HttpServerOptions options, RequestHandlerFactory factory, ApiMetrics* metrics);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Before Start(): connections that ask for a WebSocket Upgrade go to `handler`, at most
  // `max_connections` of them at a time (with those of the upgrade listeners). Without a
  // handler, Upgrade requests are answered like any other.
  void SetUpgradeHandler(UpgradeHandler* handler, size_t max_connections);
  // Before Start(), after SetUpgradeHandler: another port on the same address whose connections
  // go to the upgrade handler as they are accepted. Port 0: a free port. Returns its index for
  // port().
  size_t AddUpgradeListener(uint16_t port);

  // Binds every listener and starts the workers.
  absl::Status Start();
  // Reads the TLS certificate and key files again: connections accepted from now on get the
  // new ones, open connections keep theirs. On an error the server keeps serving what it had.
  // Without TLS there is nothing to reload (OK). Any thread.
  absl::Status ReloadTls();

  // Stops accepting, lets HTTP connections finish the answers they owe and upgraded ones
  // close (up to drain_timeout), cuts the rest, then stops the workers and joins them.
  void Stop();

  // The bound port of listener `listener` (0: the HTTP listener), once started.
  uint16_t port(size_t listener = 0) const;
  size_t worker_count() const { return workers_.size(); }
  // The io_context of worker `i`, for components that must live on it.
  boost::asio::io_context& worker_context(size_t i);
  // The CORS policy of options.cors, for an upgrade handler that reads its own handshakes.
  const CorsPolicy& cors() const { return cors_; }
  // Which worker of this server the calling thread is, or nullopt.
  std::optional<size_t> worker_of_this_thread() const;

  // For tests: called on the accepting worker's thread with each admitted connection.
  using AcceptObserver =
      std::function<void(size_t worker, const boost::asio::ip::tcp::socket& socket)>;
  void SetAcceptObserver(AcceptObserver observer) { accept_observer_ = std::move(observer); }
  // Open connections: HTTP ones, and upgraded ones.
  size_t http_connections() const;
  size_t upgraded_connections() const;

  class Session;
  template <typename Stream>
  class StreamSession;
  class TlsHandshake;

 private:
  friend class ConnectionSlot;
  struct Worker;
  struct Listener {
    uint16_t requested_port = 0;
    uint16_t port = 0;
    bool upgrade = false;  // connections go to the upgrade handler
  };

  absl::Status Bind(size_t listener);
  void Accept(size_t worker, size_t listener);
  void OnAccepted(size_t worker, size_t listener, boost::asio::ip::tcp::socket socket);
  void StartSession(Worker& worker, boost::asio::ip::tcp::socket socket);
  // A connection of a TLS listener: its handshake, then its session or the upgrade handler.
  void StartTls(size_t worker, size_t listener, boost::asio::ip::tcp::socket socket);
  void StartTlsSession(Worker& worker, std::unique_ptr<TlsConnection> connection);
  // The server stops: the TLS handshakes of `worker` still under way are cut. On its thread.
  static void CloseHandshakes(Worker& worker);
  // Hands `connection` (a tcp::socket or a TlsConnection) to the upgrade handler on worker
  // `worker`, if the limit admits it.
  template <typename Connection>
  void Upgrade(size_t worker, Connection connection, std::optional<HttpRequest> request);
  // Counts an HTTP connection in under max_connections, or closes `socket` and counts it
  // rejected (false).
  bool AdmitHttp(boost::asio::ip::tcp::socket& socket);
  void OnSessionClosed();
  void ReleaseUpgraded();

  HttpServerOptions options_;
  CorsPolicy cors_;
  std::unique_ptr<ListenerTls> tls_;      // null: plain TCP
  std::unique_ptr<RegionTable> regions_;  // null: regions off
  RequestHandlerFactory factory_;
  UpgradeHandler* upgrade_handler_ = nullptr;
  size_t max_upgraded_ = 0;
  AcceptObserver accept_observer_;
  ApiMetrics* metrics_;
  std::vector<Listener> listeners_;
  bool started_ = false;
  bool stopped_ = false;
  std::atomic<bool> stopping_{false};
  mutable absl::Mutex mu_;
  size_t live_sessions_ ABSL_GUARDED_BY(mu_) = 0;
  size_t live_upgraded_ ABSL_GUARDED_BY(mu_) = 0;
  // Last: destroyed first, while everything sessions touch is still alive.
  std::vector<std::unique_ptr<Worker>> workers_;
};

}  // namespace switchyard
