// PubsubUpstream over wss://: a TLS WebSocket server in the test, with a self-signed
// certificate made on the fly, answers one subscribe call and sends one notification; then
// it drops the connection, and the upstream reconnects on its own.
#include "api/upstream/pubsub_upstream.h"

#include <gtest/gtest.h>

#include <atomic>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/ssl.hpp>
#include <boost/beast/websocket.hpp>
#include <boost/beast/websocket/ssl.hpp>
#include <string>
#include <thread>
#include <vector>

#include "api/upstream/upstream.h"
#include "fmt/format.h"
#include "tests/support/test_certificate.h"

namespace switchyard {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace websocket = beast::websocket;
namespace ssl = asio::ssl;
using tcp = asio::ip::tcp;

// Serves `connections` connections one after the other: each answers the first call with
// result 5, then sends a slot notification for subscription 5 and closes the socket.
class WssServer {
 public:
  explicit WssServer(int connections)
      : tls_(ssl::context::tls_server), acceptor_(io_, {asio::ip::make_address("127.0.0.1"), 0}) {
    testing::UseTestCertificate(tls_, testing::MakeTestCertificate());
    thread_ = std::thread([this, connections] {
      for (int i = 0; i < connections; ++i) Serve(i);
    });
  }
  ~WssServer() {
    boost::system::error_code ignored;
    acceptor_.close(ignored);
    thread_.join();
  }
  uint16_t port() const { return acceptor_.local_endpoint().port(); }
  std::vector<std::string> calls() const { return calls_; }

 private:
  void Serve(int round) {
    boost::system::error_code ec;
    tcp::socket socket(io_);
    acceptor_.accept(socket, ec);
    if (ec) return;
    websocket::stream<beast::ssl_stream<tcp::socket>> ws(std::move(socket), tls_);
    ws.next_layer().handshake(ssl::stream_base::server, ec);
    if (!ec) ws.accept(ec);
    if (ec) return;
    beast::flat_buffer buffer;
    ws.read(buffer, ec);
    if (ec) return;
    const std::string call = beast::buffers_to_string(buffer.data());
    calls_.push_back(call);
    const size_t id_at = call.find(R"("id":)") + 5;
    const std::string id = call.substr(id_at, call.find(',', id_at) - id_at);
    ws.text(true);
    ws.write(asio::buffer(fmt::format(R"({{"jsonrpc":"2.0","result":5,"id":{}}})", id)), ec);
    ws.write(asio::buffer(
                 fmt::format(R"({{"jsonrpc":"2.0","method":"slotNotification","params":{{"result":)"
                             R"({{"parent":{},"root":{},"slot":{}}},"subscription":5}}}})",
                             round, round, round + 1)),
             ec);
    // Wait for the client to have read both, then cut the connection.
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    beast::get_lowest_layer(ws).close(ec);
  }

  asio::io_context io_;
  ssl::context tls_;
  tcp::acceptor acceptor_;
  std::vector<std::string> calls_;
  std::thread thread_;
};

class Recorder : public PubsubUpstream::Listener {
 public:
  explicit Recorder(std::vector<std::string>* answers) : answers_(answers) {}
  void OnUpstreamOpen(PubsubUpstream& upstream, bool reconnected) override {
    ++opened;
    reconnects += reconnected;
    upstream.Call("slotSubscribe", "[]", [this](absl::StatusOr<PubsubUpstream::Answer> answer) {
      answers_->push_back(answer.ok() ? answer->result : std::string(answer.status().message()));
    });
  }
  void OnUpstreamLost(PubsubUpstream&, const absl::Status&) override { ++lost; }
  void OnUpstreamFailed(PubsubUpstream&, const absl::Status&) override { ++failed; }
  void OnUpstreamNotification(PubsubUpstream&, std::string_view message,
                              const UpstreamMessage& parsed) override {
    notifications.emplace_back(message);
    subscriptions.push_back(parsed.subscription);
  }

  int opened = 0;
  int reconnects = 0;
  int lost = 0;
  int failed = 0;
  std::vector<std::string> notifications;
  std::vector<uint64_t> subscriptions;

 private:
  std::vector<std::string>* answers_;
};

TEST(PubsubUpstreamTest, SubscribesOverWssAndReconnectsAfterTheServerDropsIt) {
  WssServer server(2);
  asio::io_context io;
  auto tls = MakeClientTlsContext(/*verify=*/false);  // the certificate is self-signed
  PubsubUpstreamOptions options;
  options.verify_tls = false;
  options.reconnect_initial_backoff = absl::Milliseconds(20);
  std::vector<std::string> answers;
  Recorder recorder(&answers);
  absl::StatusOr<WsEndpoint> endpoint =
      ParseWsUrl(fmt::format("wss://localhost:{}/", server.port()));
  ASSERT_TRUE(endpoint.ok());
  auto upstream = std::make_shared<PubsubUpstream>(io, "base", std::vector<WsEndpoint>{*endpoint},
                                                   options, tls.get(), &recorder);
  upstream->Start();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (recorder.notifications.size() < 2 && std::chrono::steady_clock::now() < deadline) {
    io.restart();
    io.run_for(std::chrono::milliseconds(10));
  }
  upstream->Close();
  io.restart();
  io.run_for(std::chrono::milliseconds(10));

  EXPECT_EQ(answers, (std::vector<std::string>{"5", "5"}));
  ASSERT_EQ(recorder.notifications.size(), 2u);
  EXPECT_EQ(recorder.subscriptions, (std::vector<uint64_t>{5, 5}));
  EXPECT_NE(recorder.notifications[1].find(R"("slot":2)"), std::string::npos);
  EXPECT_EQ(recorder.opened, 2);
  EXPECT_EQ(recorder.reconnects, 1);
  EXPECT_GE(recorder.lost, 1);
  EXPECT_EQ(recorder.failed, 0);
  const std::vector<std::string> calls = server.calls();
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_EQ(calls[0], R"({"jsonrpc":"2.0","id":1,"method":"slotSubscribe","params":[]})");
}

TEST(PubsubUpstreamTest, GivesUpAfterTheReconnectWindow) {
  asio::io_context io;
  PubsubUpstreamOptions options;
  options.reconnect_initial_backoff = absl::Milliseconds(10);
  options.reconnect_max_backoff = absl::Milliseconds(20);
  options.reconnect_give_up = absl::Milliseconds(200);
  std::vector<std::string> answers;
  Recorder recorder(&answers);
  // A port nothing listens on: the one of an acceptor that is closed again.
  uint16_t port = 0;
  {
    tcp::acceptor closed(io, {asio::ip::make_address("127.0.0.1"), 0});
    port = closed.local_endpoint().port();
  }
  auto upstream = std::make_shared<PubsubUpstream>(
      io, "er1", std::vector<WsEndpoint>{*ParseWsUrl(fmt::format("ws://127.0.0.1:{}", port))},
      options, nullptr, &recorder);
  upstream->Start();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (recorder.failed == 0 && std::chrono::steady_clock::now() < deadline) {
    io.restart();
    io.run_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(recorder.failed, 1);
  EXPECT_EQ(recorder.opened, 0);
  // Calls on a connection that is not open fail, after Call has returned.
  bool failed_call = false;
  upstream->Call("slotSubscribe", "[]", [&](absl::StatusOr<PubsubUpstream::Answer> answer) {
    failed_call = absl::IsUnavailable(answer.status());
  });
  EXPECT_FALSE(failed_call);
  io.restart();
  io.run_for(std::chrono::milliseconds(20));
  EXPECT_TRUE(failed_call);
  upstream->Close();
}

}  // namespace
}  // namespace switchyard
