// The base-layer clients over https and wss. A TLS terminator in the test (a self-signed
// certificate for "localhost", made at run time) forwards to a real switchyard-localnet, so
// the watcher's whole path runs over TLS against a real chain.
#include <gtest/gtest.h>
#include <signal.h>

#include <atomic>
#include <boost/asio.hpp>
#include <boost/asio/ssl.hpp>
#include <fstream>
#include <thread>

#include "engine/fold_runner.h"
#include "ingest/base_clients.h"
#include "ingest/watcher.h"
#include "storage/embedded_event_log.h"
#include "storage/rocksdb_state_store.h"
#include "tests/support/localnet_process.h"
#include "tests/support/subprocess.h"
#include "tests/support/temp_dir.h"
#include "tests/support/test_certificate.h"

namespace switchyard {
namespace {

namespace asio = boost::asio;
namespace ssl = asio::ssl;
using tcp = asio::ip::tcp;

// Accepts TLS on a loopback port and forwards the plaintext to `target_port`, both ways.
class TlsTerminator {
 public:
  TlsTerminator(const testing::TestCertificate& certificate, uint16_t target_port)
      : tls_(ssl::context::tls_server),
        acceptor_(io_context_, {asio::ip::make_address("127.0.0.1"), 0}),
        target_(asio::ip::make_address("127.0.0.1"), target_port) {
    testing::UseTestCertificate(tls_, certificate);
    Accept();
    thread_ = std::thread([this] { io_context_.run(); });
  }
  ~TlsTerminator() {
    asio::post(io_context_, [this] { io_context_.stop(); });
    thread_.join();
  }
  uint16_t port() const { return acceptor_.local_endpoint().port(); }
  int handshakes() const { return handshakes_.load(); }

 private:
  struct Pipe : std::enable_shared_from_this<Pipe> {
    Pipe(tcp::socket client, ssl::context& tls, asio::io_context& io)
        : secure(std::move(client), tls), plain(io) {}
    ssl::stream<tcp::socket> secure;
    tcp::socket plain;
    std::array<char, 16384> up{};
    std::array<char, 16384> down{};
    void Close() {
      boost::system::error_code ec;
      secure.lowest_layer().close(ec);
      plain.close(ec);
    }
  };

  void Accept() {
    acceptor_.async_accept([this](boost::system::error_code ec, tcp::socket socket) {
      if (ec) return;
      auto pipe = std::make_shared<Pipe>(std::move(socket), tls_, io_context_);
      pipe->secure.async_handshake(
          ssl::stream_base::server, [this, pipe](boost::system::error_code ec) {
            if (ec) return pipe->Close();
            ++handshakes_;
            pipe->plain.async_connect(target_, [pipe](boost::system::error_code ec) {
              if (ec) return pipe->Close();
              Pump(pipe, pipe->secure, pipe->plain, pipe->up);
              Pump(pipe, pipe->plain, pipe->secure, pipe->down);
            });
          });
      Accept();
    });
  }

  template <typename From, typename To>
  static void Pump(std::shared_ptr<Pipe> pipe, From& from, To& to, std::array<char, 16384>& buf) {
    from.async_read_some(
        asio::buffer(buf), [pipe, &from, &to, &buf](boost::system::error_code ec, size_t n) {
          if (ec) return pipe->Close();
          asio::async_write(to, asio::buffer(buf.data(), n),
                            [pipe, &from, &to, &buf](boost::system::error_code ec, size_t) {
                              if (ec) return pipe->Close();
                              Pump(pipe, from, to, buf);
                            });
        });
  }

  asio::io_context io_context_;
  ssl::context tls_;
  tcp::acceptor acceptor_;
  tcp::endpoint target_;
  std::thread thread_;
  std::atomic<int> handshakes_{0};
};

TEST(BaseUrlTest, SchemesPortsAndPubsubDerivation) {
  auto https = ParseBaseUrl("https://rpc.example.com");
  ASSERT_TRUE(https.ok());
  EXPECT_TRUE(https->tls);
  EXPECT_EQ(https->port, "443");
  EXPECT_FALSE(https->explicit_port);
  EXPECT_EQ(https->path, "/");
  auto wss = ParseBaseUrl("wss://rpc.example.com:9000/key/abc");
  ASSERT_TRUE(wss.ok());
  EXPECT_TRUE(wss->tls);
  EXPECT_EQ(wss->port, "9000");
  EXPECT_EQ(wss->path, "/key/abc");
  auto http = ParseBaseUrl("http://127.0.0.1:8899");
  ASSERT_TRUE(http.ok());
  EXPECT_FALSE(http->tls);

  // As Solana clients do it: port + 1 when the URL names one, else the default port.
  EXPECT_EQ(PubsubEndpointFor(*http)->port, "8900");
  EXPECT_EQ(PubsubEndpointFor(*https)->port, "443");
  EXPECT_TRUE(PubsubEndpointFor(*https)->tls);
  EXPECT_FALSE(PubsubEndpointFor(*ParseBaseUrl("http://h:65535")).ok());

  EXPECT_FALSE(ParseBaseUrl("ftp://h").ok());
  EXPECT_FALSE(ParseBaseUrl("https://:80").ok());
  const auto bad_port = ParseBaseUrl("http://h:80x/");
  ASSERT_FALSE(bad_port.ok());
  EXPECT_NE(bad_port.status().message().find("not a number"), absl::string_view::npos);
}

class BaseTlsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::ofstream(dir_.Sub("cert.pem")) << certificate_.certificate_pem;
    net_ = testing::StartLocalnetProcess(
        SWITCHYARD_LOCALNET_BINARY, dir_.Sub("ready.json"),
        {"--slot-ms", "20", "--seed", "11", "--accounts", "40", "--delegate-rate", "2",
         "--undelegate-rate", "1", "--scenario-er-count", "2", "--ground-truth",
         dir_.Sub("truth.jsonl")});
    ASSERT_NE(net_.http_port, 0) << "localnet did not start";
    rpc_ = std::make_unique<TlsTerminator>(certificate_, net_.http_port);
    pubsub_ = std::make_unique<TlsTerminator>(certificate_, net_.http_port + 1);
  }
  void TearDown() override {
    rpc_.reset();
    pubsub_.reset();
    if (net_.pid != 0) {
      kill(net_.pid, SIGTERM);
      EXPECT_EQ(testing::WaitProcess(net_.pid), 0);
    }
  }
  BaseEndpoint Endpoint(const std::string& scheme, const std::string& host, uint16_t port) {
    auto endpoint = ParseBaseUrl(scheme + "://" + host + ":" + std::to_string(port) + "/");
    EXPECT_TRUE(endpoint.ok());
    return *endpoint;
  }
  BaseTlsOptions Trusting() { return {.verify = true, .ca_file = dir_.Sub("cert.pem")}; }

  const testing::TestCertificate certificate_ = testing::MakeTestCertificate();
  testing::TempDir dir_;
  testing::LocalnetProcess net_;
  std::unique_ptr<TlsTerminator> rpc_;
  std::unique_ptr<TlsTerminator> pubsub_;
};

TEST_F(BaseTlsTest, HttpsCallsTrustTheConfiguredAuthorityAndCheckTheName) {
  BaseRpcClient trusted(Endpoint("https", "localhost", rpc_->port()), Trusting());
  for (int i = 0; i < 3; ++i) {  // keep-alive: one handshake for all three
    auto answer = trusted.Call("getSlot", "[]", absl::Seconds(5));
    ASSERT_TRUE(answer.ok()) << answer.status();
    EXPECT_NE(answer->find("\"result\":"), std::string::npos) << *answer;
  }
  EXPECT_EQ(rpc_->handshakes(), 1);

  // The system's store does not know the test's authority.
  BaseRpcClient untrusted(Endpoint("https", "localhost", rpc_->port()), {});
  auto refused = untrusted.Call("getSlot", "[]", absl::Seconds(5));
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("certificate verify failed"), absl::string_view::npos)
      << refused.status();

  // The certificate names "localhost", not the address.
  BaseRpcClient wrong_name(Endpoint("https", "127.0.0.1", rpc_->port()), Trusting());
  EXPECT_FALSE(wrong_name.Call("getSlot", "[]", absl::Seconds(5)).ok());

  // Verification off: anything is accepted.
  BaseRpcClient unchecked(Endpoint("https", "127.0.0.1", rpc_->port()),
                          {.verify = false, .ca_file = ""});
  EXPECT_TRUE(unchecked.Call("getSlot", "[]", absl::Seconds(5)).ok());

  // A CA file that does not exist is a clear error.
  BaseRpcClient missing(Endpoint("https", "localhost", rpc_->port()),
                        {.verify = true, .ca_file = dir_.Sub("nope.pem")});
  auto no_file = missing.Call("getSlot", "[]", absl::Seconds(5));
  ASSERT_FALSE(no_file.ok());
  EXPECT_NE(no_file.status().message().find("nope.pem"), absl::string_view::npos);

  // Plain HTTP to a TLS port fails instead of hanging.
  BaseRpcClient plain(Endpoint("http", "localhost", rpc_->port()), {});
  EXPECT_FALSE(plain.Call("getSlot", "[]", absl::Seconds(2)).ok());
}

TEST_F(BaseTlsTest, WssSubscriptionsDeliverNotifications) {
  auto connection = BasePubsubConnection::Connect(Endpoint("wss", "localhost", pubsub_->port()),
                                                  absl::Seconds(5), Trusting());
  ASSERT_TRUE(connection.ok()) << connection.status();
  ASSERT_TRUE((*connection)
                  ->Send(R"({"jsonrpc":"2.0","id":1,"method":"slotSubscribe"})", absl::Seconds(5))
                  .ok());
  int notifications = 0;
  bool confirmed = false;
  for (int i = 0; i < 50 && notifications < 3; ++i) {
    auto message = (*connection)->Read(absl::Seconds(2));
    ASSERT_TRUE(message.ok()) << message.status();
    if (!message->has_value()) continue;
    if ((*message)->find("\"id\":1") != std::string::npos) confirmed = true;
    if ((*message)->find("slotNotification") != std::string::npos) ++notifications;
  }
  EXPECT_TRUE(confirmed);
  EXPECT_EQ(notifications, 3);

  auto untrusted = BasePubsubConnection::Connect(Endpoint("wss", "localhost", pubsub_->port()),
                                                 absl::Seconds(5), {});
  EXPECT_FALSE(untrusted.ok());
}

// The whole watcher over https + wss: the folded state equals the ground truth.
TEST_F(BaseTlsTest, WatcherOverTlsFoldsTheGroundTruth) {
  auto log = EmbeddedEventLog::Open(dir_.Sub("log"));
  ASSERT_TRUE(log.ok());
  SystemClock clock;
  MetricsRegistry registry;
  WatcherMetrics metrics(registry);
  WatcherOptions options;
  options.endpoints = {{"https://localhost:" + std::to_string(rpc_->port()),
                        "wss://localhost:" + std::to_string(pubsub_->port())}};
  options.tls = Trusting();
  BaseLayerWatcher watcher(options, log->get(), {}, &clock, &metrics);
  ASSERT_TRUE(watcher.Start().ok());
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (watcher.last_sealed_slot() < 120 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  watcher.Stop();
  ASSERT_GE(watcher.last_sealed_slot(), 120u);
  EXPECT_EQ(metrics.stream_gaps.value(), 0u);
  EXPECT_GT(metrics.notifications.value(), 0u);

  auto store = RocksDbStateStore::Open(dir_.Sub("state"));
  ASSERT_TRUE(store.ok());
  auto reader = (*log)->NewReader();
  SnapshotHolder snapshots;
  FoldRunner runner(FoldRunnerOptions(), reader.get(), store->get(), &snapshots, &clock);
  ASSERT_TRUE(runner.Init().ok());
  ASSERT_TRUE(runner.RunUntilCaughtUp().ok());
  auto snapshot = snapshots.Current();
  ASSERT_EQ(snapshot->applied_slot(), watcher.last_sealed_slot());
  const auto truth = testing::GroundTruthAt(dir_.Sub("truth.jsonl"), snapshot->applied_slot());
  ASSERT_FALSE(truth.empty());
  EXPECT_EQ(snapshot->delegated_count(), truth.size());
  for (const auto& [account, authority] : truth) {
    const auto found = snapshot->FindDelegation(account);
    EXPECT_TRUE(found && found->validator == authority) << account.ToBase58();
  }
  EXPECT_EQ(runner.fold().position().counters.ignored_stale, 0u);
  EXPECT_GE(rpc_->handshakes(), 1);
  EXPECT_GE(pubsub_->handshakes(), 1);
}

}  // namespace
}  // namespace switchyard
