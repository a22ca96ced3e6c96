#pragma once

#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/websocket/stream.hpp>
#include <optional>
#include <utility>

#include "api/net/http_server.h"

namespace switchyard {

// Answers the WebSocket handshake of a connection HttpServer handed over: with the Upgrade
// request its HTTP session already read, or (nullopt: a connection to an upgrade listener)
// by reading the request from the stream first. `done(error_code)` as for async_accept.
template <typename Stream, typename Done>
void AcceptWebSocket(boost::beast::websocket::stream<Stream>& ws,
                     const std::optional<HttpRequest>& upgrade, Done&& done) {
  if (!upgrade) {
    ws.async_accept(std::forward<Done>(done));
    return;
  }
  boost::beast::http::request<boost::beast::http::empty_body> request;
  request.method_string(upgrade->method);
  request.target(upgrade->target);
  request.version(11);
  for (const auto& [name, value] : upgrade->headers) request.insert(name, value);
  ws.async_accept(request, std::forward<Done>(done));
}

}  // namespace switchyard
