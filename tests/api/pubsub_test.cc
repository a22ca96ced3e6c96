// The pubsub router over real sockets, in front of switchyard-localnet processes (a base
// layer and an ER). The test drives delegation on the chains itself and publishes the
// matching snapshots, so that every switch happens at a known point.
#include <gtest/gtest.h>
#include <signal.h>
#include <sodium.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include <boost/asio/connect.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/websocket.hpp>
#include <chrono>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "api/metrics/api_metrics.h"
#include "api/net/http_server.h"
#include "api/pubsub/pubsub_metrics.h"
#include "api/pubsub/pubsub_server.h"
#include "api/rpc/router.h"
#include "common/clock.h"
#include "common/endian.h"
#include "common/metrics.h"
#include "fmt/format.h"
#include "simdjson.h"
#include "solana/base64.h"
#include "solana/delegation.h"
#include "solana/transaction.h"
#include "tests/api/test_support.h"
#include "tests/localnet/test_clients.h"
#include "tests/support/localnet_process.h"
#include "tests/support/temp_dir.h"
#include "tests/support/test_transactions.h"

namespace switchyard {
namespace {

using namespace std::chrono_literals;
using api_test::SnapshotBuilder;
using localnet::testing::HttpClient;
using localnet::testing::WsClient;

constexpr uint64_t kFunds = 1'000'000'000;
constexpr std::string_view kSystemProgram = "11111111111111111111111111111111";

bool WaitFor(const std::function<bool()>& condition, std::chrono::milliseconds deadline = 10s) {
  const auto end = std::chrono::steady_clock::now() + deadline;
  while (!condition()) {
    if (std::chrono::steady_clock::now() > end) return false;
    std::this_thread::sleep_for(2ms);
  }
  return true;
}

using testing::Keypair;
using testing::MakeKeypair;

// A signed legacy transaction, base64.
std::string Sign(const std::vector<const Keypair*>& signers, std::vector<Pubkey> keys,
                 MessageHeader header, std::vector<CompiledInstruction> instructions,
                 const Hash& blockhash) {
  return testing::BuildTransaction(signers, keys, header, blockhash, std::move(instructions));
}

std::string Transfer(const Keypair& from, const Pubkey& to, uint64_t lamports,
                     const Hash& blockhash) {
  std::string data;
  AppendU32LE(&data, 2);
  AppendU64LE(&data, lamports);
  return Sign({&from}, {from.pubkey, to, Pubkey()}, MessageHeader{1, 0, 1},
              {CompiledInstruction{2, {0, 1}, data}}, blockhash);
}

// Delegate of a system-owned `account` to `validator`, paid by `payer`.
std::string Delegate(const Keypair& payer, const Pubkey& account, const Pubkey& validator,
                     const Hash& blockhash) {
  return Sign(
      {&payer},
      {payer.pubkey, account, DelegateBufferPda(account, Pubkey()), DelegationRecordPda(account),
       DelegationMetadataPda(account), Pubkey(), DelegationProgramId()},
      MessageHeader{1, 0, 2},
      {CompiledInstruction{
          6, {0, 1, 5, 2, 3, 4, 5}, EncodeDelegateInstructionData(1000, {}, validator)}},
      blockhash);
}

// Undelegate of a system-owned `account`, signed and paid by `validator`.
std::string Undelegate(const Keypair& validator, const Pubkey& account, const Hash& blockhash) {
  std::string data(8, '\0');
  data[0] = static_cast<char>(kUndelegateDiscriminator);
  return Sign(
      {&validator},
      {validator.pubkey, account, UndelegateBufferPda(account), CommitStatePda(account),
       CommitRecordPda(account), DelegationRecordPda(account), DelegationMetadataPda(account),
       FeesVaultPda(), ValidatorFeesVaultPda(validator.pubkey), Pubkey(), DelegationProgramId()},
      MessageHeader{1, 0, 2}, {CompiledInstruction{10, {0, 1, 9, 2, 3, 4, 5, 6, 0, 7, 8, 9}, data}},
      blockhash);
}

// A parsed JSON message kept with its parser.
struct Json {
  std::string text;
  simdjson::dom::parser parser;
  simdjson::dom::element root;

  static std::unique_ptr<Json> Of(std::string text) {
    auto json = std::make_unique<Json>();
    json->text = std::move(text);
    if (json->parser.parse(json->text).get(json->root) != simdjson::SUCCESS) return nullptr;
    return json;
  }
  bool Has(const char* key) const {
    simdjson::dom::element ignored;
    return root[key].get(ignored) == simdjson::SUCCESS;
  }
  std::string Method() const {
    std::string_view method;
    return root["method"].get_string().get(method) == simdjson::SUCCESS ? std::string(method) : "";
  }
  uint64_t Subscription() const { return root["params"]["subscription"].get_uint64().value(); }
  uint64_t Slot() const { return root["params"]["result"]["context"]["slot"].get_uint64().value(); }
  uint64_t Lamports() const {
    return root["params"]["result"]["value"]["lamports"].get_uint64().value();
  }
  std::string Owner() const {
    return std::string(root["params"]["result"]["value"]["owner"].get_string().value());
  }
  int64_t ErrorCode() const { return root["error"]["code"].get_int64().value(); }
  std::string ErrorMessage() const {
    return std::string(root["error"]["message"].get_string().value());
  }
};

// A pubsub client: calls are matched to their answers; notifications queue up.
class PubsubClientForTest {
 public:
  explicit PubsubClientForTest(uint16_t port) : ws_(port) {}
  bool ok() const { return ws_.ok(); }

  // Sends a call and returns its answer (nullptr on timeout).
  std::unique_ptr<Json> Call(std::string_view method, std::string_view params,
                             std::chrono::milliseconds timeout = 10s) {
    const uint64_t id = next_id_++;
    if (!ws_.Send(fmt::format(R"({{"jsonrpc":"2.0","id":{},"method":"{}","params":{}}})", id,
                              method, params))) {
      return nullptr;
    }
    const auto end = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < end) {
      auto message = ReadOne(std::chrono::duration_cast<std::chrono::milliseconds>(
          end - std::chrono::steady_clock::now()));
      if (!message) return nullptr;
      uint64_t answer_id = 0;
      if (message->root["id"].get_uint64().get(answer_id) == simdjson::SUCCESS && answer_id == id) {
        return message;
      }
      queued_.push_back(std::move(message));
    }
    return nullptr;
  }

  // The subscription id of a successful subscribe call, or 0.
  uint64_t Subscribe(std::string_view method, std::string_view params) {
    auto answer = Call(method, params);
    uint64_t id = 0;
    if (!answer || answer->root["result"].get_uint64().get(id) != simdjson::SUCCESS) {
      ADD_FAILURE() << method << " " << params << " -> " << (answer ? answer->text : "timeout");
      return 0;
    }
    return id;
  }

  // The next message that is not an answer to a call (a notification or an error with id
  // null), or nullptr after `timeout`.
  std::unique_ptr<Json> Next(std::chrono::milliseconds timeout = 10s) {
    if (!queued_.empty()) {
      auto message = std::move(queued_.front());
      queued_.pop_front();
      return message;
    }
    return ReadOne(timeout);
  }

  // The next notification of `method`, skipping others.
  std::unique_ptr<Json> NextOf(std::string_view method, std::chrono::milliseconds timeout = 10s) {
    const auto end = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < end) {
      auto message = Next(std::chrono::duration_cast<std::chrono::milliseconds>(
          end - std::chrono::steady_clock::now()));
      if (!message) return nullptr;
      if (message->Method() == method) return message;
    }
    return nullptr;
  }

  bool closed() const { return ws_.closed(); }

 private:
  std::unique_ptr<Json> ReadOne(std::chrono::milliseconds timeout) {
    std::optional<std::string> text = ws_.Read(timeout);
    if (!text) return nullptr;
    auto json = Json::Of(std::move(*text));
    EXPECT_NE(json, nullptr);
    return json;
  }

  WsClient ws_;
  uint64_t next_id_ = 1;
  std::deque<std::unique_ptr<Json>> queued_;
};

class PubsubRouterTest : public ::testing::Test {
 protected:
  PubsubRouterTest()
      : payer_(MakeKeypair(1)),
        a_(MakeKeypair(2)),
        b_(MakeKeypair(3)),
        validator_(MakeKeypair(9)) {}

  static void SetUpTestSuite() { ASSERT_GE(sodium_init(), 0); }

  void TearDown() override {
    // The HTTP server runs the pubsub connections and shards: stopping it stops them.
    if (http_) http_->Stop();
    for (pid_t pid : processes_) {
      kill(pid, SIGKILL);
      int status = 0;
      waitpid(pid, &status, 0);
    }
  }

  // Starts a localnet and returns its HTTP port (pubsub is on port + 1).
  uint16_t StartLocalnet(const std::string& name, std::vector<std::string> args) {
    testing::LocalnetProcess process =
        testing::StartLocalnetProcess(SWITCHYARD_LOCALNET_BINARY, dir_.Sub(name + ".ready"), args);
    if (process.pid > 0) processes_.push_back(process.pid);
    pids_[name] = process.pid;
    EXPECT_GT(process.http_port, 0) << name;
    return process.http_port;
  }

  // A base layer (payer, A, B and the validator funded) and, unless `er` is false, an ER whose
  // identity is the validator's.
  void StartChains(bool er = true, std::vector<std::string> base_args = {}, int base_slot_ms = 20) {
    std::vector<std::string> args = {"--slot-ms", std::to_string(base_slot_ms)};
    for (const Keypair* k : {&payer_, &a_, &b_, &validator_}) {
      args.push_back("--fund");
      args.push_back(fmt::format("{}={}", k->pubkey.ToBase58(), kFunds));
    }
    args.insert(args.end(), base_args.begin(), base_args.end());
    base_port_ = StartLocalnet("base", args);
    if (er) {
      er_port_ =
          StartLocalnet("er", {"--er", "--identity", validator_.pubkey.ToBase58(), "--base",
                               fmt::format("http://127.0.0.1:{}", base_port_), "--slot-ms", "20"});
    }
  }

  void StartRouter(std::function<void(PubsubServerOptions&)> customize = nullptr) {
    snapshots_.Publish(SnapshotBuilder().Build(1));
    RouterOptions options;
    options.upstreams = {{"base", {{fmt::format("http://127.0.0.1:{}", base_port_), 1}}}};
    if (er_port_ != 0) {
      options.upstreams.push_back({"er1", {{fmt::format("http://127.0.0.1:{}", er_port_), 1}}});
      options.ers = {{validator_.pubkey, "er1", "", 0, 50, ""}};
      options.routing.default_er = "er1";
    }
    options.upstream.request_timeout = absl::Seconds(5);
    std::vector<std::string> targets;
    for (const UpstreamTarget& target : options.upstreams) targets.push_back(target.name);
    pubsub_metrics_ = std::make_unique<PubsubMetrics>(registry_, targets);
    absl::StatusOr<std::unique_ptr<RouterContext>> context =
        RouterContext::Create(std::move(options), &snapshots_, &clock_, &api_metrics_);
    ASSERT_TRUE(context.ok()) << context.status();
    context_ = *std::move(context);

    PubsubServerOptions pubsub_options;
    pubsub_options.router.upstream.reconnect_give_up = absl::Seconds(1);
    pubsub_options.router.upstream.reconnect_initial_backoff = absl::Milliseconds(50);
    if (customize) customize(pubsub_options);
    pubsub_ = std::make_unique<PubsubServer>(pubsub_options, context_.get(), pubsub_metrics_.get());
    HttpServerOptions http_options;
    http_options.threads = 2;
    http_ = std::make_unique<HttpServer>(http_options, context_->HandlerFactory(), &api_metrics_);
    ASSERT_TRUE(pubsub_->Attach(http_.get()).ok());
    ASSERT_TRUE(http_->Start().ok());
  }

  // Sends a transaction to `port` and waits until it is processed; returns its slot.
  uint64_t Land(uint16_t port, const std::string& tx, std::string* signature_out = nullptr) {
    HttpClient client(port);
    auto sent =
        Json::Of(client
                     .Post(fmt::format(R"({{"jsonrpc":"2.0","id":1,"method":"sendTransaction",)"
                                       R"("params":["{}",{{"encoding":"base64"}}]}})",
                                       tx))
                     .value_or(""));
    std::string_view signature;
    if (!sent || sent->root["result"].get_string().get(signature) != simdjson::SUCCESS) {
      ADD_FAILURE() << "sendTransaction: " << (sent ? sent->text : "no answer");
      return 0;
    }
    if (signature_out != nullptr) *signature_out = std::string(signature);
    uint64_t slot = 0;
    const std::string query = fmt::format(
        R"({{"jsonrpc":"2.0","id":1,"method":"getSignatureStatuses","params":[["{}"]]}})",
        signature);
    const bool landed = WaitFor([&] {
      auto status = Json::Of(client.Post(query).value_or(""));
      simdjson::dom::element value;
      if (!status || status->root["result"]["value"].at(0).get(value) != simdjson::SUCCESS ||
          value.is_null()) {
        return false;
      }
      EXPECT_TRUE(value["err"].is_null()) << status->text;
      slot = value["slot"].get_uint64().value();
      return true;
    });
    EXPECT_TRUE(landed) << signature;
    return slot;
  }

  // The latest blockhash of the chain at `port`.
  Hash BlockhashOf(uint16_t port) {
    HttpClient client(port);
    auto answer = Json::Of(
        client.Post(R"({"jsonrpc":"2.0","id":1,"method":"getLatestBlockhash"})").value_or(""));
    std::string_view text;
    if (!answer ||
        answer->root["result"]["value"]["blockhash"].get_string().get(text) != simdjson::SUCCESS) {
      ADD_FAILURE() << "getLatestBlockhash: " << (answer ? answer->text : "no answer");
      return Hash();
    }
    return Hash::FromBase58(text).value_or(Hash());
  }

  // The blockhash for a transaction writing `accounts` sent through the router: asked of the
  // router (getBlockhashForAccounts), as MagicBlock's SDK does, so that it is the ER's.
  Hash RouterBlockhashFor(const std::vector<Pubkey>& accounts) {
    HttpClient client(http_->port());
    std::string keys;
    for (const Pubkey& key : accounts) {
      keys += fmt::format("{}\"{}\"", keys.empty() ? "" : ",", key.ToBase58());
    }
    auto answer = Json::Of(client
                               .Post(fmt::format(R"({{"jsonrpc":"2.0","id":1,)"
                                                 R"("method":"getBlockhashForAccounts",)"
                                                 R"("params":[[{}]]}})",
                                                 keys))
                               .value_or(""));
    std::string_view text;
    if (!answer ||
        answer->root["result"]["blockhash"].get_string().get(text) != simdjson::SUCCESS) {
      ADD_FAILURE() << "getBlockhashForAccounts: " << (answer ? answer->text : "no answer");
      return Hash();
    }
    return Hash::FromBase58(text).value_or(Hash());
  }

  uint64_t SlotOf(uint16_t port) {
    HttpClient client(port);
    auto answer =
        Json::Of(client.Post(R"({"jsonrpc":"2.0","id":1,"method":"getSlot"})").value_or(""));
    return answer ? answer->root["result"].get_uint64().value() : 0;
  }

  std::string AccountParams(const Pubkey& key) const {
    return fmt::format(R"(["{}",{{"encoding":"base64","commitment":"confirmed"}}])",
                       key.ToBase58());
  }

  // Delegates A and B to the validator on the base layer.
  void DelegateOnBase() {
    Land(base_port_, Delegate(payer_, a_.pubkey, validator_.pubkey, BlockhashOf(base_port_)));
    Land(base_port_, Delegate(payer_, b_.pubkey, validator_.pubkey, BlockhashOf(base_port_)));
  }

  // Nothing more arrives within `quiet`.
  static void ExpectSilence(PubsubClientForTest& client, std::chrono::milliseconds quiet = 1s) {
    auto extra = client.Next(quiet);
    EXPECT_EQ(extra, nullptr) << (extra ? extra->text : "");
  }

  Keypair payer_;
  Keypair a_;
  Keypair b_;
  Keypair validator_;
  ::switchyard::testing::TempDir dir_;
  std::vector<pid_t> processes_;
  std::map<std::string, pid_t> pids_;
  uint16_t base_port_ = 0;
  uint16_t er_port_ = 0;
  SnapshotHolder snapshots_;
  SystemClock clock_;
  MetricsRegistry registry_;
  ApiMetrics api_metrics_{registry_};
  std::unique_ptr<PubsubMetrics> pubsub_metrics_;
  std::unique_ptr<RouterContext> context_;
  std::unique_ptr<PubsubServer> pubsub_;
  std::unique_ptr<HttpServer> http_;
};

// Item 7: every change, in order, across the switch to the ER and back, with no gap and no
// duplicate as PubsubRouter defines them.
TEST_F(PubsubRouterTest, AccountSubscribeFollowsDelegationToTheErAndBackWithoutGapOrDuplicate) {
  StartChains();
  StartRouter();
  PubsubClientForTest client(pubsub_->port());
  ASSERT_TRUE(client.ok());
  const uint64_t id = client.Subscribe("accountSubscribe", AccountParams(a_.pubkey));
  ASSERT_NE(id, 0u);

  struct Expected {
    uint64_t lamports;
    std::string_view owner;
    uint64_t slot;      // the exact context slot, or 0 when only bounded below
    uint64_t min_slot;  // for baselines
  };
  auto expect = [&](const Expected& e, const char* step) {
    auto n = client.Next(5s);
    ASSERT_NE(n, nullptr) << step << ": no notification";
    EXPECT_EQ(n->Method(), "accountNotification") << step << ": " << n->text;
    EXPECT_EQ(n->Subscription(), id) << step;
    EXPECT_EQ(n->Lamports(), e.lamports) << step << ": " << n->text;
    EXPECT_EQ(n->Owner(), e.owner) << step << ": " << n->text;
    if (e.slot != 0) {
      EXPECT_EQ(n->Slot(), e.slot) << step << ": " << n->text;
    }
    EXPECT_GE(n->Slot(), e.min_slot) << step << ": " << n->text;
  };

  // 1. On base: a transfer into A.
  const uint64_t s1 = Land(base_port_, Transfer(payer_, a_.pubkey, 100, BlockhashOf(base_port_)));
  expect({kFunds + 100, kSystemProgram, s1, 0}, "base transfer");
  // 2. The delegation itself, still on base: A now shows the delegation program as owner.
  const uint64_t s2 =
      Land(base_port_, Delegate(payer_, a_.pubkey, validator_.pubkey, BlockhashOf(base_port_)));
  expect({kFunds + 100, kDelegationProgramId, s2, 0}, "delegation on base");
  Land(base_port_, Delegate(payer_, b_.pubkey, validator_.pubkey, BlockhashOf(base_port_)));
  ExpectSilence(client, 300ms);  // B's delegation is not A's business
  EXPECT_EQ(pubsub_metrics_->switches.value(), 0u);

  // 3. The snapshot says delegated: the first notification from the ER is its baseline (A with
  // its original owner), then ER transactions, each once, at their ER slots.
  snapshots_.Publish(SnapshotBuilder()
                         .Delegate(a_.pubkey, validator_.pubkey)
                         .Delegate(b_.pubkey, validator_.pubkey)
                         .Build(SlotOf(base_port_)));
  expect({kFunds + 100, kSystemProgram, 0, 0}, "ER baseline");
  EXPECT_EQ(pubsub_metrics_->switches.value(), 1u);
  const uint64_t e1 = Land(
      http_->port(),
      Transfer(a_, b_.pubkey, 10, RouterBlockhashFor({a_.pubkey, b_.pubkey})));  // routed to the ER
  expect({kFunds + 90, kSystemProgram, e1, 0}, "first ER transfer");
  const uint64_t e2 = Land(er_port_, Transfer(a_, b_.pubkey, 20, BlockhashOf(er_port_)));
  expect({kFunds + 70, kSystemProgram, e2, 0}, "second ER transfer");

  // 4. Undelegated on base. Nothing reaches the client until the snapshot says so (the base
  // subscription is gone); then the base baseline shows base's A (the ER's changes are not
  // committed back by localnet), at a slot at or after the undelegation.
  const uint64_t s3 = Land(base_port_, Undelegate(validator_, a_.pubkey, BlockhashOf(base_port_)));
  ExpectSilence(client, 300ms);
  snapshots_.Publish(
      SnapshotBuilder().Delegate(b_.pubkey, validator_.pubkey).Build(SlotOf(base_port_)));
  expect({kFunds + 100, kSystemProgram, 0, s3}, "base baseline");
  EXPECT_EQ(pubsub_metrics_->switches.value(), 2u);
  const uint64_t s4 = Land(base_port_, Transfer(payer_, a_.pubkey, 1, BlockhashOf(base_port_)));
  expect({kFunds + 101, kSystemProgram, s4, 0}, "base transfer after undelegation");

  // Nothing else: no duplicate of any of the above.
  ExpectSilence(client);
  EXPECT_EQ(pubsub_metrics_->baselines_sent.value(), 2u);
  EXPECT_EQ(pubsub_metrics_->switch_failures.value(), 0u);
  EXPECT_EQ(pubsub_metrics_->UpstreamSubscriptions("account", "er1").value(), 0);
  EXPECT_EQ(pubsub_metrics_->UpstreamSubscriptions("account", "base").value(), 1);
}

// A switch whose baseline equals what the client last saw sends nothing. A (not delegated) is
// routed to the ER by a snapshot that says so: the ER's clone of A equals base's A, so the
// switch there and back again shows the client nothing, and the stream goes on.
TEST_F(PubsubRouterTest, ASwitchBetweenEqualValuesSendsNothing) {
  StartChains();
  StartRouter();
  PubsubClientForTest client(pubsub_->port());
  const uint64_t id = client.Subscribe("accountSubscribe", AccountParams(a_.pubkey));
  ASSERT_NE(id, 0u);
  // The silent baseline (the value the client starts from) is read after the subscription.
  ASSERT_TRUE(WaitFor([&] { return pubsub_metrics_->baselines_read.value() == 1; }));
  snapshots_.Publish(
      SnapshotBuilder().Delegate(a_.pubkey, validator_.pubkey).Build(SlotOf(base_port_)));
  ASSERT_TRUE(WaitFor([&] { return pubsub_metrics_->switches.value() == 1; }));
  snapshots_.Publish(SnapshotBuilder().Build(SlotOf(base_port_)));
  ASSERT_TRUE(WaitFor([&] { return pubsub_metrics_->switches.value() == 2; }));
  ExpectSilence(client, 300ms);
  EXPECT_EQ(pubsub_metrics_->baselines_sent.value(), 0u);
  EXPECT_GE(pubsub_metrics_->duplicates_dropped.value(), 2u);
  const uint64_t landed = Land(base_port_, Transfer(payer_, a_.pubkey, 5, BlockhashOf(base_port_)));
  auto after = client.Next(5s);
  ASSERT_NE(after, nullptr);
  EXPECT_EQ(after->Lamports(), kFunds + 5);
  EXPECT_EQ(after->Slot(), landed);
  EXPECT_EQ(after->Subscription(), id);
  ExpectSilence(client, 500ms);
}

// Item 7: a transaction sent through the router to an ER is confirmed through the router's
// signatureSubscribe, from the ER alone; an unknown one is asked of everyone, first wins.
TEST_F(PubsubRouterTest, SignatureSubscribeFollowsTheTransactionToItsEr) {
  StartChains();
  StartRouter();
  DelegateOnBase();
  snapshots_.Publish(SnapshotBuilder()
                         .Delegate(a_.pubkey, validator_.pubkey)
                         .Delegate(b_.pubkey, validator_.pubkey)
                         .Build(SlotOf(base_port_)));
  PubsubClientForTest client(pubsub_->port());
  std::string signature;
  const uint64_t slot =
      Land(http_->port(), Transfer(a_, b_.pubkey, 7, RouterBlockhashFor({a_.pubkey, b_.pubkey})),
           &signature);
  const uint64_t id = client.Subscribe(
      "signatureSubscribe", fmt::format(R"(["{}",{{"commitment":"confirmed"}}])", signature));
  ASSERT_NE(id, 0u);
  auto n = client.Next(5s);
  ASSERT_NE(n, nullptr);
  EXPECT_EQ(n->Method(), "signatureNotification") << n->text;
  EXPECT_EQ(n->Subscription(), id);
  EXPECT_EQ(n->Slot(), slot);
  EXPECT_TRUE(n->root["params"]["result"]["value"]["err"].is_null()) << n->text;
  EXPECT_EQ(pubsub_metrics_->signature_fanouts.value(), 0u);

  // Sent to the ER directly: the router does not know it.
  std::string direct;
  const uint64_t direct_slot =
      Land(er_port_, Transfer(a_, b_.pubkey, 8, BlockhashOf(er_port_)), &direct);
  const uint64_t direct_id =
      client.Subscribe("signatureSubscribe", fmt::format(R"(["{}"])", direct));
  ASSERT_NE(direct_id, 0u);
  auto m = client.Next(5s);
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->Subscription(), direct_id);
  EXPECT_EQ(m->Slot(), direct_slot);
  EXPECT_EQ(pubsub_metrics_->signature_fanouts.value(), 1u);
  ExpectSilence(client, 500ms);
  // The losing base subscription is dropped; the finished subscription is forgotten.
  EXPECT_TRUE(WaitFor(
      [&] { return pubsub_metrics_->UpstreamSubscriptions("signature", "base").value() == 0; }));
  auto unsubscribed = client.Call("signatureUnsubscribe", fmt::format("[{}]", direct_id));
  ASSERT_NE(unsubscribed, nullptr);
  EXPECT_EQ(unsubscribed->ErrorCode(), -32602) << unsubscribed->text;
}

// Item 3 and 4: pass-through methods on the pubsub port and through Upgrade on the HTTP port;
// identical subscriptions share one id and one upstream subscription.
TEST_F(PubsubRouterTest, PassesThroughToBaseAndSharesIdenticalSubscriptions) {
  StartChains(/*er=*/false);
  StartRouter();
  PubsubClientForTest own(pubsub_->port());
  PubsubClientForTest upgraded(http_->port());
  ASSERT_TRUE(own.ok());
  ASSERT_TRUE(upgraded.ok());
  EXPECT_EQ(pubsub_metrics_->connections_upgraded.value(), 1u);

  const uint64_t account_own = own.Subscribe("accountSubscribe", AccountParams(a_.pubkey));
  const uint64_t account_upgraded =
      upgraded.Subscribe("accountSubscribe", AccountParams(a_.pubkey));
  EXPECT_EQ(account_own, account_upgraded);
  EXPECT_EQ(pubsub_metrics_->UpstreamSubscriptions("account", "base").value(), 1);
  // The same subscription twice on one connection is one subscription.
  EXPECT_EQ(own.Subscribe("accountSubscribe", AccountParams(a_.pubkey)), account_own);
  EXPECT_EQ(pubsub_metrics_->ClientSubscriptions("account").value(), 2);

  const uint64_t slot_id = own.Subscribe("slotSubscribe", "[]");
  const uint64_t root_id = own.Subscribe("rootSubscribe", "[]");
  const uint64_t block_id = own.Subscribe("blockSubscribe", R"(["all"])");
  const uint64_t logs_id = own.Subscribe(
      "logsSubscribe", fmt::format(R"([{{"mentions":["{}"]}}])", a_.pubkey.ToBase58()));
  const uint64_t program_id = own.Subscribe(
      "programSubscribe", fmt::format(R"(["{}",{{"encoding":"base64"}}])", kSystemProgram));
  for (uint64_t id : {slot_id, root_id, block_id, logs_id, program_id}) EXPECT_NE(id, 0u);

  std::string signature;
  const uint64_t landed =
      Land(base_port_, Transfer(payer_, a_.pubkey, 3, BlockhashOf(base_port_)), &signature);
  auto on_upgraded = upgraded.NextOf("accountNotification", 5s);
  ASSERT_NE(on_upgraded, nullptr);
  EXPECT_EQ(on_upgraded->Lamports(), kFunds + 3);
  EXPECT_EQ(on_upgraded->Slot(), landed);

  // Every method's notification reaches the own-port client under its own id.
  std::map<std::string, uint64_t> seen;
  const auto end = std::chrono::steady_clock::now() + 5s;
  while (seen.size() < 6 && std::chrono::steady_clock::now() < end) {
    auto n = own.Next(1s);
    if (!n) continue;
    const std::string method = n->Method();
    if (method == "logsNotification") {
      EXPECT_EQ(n->root["params"]["result"]["value"]["signature"].get_string().value(), signature);
    }
    if (method == "blockNotification" && n->Slot() != landed) continue;
    if (method == "programNotification" &&
        n->root["params"]["result"]["value"]["pubkey"].get_string().value() !=
            a_.pubkey.ToBase58()) {
      continue;
    }
    seen[method] = n->Subscription();
  }
  EXPECT_EQ(seen["accountNotification"], account_own);
  EXPECT_EQ(seen["slotNotification"], slot_id);
  EXPECT_EQ(seen["rootNotification"], root_id);
  EXPECT_EQ(seen["blockNotification"], block_id);
  EXPECT_EQ(seen["logsNotification"], logs_id);
  EXPECT_EQ(seen["programNotification"], program_id);

  // Unsubscribing one client keeps the other's stream; the last one ends the upstream one.
  auto answer = own.Call("accountUnsubscribe", fmt::format("[{}]", account_own));
  ASSERT_NE(answer, nullptr);
  EXPECT_TRUE(answer->root["result"].get_bool().value()) << answer->text;
  Land(base_port_, Transfer(payer_, a_.pubkey, 4, BlockhashOf(base_port_)));
  auto still = upgraded.NextOf("accountNotification", 5s);
  ASSERT_NE(still, nullptr);
  EXPECT_EQ(still->Lamports(), kFunds + 7);
  EXPECT_EQ(pubsub_metrics_->UpstreamSubscriptions("account", "base").value(), 1);
  answer = upgraded.Call("accountUnsubscribe", fmt::format("[{}]", account_upgraded));
  ASSERT_NE(answer, nullptr);
  EXPECT_TRUE(WaitFor(
      [&] { return pubsub_metrics_->UpstreamSubscriptions("account", "base").value() == 0; }));
  EXPECT_EQ(pubsub_metrics_->ClientSubscriptions("account").value(), 0);
}

TEST_F(PubsubRouterTest, AnswersBadCallsWithJsonRpcErrors) {
  StartChains(/*er=*/false);
  StartRouter();
  PubsubClientForTest client(pubsub_->port());
  auto answer = client.Call("voteSubscribe", "[]");
  ASSERT_NE(answer, nullptr);
  EXPECT_EQ(answer->ErrorCode(), -32601);
  answer = client.Call("accountSubscribe", R"(["not a key"])");
  ASSERT_NE(answer, nullptr);
  EXPECT_EQ(answer->ErrorCode(), -32602);
  answer = client.Call("slotUnsubscribe", "[424242]");
  ASSERT_NE(answer, nullptr);
  EXPECT_EQ(answer->ErrorCode(), -32602);
  EXPECT_EQ(answer->ErrorMessage(), "Invalid subscription id.");
  // The upstream's own refusal is passed on as the answer.
  answer = client.Call("logsSubscribe", R"(["everything"])");
  ASSERT_NE(answer, nullptr);
  EXPECT_EQ(answer->ErrorCode(), -32602) << answer->text;
}

// Item 5: the per-connection limit counts distinct subscriptions.
TEST_F(PubsubRouterTest, RefusesSubscriptionsPastThePerConnectionLimit) {
  StartChains(/*er=*/false);
  StartRouter([](PubsubServerOptions& options) { options.max_subscriptions_per_connection = 3; });
  PubsubClientForTest client(pubsub_->port());
  const uint64_t slot_id = client.Subscribe("slotSubscribe", "[]");
  client.Subscribe("rootSubscribe", "[]");
  client.Subscribe("accountSubscribe", AccountParams(a_.pubkey));
  EXPECT_EQ(client.Subscribe("slotSubscribe", "[]"), slot_id);  // not a new one
  auto refused = client.Call("accountSubscribe", AccountParams(b_.pubkey));
  ASSERT_NE(refused, nullptr);
  EXPECT_EQ(refused->ErrorCode(), -32600);
  EXPECT_NE(refused->ErrorMessage().find("maximum of 3 subscriptions"), std::string::npos);
  EXPECT_EQ(pubsub_metrics_->subscription_limit_rejections.value(), 1u);
  // Another connection has its own budget.
  PubsubClientForTest other(pubsub_->port());
  EXPECT_NE(other.Subscribe("accountSubscribe", AccountParams(b_.pubkey)), 0u);
  ASSERT_NE(client.Call("slotUnsubscribe", fmt::format("[{}]", slot_id)), nullptr);
  EXPECT_NE(client.Subscribe("accountSubscribe", AccountParams(b_.pubkey)), 0u);
}

// Item 5: an idle client is pinged; one that answers stays, one that does not is dropped. A
// message over the size limit closes its connection.
TEST_F(PubsubRouterTest, PingsIdleClientsDropsSilentOnesAndRefusesOversizedMessages) {
  StartChains(/*er=*/false);
  StartRouter([](PubsubServerOptions& options) {
    options.idle_timeout = absl::Milliseconds(400);
    options.max_message_bytes = 1024;
  });
  PubsubClientForTest answering(pubsub_->port());
  PubsubClientForTest silent(pubsub_->port());  // never reads, so never answers a ping
  ASSERT_TRUE(answering.ok());
  ASSERT_TRUE(silent.ok());
  EXPECT_EQ(pubsub_metrics_->connections_open.value(), 2);
  // The answering client reads (and so answers pings) for three idle timeouts.
  EXPECT_EQ(answering.Next(1200ms), nullptr);
  EXPECT_FALSE(answering.closed());
  EXPECT_TRUE(WaitFor([&] { return pubsub_metrics_->connections_open.value() == 1; }, 5s));
  EXPECT_NE(answering.Subscribe("slotSubscribe", "[]"), 0u);

  PubsubClientForTest oversized(pubsub_->port());
  auto answer =
      oversized.Call("slotSubscribe", fmt::format(R"(["{}"])", std::string(2000, 'x')), 2s);
  EXPECT_EQ(answer, nullptr);
  EXPECT_TRUE(oversized.closed());
}

// Item 5: a client that stops reading is disconnected and counted; others go on.
TEST_F(PubsubRouterTest, DisconnectsASlowConsumer) {
  StartChains(/*er=*/false, {}, /*base_slot_ms=*/2);
  StartRouter([](PubsubServerOptions& options) {
    options.max_send_queue_messages = 16;
    options.socket_send_buffer_bytes = 4096;
  });
  namespace beast = boost::beast;
  boost::asio::io_context io;
  beast::websocket::stream<beast::tcp_stream> slow(io);
  auto& socket = beast::get_lowest_layer(slow).socket();
  boost::system::error_code ec;
  socket.open(boost::asio::ip::tcp::v4(), ec);
  socket.set_option(boost::asio::socket_base::receive_buffer_size(2048), ec);
  socket.connect({boost::asio::ip::make_address("127.0.0.1"), pubsub_->port()}, ec);
  ASSERT_FALSE(ec) << ec.message();
  slow.handshake("127.0.0.1", "/", ec);
  ASSERT_FALSE(ec) << ec.message();
  slow.write(
      boost::asio::buffer(std::string(R"({"jsonrpc":"2.0","id":1,"method":"slotSubscribe"})")), ec);
  slow.write(boost::asio::buffer(std::string(
                 R"({"jsonrpc":"2.0","id":2,"method":"blockSubscribe","params":["all"]})")),
             ec);
  ASSERT_FALSE(ec) << ec.message();
  // ... and never reads.
  PubsubClientForTest healthy(pubsub_->port());
  healthy.Subscribe("slotSubscribe", "[]");
  EXPECT_TRUE(WaitFor([&] { return pubsub_metrics_->slow_consumers.value() == 1; }, 30s));
  EXPECT_TRUE(WaitFor([&] { return pubsub_metrics_->connections_open.value() == 1; }));
  // The healthy client still gets its notifications, in slot order.
  uint64_t last = 0;
  for (int i = 0; i < 20; ++i) {
    auto n = healthy.NextOf("slotNotification", 5s);
    ASSERT_NE(n, nullptr);
    const uint64_t slot = n->root["params"]["result"]["slot"].get_uint64().value();
    EXPECT_GT(slot, last);
    last = slot;
  }
  EXPECT_EQ(pubsub_metrics_->slow_consumers.value(), 1u);
}

// Item 4 and 7: the base layer drops every WebSocket mid-stream; the router reconnects and
// makes every subscription again, and the stream goes on. Nothing changed during the outage,
// so the resync baseline is not sent.
TEST_F(PubsubRouterTest, MakesSubscriptionsAgainAfterTheUpstreamDropsItsWebSockets) {
  StartChains(/*er=*/false, {"--drop-websockets-at-slot", "120"});
  StartRouter();
  ASSERT_LT(SlotOf(base_port_), 100u) << "the machine is too slow for this test's timing";
  PubsubClientForTest client(pubsub_->port());
  const uint64_t account_id = client.Subscribe("accountSubscribe", AccountParams(a_.pubkey));
  const uint64_t slot_id = client.Subscribe("slotSubscribe", "[]");
  ASSERT_TRUE(WaitFor([&] { return pubsub_metrics_->upstream_reconnects.value() >= 1; }, 15s));
  EXPECT_GE(pubsub_metrics_->upstream_disconnects.value(), 1u);
  // Slots after the drop arrive under the same id.
  uint64_t slot = 0;
  ASSERT_TRUE(WaitFor([&] {
    auto n = client.NextOf("slotNotification", 2s);
    if (!n) return false;
    EXPECT_EQ(n->Subscription(), slot_id);
    slot = n->root["params"]["result"]["slot"].get_uint64().value();
    return slot > 121;
  }));
  const uint64_t landed =
      Land(base_port_, Transfer(payer_, a_.pubkey, 11, BlockhashOf(base_port_)));
  auto n = client.NextOf("accountNotification", 5s);
  ASSERT_NE(n, nullptr);
  EXPECT_EQ(n->Subscription(), account_id);
  EXPECT_EQ(n->Lamports(), kFunds + 11);
  EXPECT_EQ(n->Slot(), landed);
  EXPECT_EQ(pubsub_metrics_->baselines_sent.value(), 0u);
  EXPECT_GE(pubsub_metrics_->duplicates_dropped.value(), 1u);
  EXPECT_EQ(pubsub_metrics_->UpstreamSubscriptions("slot", "base").value(), 1);
  EXPECT_EQ(pubsub_metrics_->UpstreamSubscriptions("account", "base").value(), 1);
}

// Item 4: an upstream that stays away: the client gets an error naming its subscription,
// and the subscription is closed.
TEST_F(PubsubRouterTest, ClosesSubscriptionsWithAnErrorWhenTheirUpstreamIsGone) {
  StartChains();
  StartRouter();
  DelegateOnBase();
  snapshots_.Publish(
      SnapshotBuilder().Delegate(a_.pubkey, validator_.pubkey).Build(SlotOf(base_port_)));
  PubsubClientForTest client(pubsub_->port());
  const uint64_t id = client.Subscribe("accountSubscribe", AccountParams(a_.pubkey));
  ASSERT_NE(id, 0u);
  const uint64_t slot_id = client.Subscribe("slotSubscribe", "[]");
  ASSERT_TRUE(WaitFor(
      [&] { return pubsub_metrics_->UpstreamSubscriptions("account", "er1").value() == 1; }));
  kill(pids_["er"], SIGKILL);
  std::unique_ptr<Json> error;
  ASSERT_TRUE(WaitFor(
      [&] {
        auto message = client.Next(1s);
        if (message && message->Has("error")) error = std::move(message);
        return error != nullptr;
      },
      15s));
  EXPECT_EQ(error->ErrorCode(), -32603) << error->text;
  EXPECT_EQ(error->root["error"]["data"]["subscription"].get_uint64().value(), id) << error->text;
  EXPECT_NE(error->ErrorMessage().find(fmt::format("subscription {} closed", id)),
            std::string::npos)
      << error->text;
  EXPECT_GE(pubsub_metrics_->upstream_failures.value(), 1u);
  EXPECT_EQ(pubsub_metrics_->subscriptions_failed.value(), 1u);
  auto gone = client.Call("accountUnsubscribe", fmt::format("[{}]", id));
  ASSERT_NE(gone, nullptr);
  EXPECT_EQ(gone->ErrorCode(), -32602);
  // The base subscription of the same client is untouched.
  auto slot = client.NextOf("slotNotification", 5s);
  ASSERT_NE(slot, nullptr);
  EXPECT_EQ(slot->Subscription(), slot_id);
}

// Stop drains pubsub with HTTP: clients on the pubsub port and upgraded on the HTTP port get a
// close frame, and Stop returns once they are gone, well within the drain timeout.
TEST_F(PubsubRouterTest, StopClosesClientsOnBothPortsWithinTheDrain) {
  StartChains(/*er=*/false);
  StartRouter();
  PubsubClientForTest own(pubsub_->port());
  PubsubClientForTest upgraded(http_->port());
  ASSERT_TRUE(own.ok());
  ASSERT_TRUE(upgraded.ok());
  ASSERT_NE(own.Subscribe("slotSubscribe", "[]"), 0u);
  ASSERT_NE(upgraded.Subscribe("slotSubscribe", "[]"), 0u);
  ASSERT_NE(upgraded.NextOf("slotNotification", 5s), nullptr);
  EXPECT_EQ(pubsub_metrics_->connections_open.value(), 2);

  const auto started = std::chrono::steady_clock::now();
  std::thread stopper([&] { http_->Stop(); });
  for (PubsubClientForTest* client : {&own, &upgraded}) {
    const auto end = std::chrono::steady_clock::now() + 5s;
    while (!client->closed() && std::chrono::steady_clock::now() < end) client->Next(100ms);
    EXPECT_TRUE(client->closed());
  }
  stopper.join();
  EXPECT_LT(std::chrono::steady_clock::now() - started, 3s);
  EXPECT_EQ(pubsub_metrics_->connections_open.value(), 0);
  EXPECT_EQ(pubsub_metrics_->ClientSubscriptions("slot").value(), 0);
}

}  // namespace
}  // namespace switchyard
