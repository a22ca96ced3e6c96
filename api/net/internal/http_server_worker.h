#pragma once

// The parts of HttpServer shared by its sources (http_server.cc: sessions, accept, stop;
// http_server_tls.cc: the TLS handshake). Not for use outside api/net.
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include "api/net/http_server.h"

namespace switchyard {

// One worker thread: its io_context, handler, acceptors and connections.
struct HttpServer::Worker {
  boost::asio::io_context io_context{1};
  std::optional<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>> guard;
  std::unique_ptr<RequestHandler> handler;
  // Touched only on this worker's thread once it runs.
  std::vector<std::unique_ptr<boost::asio::ip::tcp::acceptor>> acceptors;  // one per listener
  std::vector<std::weak_ptr<Session>> sessions;
  std::vector<std::weak_ptr<TlsHandshake>> handshakes;  // TLS connections not yet handed on
  std::vector<std::weak_ptr<UpgradedConnection>> upgraded;
  std::thread thread;
};

}  // namespace switchyard
