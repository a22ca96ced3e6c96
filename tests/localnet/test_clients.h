#pragma once

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
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

// A keep-alive HTTP JSON-RPC client for tests; every call has a deadline.
class HttpClient {
 public:
  explicit HttpClient(uint16_t port) : port_(port) {}

  // POSTs `body`; returns the response body, or nullopt on error or timeout.
  std::optional<std::string> Post(const std::string& body,
                                  std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
    if (!stream_) {
      stream_.emplace(ioc_);
      boost::system::error_code ec;
      stream_->expires_after(timeout);
      bool done = false;
      stream_->async_connect(tcp::endpoint(net::ip::make_address("127.0.0.1"), port_),
                             [&](boost::system::error_code e) {
                               ec = e;
                               done = true;
                             });
      Run(timeout);
      if (!done || ec) {
        stream_.reset();
        return std::nullopt;
      }
    }
    http::request<http::string_body> req(http::verb::post, "/", 11);
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
      return std::nullopt;
    }
    return res.body();
  }

 private:
  void Run(std::chrono::milliseconds timeout) {
    ioc_.restart();
    ioc_.run_for(timeout + std::chrono::milliseconds(200));
  }

  uint16_t port_;
  net::io_context ioc_;
  std::optional<beast::tcp_stream> stream_;
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
  }
  bool ok() const { return ok_; }

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
};

}  // namespace switchyard::localnet::testing
