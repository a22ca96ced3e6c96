#include "ingest/base_clients.h"

#include <fmt/format.h>
#include <openssl/ssl.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <boost/beast/websocket.hpp>
#include <boost/beast/websocket/ssl.hpp>

#include "absl/strings/cord.h"
#include "absl/strings/numbers.h"
#include "common/clock.h"
#include "common/socket_liveness.h"
#include "common/status.h"

namespace switchyard {
namespace {

namespace net = boost::asio;
namespace ssl = net::ssl;
namespace beast = boost::beast;
namespace http = beast::http;
namespace websocket = beast::websocket;
using tcp = net::ip::tcp;
using TlsStream = beast::ssl_stream<beast::tcp_stream>;

constexpr uint64_t kMaxResponseBytes = 256ull << 20;  // a getProgramAccounts of a big program

// Runs the io_context until `done` or the deadline; returns false on timeout.
bool RunUntil(net::io_context& ioc, const bool& done, absl::Duration timeout) {
  ioc.restart();
  const auto deadline = std::chrono::steady_clock::now() + ToChrono(timeout);
  while (!done && std::chrono::steady_clock::now() < deadline) ioc.run_one_until(deadline);
  return done;
}

// Gives up on a stream whose operation did not finish in time: closes its socket and runs the
// aborted handlers now, while the caller's locals they refer to still exist.
template <typename Stream>
void Abandon(net::io_context& ioc, Stream& stream) {
  boost::system::error_code ec;
  beast::get_lowest_layer(stream).socket().close(ec);
  ioc.restart();
  ioc.poll();
}

constexpr std::string_view kBaseLayer = "base layer";

absl::Status IoError(std::string_view name, std::string_view what,
                     const boost::system::error_code& ec) {
  return absl::UnavailableError(fmt::format("{} {}: {}", name, what, ec.message()));
}

absl::StatusOr<tcp::resolver::results_type> Resolve(net::io_context& ioc, const Url& endpoint,
                                                    std::string_view name) {
  tcp::resolver resolver(ioc);
  boost::system::error_code ec;
  auto results = resolver.resolve(endpoint.host, endpoint.port, ec);
  if (ec) return IoError(name, "name resolution", ec);
  return results;
}

absl::StatusOr<std::unique_ptr<ssl::context>> MakeTlsContext(const BaseTlsOptions& options) {
  auto context = std::make_unique<ssl::context>(ssl::context::tls_client);
  boost::system::error_code ec;
  if (options.ca_file.empty()) {
    context->set_default_verify_paths(ec);
  } else {
    context->load_verify_file(options.ca_file, ec);
  }
  if (ec) {
    return absl::InvalidArgumentError(fmt::format(
        "base layer TLS: cannot load {}: {}",
        options.ca_file.empty() ? "the system trust store" : options.ca_file, ec.message()));
  }
  context->set_verify_mode(options.verify ? ssl::verify_peer : ssl::verify_none);
  return context;
}

// Prepares a TLS stream for the handshake with `host`: SNI and, when verifying, the
// certificate's name checked against the host.
absl::Status PrepareTls(TlsStream& stream, const std::string& host, bool verify) {
  if (!SSL_set_tlsext_host_name(stream.native_handle(), host.c_str())) {
    return absl::InvalidArgumentError(fmt::format("base layer TLS: bad server name '{}'", host));
  }
  if (verify) stream.set_verify_callback(ssl::host_name_verification(host));
  return absl::OkStatus();
}

// Connects the lowest layer of `stream` to `endpoint` and, for TLS, runs the handshake;
// `then` continues on success (a WebSocket upgrade). Returns when done or at the deadline.
template <typename Stream, typename Then>
absl::Status ConnectStream(net::io_context& ioc, Stream& stream,
                           const tcp::resolver::results_type& results, TlsStream* tls,
                           absl::Duration timeout, std::string_view name, Then then) {
  boost::system::error_code ec;
  bool done = false;
  const char* stage = "connect";
  beast::get_lowest_layer(stream).expires_after(ToChrono(timeout));
  beast::get_lowest_layer(stream).async_connect(
      results, [&](boost::system::error_code e, const tcp::endpoint&) {
        auto finish = [&](boost::system::error_code e2) {
          ec = e2;
          done = true;
        };
        if (e) return finish(e);
        if (tls == nullptr) {
          stage = "handshake";
          return then(finish);
        }
        stage = "TLS handshake";
        tls->async_handshake(ssl::stream_base::client, [&, finish](boost::system::error_code e2) {
          if (e2) return finish(e2);
          stage = "handshake";
          then(finish);
        });
      });
  if (!RunUntil(ioc, done, timeout + absl::Milliseconds(100))) {
    Abandon(ioc, stream);
    return absl::DeadlineExceededError(fmt::format("{} {} timed out", name, stage));
  }
  if (ec) return IoError(name, stage, ec);
  return absl::OkStatus();
}

}  // namespace

namespace {

constexpr char kRetryAfterPayload[] = "type.switchyard/base.retry_after_ms";

// The wait a 429 asked for: Retry-After in seconds (an HTTP date is not honoured).
std::optional<absl::Duration> ParseRetryAfter(const std::string& header) {
  uint64_t seconds = 0;
  if (header.empty() || !absl::SimpleAtoi(header, &seconds)) return std::nullopt;
  return absl::Seconds(static_cast<int64_t>(std::min<uint64_t>(seconds, 3600)));
}

}  // namespace

std::optional<absl::Duration> RetryAfterOf(const absl::Status& status) {
  absl::optional<absl::Cord> payload = status.GetPayload(kRetryAfterPayload);
  int64_t ms = 0;
  if (!payload || !absl::SimpleAtoi(std::string(*payload), &ms)) return std::nullopt;
  return absl::Milliseconds(ms);
}

struct HttpReadClient::Impl {
  Impl(Url e, std::string n, BaseTlsOptions t, Counter* stale)
      : endpoint(std::move(e)),
        name(std::move(n)),
        tls_options(std::move(t)),
        stale_retries(stale) {}
  Url endpoint;
  std::string name;
  BaseTlsOptions tls_options;
  Counter* stale_retries;
  net::io_context ioc;
  std::unique_ptr<ssl::context> tls_context;  // made on the first https connection
  std::optional<beast::tcp_stream> plain;
  std::optional<TlsStream> secure;
  static constexpr size_t kReadSize = 64 * 1024;
  beast::flat_buffer buffer;

  bool connected() const { return plain.has_value() || secure.has_value(); }
  beast::tcp_stream& Lowest() { return secure ? beast::get_lowest_layer(*secure) : *plain; }
  void Drop() {
    plain.reset();
    secure.reset();
    buffer.clear();
  }

  absl::Status Connect(absl::Duration timeout) {
    auto results = Resolve(ioc, endpoint, name);
    if (!results.ok()) return results.status();
    auto no_upgrade = [](auto finish) { finish(boost::system::error_code()); };
    absl::Status connected;
    if (endpoint.tls) {
      if (tls_context == nullptr) {
        ASSIGN_OR_RETURN(tls_context, MakeTlsContext(tls_options));
      }
      secure.emplace(ioc, *tls_context);
      connected = PrepareTls(*secure, endpoint.host, tls_options.verify);
      if (connected.ok()) {
        connected = ConnectStream(ioc, *secure, *results, &*secure, timeout, name, no_upgrade);
      }
    } else {
      plain.emplace(ioc);
      connected = ConnectStream(ioc, *plain, *results, nullptr, timeout, name, no_upgrade);
    }
    if (!connected.ok()) Drop();
    return connected;
  }

  struct Exchanged {
    absl::StatusOr<HttpReply> reply;
    // Failed in transport before a byte of the answer arrived (not a timeout): on a reused
    // connection, the peer had closed it while it was idle.
    bool before_answer = false;
  };

  Exchanged Exchange(const http::request<http::string_body>& request, std::string_view what,
                     absl::Duration timeout) {
    http::response_parser<http::string_body> parser;
    parser.body_limit(kMaxResponseBytes);
    boost::system::error_code ec;
    bool done = false;
    auto exchange = [&](auto& stream) {
      beast::get_lowest_layer(stream).expires_after(ToChrono(timeout));
      http::async_write(stream, request, [&](boost::system::error_code e, size_t) {
        if (e) {
          ec = e;
          done = true;
          return;
        }
        // Beast reads at most the buffer's free capacity (512 bytes at the least), and the
        // parser takes every byte it is given, so a buffer left to grow by itself stays at 512
        // bytes and a large answer (a block) takes hundreds of reads.
        buffer.reserve(kReadSize);
        http::async_read(stream, buffer, parser, [&](boost::system::error_code e2, size_t) {
          ec = e2;
          done = true;
        });
      });
    };
    if (secure) {
      exchange(*secure);
    } else {
      exchange(*plain);
    }
    const bool in_time = RunUntil(ioc, done, timeout + absl::Milliseconds(100));
    if (!in_time || ec) {
      if (!in_time) {
        if (secure) {
          Abandon(ioc, *secure);
        } else {
          Abandon(ioc, *plain);
        }
      }
      Drop();
      if (!in_time || ec == beast::error::timeout) {
        return {absl::DeadlineExceededError(fmt::format("{} {} timed out", name, what))};
      }
      return {IoError(name, what, ec), !parser.got_some()};
    }
    http::response<http::string_body> response = parser.release();
    if (!response.keep_alive()) Drop();
    HttpReply reply;
    reply.status = response.result_int();
    reply.retry_after = std::string(response[http::field::retry_after]);
    reply.body = std::move(response.body());
    return {std::move(reply)};
  }

  absl::StatusOr<HttpReply> Send(const http::request<http::string_body>& request,
                                 std::string_view what, absl::Duration timeout) {
    // A connection the server closed while it was idle is not used again.
    if (connected() && !IdleSocketIsOpen(Lowest().socket().native_handle())) Drop();
    for (int attempt = 0;; ++attempt) {
      const bool reused = connected();
      if (!reused) RETURN_IF_ERROR(Connect(timeout));
      Exchanged result = Exchange(request, what, timeout);
      // Every request of this client is a read: one that met a stale connection goes again at
      // once on a fresh one, and is no failure.
      if (!result.reply.ok() && reused && result.before_answer && attempt == 0) {
        if (stale_retries != nullptr) stale_retries->Increment();
        continue;
      }
      return std::move(result.reply);
    }
  }

  std::string Target(std::string_view below) const {
    std::string_view base = endpoint.path;
    while (base.ends_with('/')) base.remove_suffix(1);
    return fmt::format("{}{}{}", base, below.starts_with('/') ? "" : "/", below);
  }
};

HttpReadClient::HttpReadClient(Url endpoint, std::string name, BaseTlsOptions tls,
                               Counter* stale_retries)
    : impl_(std::make_unique<Impl>(std::move(endpoint), std::move(name), std::move(tls),
                                   stale_retries)) {}
HttpReadClient::~HttpReadClient() = default;

absl::StatusOr<HttpReply> HttpReadClient::Get(std::string_view target, absl::Duration timeout) {
  http::request<http::string_body> request(http::verb::get, impl_->Target(target), 11);
  request.set(http::field::host, impl_->endpoint.HostHeader());
  request.keep_alive(true);
  return impl_->Send(request, fmt::format("GET {}", target), timeout);
}

absl::StatusOr<HttpReply> HttpReadClient::PostJson(std::string body, std::string_view what,
                                                   absl::Duration timeout) {
  http::request<http::string_body> request(http::verb::post, impl_->endpoint.path, 11);
  request.set(http::field::host, impl_->endpoint.host);
  request.set(http::field::content_type, "application/json");
  request.keep_alive(true);
  request.body() = std::move(body);
  request.prepare_payload();
  return impl_->Send(request, what, timeout);
}

BaseRpcClient::BaseRpcClient(BaseEndpoint endpoint, BaseTlsOptions tls, Counter* stale_retries)
    : http_(std::move(endpoint), "base layer", std::move(tls), stale_retries) {}
BaseRpcClient::~BaseRpcClient() = default;

absl::StatusOr<std::string> BaseRpcClient::Call(const std::string& method,
                                                const std::string& params, absl::Duration timeout) {
  std::string body = fmt::format(R"({{"jsonrpc":"2.0","id":{},"method":"{}","params":{}}})",
                                 next_id_++, method, params);
  ASSIGN_OR_RETURN(HttpReply reply, http_.PostJson(std::move(body), method, timeout));
  if (reply.status == 429) {
    absl::Status limited = absl::ResourceExhaustedError(
        fmt::format("base layer {} answered HTTP 429 (rate limited)", method));
    if (auto wait = ParseRetryAfter(reply.retry_after)) {
      limited.SetPayload(kRetryAfterPayload,
                         absl::Cord(std::to_string(absl::ToInt64Milliseconds(*wait))));
    }
    return limited;
  }
  if (reply.status != 200) {
    return absl::UnavailableError(
        fmt::format("base layer {} answered HTTP {}", method, reply.status));
  }
  return std::move(reply.body);
}

struct BasePubsubConnection::Impl {
  net::io_context ioc;
  std::unique_ptr<ssl::context> tls_context;
  std::optional<websocket::stream<beast::tcp_stream>> plain;
  std::optional<websocket::stream<TlsStream>> secure;
  beast::flat_buffer buffer;
  bool reading = false;
  bool read_done = false;
  boost::system::error_code read_error;

  // Calls f with whichever WebSocket stream this connection has.
  template <typename F>
  void With(F&& f) {
    if (secure) {
      f(*secure);
    } else {
      f(*plain);
    }
  }
};

BasePubsubConnection::BasePubsubConnection(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

BasePubsubConnection::~BasePubsubConnection() {
  impl_->With([](auto& ws) {
    boost::system::error_code ec;
    beast::get_lowest_layer(ws).socket().close(ec);
  });
}

absl::StatusOr<std::unique_ptr<BasePubsubConnection>> BasePubsubConnection::Connect(
    const BaseEndpoint& endpoint, absl::Duration timeout, const BaseTlsOptions& tls) {
  auto impl = std::make_unique<Impl>();
  auto results = Resolve(impl->ioc, endpoint, kBaseLayer);
  if (!results.ok()) return results.status();
  const std::string host = endpoint.HostHeader();
  auto upgrade = [&](auto& ws) {
    return [&](auto finish) { ws.async_handshake(host, endpoint.path, finish); };
  };
  absl::Status connected;
  if (endpoint.tls) {
    ASSIGN_OR_RETURN(impl->tls_context, MakeTlsContext(tls));
    impl->secure.emplace(impl->ioc, *impl->tls_context);
    TlsStream& tls_stream = impl->secure->next_layer();
    connected = PrepareTls(tls_stream, endpoint.host, tls.verify);
    if (connected.ok()) {
      connected = ConnectStream(impl->ioc, *impl->secure, *results, &tls_stream, timeout,
                                kBaseLayer, upgrade(*impl->secure));
    }
  } else {
    impl->plain.emplace(impl->ioc);
    connected = ConnectStream(impl->ioc, *impl->plain, *results, nullptr, timeout, kBaseLayer,
                              upgrade(*impl->plain));
  }
  if (!connected.ok()) {
    return absl::Status(connected.code(),
                        fmt::format("pubsub: {}", std::string(connected.message())));
  }
  // Reads are bounded by Read's own deadline, not by the stream's.
  impl->With([](auto& ws) { beast::get_lowest_layer(ws).expires_never(); });
  return std::unique_ptr<BasePubsubConnection>(new BasePubsubConnection(std::move(impl)));
}

absl::Status BasePubsubConnection::Send(const std::string& text, absl::Duration timeout) {
  Impl& s = *impl_;
  boost::system::error_code ec;
  bool done = false;
  s.With([&](auto& ws) {
    ws.async_write(net::buffer(text), [&](boost::system::error_code e, size_t) {
      ec = e;
      done = true;
    });
  });
  // A pending read may complete while we wait; its result is kept for Read.
  if (!RunUntil(s.ioc, done, timeout)) {
    s.With([&s](auto& ws) { Abandon(s.ioc, ws); });
    return absl::DeadlineExceededError("base layer pubsub write timed out");
  }
  if (ec) return IoError(kBaseLayer, "pubsub write", ec);
  return absl::OkStatus();
}

absl::StatusOr<std::optional<std::string>> BasePubsubConnection::Read(absl::Duration timeout) {
  Impl& s = *impl_;
  if (!s.reading && !s.read_done) {
    s.reading = true;
    s.With([&s](auto& ws) {
      ws.async_read(s.buffer, [&s](boost::system::error_code ec, size_t) {
        s.reading = false;
        s.read_done = true;
        s.read_error = ec;
      });
    });
  }
  if (!s.read_done) RunUntil(s.ioc, s.read_done, timeout);
  if (!s.read_done) return std::optional<std::string>();
  s.read_done = false;
  if (s.read_error) return IoError(kBaseLayer, "pubsub read", s.read_error);
  std::string message = beast::buffers_to_string(s.buffer.data());
  s.buffer.consume(s.buffer.size());
  return std::optional<std::string>(std::move(message));
}

}  // namespace switchyard
