#include "ingest/base_clients.h"

#include <fmt/format.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/websocket.hpp>

namespace switchyard {
namespace {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace websocket = beast::websocket;
using tcp = net::ip::tcp;

std::chrono::steady_clock::duration ToChrono(absl::Duration d) {
  return std::chrono::duration_cast<std::chrono::steady_clock::duration>(
      absl::ToChronoNanoseconds(d));
}

// Runs the io_context until `done` or the deadline; returns false on timeout.
bool RunUntil(net::io_context& ioc, const bool& done, absl::Duration timeout) {
  ioc.restart();
  const auto deadline = std::chrono::steady_clock::now() + ToChrono(timeout);
  while (!done && std::chrono::steady_clock::now() < deadline) ioc.run_one_until(deadline);
  return done;
}

absl::Status IoError(const char* what, const boost::system::error_code& ec) {
  return absl::UnavailableError(fmt::format("base layer {}: {}", what, ec.message()));
}

absl::StatusOr<tcp::resolver::results_type> Resolve(net::io_context& ioc,
                                                    const BaseEndpoint& endpoint) {
  tcp::resolver resolver(ioc);
  boost::system::error_code ec;
  auto results = resolver.resolve(endpoint.host, endpoint.port, ec);
  if (ec) return IoError("name resolution", ec);
  return results;
}

}  // namespace

absl::StatusOr<BaseEndpoint> ParseBaseUrl(const std::string& url) {
  std::string rest;
  std::string default_port;
  if (url.rfind("http://", 0) == 0) {
    rest = url.substr(7);
    default_port = "80";
  } else if (url.rfind("ws://", 0) == 0) {
    rest = url.substr(5);
    default_port = "80";
  } else {
    return absl::InvalidArgumentError(fmt::format(
        "base URL '{}' must start with http:// or ws:// (TLS is not supported yet)", url));
  }
  BaseEndpoint endpoint;
  const size_t slash = rest.find('/');
  const std::string authority = rest.substr(0, slash);
  if (slash != std::string::npos) endpoint.path = rest.substr(slash);
  const size_t colon = authority.rfind(':');
  endpoint.host = authority.substr(0, colon);
  endpoint.port = colon == std::string::npos ? default_port : authority.substr(colon + 1);
  if (endpoint.host.empty() || endpoint.port.empty()) {
    return absl::InvalidArgumentError(fmt::format("base URL '{}' has no host or port", url));
  }
  return endpoint;
}

struct BaseRpcClient::Impl {
  explicit Impl(BaseEndpoint e) : endpoint(std::move(e)) {}
  BaseEndpoint endpoint;
  net::io_context ioc;
  std::optional<beast::tcp_stream> stream;
  beast::flat_buffer buffer;
  uint64_t next_id = 1;
};

BaseRpcClient::BaseRpcClient(BaseEndpoint endpoint)
    : impl_(std::make_unique<Impl>(std::move(endpoint))) {}
BaseRpcClient::~BaseRpcClient() = default;

absl::StatusOr<std::string> BaseRpcClient::Call(const std::string& method,
                                                const std::string& params, absl::Duration timeout) {
  Impl& s = *impl_;
  if (!s.stream) {
    auto results = Resolve(s.ioc, s.endpoint);
    if (!results.ok()) return results.status();
    s.stream.emplace(s.ioc);
    s.stream->expires_after(ToChrono(timeout));
    bool done = false;
    boost::system::error_code ec;
    s.stream->async_connect(*results, [&](boost::system::error_code e, const tcp::endpoint&) {
      ec = e;
      done = true;
    });
    if (!RunUntil(s.ioc, done, timeout + absl::Milliseconds(100)) || ec) {
      s.stream.reset();
      return ec ? IoError("connect", ec)
                : absl::DeadlineExceededError("base layer connect timed out");
    }
  }
  http::request<http::string_body> request(http::verb::post, s.endpoint.path, 11);
  request.set(http::field::host, s.endpoint.host);
  request.set(http::field::content_type, "application/json");
  request.keep_alive(true);
  request.body() = fmt::format(R"({{"jsonrpc":"2.0","id":{},"method":"{}","params":{}}})",
                               s.next_id++, method, params);
  request.prepare_payload();
  http::response<http::string_body> response;
  boost::system::error_code ec;
  bool done = false;
  s.stream->expires_after(ToChrono(timeout));
  http::async_write(*s.stream, request, [&](boost::system::error_code e, size_t) {
    if (e) {
      ec = e;
      done = true;
      return;
    }
    http::async_read(*s.stream, s.buffer, response, [&](boost::system::error_code e2, size_t) {
      ec = e2;
      done = true;
    });
  });
  if (!RunUntil(s.ioc, done, timeout + absl::Milliseconds(100)) || ec) {
    s.stream.reset();
    s.buffer.clear();
    return ec ? IoError(method.c_str(), ec)
              : absl::DeadlineExceededError(fmt::format("base layer {} timed out", method));
  }
  if (!response.keep_alive()) s.stream.reset();
  if (response.result() != http::status::ok) {
    return absl::UnavailableError(
        fmt::format("base layer {} answered HTTP {}", method, response.result_int()));
  }
  return std::move(response.body());
}

struct BasePubsubConnection::Impl {
  net::io_context ioc;
  websocket::stream<beast::tcp_stream> ws{ioc};
  beast::flat_buffer buffer;
  bool reading = false;
  bool read_done = false;
  boost::system::error_code read_error;
};

BasePubsubConnection::BasePubsubConnection(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

BasePubsubConnection::~BasePubsubConnection() {
  boost::system::error_code ec;
  beast::get_lowest_layer(impl_->ws).socket().close(ec);
}

absl::StatusOr<std::unique_ptr<BasePubsubConnection>> BasePubsubConnection::Connect(
    const BaseEndpoint& endpoint, absl::Duration timeout) {
  auto impl = std::make_unique<Impl>();
  auto results = Resolve(impl->ioc, endpoint);
  if (!results.ok()) return results.status();
  boost::system::error_code ec;
  bool done = false;
  beast::get_lowest_layer(impl->ws).expires_after(ToChrono(timeout));
  beast::get_lowest_layer(impl->ws).async_connect(
      *results, [&](boost::system::error_code e, const tcp::endpoint&) {
        if (e) {
          ec = e;
          done = true;
          return;
        }
        impl->ws.async_handshake(endpoint.host, endpoint.path, [&](boost::system::error_code e2) {
          ec = e2;
          done = true;
        });
      });
  if (!RunUntil(impl->ioc, done, timeout + absl::Milliseconds(100)) || ec) {
    return ec ? IoError("pubsub connect", ec)
              : absl::DeadlineExceededError("base layer pubsub connect timed out");
  }
  // Reads are bounded by Read's own deadline, not by the stream's.
  beast::get_lowest_layer(impl->ws).expires_never();
  return std::unique_ptr<BasePubsubConnection>(new BasePubsubConnection(std::move(impl)));
}

absl::Status BasePubsubConnection::Send(const std::string& text, absl::Duration timeout) {
  Impl& s = *impl_;
  boost::system::error_code ec;
  bool done = false;
  s.ws.async_write(net::buffer(text), [&](boost::system::error_code e, size_t) {
    ec = e;
    done = true;
  });
  // A pending read may complete while we wait; its result is kept for Read.
  s.ioc.restart();
  const auto deadline = std::chrono::steady_clock::now() + ToChrono(timeout);
  while (!done && std::chrono::steady_clock::now() < deadline) s.ioc.run_one_until(deadline);
  if (!done) return absl::DeadlineExceededError("base layer pubsub write timed out");
  if (ec) return IoError("pubsub write", ec);
  return absl::OkStatus();
}

absl::StatusOr<std::optional<std::string>> BasePubsubConnection::Read(absl::Duration timeout) {
  Impl& s = *impl_;
  if (!s.reading && !s.read_done) {
    s.reading = true;
    s.ws.async_read(s.buffer, [&s](boost::system::error_code ec, size_t) {
      s.reading = false;
      s.read_done = true;
      s.read_error = ec;
    });
  }
  if (!s.read_done) {
    s.ioc.restart();
    const auto deadline = std::chrono::steady_clock::now() + ToChrono(timeout);
    while (!s.read_done && std::chrono::steady_clock::now() < deadline) {
      s.ioc.run_one_until(deadline);
    }
  }
  if (!s.read_done) return std::optional<std::string>();
  s.read_done = false;
  if (s.read_error) return IoError("pubsub read", s.read_error);
  std::string message = beast::buffers_to_string(s.buffer.data());
  s.buffer.consume(s.buffer.size());
  return std::optional<std::string>(std::move(message));
}

}  // namespace switchyard
