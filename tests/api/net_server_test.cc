// The one worker pool of api/net: where connections are accepted and served, HTTP and
// upgraded alike, admission of both kinds, and the drain of both at Stop.
#include <gtest/gtest.h>
#include <sys/socket.h>

#include <atomic>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/websocket.hpp>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "api/metrics/api_metrics.h"
#include "api/net/http_server.h"
#include "api/net/websocket_accept.h"
#include "common/metrics.h"
#include "fmt/format.h"

namespace switchyard {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace websocket = beast::websocket;
using tcp = asio::ip::tcp;
using boost::system::error_code;
using namespace std::chrono_literals;

size_t ThreadHash() { return std::hash<std::thread::id>()(std::this_thread::get_id()); }

// "worker:thread" of the calling thread.
std::string WhereAmI(const HttpServer* server) {
  std::optional<size_t> worker = server->worker_of_this_thread();
  return fmt::format("{}:{}", worker ? static_cast<int64_t>(*worker) : -1, ThreadHash());
}

bool WaitFor(const std::function<bool()>& condition, std::chrono::milliseconds deadline = 10s) {
  const auto end = std::chrono::steady_clock::now() + deadline;
  while (!condition()) {
    if (std::chrono::steady_clock::now() > end) return false;
    std::this_thread::sleep_for(2ms);
  }
  return true;
}

// Answers with where it ran; "/slow" answers after 300 ms, "/peer" with the client's address.
class WhereHandler : public RequestHandler {
 public:
  WhereHandler(asio::io_context& io, const HttpServer* const* server) : io_(io), server_(server) {}
  void Handle(HttpRequest request, Done done) override {
    HttpResponse response;
    response.body = WhereAmI(*server_);
    if (request.target == "/peer") {
      response.body = request.peer.to_string();
      return done(std::move(response));
    }
    if (request.target != "/slow") return done(std::move(response));
    auto timer = std::make_shared<asio::steady_timer>(io_, 300ms);
    timer->async_wait([timer, done = std::move(done), response](error_code) { done(response); });
  }

 private:
  asio::io_context& io_;
  const HttpServer* const* server_;
};

// A WebSocket that answers every message with where it ran.
class EchoConnection : public UpgradedConnection,
                       public std::enable_shared_from_this<EchoConnection> {
 public:
  EchoConnection(tcp::socket socket, const HttpServer* server, ConnectionSlot slot)
      : ws_(std::move(socket)), server_(server), slot_(std::move(slot)) {}

  void Start(std::optional<HttpRequest> upgrade) {
    auto on_accept = [self = shared_from_this()](error_code ec) {
      if (ec) return;
      self->open_ = true;
      if (self->draining_) return self->SendClose();
      self->Read();
    };
    AcceptWebSocket(ws_, upgrade, server_->cors(), std::move(on_accept));
  }
  // As the pubsub connection does: no close frame while the handshake or a write is still
  // going (Beast allows one write at a time; a debug build asserts it); their ends send it.
  void Drain() override {
    draining_ = true;
    if (open_ && !writing_) SendClose();
  }
  void Close() override {
    error_code ignored;
    ws_.next_layer().close(ignored);
  }

 private:
  void SendClose() {
    ws_.async_close(websocket::close_code::going_away,
                    [self = shared_from_this()](error_code) { self->Close(); });
  }
  void Read() {
    ws_.async_read(buffer_, [self = shared_from_this()](error_code ec, size_t) {
      if (ec) return self->Close();
      if (self->draining_) return;  // the close is under way
      self->buffer_.clear();
      self->answer_ = WhereAmI(self->server_);
      self->writing_ = true;
      self->ws_.async_write(asio::buffer(self->answer_), [self](error_code ec, size_t) {
        self->writing_ = false;
        if (ec) return;
        if (self->draining_) return self->SendClose();
        self->Read();
      });
    });
  }

  websocket::stream<tcp::socket> ws_;
  const HttpServer* server_;
  ConnectionSlot slot_;
  beast::flat_buffer buffer_;
  std::string answer_;
  bool open_ = false;
  bool writing_ = false;
  bool draining_ = false;
};

class EchoUpgrades : public UpgradeHandler {
 public:
  explicit EchoUpgrades(const HttpServer* const* server) : server_(server) {}
  std::shared_ptr<UpgradedConnection> Adopt(size_t worker, tcp::socket socket,
                                            std::optional<HttpRequest> upgrade,
                                            ConnectionSlot slot) override {
    if ((*server_)->worker_of_this_thread() != worker) adopted_on_right_worker = false;
    auto connection =
        std::make_shared<EchoConnection>(std::move(socket), *server_, std::move(slot));
    connection->Start(std::move(upgrade));
    return connection;
  }
  void OnRefused() override { ++refused; }
  void Shutdown(size_t) override { ++shutdowns; }
  void Stopped() override { stopped = true; }

  std::atomic<bool> adopted_on_right_worker{true};
  std::atomic<int> refused{0};
  std::atomic<int> shutdowns{0};
  std::atomic<bool> stopped{false};

 private:
  const HttpServer* const* server_;
};

// A blocking client: HTTP requests, then (optionally) a WebSocket on the same connection.
class Client {
 public:
  explicit Client(uint16_t port) : socket_(io_) {
    socket_.connect({asio::ip::make_address("127.0.0.1"), port}, connect_error_);
  }
  uint16_t local_port() const {
    error_code ec;
    return socket_.local_endpoint(ec).port();
  }
  // The body of the answer to a POST of `target`, or "" when the connection failed.
  std::string Post(const std::string& target = "/") {
    http::request<http::string_body> request(http::verb::post, target, 11);
    request.set(http::field::host, "test");
    request.body() = "{}";
    request.prepare_payload();
    error_code ec;
    http::write(socket_, request, ec);
    if (ec) return "";
    http::response<http::string_body> response;
    http::read(socket_, buffer_, response, ec);
    return ec ? "" : response.body();
  }
  // The WebSocket handshake on this connection, with `origin` as a browser sends it.
  bool Upgrade(std::optional<std::string> origin = std::nullopt) {
    ws_.emplace(socket_);
    if (origin) {
      ws_->set_option(websocket::stream_base::decorator([origin](websocket::request_type& request) {
        request.set(http::field::origin, *origin);
      }));
    }
    error_code ec;
    ws_->handshake("127.0.0.1", "/", ec);
    return !ec;
  }
  // The status of the answer to a handshake from `origin`, read as plain HTTP (0: none).
  unsigned HandshakeStatus(const std::string& origin) {
    http::request<http::empty_body> request(http::verb::get, "/", 11);
    request.set(http::field::host, "127.0.0.1");
    request.set(http::field::connection, "Upgrade");
    request.set(http::field::upgrade, "websocket");
    request.set(http::field::sec_websocket_version, "13");
    request.set(http::field::sec_websocket_key, "dGhlIHNhbXBsZSBub25jZQ==");
    request.set(http::field::origin, origin);
    error_code ec;
    http::write(socket_, request, ec);
    if (ec) return 0;
    http::response<http::string_body> response;
    http::read(socket_, buffer_, response, ec);
    return ec ? 0 : response.result_int();
  }
  // Sends a message and returns the answer ("" on failure).
  std::string Echo() {
    error_code ec;
    ws_->write(asio::buffer(std::string("hi")), ec);
    if (ec) return "";
    beast::flat_buffer buffer;
    ws_->read(buffer, ec);
    return ec ? "" : beast::buffers_to_string(buffer.data());
  }
  // Reads until the server closes the WebSocket; its close code, or -1.
  int CloseCode() {
    beast::flat_buffer buffer;
    error_code ec;
    while (!ec) ws_->read(buffer, ec);
    return ec == websocket::error::closed ? static_cast<int>(ws_->reason().code) : -1;
  }
  // True when the server closed the connection without a word.
  bool Closed() {
    char byte;
    error_code ec;
    socket_.read_some(asio::buffer(&byte, 1), ec);
    return ec == asio::error::eof || ec == asio::error::connection_reset;
  }

 private:
  asio::io_context io_;
  tcp::socket socket_;
  error_code connect_error_;
  beast::flat_buffer buffer_;
  std::optional<websocket::stream<tcp::socket&>> ws_;
};

class NetServerTest : public ::testing::Test {
 protected:
  ~NetServerTest() override {
    if (server_) server_->Stop();
  }

  void Start(size_t threads, std::function<void(HttpServerOptions&)> customize = nullptr,
             size_t max_upgraded = 100) {
    HttpServerOptions options;
    options.threads = threads;
    if (customize) customize(options);
    server_ = std::make_unique<HttpServer>(
        options, [this](asio::io_context& io) { return std::make_unique<WhereHandler>(io, &raw_); },
        &metrics_);
    raw_ = server_.get();
    server_->SetUpgradeHandler(&upgrades_, max_upgraded);
    upgrade_listener_ = server_->AddUpgradeListener(0);
    server_->SetAcceptObserver([this](size_t worker, const tcp::socket& socket) {
      error_code ec;
      const uint16_t remote = socket.remote_endpoint(ec).port();
      absl::MutexLock lock(&mu_);
      accepted_[remote] = fmt::format("{}:{}", worker, ThreadHash());
    });
    ASSERT_TRUE(server_->Start().ok());
  }

  // Where the connection from client port `port` was accepted.
  std::string AcceptedAt(uint16_t port) {
    absl::MutexLock lock(&mu_);
    auto it = accepted_.find(port);
    return it == accepted_.end() ? "not accepted" : it->second;
  }

  MetricsRegistry registry_;
  ApiMetrics metrics_{registry_};
  const HttpServer* raw_ = nullptr;
  EchoUpgrades upgrades_{&raw_};
  std::unique_ptr<HttpServer> server_;
  size_t upgrade_listener_ = 0;
  absl::Mutex mu_;
  std::map<uint16_t, std::string> accepted_ ABSL_GUARDED_BY(mu_);
};

// (a) An HTTP request and then a WebSocket Upgrade on one connection run on the worker whose
// acceptor took the connection, on that worker's thread.
TEST_F(NetServerTest, HttpAndItsUpgradeRunOnTheAcceptingWorker) {
  Start(2);
  for (int i = 0; i < 8; ++i) {
    Client client(server_->port());
    const std::string http_at = client.Post();
    ASSERT_NE(http_at, "");
    EXPECT_EQ(http_at, AcceptedAt(client.local_port())) << "connection " << i;
    ASSERT_TRUE(client.Upgrade());
    EXPECT_EQ(client.Echo(), http_at) << "connection " << i;
  }
  EXPECT_TRUE(upgrades_.adopted_on_right_worker);
}

// Every request carries the address of the client it came from, on each request of a
// keep-alive connection.
TEST_F(NetServerTest, EachRequestCarriesTheClientAddress) {
  Start(1);
  Client client(server_->port());
  EXPECT_EQ(client.Post("/peer"), "127.0.0.1");
  EXPECT_EQ(client.Post("/peer"), "127.0.0.1");
}

// (a) A connection of the upgrade listener also stays where it was accepted.
TEST_F(NetServerTest, UpgradeListenerConnectionsRunOnTheAcceptingWorker) {
  Start(2);
  const uint16_t port = server_->port(upgrade_listener_);
  ASSERT_NE(port, 0);
  ASSERT_NE(port, server_->port());
  for (int i = 0; i < 8; ++i) {
    Client client(port);
    ASSERT_TRUE(client.Upgrade());
    const std::string at = client.Echo();
    ASSERT_NE(at, "");
    EXPECT_EQ(at, AcceptedAt(client.local_port())) << "connection " << i;
  }
  EXPECT_TRUE(upgrades_.adopted_on_right_worker);
}

// (b) With several workers the kernel spreads connections over their acceptors, and each
// connection is served on the thread that accepted it.
TEST_F(NetServerTest, ConnectionsAreSpreadAndServedWhereAccepted) {
  Start(4);
  std::set<std::string> workers;
  for (int i = 0; i < 32; ++i) {
    Client client(server_->port());
    const std::string at = client.Post();
    ASSERT_NE(at, "");
    EXPECT_EQ(at, AcceptedAt(client.local_port())) << "connection " << i;
    EXPECT_NE(at.rfind("-1:", 0), 0u) << "not on a worker: " << at;
    workers.insert(at);
  }
  EXPECT_GE(workers.size(), 2u);
}

// (c) HTTP connections count against max_connections; upgraded ones, from the HTTP port or
// the upgrade listener, against the upgrade limit.
TEST_F(NetServerTest, AdmissionCountsBothKinds) {
  Start(
      2, [](HttpServerOptions& options) { options.max_connections = 1; }, /*max_upgraded=*/1);
  Client first(server_->port());
  ASSERT_NE(first.Post(), "");
  Client refused(server_->port());
  EXPECT_TRUE(refused.Closed());
  EXPECT_EQ(metrics_.connections_rejected.value(), 1u);

  ASSERT_TRUE(first.Upgrade());
  ASSERT_NE(first.Echo(), "");
  ASSERT_TRUE(WaitFor([&] { return server_->http_connections() == 0; }));
  EXPECT_EQ(server_->upgraded_connections(), 1u);

  Client second(server_->port());
  ASSERT_NE(second.Post(), "");  // the upgraded connection no longer counts as HTTP
  EXPECT_FALSE(second.Upgrade());
  EXPECT_EQ(upgrades_.refused, 1);
  Client listener(server_->port(upgrade_listener_));
  EXPECT_FALSE(listener.Upgrade());
  EXPECT_EQ(upgrades_.refused, 2);
  EXPECT_EQ(server_->upgraded_connections(), 1u);
}

// (d) Stop lets an HTTP answer in flight out, closes WebSockets with "going away", and
// returns as soon as both are gone.
TEST_F(NetServerTest, StopDrainsBothKinds) {
  Start(2, [](HttpServerOptions& options) { options.drain_timeout = absl::Seconds(4); });
  Client ws(server_->port(upgrade_listener_));
  ASSERT_TRUE(ws.Upgrade());
  ASSERT_NE(ws.Echo(), "");
  Client upgraded(server_->port());
  ASSERT_TRUE(upgraded.Upgrade());
  ASSERT_NE(upgraded.Echo(), "");
  Client slow(server_->port());
  std::string answer;
  std::thread reader([&] { answer = slow.Post("/slow"); });
  ASSERT_TRUE(WaitFor([&] { return server_->http_connections() == 1; }));
  std::this_thread::sleep_for(50ms);  // the request is in
  const auto started = std::chrono::steady_clock::now();
  std::thread stopper([&] { server_->Stop(); });
  EXPECT_EQ(ws.CloseCode(), static_cast<int>(websocket::close_code::going_away));
  EXPECT_EQ(upgraded.CloseCode(), static_cast<int>(websocket::close_code::going_away));
  reader.join();
  stopper.join();
  EXPECT_NE(answer, "");
  EXPECT_LT(std::chrono::steady_clock::now() - started, 3s);
  EXPECT_EQ(server_->http_connections(), 0u);
  EXPECT_EQ(server_->upgraded_connections(), 0u);
  EXPECT_EQ(upgrades_.shutdowns, 2);
  EXPECT_TRUE(upgrades_.stopped);
}

// With several workers a fixed port is refused when something else listens there, as with
// one, rather than shared through SO_REUSEPORT.
TEST_F(NetServerTest, AFixedPortInUseIsRefused) {
  // Another listener that itself allows SO_REUSEPORT sharing.
  asio::io_context io;
  tcp::acceptor other(io);
  other.open(tcp::v4());
  other.set_option(asio::detail::socket_option::boolean<SOL_SOCKET, SO_REUSEPORT>(true));
  other.bind(tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
  other.listen();
  HttpServerOptions options;
  options.threads = 2;
  options.port = other.local_endpoint().port();
  HttpServer server(
      options, [this](asio::io_context& io) { return std::make_unique<WhereHandler>(io, &raw_); },
      &metrics_);
  EXPECT_FALSE(server.Start().ok());
}

// A browser's WebSocket handshake from an origin [api] cors_origins does not allow gets 403, on
// the HTTP port and on the upgrade listener; an allowed origin and a client without Origin are
// served.
TEST_F(NetServerTest, WebSocketUpgradeFromARefusedOriginGets403) {
  Start(1,
        [](HttpServerOptions& options) { options.cors.allowed_origins = {"https://app.example"}; });
  for (const uint16_t port : {server_->port(), server_->port(upgrade_listener_)}) {
    {
      Client client(port);
      EXPECT_EQ(client.HandshakeStatus("https://evil.example"), 403u) << port;
      EXPECT_TRUE(client.Closed());
    }
    {
      Client client(port);
      EXPECT_EQ(client.HandshakeStatus("https://app.example"), 101u) << port;
    }
    {
      Client client(port);
      ASSERT_TRUE(client.Upgrade("https://app.example")) << port;
      EXPECT_NE(client.Echo(), "");
    }
    {
      Client client(port);
      ASSERT_TRUE(client.Upgrade()) << port;
      EXPECT_NE(client.Echo(), "");
    }
  }
  EXPECT_EQ(metrics_.cors_origins_refused.value(), 2u);
}

// With CORS off no browser page is allowed: a handshake that carries an Origin is refused, one
// without is served.
TEST_F(NetServerTest, WebSocketUpgradeWithAnOriginIsRefusedWhenCorsIsOff) {
  Start(1);
  for (const uint16_t port : {server_->port(), server_->port(upgrade_listener_)}) {
    Client browser(port);
    EXPECT_EQ(browser.HandshakeStatus("https://app.example"), 403u) << port;
    Client plain(port);
    EXPECT_TRUE(plain.Upgrade());
  }
}

}  // namespace
}  // namespace switchyard
