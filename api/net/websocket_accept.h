#pragma once

#include <boost/asio/error.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/stream_traits.hpp>
#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>
#include <boost/beast/websocket/stream.hpp>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "api/net/cors.h"
#include "api/net/http_server.h"

namespace switchyard {

// A WebSocket handshake refused by the handler's own check (an API key, say).
struct HandshakeRefusal {
  unsigned status = 403;
  std::string body;
  std::string content_type = "text/plain";
};

// Answers the WebSocket handshake of a connection HttpServer handed over: with the Upgrade
// request its HTTP session already read (and whose Origin it checked), or (nullopt: a
// connection to an upgrade listener) by reading the request from the stream first, under the
// stream's handshake timeout when its lowest layer has one. A handshake whose Origin `cors`
// does not allow is answered 403; one that `admit(request)` refuses (it returns a
// HandshakeRefusal rather than nullopt) gets that answer; both end with access_denied.
// `done(error_code)` as for async_accept.
template <typename Stream, typename Admit, typename Done>
void AcceptWebSocket(boost::beast::websocket::stream<Stream>& ws,
                     const std::optional<HttpRequest>& upgrade, const CorsPolicy& cors,
                     Admit&& admit, Done&& done) {
  namespace beast = boost::beast;
  namespace http = beast::http;
  struct Handshake {
    beast::flat_buffer buffer;
    http::request<http::empty_body> request;
    http::response<http::string_body> refusal;
  };
  auto handshake = std::make_shared<Handshake>();
  // Accepts, or writes `refusal` and ends with access_denied.
  auto finish = [&ws, handshake](std::optional<HandshakeRefusal> refusal, auto done) {
    if (!refusal) {
      ws.async_accept(handshake->request, std::move(done));
      return;
    }
    http::response<http::string_body>& answer = handshake->refusal;
    answer.result(refusal->status);
    answer.version(handshake->request.version());
    answer.set(http::field::content_type, refusal->content_type);
    answer.keep_alive(false);
    answer.body() = std::move(refusal->body);
    answer.prepare_payload();
    http::async_write(
        ws.next_layer(), answer,
        [handshake, done = std::move(done)](boost::system::error_code, size_t) mutable {
          done(boost::asio::error::access_denied);
        });
  };
  if (upgrade) {
    http::request<http::empty_body>& request = handshake->request;
    request.method_string(upgrade->method);
    request.target(upgrade->target);
    request.version(11);
    for (const auto& [name, value] : upgrade->headers) request.insert(name, value);
    finish(admit(std::as_const(request)), std::forward<Done>(done));
    return;
  }
  constexpr bool kHasTimer = requires {
    beast::get_lowest_layer(ws).expires_after(std::chrono::seconds(1));
  };
  if constexpr (kHasTimer) {
    beast::websocket::stream_base::timeout timeout;
    ws.get_option(timeout);
    if (timeout.handshake_timeout != beast::websocket::stream_base::none()) {
      beast::get_lowest_layer(ws).expires_after(timeout.handshake_timeout);
    }
  }
  http::async_read(ws.next_layer(), handshake->buffer, handshake->request,
                   [&ws, &cors, handshake, finish, admit = std::forward<Admit>(admit),
                    done = std::forward<Done>(done)](boost::system::error_code ec, size_t) mutable {
                     if constexpr (kHasTimer) beast::get_lowest_layer(ws).expires_never();
                     if (ec) return done(ec);
                     std::optional<std::string_view> origin;
                     if (auto it = handshake->request.find(http::field::origin);
                         it != handshake->request.end()) {
                       origin = std::string_view(it->value().data(), it->value().size());
                     }
                     if (!cors.AllowsWebSocket(origin)) {
                       finish(HandshakeRefusal{403, "origin not allowed"}, std::move(done));
                       return;
                     }
                     finish(admit(std::as_const(handshake->request)), std::move(done));
                   });
}

// The same with no check of the handler's own.
template <typename Stream, typename Done>
void AcceptWebSocket(boost::beast::websocket::stream<Stream>& ws,
                     const std::optional<HttpRequest>& upgrade, const CorsPolicy& cors,
                     Done&& done) {
  AcceptWebSocket(
      ws, upgrade, cors,
      [](const boost::beast::http::request<boost::beast::http::empty_body>&) {
        return std::optional<HandshakeRefusal>();
      },
      std::forward<Done>(done));
}

}  // namespace switchyard
