#pragma once

#include <atomic>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "localnet/er_registry.h"
#include "localnet/http_faults.h"
#include "localnet/pubsub.h"
#include "localnet/rpc_service.h"

namespace switchyard::localnet {

// N threads, each running its own io_context. Owned by Localnet.
class IoPool {
 public:
  explicit IoPool(int threads);
  ~IoPool();
  void Start();
  // Stops every io_context and joins the threads.
  void Stop();
  boost::asio::io_context& Next();
  boost::asio::io_context& First() { return *contexts_[0]; }

 private:
  using WorkGuard = boost::asio::executor_work_guard<boost::asio::io_context::executor_type>;
  std::vector<std::unique_ptr<boost::asio::io_context>> contexts_;
  std::vector<WorkGuard> guards_;
  std::vector<std::thread> threads_;
  std::atomic<size_t> next_{0};
};

// The answers the HTTP listener sent gzip-compressed, and their bytes as sent (GET
// /gzip-stats shows them). Any thread.
struct GzipCounters {
  std::atomic<uint64_t> answers{0};
  std::atomic<uint64_t> bytes{0};
};

struct ServerLimits {
  size_t max_body_bytes = 1 << 20;
  size_t max_ws_queue = 65536;
  // HTTP: the wait for the first byte of a next request (zero: no limit), then the time to
  // read and answer it. WebSocket: the ping interval (zero: no pings). See LocalnetOptions.
  absl::Duration idle_timeout = absl::Seconds(5);
  absl::Duration request_timeout = absl::Seconds(30);
  absl::Duration ws_ping_interval = absl::Seconds(15);
  // Faults of HTTP requests; null: none. Outlives the listener.
  HttpFaultInjector* faults = nullptr;
  // FaultOptions::no_pipelining.
  bool no_pipelining = false;
  // See LocalnetOptions::gzip_min_bytes; the counters outlive the listener.
  size_t gzip_min_bytes = 0;
  GzipCounters* gzip_counters = nullptr;
  // POST /faults changes these (RuntimeFaults::Apply), and every HTTP JSON-RPC answer waits
  // their delay. Outlives the listener.
  RuntimeFaults* runtime_faults = nullptr;
  // Base mode: POST /registry changes the ER registry's records (LocalErRegistry::Apply).
  LocalErRegistry* registry = nullptr;
};

// Accepts connections on one port and hands each to a session on the pool's next
// io_context: HTTP JSON-RPC sessions (RpcService) or WebSocket pubsub sessions (PubSubHub).
class Listener {
 public:
  enum class Protocol { kHttp, kWebSocket };
  Listener(IoPool* pool, Protocol protocol, RpcService* rpc, PubSubHub* hub, ServerLimits limits);
  // Destroy only after the pool's threads are stopped (or before they start).
  ~Listener();
  // Binds and listens; port 0 picks a free port. Accepts nothing until Run().
  absl::Status Start(const std::string& address, uint16_t port);
  // Starts accepting connections. Until then the listener may be destroyed at any time.
  void Run();
  // Closes the acceptor on its own thread; sessions already accepted go on.
  void Stop();
  uint16_t port() const { return port_; }

 private:
  void Accept();

  IoPool* const pool_;
  const Protocol protocol_;
  RpcService* const rpc_;
  PubSubHub* const hub_;
  const ServerLimits limits_;
  std::unique_ptr<boost::asio::ip::tcp::acceptor> acceptor_;
  uint16_t port_ = 0;
};

}  // namespace switchyard::localnet
