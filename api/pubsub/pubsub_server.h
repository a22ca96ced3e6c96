#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "api/net/http_server.h"
#include "api/pubsub/pubsub_metrics.h"
#include "api/pubsub/pubsub_router.h"
#include "api/rpc/router.h"

namespace switchyard {

struct PubsubServerOptions {
  // The server's own WebSocket listener, on the HTTP server's address: nullopt for none
  // (Upgrade on the HTTP port only); port 0 picks a free port (see port()).
  std::optional<uint16_t> port = 0;
  // WebSocket connections at a time, however they came in (HTTP connections count against the
  // HTTP server's own limit).
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

// Solana's WebSocket JSON-RPC pubsub, served on the workers of an HttpServer (Attach): the
// HttpServer hands over every WebSocket Upgrade on its port and every connection of the pubsub
// listener (by convention the HTTP port + 1), and each such connection lives on the worker that
// accepted it. One PubsubRouter shard runs on each worker's io_context. The HttpServer admits,
// drains and stops the connections; this class holds the protocol. Owned by the app; it must
// outlive the HttpServer. The RouterContext and the metrics outlive it.
class PubsubServer : public UpgradeHandler {
 public:
  PubsubServer(PubsubServerOptions options, RouterContext* context, PubsubMetrics* metrics);
  ~PubsubServer() override;
  PubsubServer(const PubsubServer&) = delete;
  PubsubServer& operator=(const PubsubServer&) = delete;

  // Checks the upstream pubsub endpoints, creates the shards on `server`'s workers and becomes
  // its upgrade handler (and, with a port, adds the pubsub listener). Before server->Start().
  absl::Status Attach(HttpServer* server);

  // The listener's port once the HttpServer started; 0 without one.
  uint16_t port() const;

  // UpgradeHandler, called by the HttpServer on its workers.
  std::shared_ptr<UpgradedConnection> Adopt(size_t worker, boost::asio::ip::tcp::socket socket,
                                            std::optional<HttpRequest> upgrade,
                                            ConnectionSlot slot) override;
  std::shared_ptr<UpgradedConnection> AdoptTls(size_t worker,
                                               std::unique_ptr<TlsConnection> connection,
                                               std::optional<HttpRequest> upgrade,
                                               ConnectionSlot slot) override;
  void OnRefused() override;
  void Shutdown(size_t worker) override;
  void Stopped() override;

  template <typename Stream>
  class Session;

 private:
  const PubsubServerOptions options_;
  RouterContext* const context_;
  PubsubMetrics* const metrics_;
  HttpServer* server_ = nullptr;
  std::optional<size_t> listener_;  // the HttpServer's index of the pubsub listener
  std::unique_ptr<PubsubRouter> router_;
};

}  // namespace switchyard
