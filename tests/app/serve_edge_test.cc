// `switchyard serve` at the edge, over real sockets: TLS on the api and pubsub listeners (HTTPS,
// WSS, a plain request refused, a failed handshake, a certificate reload on SIGHUP) in front
// of a localnet base layer, and the regional /_redirect and /_getlink by client address.

#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <boost/beast/websocket.hpp>
#include <boost/beast/websocket/ssl.hpp>
#include <chrono>
#include <regex>
#include <string>

#include "tests/app/process_test.h"
#include "tests/support/test_certificate.h"

namespace switchyard {
namespace {

using namespace std::chrono_literals;
namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace ssl = asio::ssl;
namespace websocket = beast::websocket;
using boost::system::error_code;
using tcp = asio::ip::tcp;
using testing::HttpGet;
using testing::JsonInt;
using testing::MetricValue;
using testing::Request;
using testing::TestCertificate;
using testing::WaitFor;

constexpr std::string_view kFunded = "9WzDXwBbmkg8ZTbNMqUxvQRAyrZzDsGYdLVL9zYtAWWM";

// Runs `ioc` until the operation started by `start(handler)` completes, for at most 5 s;
// false on timeout (the operation's error otherwise lands in `ec`).
template <typename Start>
bool Await(asio::io_context& ioc, error_code& ec, Start start) {
  bool done = false;
  start([&](error_code result, auto&&...) {
    ec = result;
    done = true;
  });
  ioc.restart();
  const auto end = std::chrono::steady_clock::now() + 5s;
  while (!done && std::chrono::steady_clock::now() < end) ioc.run_one_for(100ms);
  return done;
}

// The PEM of the certificate a TLS peer presented.
std::string PeerCertificatePem(SSL* ssl) {
  X509* cert = SSL_get1_peer_certificate(ssl);
  if (cert == nullptr) return "";
  BIO* bio = BIO_new(BIO_s_mem());
  PEM_write_bio_X509(bio, cert);
  char* data = nullptr;
  const long size = BIO_get_mem_data(bio, &data);  // NOLINT(google-runtime-int): OpenSSL's
  std::string pem(data, static_cast<size_t>(size));
  BIO_free(bio);
  X509_free(cert);
  return pem;
}

// One kept-alive HTTPS connection that trusts `authorities`.
class HttpsClient {
 public:
  HttpsClient(uint16_t port, const std::vector<TestCertificate>& authorities)
      : context_(ssl::context::tls_client), stream_(ioc_, context_) {
    for (const TestCertificate& ca : authorities) {
      context_.add_certificate_authority(asio::buffer(ca.certificate_pem));
    }
    stream_ = beast::ssl_stream<beast::tcp_stream>(ioc_, context_);
    stream_.set_verify_mode(ssl::verify_peer);
    SSL_set_tlsext_host_name(stream_.native_handle(), "localhost");
    error_code ec;
    connected_ =
        Await(ioc_, ec,
              [&](auto handler) {
                beast::get_lowest_layer(stream_).async_connect(
                    tcp::endpoint(asio::ip::make_address("127.0.0.1"), port), handler);
              }) &&
        !ec &&
        Await(ioc_, ec,
              [&](auto handler) { stream_.async_handshake(ssl::stream_base::client, handler); }) &&
        !ec;
    handshake_error_ = ec;
  }

  bool connected() const { return connected_; }
  error_code handshake_error() const { return handshake_error_; }
  std::string PeerCertificate() { return PeerCertificatePem(stream_.native_handle()); }

  // The body of the answer to a POST, or nullopt.
  std::optional<std::string> Post(const std::string& body) {
    http::request<http::string_body> request(http::verb::post, "/", 11);
    request.set(http::field::host, "localhost");
    request.set(http::field::content_type, "application/json");
    request.body() = body;
    request.prepare_payload();
    http::response<http::string_body> response;
    error_code ec;
    if (!Await(ioc_, ec, [&](auto h) { http::async_write(stream_, request, h); }) || ec) {
      return std::nullopt;
    }
    if (!Await(ioc_, ec, [&](auto h) { http::async_read(stream_, buffer_, response, h); }) || ec) {
      return std::nullopt;
    }
    if (response.result_int() != 200) return std::nullopt;
    return response.body();
  }

 private:
  asio::io_context ioc_;
  ssl::context context_;
  beast::ssl_stream<beast::tcp_stream> stream_;
  beast::flat_buffer buffer_;
  bool connected_ = false;
  error_code handshake_error_;
};

// slotSubscribe over WSS on `port`: the subscription's answer and its first notification, or
// what went wrong.
std::string SlotSubscribeOverWss(uint16_t port, const TestCertificate& authority) {
  asio::io_context ioc;
  ssl::context context(ssl::context::tls_client);
  context.add_certificate_authority(asio::buffer(authority.certificate_pem));
  websocket::stream<beast::ssl_stream<beast::tcp_stream>> ws(ioc, context);
  ws.next_layer().set_verify_mode(ssl::verify_peer);
  SSL_set_tlsext_host_name(ws.next_layer().native_handle(), "localhost");
  error_code ec;
  if (!Await(ioc, ec,
             [&](auto h) {
               beast::get_lowest_layer(ws).async_connect(
                   tcp::endpoint(asio::ip::make_address("127.0.0.1"), port), h);
             }) ||
      ec) {
    return "connect failed";
  }
  if (!Await(ioc, ec,
             [&](auto h) { ws.next_layer().async_handshake(ssl::stream_base::client, h); }) ||
      ec) {
    return "TLS handshake failed: " + ec.message();
  }
  beast::get_lowest_layer(ws).expires_never();
  if (!Await(ioc, ec, [&](auto h) { ws.async_handshake("localhost", "/", h); }) || ec) {
    return "WebSocket handshake failed: " + ec.message();
  }
  const std::string subscribe = R"({"jsonrpc":"2.0","id":1,"method":"slotSubscribe"})";
  if (!Await(ioc, ec, [&](auto h) { ws.async_write(asio::buffer(subscribe), h); }) || ec) {
    return "write failed";
  }
  std::string out;
  for (int message = 0; message < 2; ++message) {
    beast::flat_buffer buffer;
    if (!Await(ioc, ec, [&](auto h) { ws.async_read(buffer, h); }) || ec) {
      return out + " | read failed";
    }
    out += beast::buffers_to_string(buffer.data());
    out += '\n';
  }
  return out;
}

// A GET from source address `from` (any 127.x.y.z reaches the loopback listener); the whole
// answer as text.
std::string GetFrom(const std::string& from, uint16_t port, const std::string& target) {
  asio::io_context ioc;
  tcp::socket socket(ioc);
  socket.open(tcp::v4());
  socket.bind(tcp::endpoint(asio::ip::make_address(from), 0));
  error_code ec;
  if (!Await(ioc, ec,
             [&](auto h) {
               socket.async_connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), port), h);
             }) ||
      ec) {
    return "connect failed";
  }
  const std::string request =
      fmt::format("GET {} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n", target);
  asio::write(socket, asio::buffer(request), ec);
  std::string answer;
  Await(ioc, ec, [&](auto h) { asio::async_read(socket, asio::dynamic_buffer(answer), h); });
  return answer;
}

class ServeEdgeTest : public testing::ProcessTest {
 protected:
  struct Ports {
    uint16_t api = 0;
    uint16_t admin = 0;
    uint16_t pubsub = 0;
  };

  void WriteCertificate(const TestCertificate& certificate) {
    std::ofstream(cert_file_) << certificate.certificate_pem;
    std::ofstream(key_file_) << certificate.private_key_pem;
  }

  // serve with TLS on its api and pubsub listeners, in front of a localnet base layer.
  Ports StartTlsServe() {
    const uint16_t base =
        StartLocalnet("base", {"--fund", fmt::format("{}=4242", kFunded), "--slot-ms", "100"});
    const std::string config =
        WriteFile("serve.toml",
                  fmt::format("[api]\nlisten = \"127.0.0.1:0\"\nthreads = 2\n"
                              "tls_cert_file = \"{}\"\ntls_key_file = \"{}\"\n"
                              "[admin]\nlisten = \"127.0.0.1:0\"\n"
                              "[upstreams.base]\nendpoints = [{{url = \"http://127.0.0.1:{}\"}}]\n",
                              cert_file_, key_file_, base));
    const std::string ready = dir_.Sub("serve.ready");
    serve_ = Start({SWITCHYARD_BINARY, "serve", "--config", config, "--data-dir", dir_.Sub("data"),
                    "--ready-file", ready});
    const std::string text = WaitForReadyFile(ready);
    Ports ports{static_cast<uint16_t>(JsonInt(text, "api")),
                static_cast<uint16_t>(JsonInt(text, "admin")),
                static_cast<uint16_t>(JsonInt(text, "pubsub"))};
    EXPECT_GT(ports.pubsub, 0) << text;
    return ports;
  }

  int64_t Metric(uint16_t admin, const std::string& series) {
    std::optional<testing::HttpAnswer> metrics = HttpGet(admin, "/metrics");
    return metrics ? MetricValue(metrics->body, series) : -2;
  }

  const std::string cert_file_ = dir_.Sub("cert.pem");
  const std::string key_file_ = dir_.Sub("key.pem");
  pid_t serve_ = -1;
};

TEST_F(ServeEdgeTest, ServesJsonRpcOverHttpsAndSlotSubscribeOverWssOnBothPorts) {
  const TestCertificate certificate = testing::MakeTestCertificate();
  WriteCertificate(certificate);
  const Ports ports = StartTlsServe();

  HttpsClient client(ports.api, {certificate});
  ASSERT_TRUE(client.connected()) << client.handshake_error().message();
  EXPECT_EQ(client.PeerCertificate(), certificate.certificate_pem);
  for (int i = 0; i < 3; ++i) {  // on the one kept-alive connection
    std::optional<std::string> answer =
        client.Post(Request("getBalance", fmt::format(R"(["{}"])", kFunded)));
    ASSERT_TRUE(answer.has_value());
    EXPECT_NE(answer->find(R"("value":4242)"), std::string::npos) << *answer;
  }
  std::optional<std::string> account = client.Post(
      Request("getAccountInfo", fmt::format(R"(["{}",{{"encoding":"base64"}}])", kFunded)));
  ASSERT_TRUE(account.has_value());
  EXPECT_NE(account->find(R"("lamports":4242)"), std::string::npos) << *account;

  for (const uint16_t port : {ports.api, ports.pubsub}) {
    const std::string messages = SlotSubscribeOverWss(port, certificate);
    EXPECT_TRUE(std::regex_search(messages, std::regex(R"("result":[0-9]+,"id":1)")))
        << "port " << port << ": " << messages;
    EXPECT_NE(messages.find(R"("method":"slotNotification")"), std::string::npos)
        << "port " << port << ": " << messages;
  }
  EXPECT_EQ(Metric(ports.admin, "switchyard_api_tls_handshakes_total"), 3);
  EXPECT_EQ(Metric(ports.admin, "switchyard_api_tls_handshake_failures_total"), 0);
}

TEST_F(ServeEdgeTest, RefusesPlainHttpOnBothTlsPortsAndCountsAFailedHandshake) {
  const TestCertificate certificate = testing::MakeTestCertificate();
  WriteCertificate(certificate);
  const Ports ports = StartTlsServe();

  for (const uint16_t port : {ports.api, ports.pubsub}) {
    std::optional<testing::HttpAnswer> plain = HttpGet(port, "/");
    ASSERT_TRUE(plain.has_value()) << port;
    EXPECT_EQ(plain->status, 400u);
    EXPECT_NE(plain->body.find("this port speaks TLS only: use https:// or wss://"),
              std::string::npos)
        << plain->body;
  }
  EXPECT_EQ(Metric(ports.admin, "switchyard_api_tls_plain_requests_refused_total"), 2);

  // A client that does not trust the certificate aborts the handshake.
  HttpsClient untrusting(ports.api, {testing::MakeTestCertificate()});
  EXPECT_FALSE(untrusting.connected());
  EXPECT_TRUE(WaitFor(
      [&] { return Metric(ports.admin, "switchyard_api_tls_handshake_failures_total") == 1; }, 5s));
  EXPECT_EQ(Metric(ports.admin, "switchyard_api_tls_handshakes_total"), 0);
  // The listener still serves.
  HttpsClient client(ports.api, {certificate});
  ASSERT_TRUE(client.connected());
  EXPECT_TRUE(client.Post(Request("getSlot", "[]")).has_value());
}

TEST_F(ServeEdgeTest, SighupServesTheNewCertificateToNewConnectionsAndKeepsOpenOnes) {
  const TestCertificate first = testing::MakeTestCertificate();
  const TestCertificate second = testing::MakeTestCertificate();
  ASSERT_NE(first.certificate_pem, second.certificate_pem);
  WriteCertificate(first);
  const Ports ports = StartTlsServe();

  HttpsClient open(ports.api, {first});
  ASSERT_TRUE(open.connected());
  ASSERT_TRUE(open.Post(Request("getSlot", "[]")).has_value());

  WriteCertificate(second);
  ASSERT_EQ(kill(serve_, SIGHUP), 0);
  EXPECT_TRUE(
      WaitFor([&] { return Metric(ports.admin, "switchyard_api_tls_reloads_total") == 1; }, 5s));
  // (Each client trusts one certificate: the test ones share their subject, and OpenSSL would
  // look only at the first authority of that name.)
  HttpsClient fresh(ports.api, {second});
  ASSERT_TRUE(fresh.connected());
  EXPECT_EQ(fresh.PeerCertificate(), second.certificate_pem);
  EXPECT_TRUE(fresh.Post(Request("getSlot", "[]")).has_value());
  // The pubsub port serves it too.
  EXPECT_NE(SlotSubscribeOverWss(ports.pubsub, second).find("slotNotification"), std::string::npos);
  // The connection opened before the reload goes on with the first certificate.
  std::optional<std::string> answer =
      open.Post(Request("getBalance", fmt::format(R"(["{}"])", kFunded)));
  ASSERT_TRUE(answer.has_value());
  EXPECT_NE(answer->find(R"("value":4242)"), std::string::npos) << *answer;
  EXPECT_EQ(open.PeerCertificate(), first.certificate_pem);

  // A key that does not match: the reload is refused and the second certificate stays.
  std::ofstream(key_file_) << first.private_key_pem;
  ASSERT_EQ(kill(serve_, SIGHUP), 0);
  EXPECT_TRUE(WaitFor(
      [&] { return Metric(ports.admin, "switchyard_api_tls_reload_failures_total") == 1; }, 5s));
  HttpsClient after(ports.api, {second});
  ASSERT_TRUE(after.connected());
  EXPECT_EQ(after.PeerCertificate(), second.certificate_pem);
}

TEST_F(ServeEdgeTest, BadTlsFilesStopServeNamingTheKey) {
  const TestCertificate certificate = testing::MakeTestCertificate();
  WriteCertificate(certificate);
  std::ofstream(key_file_) << testing::MakeTestCertificate().private_key_pem;
  const std::string config = WriteFile(
      "bad.toml", fmt::format("[api]\ntls_cert_file = \"{}\"\ntls_key_file = \"{}\"\n"
                              "[upstreams.base]\nendpoints = [{{url = \"http://127.0.0.1:1\"}}]\n",
                              cert_file_, key_file_));
  const testing::CommandResult r = testing::RunCommand(
      {SWITCHYARD_BINARY, "serve", "--config", config, "--data-dir", dir_.Sub("data")});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("bad.toml: 'api.tls_key_file' is not usable: " + key_file_),
            std::string::npos)
      << r.err;
}

TEST_F(ServeEdgeTest, RedirectAndGetLinkFollowTheClientAddress) {
  // 127.0.0.1 is this replica's own region, 127.0.0.2 is us's, 127.0.0.3 is in no range.
  const std::string config =
      WriteFile("serve.toml",
                "[api]\nlisten = \"127.0.0.1:0\"\nregion = \"eu\"\n"
                "[admin]\nlisten = \"127.0.0.1:0\"\n"
                "[upstreams.base]\nendpoints = [{url = \"http://127.0.0.1:1\"}]\n"
                "[[regions]]\nname = \"eu\"\nurl = \"https://eu.example.com\"\n"
                "ranges = [\"127.0.0.1/32\", \"2001:db8:e::/48\"]\n"
                "[[regions]]\nname = \"us\"\nurl = \"https://us.example.com/rpc\"\n"
                "ranges = [\"127.0.0.2/32\", \"2001:db8:a::/48\"]\n");
  const std::string ready = dir_.Sub("serve.ready");
  Start({SWITCHYARD_BINARY, "serve", "--config", config, "--data-dir", dir_.Sub("data"),
         "--ready-file", ready});
  const std::string text = WaitForReadyFile(ready);
  const auto api = static_cast<uint16_t>(JsonInt(text, "api"));
  const auto admin = static_cast<uint16_t>(JsonInt(text, "admin"));

  std::string answer = GetFrom("127.0.0.2", api, "/_redirect/KEY?commitment=confirmed");
  EXPECT_TRUE(answer.starts_with("HTTP/1.1 308 Permanent Redirect\r\n")) << answer;
  EXPECT_NE(answer.find("\r\nLocation: https://us.example.com/rpc/KEY?commitment=confirmed\r\n"),
            std::string::npos)
      << answer;
  answer = GetFrom("127.0.0.2", api, "/_getlink/KEY");
  EXPECT_TRUE(answer.starts_with("HTTP/1.1 200 OK\r\n")) << answer;
  EXPECT_TRUE(answer.ends_with(R"({"region":"us","url":"https://us.example.com/rpc/KEY"})"))
      << answer;

  answer = GetFrom("127.0.0.1", api, "/_redirect/KEY");
  EXPECT_TRUE(answer.starts_with("HTTP/1.1 200 OK\r\n")) << answer;
  EXPECT_EQ(answer.find("Location:"), std::string::npos) << answer;
  EXPECT_TRUE(answer.ends_with(R"({"region":"eu","url":"https://eu.example.com/KEY"})")) << answer;

  answer = GetFrom("127.0.0.3", api, "/_redirect");
  EXPECT_TRUE(answer.starts_with("HTTP/1.1 404 Not Found\r\n")) << answer;
  EXPECT_TRUE(answer.ends_with(R"({"error":"no region serves the client address 127.0.0.3"})"))
      << answer;
  answer = GetFrom("127.0.0.3", api, "/_getlink");
  EXPECT_TRUE(answer.starts_with("HTTP/1.1 404 Not Found\r\n")) << answer;

  // Any other GET is the router's (405: use POST).
  answer = GetFrom("127.0.0.2", api, "/_redirects");
  EXPECT_TRUE(answer.starts_with("HTTP/1.1 405 ")) << answer;

  std::optional<testing::HttpAnswer> metrics = HttpGet(admin, "/metrics");
  ASSERT_TRUE(metrics.has_value());
  EXPECT_EQ(MetricValue(metrics->body, R"(switchyard_api_region_redirects_total{region="us"})"), 1);
  EXPECT_EQ(MetricValue(metrics->body, R"(switchyard_api_region_links_total{region="us"})"), 1);
  EXPECT_EQ(MetricValue(metrics->body, R"(switchyard_api_region_here_total{region="eu"})"), 1);
  EXPECT_EQ(MetricValue(metrics->body, "switchyard_api_region_unmatched_total"), 2);
}

}  // namespace
}  // namespace switchyard
