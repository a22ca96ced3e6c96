#pragma once

#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "api/net/http_server.h"
#include "api/pubsub/pubsub_metrics.h"
#include "api/pubsub/pubsub_router.h"
#include "api/rpc/router.h"

namespace switchyard {

struct PubsubServerOptions {
  // The server's own WebSocket listener: nullopt for none (Upgrade on the HTTP port only);
  // port 0 picks a free port (see port()).
  std::optional<uint16_t> port = 0;
  std::string address = "127.0.0.1";
  size_t threads = 0;  // one io_context and one shard each; 0: one per usable CPU (affinity)
  size_t max_connections = 10'000;
  size_t max_subscriptions_per_connection = 1000;
  size_t max_message_bytes = 1 << 20;  // a larger client message closes the connection
  absl::Duration handshake_timeout = absl::Seconds(10);
  // A client silent for half of it is pinged; one silent for all of it is disconnected.
  absl::Duration idle_timeout = absl::Seconds(60);
  // A client whose unwritten messages exceed either bound is disconnected (a slow consumer).
  size_t max_send_queue_messages = 16384;
  size_t max_send_queue_bytes = 16 << 20;
  // SO_SNDBUF of client sockets; 0 keeps the system's. A small one finds slow consumers
  // sooner (the kernel buffers less of what they do not read).
  int socket_send_buffer_bytes = 0;
  PubsubRouterOptions router;
};

// The pubsub front door: Solana's WebSocket JSON-RPC on its own listener (by convention the
// HTTP port + 1) and on the HTTP port through Upgrade (HttpServer hands such connections over,
// see UpgradeHandler()). Runs its own threads, one io_context each; each client connection
// lives on one of them, and one PubsubRouter shard runs on each. Owned by the app; Start() and
// Stop() are called from one control thread; the RouterContext and the metrics outlive it.
class PubsubServer {
 public:
  PubsubServer(PubsubServerOptions options, RouterContext* context, PubsubMetrics* metrics);
  ~PubsubServer();
  PubsubServer(const PubsubServer&) = delete;
  PubsubServer& operator=(const PubsubServer&) = delete;

  // Checks the upstream pubsub endpoints, binds (when it has a port) and starts the threads.
  absl::Status Start();
  // Stops accepting, drops every upstream connection, closes every client and joins the
  // threads.
  void Stop();

  // The listener's port, 0 without one.
  uint16_t port() const { return port_; }
  // For HttpServer::SetUpgradeHandler. Any thread may call it.
  HttpServer::UpgradeHandler UpgradeHandler();

  class Session;

 private:
  struct Worker;

  void Accept();
  void Adopt(size_t worker, boost::asio::ip::tcp::socket socket,
             std::optional<HttpRequest> upgrade);
  bool Admit();
  void OnSessionClosed();

  const PubsubServerOptions options_;
  RouterContext* const context_;
  PubsubMetrics* const metrics_;
  std::unique_ptr<PubsubRouter> router_;
  uint16_t port_ = 0;
  std::atomic<bool> started_{false};
  std::atomic<bool> stopping_{false};
  std::atomic<size_t> live_sessions_{0};
  std::atomic<size_t> next_worker_{0};
  std::vector<std::unique_ptr<Worker>> workers_;
  std::unique_ptr<boost::asio::ip::tcp::acceptor> acceptor_;
};

}  // namespace switchyard
