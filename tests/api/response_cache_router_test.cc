// The response cache in the router over real sockets (docs/architecture.md §19): coalescing of
// identical reads in flight, what each cache class keeps, the delegation marks of kept answers,
// minContextSlot, the shared Redis tier between two routers, and /status.
#include <signal.h>

#include <array>
#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read_until.hpp>
#include <boost/asio/streambuf.hpp>
#include <boost/asio/write.hpp>
#include <chrono>
#include <istream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "api/admin/admin_handler.h"
#include "tests/api/router_fixture.h"
#include "tests/support/sanitizer.h"
#include "tests/support/subprocess.h"

// GCC 12 reports a false -Wrestrict on `"literal" + std::string` (GCC bug 105329).
#pragma GCC diagnostic ignored "-Wrestrict"

namespace switchyard::api_test {
namespace {

std::string Call(const std::string& id, const std::string& method, const std::string& params) {
  return R"({"jsonrpc":"2.0","id":)" + id + R"(,"method":")" + method + R"(","params":)" + params +
         "}";
}

// The value of one series in `registry`'s Prometheus text, -1 when it is absent.
double Metric(const MetricsRegistry& registry, const std::string& series) {
  std::istringstream text(registry.RenderPrometheus());
  for (std::string line; std::getline(text, line);) {
    if (line.rfind(series + " ", 0) != 0) continue;
    double value = 0;
    if (absl::SimpleAtod(line.substr(series.size() + 1), &value)) return value;
  }
  return -1;
}

// A responder that answers every call with `result` and the call's own id.
FakeUpstream::Responder AnswerWith(std::string result) {
  return [result](const std::string&, const std::string& body) {
    absl::StatusOr<RpcBody> parsed = ParseRpcBody(body, RpcCodecOptions{});
    std::string id = parsed.ok() && !parsed->calls.empty()
                         ? std::string(parsed->calls[0].id_or_null())
                         : std::string("null");
    return FakeReply{FakeReply::Action::kAnswer, 200, RpcResultResponse(id, result)};
  };
}

std::string SignatureText(uint8_t fill) {
  std::array<uint8_t, 64> bytes;
  bytes.fill(fill);
  return Signature(bytes).ToBase58();
}

class ResponseCacheRouterTest : public RouterFixture {
 protected:
  // The router with owner verification off, so reads of one account are plain forwards.
  void StartCached(std::function<void(CacheOptions&)> customize = nullptr) {
    Start([&](RouterOptions& options, HttpServerOptions&) {
      options.verify_owner = false;
      options.cache.slot_ttl = absl::Seconds(30);  // only slots and writes end an answer here
      if (customize) customize(options.cache);
    });
  }

  std::string Post(const std::string& body) { return TestClient(port()).Post(body).body; }

  // The admin /status of this router's cache.
  std::string StatusJson() {
    MetricsRegistry admin_registry;
    AdminMetrics admin_metrics(admin_registry);
    UpstreamMonitor monitor(UpstreamMonitorOptions{}, &admin_registry);
    AdminContext admin(AdminOptions{}, &snapshots_, &registry_, &monitor, nullptr, &admin_metrics);
    admin.SetCache(context_->cache());
    return admin.StatusJson();
  }
};

TEST_F(ResponseCacheRouterTest, SixteenIdenticalReadsInFlightShareOneUpstreamCall) {
  StartCached();
  ASSERT_NE(context_->cache(), nullptr);
  base_.Hold();
  const std::string params = "[" + Quoted(Key(30)) + "]";
  constexpr int kClients = 16;
  std::vector<std::string> answers(kClients);
  std::vector<std::thread> threads;
  for (int i = 0; i < kClients; ++i) {
    threads.emplace_back([&, i] {
      answers[i] = TestClient(port()).Post(Call(std::to_string(i), "getAccountInfo", params)).body;
    });
  }
  // Every read arrived: one leader at the fake, fifteen following it.
  ASSERT_TRUE(WaitFor([&] { return context_->cache()->stats().coalesced == kClients - 1; },
                      absl::Seconds(4)))
      << context_->cache()->stats().coalesced;
  base_.Release();
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(base_.received_count(), 1u);
  for (int i = 0; i < kClients; ++i) {
    EXPECT_EQ(answers[i], R"({"jsonrpc":"2.0","result":{"from":"base","method":"getAccountInfo"},)"
                          R"("id":)" +
                              std::to_string(i) + "}");
  }
  EXPECT_EQ(Metric(registry_, R"(switchyard_cache_coalesced_total{method="getAccountInfo"})"), 15);
}

TEST_F(ResponseCacheRouterTest, WritesAndBlockhashesAreNeverKept) {
  StartCached();
  const Transaction tx = MakeTransaction(Key(30), {}, Key(31), 0x51);
  const std::string send =
      Call("1", "sendTransaction", "[\"" + TransactionBase64(tx) + R"(",{"encoding":"base64"}])");
  EXPECT_EQ(Post(send), R"({"jsonrpc":"2.0","result":"sent-to-base","id":1})");
  EXPECT_EQ(Post(send), R"({"jsonrpc":"2.0","result":"sent-to-base","id":1})");
  EXPECT_EQ(base_.received_count(), 2u);
  Post(Call("2", "getLatestBlockhash", "[]"));
  Post(Call("3", "getLatestBlockhash", "[]"));
  EXPECT_EQ(base_.received_count(), 4u);
}

TEST_F(ResponseCacheRouterTest, CoalescedOnlyReadsAreNotKept) {
  StartCached();
  EXPECT_EQ(Post(Call("1", "getSlot", "[]")),
            R"({"jsonrpc":"2.0","result":{"from":"base","method":"getSlot"},"id":1})");
  EXPECT_EQ(Post(Call("2", "getSlot", "[]")),
            R"({"jsonrpc":"2.0","result":{"from":"base","method":"getSlot"},"id":2})");
  EXPECT_EQ(base_.received_count(), 2u);
}

TEST_F(ResponseCacheRouterTest, FinalTransactionIsAnsweredFromTheCacheWithItsOwnId) {
  StartCached();
  const std::string signature = SignatureText(0x61);
  base_.AddKnownSignature(signature);
  // Remembered on base (as a transaction sent through the router is), so it is one forward.
  context_->signatures().Remember(*Signature::FromBase58(signature), "base");
  const std::string params = "[\"" + signature + "\"]";
  EXPECT_EQ(Post(Call("\"a\"", "getTransaction", params)),
            R"({"jsonrpc":"2.0","result":{"slot":7,"from":"base"},"id":"a"})");
  EXPECT_EQ(Post(Call("\"b\"", "getTransaction", params)),
            R"({"jsonrpc":"2.0","result":{"slot":7,"from":"base"},"id":"b"})");
  EXPECT_EQ(base_.received_count(), 1u);
  EXPECT_EQ(Metric(registry_, R"(switchyard_cache_hits_total{method="getTransaction"})"), 1);
}

TEST_F(ResponseCacheRouterTest, FinalTransactionOfAnUnknownSignatureIsKeptAfterItsFanOut) {
  StartCached();
  const std::string signature = SignatureText(0x63);
  base_.AddKnownSignature(signature);
  // Nobody remembers it: the router asks base and every ER.
  const std::string params = "[\"" + signature + "\"]";
  const std::string first = Post(Call("\"a\"", "getTransaction", params));
  EXPECT_NE(first.find(R"("from":"base")"), std::string::npos) << first;
  const size_t asked = base_.received_count() + er1_.received_count() + er2_.received_count();
  EXPECT_GE(asked, 2u);
  const std::string second = Post(Call("\"b\"", "getTransaction", params));
  EXPECT_NE(second.find(R"("from":"base")"), std::string::npos) << second;
  EXPECT_NE(second.find(R"("id":"b")"), std::string::npos) << second;
  EXPECT_EQ(base_.received_count() + er1_.received_count() + er2_.received_count(), asked);
  EXPECT_EQ(Metric(registry_, R"(switchyard_cache_hits_total{method="getTransaction"})"), 1);
}

TEST_F(ResponseCacheRouterTest, NotFoundIsKeptOnlyTheNegativeTtl) {
  StartCached([](CacheOptions& cache) { cache.negative_ttl = absl::Milliseconds(100); });
  const std::string signature = SignatureText(0x62);
  context_->signatures().Remember(*Signature::FromBase58(signature), "base");
  const std::string params = "[\"" + signature + "\"]";
  EXPECT_EQ(Post(Call("1", "getTransaction", params)), R"({"jsonrpc":"2.0","result":null,"id":1})");
  EXPECT_EQ(Post(Call("2", "getTransaction", params)), R"({"jsonrpc":"2.0","result":null,"id":2})");
  EXPECT_EQ(base_.received_count(), 1u);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the ttl under test
  Post(Call("3", "getTransaction", params));
  EXPECT_EQ(base_.received_count(), 2u);
}

TEST_F(ResponseCacheRouterTest, SignatureStatusesAreKeptOnlyWhenAllFinalized) {
  StartCached();
  std::string confirmation = "confirmed";
  base_.SetResponder([&confirmation](const std::string& method, const std::string& body) {
    (void)method;
    absl::StatusOr<RpcBody> parsed = ParseRpcBody(body, RpcCodecOptions{});
    return FakeReply{
        FakeReply::Action::kAnswer, 200,
        RpcResultResponse(parsed->calls[0].id_or_null(),
                          R"({"context":{"slot":90},"value":[{"slot":80,"confirmations":null,)"
                          R"("err":null,"confirmationStatus":")" +
                              confirmation + R"("}]})")};
  });
  const std::string signature = SignatureText(0x63);
  context_->signatures().Remember(*Signature::FromBase58(signature), "base");
  const std::string params = "[[\"" + signature + "\"]]";
  Post(Call("1", "getSignatureStatuses", params));
  Post(Call("2", "getSignatureStatuses", params));
  EXPECT_EQ(base_.received_count(), 2u);  // "confirmed" may still change
  confirmation = "finalized";
  Post(Call("3", "getSignatureStatuses", params));
  const std::string cached = Post(Call("4", "getSignatureStatuses", params));
  EXPECT_EQ(base_.received_count(), 3u);
  EXPECT_NE(cached.find(R"("confirmationStatus":"finalized"}]},"id":4})"), std::string::npos)
      << cached;
}

TEST_F(ResponseCacheRouterTest, ErrorAnswersAreNotKept) {
  StartCached();
  base_.SetResponder([](const std::string&, const std::string&) {
    return FakeReply{FakeReply::Action::kAnswer, 200,
                     R"({"jsonrpc":"2.0","error":{"code":-32005,"message":"busy"},"id":1})"};
  });
  const std::string read = Call("1", "getAccountInfo", "[" + Quoted(Key(30)) + "]");
  EXPECT_NE(Post(read).find("-32005"), std::string::npos);
  EXPECT_NE(Post(read).find("-32005"), std::string::npos);
  EXPECT_EQ(base_.received_count(), 2u);
}

TEST_F(ResponseCacheRouterTest, MethodRuleNeverOverridesTheDefaultClass) {
  StartCached([](CacheOptions& cache) { cache.rules = {{"getTokenSupply", CacheClass::kNever}}; });
  const std::string read = Call("1", "getTokenSupply", "[" + Quoted(Key(30)) + "]");
  Post(read);
  Post(read);
  EXPECT_EQ(base_.received_count(), 2u);
  // Without the rule the same read is kept (the control: the rule is what made the difference).
  const std::string balance = Call("2", "getBalance", "[" + Quoted(Key(30)) + "]");
  Post(balance);
  Post(balance);
  EXPECT_EQ(base_.received_count(), 3u);
}

TEST_F(ResponseCacheRouterTest, DelegationChangesEndTheKeptAnswerOfTheAccount) {
  StartCached();
  const std::string read = Call("1", "getAccountInfo", "[" + Quoted(Key(30)) + "]");
  const std::string from_base =
      R"({"jsonrpc":"2.0","result":{"from":"base","method":"getAccountInfo"},"id":1})";
  EXPECT_EQ(Post(read), from_base);
  EXPECT_EQ(Post(read), from_base);
  EXPECT_EQ(base_.received_count(), 1u);  // kept

  snapshots_.Publish(SnapshotBuilder().Delegate(Key(30), kEr1Identity).Build(101));
  EXPECT_EQ(context_->cache()->stats().entries, 0u);  // dropped by the publish
  EXPECT_EQ(Post(read),
            R"({"jsonrpc":"2.0","result":{"from":"er1","method":"getAccountInfo"},"id":1})");
  EXPECT_EQ(er1_.received_count(), 1u);

  // Undelegated again: the ER may have changed it and base holds what it committed, so the
  // answer kept before the delegation is not good any more.
  snapshots_.Publish(SnapshotBuilder().Undelegate(Key(30), 102).Build(102));
  EXPECT_EQ(Post(read), from_base);
  EXPECT_EQ(base_.received_count(), 2u);
  EXPECT_EQ(Post(read), from_base);
  EXPECT_EQ(base_.received_count(), 2u);  // and that answer is kept in turn
}

// A getMultipleAccounts split over base and ERs is kept part by part, each under its own target
// and with the marks of its own accounts: a delegation change or a write ends only the parts it
// concerns.
TEST_F(ResponseCacheRouterTest, SplitAccountListIsKeptPerPartAndEachPartEndsOnItsOwn) {
  StartCached();
  const std::string read =
      Call("7", "getMultipleAccounts",
           "[[" + Quoted(Key(9)) + "," + Quoted(Key(1)) + "," + Quoted(Key(2)) + "]]");
  // The answer when Key(2) is read from `key2_from`.
  auto answer = [](const std::string& key2_from) {
    std::string values;
    for (const auto& [key, from] :
         {std::pair{Key(9), "base"}, {Key(1), "er1"}, {Key(2), key2_from.c_str()}}) {
      values += (values.empty() ? "" : ",") + std::string(R"({"key":")") + key.ToBase58() +
                R"(","from":")" + from + R"("})";
    }
    return R"({"jsonrpc":"2.0","result":{"context":{"apiVersion":"2.1.0","slot":500},"value":[)" +
           values + R"(]},"id":7})";
  };
  // How many requests each upstream received so far.
  auto asked = [&](size_t base, size_t er1, size_t er2) {
    EXPECT_EQ(base_.received_count(), base);
    EXPECT_EQ(er1_.received_count(), er1);
    EXPECT_EQ(er2_.received_count(), er2);
  };
  EXPECT_EQ(Post(read), answer("er2"));
  EXPECT_EQ(Post(read), answer("er2"));
  asked(1, 1, 1);
  EXPECT_EQ(Metric(registry_, R"(switchyard_cache_hits_total{method="getMultipleAccounts"})"), 3);
  EXPECT_EQ(Metric(registry_, R"(switchyard_cache_misses_total{method="getMultipleAccounts"})"), 3);

  // A write to base ends base's part only.
  const Transaction tx = MakeTransaction(Key(30), {}, Key(31), 0x52);
  Post(Call("8", "sendTransaction", "[\"" + TransactionBase64(tx) + R"(",{"encoding":"base64"}])"));
  asked(2, 1, 1);
  EXPECT_EQ(Post(read), answer("er2"));
  asked(3, 1, 1);

  // Key(2) back on base: base's part now names it (a new key, asked), er2 has no part any
  // more, and er1's part, whose account did not change, is still kept.
  SnapshotBuilder state;
  state.Delegate(Key(1), kEr1Identity).Delegate(Key(5), kEr1Identity).Undelegate(Key(2), 101);
  snapshots_.Publish(state.Build(101));
  EXPECT_EQ(Post(read), answer("base"));
  asked(4, 1, 1);

  // An undelegation of Key(9) seen (its delegation state changed, its target did not): base's
  // part, which names it, is asked again; er1's part is still kept.
  snapshots_.Publish(state.Undelegate(Key(9), 102).Build(102));
  EXPECT_EQ(Post(read), answer("base"));
  asked(5, 1, 1);
}

// The publish itself drops what a delegation change makes wrong: the entries are gone before
// any read asks for them, by the publish's list of changed accounts, or by a pass over every
// entry when the router missed a snapshot.
TEST_F(ResponseCacheRouterTest, APublishDropsTheAnswersNamingAnAccountItChanged) {
  StartCached();
  auto changes = [](uint64_t generation, std::vector<Pubkey> accounts) {
    return SnapshotChanges{generation,
                           std::make_shared<const std::vector<Pubkey>>(std::move(accounts))};
  };
  snapshots_.Publish(SnapshotBuilder().Build(100, std::nullopt, changes(1, {})));
  Post(Call("1", "getAccountInfo", "[" + Quoted(Key(30)) + "]"));
  Post(Call("2", "getAccountInfo", "[" + Quoted(Key(31)) + "]"));
  Post(Call("3", "getMultipleAccounts", "[[" + Quoted(Key(32)) + "," + Quoted(Key(30)) + "]]"));
  ResponseCache& cache = *context_->cache();
  ASSERT_EQ(cache.stats().entries, 3u);

  // Key(30) delegated: its read and the list naming it go; Key(31)'s read stays.
  snapshots_.Publish(SnapshotBuilder()
                         .Delegate(Key(30), kEr1Identity)
                         .Build(101, std::nullopt, changes(2, {Key(30)})));
  EXPECT_EQ(cache.stats().entries, 1u);
  EXPECT_EQ(cache.stats().invalidations, 2u);
  EXPECT_EQ(Metric(registry_, "switchyard_cache_invalidations_total"), 2);

  // Listed but unchanged for what was kept: nothing goes.
  snapshots_.Publish(SnapshotBuilder()
                         .Delegate(Key(30), kEr1Identity)
                         .Build(102, std::nullopt, changes(3, {Key(31)})));
  EXPECT_EQ(cache.stats().entries, 1u);

  // A missed generation: the list (empty here) cannot be trusted, every entry is checked.
  snapshots_.Publish(SnapshotBuilder()
                         .Delegate(Key(30), kEr1Identity)
                         .Delegate(Key(31), kEr1Identity)
                         .Build(104, std::nullopt, changes(5, {})));
  EXPECT_EQ(cache.stats().entries, 0u);
  EXPECT_EQ(cache.stats().invalidations, 3u);
  EXPECT_EQ(base_.received_count(), 3u);
  const std::string status = StatusJson();
  EXPECT_NE(status.find(R"("evictions":0,"invalidations":3})"), std::string::npos) << status;
}

// The minimum slot of a read, as minContextSlot or as X-Min-Slot (which is not part of the
// params, so the read shares its key with reads that need less).
TEST_F(ResponseCacheRouterTest, KeptAnswerBelowTheMinSlotOfARequestGoesUpstream) {
  StartCached();
  base_.SetResponder(AnswerWith(R"({"context":{"slot":150},"value":{"lamports":5}})"));
  // The consistency gate passes every read below: the state is at 200.
  snapshots_.Publish(SnapshotBuilder().Build(200));
  const std::string read = Call("1", "getBalance", "[" + Quoted(Key(30)) + "]");
  TestClient client(port());
  client.Post(read);
  client.Post(read);
  EXPECT_EQ(base_.received_count(), 1u);
  // At the kept slot: answered from the cache.
  client.Post(read, {{"X-Min-Slot", "150"}});
  EXPECT_EQ(base_.received_count(), 1u);
  // Above it: upstream.
  const std::string answer =
      client.Post(Call("4", "getBalance", "[" + Quoted(Key(30)) + "]"), {{"X-Min-Slot", "151"}})
          .body;
  EXPECT_EQ(base_.received_count(), 2u);
  EXPECT_EQ(answer, R"({"jsonrpc":"2.0","result":{"context":{"slot":150},"value":{"lamports":5}},)"
                    R"("id":4})");
  // minContextSlot is part of the params: the same read with one above the kept slot.
  const std::string with_min =
      Call("5", "getBalance", "[" + Quoted(Key(30)) + R"(,{"minContextSlot":151}])");
  client.Post(with_min);
  EXPECT_EQ(base_.received_count(), 3u);
}

TEST_F(ResponseCacheRouterTest, StatusReportsTheCacheAfterHits) {
  StartCached();
  const std::string read = Call("1", "getBalance", "[" + Quoted(Key(30)) + "]");
  Post(read);
  Post(read);
  Post(read);
  const std::string status = StatusJson();
  EXPECT_NE(status.find(R"("cache":{"entries":1,)"), std::string::npos) << status;
  EXPECT_NE(status.find(R"("hits":2,"misses":1,"hit_ratio":0.6667)"), std::string::npos) << status;
}

// A redis-server of the test's own on a free port, spoken to with RESP over a socket.
class RedisServer {
 public:
  RedisServer() {
    boost::asio::io_context io;
    boost::asio::ip::tcp::acceptor acceptor(io, {boost::asio::ip::make_address("127.0.0.1"), 0});
    port_ = acceptor.local_endpoint().port();
  }
  ~RedisServer() {
    if (pid_ > 0) Kill();
  }
  bool Start() {
    pid_ = testing::StartProcess({SWITCHYARD_REDIS_SERVER, "--port", std::to_string(port_),
                                  "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"});
    const absl::Time deadline = absl::Now() + absl::Seconds(5);
    while (absl::Now() < deadline) {
      if (Command("PING") == "+PONG") return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return false;
  }
  void Kill() {
    kill(pid_, SIGKILL);
    testing::WaitProcess(pid_);
    pid_ = -1;
  }
  // One inline command; the first line of the reply, "" on failure.
  std::string Command(const std::string& command) {
    boost::asio::io_context io;
    boost::asio::ip::tcp::socket socket(io);
    boost::system::error_code ec;
    socket.connect({boost::asio::ip::make_address("127.0.0.1"), port_}, ec);
    if (ec) return "";
    boost::asio::write(socket, boost::asio::buffer(command + "\r\n"), ec);
    boost::asio::streambuf buffer;
    boost::asio::read_until(socket, buffer, "\r\n", ec);
    if (ec) return "";
    std::istream in(&buffer);
    std::string line;
    std::getline(in, line);
    if (!line.empty() && line.back() == '\r') line.pop_back();
    return line;
  }
  std::string url() const { return "redis://127.0.0.1:" + std::to_string(port_); }

 private:
  uint16_t port_ = 0;
  pid_t pid_ = -1;
};

// A second router (its own context, server and metrics) in front of the same fakes.
struct SecondRouter {
  MetricsRegistry registry;
  ApiMetrics metrics{registry};
  std::unique_ptr<RouterContext> context;
  std::unique_ptr<HttpServer> server;
  ~SecondRouter() {
    if (server) server->Stop();
  }
};

TEST_F(ResponseCacheRouterTest, SharedTierAnswersTheSecondRouterAndADeadRedisCostsNoWait) {
  RedisServer redis;
  ASSERT_TRUE(redis.Start());
  // A lookup's 5 ms deadline is not what this test is about; under a sanitizer the round trip
  // through the Redis thread alone can take longer.
  const absl::Duration redis_timeout = switchyard::testing::Scaled(CacheOptions{}.redis_timeout);
  StartCached([&](CacheOptions& cache) {
    cache.redis_url = redis.url();
    cache.redis_timeout = redis_timeout;
  });
  SecondRouter b;
  {
    RouterOptions options;
    options.upstreams = {
        {"base", {{base_.url(), 1}}}, {"er1", {{er1_.url(), 1}}}, {"er2", {{er2_.url(), 1}}}};
    options.ers = {{kEr1Identity, "er1", "https://er1.example", 0, 50, "DE"},
                   {kEr2Identity, "er2", "https://er2.example", 0, 30, "US"}};
    options.routing.default_er = "er1";
    options.verify_owner = false;
    options.cache.slot_ttl = absl::Seconds(30);
    options.cache.redis_url = redis.url();
    options.cache.redis_timeout = redis_timeout;
    absl::StatusOr<std::unique_ptr<RouterContext>> context =
        RouterContext::Create(std::move(options), &snapshots_, &clock_, &b.metrics);
    ASSERT_TRUE(context.ok()) << context.status();
    b.context = *std::move(context);
    b.server =
        std::make_unique<HttpServer>(HttpServerOptions{}, b.context->HandlerFactory(), &b.metrics);
    ASSERT_TRUE(b.server->Start().ok());
  }
  auto read = [](const std::string& id, uint8_t account) {
    return Call(id, "getBalance", "[" + Quoted(Key(account)) + "]");
  };
  auto answer = [](const std::string& id) {
    return R"({"jsonrpc":"2.0","result":{"from":"base","method":"getBalance"},"id":)" + id + "}";
  };
  EXPECT_EQ(Post(read("1", 30)), answer("1"));
  ASSERT_EQ(base_.received_count(), 1u);
  ASSERT_TRUE(WaitFor([&] { return redis.Command("DBSIZE") == ":1"; }, absl::Seconds(2)));
  EXPECT_EQ(TestClient(b.server->port()).Post(read("2", 30)).body, answer("2"));
  EXPECT_EQ(base_.received_count(), 1u);  // answered by the shared tier

  // Reads that miss everywhere, with Redis up, then with Redis killed.
  auto slowest = [&](uint8_t first) {
    absl::Duration worst = absl::ZeroDuration();
    for (uint8_t account = first; account < first + 5; ++account) {
      const size_t before = base_.received_count();
      const absl::Time start = absl::Now();
      const std::string body = TestClient(b.server->port()).Post(read("3", account)).body;
      worst = std::max(worst, absl::Now() - start);
      EXPECT_EQ(body, answer("3"));
      EXPECT_EQ(base_.received_count(), before + 1);
    }
    return worst;
  };
  const absl::Duration with_redis = slowest(40);
  redis.Kill();
  const absl::Duration killed = slowest(50);
  // A latency bound: under a sanitizer the lookups' deadline is scaled and the timing is not the
  // product's.
  if (!switchyard::testing::kSanitized) {
    EXPECT_LT(killed, with_redis + absl::Milliseconds(50)) << with_redis;
  }
}

}  // namespace
}  // namespace switchyard::api_test
