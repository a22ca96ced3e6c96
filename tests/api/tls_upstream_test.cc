// https upstreams: a TLS server in the test with a self-signed certificate made on the fly.
#include <gtest/gtest.h>

#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>

#include "tests/api/router_fixture.h"
#include "tests/support/test_certificate.h"

namespace switchyard::api_test {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace ssl = asio::ssl;
using tcp = asio::ip::tcp;

// Answers every request on every connection with `{"result":"over-tls"}` and the request's id.
class TlsUpstream {
 public:
  TlsUpstream()
      : tls_(ssl::context::tls_server),
        acceptor_(io_context_, {asio::ip::make_address("127.0.0.1"), 0}) {
    testing::UseTestCertificate(tls_, testing::MakeTestCertificate());
    Accept();
    thread_ = std::thread([this] { io_context_.run(); });
  }
  ~TlsUpstream() {
    asio::post(io_context_, [this] { io_context_.stop(); });
    thread_.join();
  }
  std::string url() const {
    return "https://127.0.0.1:" + std::to_string(acceptor_.local_endpoint().port()) + "/";
  }
  int answered() const { return answered_.load(); }

 private:
  struct Session {
    explicit Session(tcp::socket socket, ssl::context& tls) : stream(std::move(socket), tls) {}
    beast::ssl_stream<tcp::socket> stream;
    beast::flat_buffer buffer;
    http::request<http::string_body> request;
    http::response<http::string_body> response;
  };

  void Accept() {
    acceptor_.async_accept([this](beast::error_code ec, tcp::socket socket) {
      if (ec) return;
      auto session = std::make_shared<Session>(std::move(socket), tls_);
      session->stream.async_handshake(ssl::stream_base::server,
                                      [this, session](beast::error_code ec) {
                                        if (!ec) Read(session);
                                      });
      Accept();
    });
  }

  void Read(std::shared_ptr<Session> session) {
    session->request = {};
    http::async_read(session->stream, session->buffer, session->request,
                     [this, session](beast::error_code ec, size_t) {
                       if (ec) return;
                       absl::StatusOr<RpcBody> body = ParseRpcBody(session->request.body(), {});
                       session->response = {http::status::ok, 11};
                       session->response.body() = RpcResultResponse(
                           body.ok() ? body->calls[0].id_or_null() : "null", R"("over-tls")");
                       session->response.keep_alive(true);
                       session->response.prepare_payload();
                       ++answered_;
                       http::async_write(session->stream, session->response,
                                         [this, session](beast::error_code ec, size_t) {
                                           if (!ec) Read(session);
                                         });
                     });
  }

  asio::io_context io_context_;
  ssl::context tls_;
  tcp::acceptor acceptor_;
  std::thread thread_;
  std::atomic<int> answered_{0};
};

class TlsUpstreamTest : public RouterFixture {};

TEST_F(TlsUpstreamTest, HttpsUpstreamIsServedOverTlsWithKeepAlive) {
  TlsUpstream upstream;
  Start([&](RouterOptions& options, HttpServerOptions& server) {
    options.upstreams[0].endpoints = {{upstream.url(), 1}};
    options.upstream.verify_tls = false;  // the certificate is self-signed
    server.threads = 1;
  });
  TestClient client(port());
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(client.Post(R"({"jsonrpc":"2.0","id":5,"method":"getSlot"})").body,
              R"({"jsonrpc":"2.0","result":"over-tls","id":5})");
  }
  EXPECT_EQ(upstream.answered(), 3);
}

TEST_F(TlsUpstreamTest, UntrustedCertificateIsRefusedWhenVerifying) {
  TlsUpstream upstream;
  Start([&](RouterOptions& options, HttpServerOptions&) {
    options.upstreams[0].endpoints = {{upstream.url(), 1}};
    options.upstream.verify_tls = true;
  });
  TestClient client(port());
  ClientResponse response = client.Post(R"({"jsonrpc":"2.0","id":5,"method":"getSlot"})");
  EXPECT_NE(response.body.find(R"("code":-32603)"), std::string::npos) << response.body;
  EXPECT_EQ(upstream.answered(), 0);
}

}  // namespace
}  // namespace switchyard::api_test
