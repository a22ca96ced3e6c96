#pragma once

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/websocket.hpp>
#include <chrono>
#include <optional>
#include <string>

namespace switchyard::localnet::testing {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace websocket = beast::websocket;
using tcp = net::ip::tcp;

// An HTTP answer as a test sees it.
struct HttpAnswer {
  unsigned status = 0;
  std::string retry_after;  // the Retry-After header, when present
  std::string body;
};

// A keep-alive HTTP JSON-RPC client for tests; every call has a deadline.
class HttpClient {
 public:
  explicit HttpClient(uint16_t port, std::string path = "/")
      : port_(port), path_(std::move(path)) {}

  // POSTs `body`; returns the response body, or nullopt on error or timeout. A kept-alive
  // connection that the server closed while idle is replaced once, as a client must.
  std::optional<std::string> Post(const std::string& body,
                                  std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
    HttpAnswer answer;
    if (Exchange(body, timeout, &answer)) return std::nullopt;
    return std::move(answer.body);
  }

  // POSTs `body` and returns the error that ended the exchange (none on an answer of any
  // status). Also replaces a connection the server closed while idle, once.
  boost::system::error_code Exchange(const std::string& body, std::chrono::milliseconds timeout,
                                     HttpAnswer* answer) {
    const bool reused = stream_.has_value();
    boost::system::error_code ec = ExchangeOnce(body, timeout, answer);
    if (reused && (ec == http::error::end_of_stream || ec == net::error::eof ||
                   ec == net::error::broken_pipe || ec == net::error::connection_reset)) {
      ec = ExchangeOnce(body, timeout, answer);
    }
    return ec;
  }

  // POSTs `body` on the current connection (or a new one), without replacing a stale one.
  boost::system::error_code ExchangeOnce(const std::string& body, std::chrono::milliseconds timeout,
                                         HttpAnswer* answer) {
    if (!stream_) {
      stream_.emplace(ioc_);
      boost::system::error_code ec = net::error::timed_out;
      stream_->expires_after(timeout);
      stream_->async_connect(tcp::endpoint(net::ip::make_address("127.0.0.1"), port_),
                             [&](boost::system::error_code e) { ec = e; });
      Run(timeout);
      if (ec) {
        stream_.reset();
        return ec;
      }
      ++connections_;
    }
    http::request<http::string_body> req(http::verb::post, path_, 11);
    req.set(http::field::host, "127.0.0.1");
    req.set(http::field::content_type, "application/json");
    req.body() = body;
    req.prepare_payload();
    http::response<http::string_body> res;
    beast::flat_buffer buffer;
    boost::system::error_code ec = net::error::timed_out;
    stream_->expires_after(timeout);
    http::async_write(*stream_, req, [&](boost::system::error_code e, size_t) {
      if (e) {
        ec = e;
        return;
      }
      http::async_read(*stream_, buffer, res,
                       [&](boost::system::error_code e2, size_t) { ec = e2; });
    });
    Run(timeout);
    if (ec) {
      stream_.reset();
      return ec;
    }
    answer->status = res.result_int();
    answer->retry_after = std::string(res[http::field::retry_after]);
    answer->body = std::move(res.body());
    if (!res.keep_alive()) stream_.reset();
    return ec;
  }

  // Waits at most `max` for the server to close the kept-alive connection. Returns how long
  // that took, or nullopt when it is still open (and still usable) after `max`.
  std::optional<std::chrono::milliseconds> WaitForClose(std::chrono::milliseconds max) {
    if (!stream_) return std::chrono::milliseconds(0);
    const auto start = std::chrono::steady_clock::now();
    bool closed = false;
    char byte = 0;
    net::steady_timer timer(ioc_, max);
    stream_->socket().async_read_some(net::buffer(&byte, 1),
                                      [&](boost::system::error_code ec, size_t) {
                                        closed = ec && ec != net::error::operation_aborted;
                                        timer.cancel();
                                      });
    timer.async_wait([&](boost::system::error_code ec) {
      if (!ec) stream_->socket().cancel();
    });
    ioc_.restart();
    ioc_.run();
    if (!closed) return std::nullopt;
    stream_.reset();
    return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                                 start);
  }

  // Connections opened so far.
  int connections() const { return connections_; }

 private:
  void Run(std::chrono::milliseconds timeout) {
    ioc_.restart();
    ioc_.run_for(timeout + std::chrono::milliseconds(200));
  }

  uint16_t port_;
  std::string path_;
  net::io_context ioc_;
  std::optional<beast::tcp_stream> stream_;
  int connections_ = 0;
};

// A WebSocket pubsub client for tests; reads wait at most the given time.
class WsClient {
 public:
  explicit WsClient(uint16_t port) : ws_(ioc_) {
    boost::system::error_code ec;
    beast::get_lowest_layer(ws_).connect(tcp::endpoint(net::ip::make_address("127.0.0.1"), port),
                                         ec);
    if (!ec) ws_.handshake("127.0.0.1", "/", ec);
    ok_ = !ec;
    ws_.control_callback([this](websocket::frame_type kind, beast::string_view) {
      if (kind == websocket::frame_type::ping) ++pings_;
    });
  }
  bool ok() const { return ok_; }
  // Pings received so far; they are answered only while a Read is waiting.
  int pings() const { return pings_; }

  bool Send(const std::string& text) {
    boost::system::error_code ec;
    ws_.write(net::buffer(text), ec);
    return !ec;
  }

  // The next message, or nullopt after `timeout` or when the connection closed.
  std::optional<std::string> Read(std::chrono::milliseconds timeout) {
    if (closed_) return std::nullopt;
    if (!reading_) {
      reading_ = true;
      ws_.async_read(buffer_, [this](boost::system::error_code ec, size_t) {
        reading_ = false;
        if (ec) {
          closed_ = true;
          return;
        }
        ready_ = beast::buffers_to_string(buffer_.data());
        buffer_.consume(buffer_.size());
      });
    }
    ioc_.restart();
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (reading_ && std::chrono::steady_clock::now() < deadline) {
      ioc_.run_one_until(deadline);
    }
    if (reading_ || closed_) return std::nullopt;
    return std::move(ready_);
  }
  bool closed() const { return closed_; }

 private:
  net::io_context ioc_;
  websocket::stream<beast::tcp_stream> ws_;
  beast::flat_buffer buffer_;
  std::string ready_;
  bool reading_ = false;
  bool closed_ = false;
  bool ok_ = false;
  int pings_ = 0;
};

}  // namespace switchyard::localnet::testing
