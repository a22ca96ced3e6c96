// HttpServer's TLS listeners: the handshake of each connection, and certificate reloads.
#include <array>
#include <boost/asio/write.hpp>
#include <boost/beast/core/detect_ssl.hpp>
#include <boost/beast/core/flat_buffer.hpp>

#include "api/net/http_server.h"
#include "api/net/internal/http_server_worker.h"
#include "api/net/internal/http_wire.h"
#include "common/clock.h"

namespace switchyard {

namespace asio = boost::asio;
namespace beast = boost::beast;
using tcp = asio::ip::tcp;
using boost::system::error_code;
using http_wire::WriteHead;

// The TLS handshake of one connection of a TLS listener, under the header timeout: the first
// bytes tell a TLS ClientHello from plain HTTP (answered 400), then the handshake, then the
// connection goes to its HTTP session or to the upgrade handler. Lives on the accepting
// worker's thread. An HTTP connection is admitted (counted) before its handshake.
class HttpServer::TlsHandshake : public std::enable_shared_from_this<TlsHandshake> {
 public:
  TlsHandshake(HttpServer* server, size_t worker, bool upgrade, tcp::socket socket,
               std::shared_ptr<asio::ssl::context> context)
      : server_(server),
        worker_(worker),
        upgrade_(upgrade),
        context_(std::move(context)),
        stream_(std::move(socket), *context_) {}

  void Start() {
    beast::get_lowest_layer(stream_).expires_after(ToChrono(server_->options_.header_timeout));
    beast::async_detect_ssl(
        stream_.next_layer(), buffer_,
        [self = shared_from_this()](error_code ec, bool is_tls) { self->OnDetected(ec, is_tls); });
  }

  // The server stops: the handshake is cut.
  void Close() {
    if (done_) return;
    error_code ignored;
    beast::get_lowest_layer(stream_).socket().close(ignored);
  }

 private:
  void OnDetected(error_code ec, bool is_tls) {
    if (ec) return Fail();
    if (!is_tls) return RefusePlain();
    stream_.async_handshake(asio::ssl::stream_base::server, buffer_.data(),
                            [self = shared_from_this()](error_code ec, size_t used) {
                              if (ec) return self->Fail();
                              self->buffer_.consume(used);
                              self->Done();
                            });
  }

  void Done() {
    done_ = true;
    beast::get_lowest_layer(stream_).expires_never();
    server_->metrics_->tls_handshakes.Increment();
    auto connection = std::make_unique<TlsConnection>(std::move(context_), std::move(stream_));
    if (server_->stopping_) {
      if (!upgrade_) Release();
      return;
    }
    if (upgrade_) {
      server_->Upgrade(worker_, std::move(connection), std::nullopt);
    } else {
      server_->StartTlsSession(*server_->workers_[worker_], std::move(connection));
    }
  }

  // Not TLS at all: a plain HTTP request on a TLS port gets a 400 that says so, in plain text.
  void RefusePlain() {
    server_->metrics_->tls_plain_refused.Increment();
    HttpResponse answer = server_->workers_[worker_]->handler->LocalAnswer(
        400, "this port speaks TLS only: use https:// or wss://");
    answer.status = 400;
    WriteHead(answer, 11, false, server_->cors_, std::nullopt, /*vary=*/false, head_);
    body_ = std::move(answer.body);
    const std::array<asio::const_buffer, 2> buffers = {asio::buffer(head_), asio::buffer(body_)};
    asio::async_write(stream_.next_layer(), buffers,
                      [self = shared_from_this()](error_code, size_t) {
                        error_code ignored;
                        beast::get_lowest_layer(self->stream_)
                            .socket()
                            .shutdown(tcp::socket::shutdown_send, ignored);
                        self->Finish();
                      });
  }

  void Fail() {
    server_->metrics_->tls_handshake_failures.Increment();
    Finish();
  }

  void Finish() {
    done_ = true;
    error_code ignored;
    beast::get_lowest_layer(stream_).socket().close(ignored);
    if (!upgrade_) Release();
  }

  // An admitted HTTP connection that never became a session.
  void Release() {
    server_->metrics_->connections_open.Add(-1);
    server_->OnSessionClosed();
  }

  HttpServer* const server_;
  const size_t worker_;
  const bool upgrade_;
  std::shared_ptr<asio::ssl::context> context_;  // before stream_, which it must outlive
  TlsStream stream_;
  beast::flat_buffer buffer_;
  std::string head_;
  std::string body_;
  bool done_ = false;
};

void HttpServer::StartTls(size_t worker, size_t listener, tcp::socket socket) {
  const bool upgrade = listeners_[listener].upgrade;
  if (!upgrade && !AdmitHttp(socket)) return;
  error_code ignored;
  socket.set_option(tcp::no_delay(true), ignored);
  auto handshake =
      std::make_shared<TlsHandshake>(this, worker, upgrade, std::move(socket), tls_->Current());
  Worker& w = *workers_[worker];
  std::erase_if(w.handshakes, [](const auto& weak) { return weak.expired(); });
  w.handshakes.push_back(handshake);
  handshake->Start();
}

void HttpServer::CloseHandshakes(Worker& worker) {
  for (auto& weak : worker.handshakes) {
    if (auto handshake = weak.lock()) handshake->Close();
  }
}

absl::Status HttpServer::ReloadTls() {
  if (!tls_) return absl::OkStatus();
  absl::Status status = tls_->Reload();
  (status.ok() ? metrics_->tls_reloads : metrics_->tls_reload_failures).Increment();
  return status;
}

}  // namespace switchyard
