// Owner verification (docs/architecture.md §10) of getBalance, getTokenAccountBalance,
// getAccountInfo and getMultipleAccounts, over real sockets, with the router in front of a
// localnet base layer and two localnet ERs. The router's state is a hand-built snapshot, so it
// can miss a delegation that base already shows (ingest has not seen it yet) or keep one that
// the ER does not have. The ERs here do not clone from base, so that an ER can lack an account
// base has.
#include <gtest/gtest.h>
#include <simdjson.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "api/metrics/api_metrics.h"
#include "api/net/http_server.h"
#include "api/rpc/router.h"
#include "common/clock.h"
#include "common/endian.h"
#include "common/metrics.h"
#include "engine/snapshot.h"
#include "localnet/localnet.h"
#include "localnet/wire.h"
#include "solana/delegation.h"
#include "tests/api/test_client.h"
#include "tests/api/test_support.h"

// GCC 12 reports a false -Wrestrict on `"literal" + std::string` (GCC bug 105329).
#pragma GCC diagnostic ignored "-Wrestrict"

namespace switchyard::api_test {
namespace {

using localnet::Account;
using localnet::Localnet;
using localnet::LocalnetOptions;

const Pubkey kEr1 = Key(0xE1);
const Pubkey kEr2 = Key(0xE2);
const Pubkey kOwnerProgram = Key(0xAA);
// Base shows it delegated (record → er2); the state has not seen it. er2: 2222 lamports.
const Pubkey kFresh = Key(0x11);
// The state calls it delegated to er1, which does not have it. Base: 3333 lamports.
const Pubkey kStale = Key(0x12);
// Delegated to er1, and the state knows it. Base: 44 lamports; er1: 4444.
const Pubkey kKnown = Key(0x13);
// An ordinary account on base: 5555 lamports.
const Pubkey kPlain = Key(0x14);
// Nowhere.
const Pubkey kMissing = Key(0x15);
// Token accounts of mint kMint (2 decimals): a fresh delegation (base: amount 100 under the
// delegation program; er2: 777) and a stale one (base: 555; er1: none).
const Pubkey kMint = Key(0x20);
const Pubkey kFreshToken = Key(0x21);
const Pubkey kStaleToken = Key(0x22);

std::string Call(const std::string& method, const std::string& params) {
  return R"({"jsonrpc":"2.0","id":7,"method":")" + method + R"(","params":)" + params + "}";
}

std::string Quoted(const Pubkey& key) { return "\"" + key.ToBase58() + "\""; }

std::string KeyList(const std::vector<Pubkey>& keys) {
  std::string out;
  for (const Pubkey& key : keys) out += (out.empty() ? "" : ",") + Quoted(key);
  return "[" + out + "]";
}

Account SystemAccount(uint64_t lamports) {
  return Account{lamports, localnet::SystemProgramId(), "", false};
}

std::string TokenAccountData(uint64_t amount) {
  std::string data(165, '\0');
  std::memcpy(data.data(), kMint.data(), 32);
  std::memcpy(data.data() + 32, kOwnerProgram.data(), 32);
  std::string amount_bytes;
  AppendU64LE(&amount_bytes, amount);
  data.replace(64, 8, amount_bytes);
  data[108] = 1;  // initialized
  return data;
}

Account MintAccount() {
  std::string data(82, '\0');
  data[44] = 2;  // decimals
  data[45] = 1;  // initialized
  return Account{1'000'000, localnet::TokenProgramId(), data, false};
}

// Makes `account` delegated to `validator` on base: owned by the delegation program, with its
// record at the PDA.
void DelegateOnBase(Localnet& base, const Pubkey& account, Account state, const Pubkey& validator) {
  state.owner = DelegationProgramId();
  base.bank().SetAccount(account, std::move(state));
  DelegationRecord record;
  record.authority = validator;
  record.owner = kOwnerProgram;
  record.delegation_slot = 1;
  base.bank().SetAccount(
      DelegationRecordPda(account),
      Account{1'000'000, DelegationProgramId(), EncodeDelegationRecord(record), false});
}

// A port nothing listens on.
uint16_t ClosedPort() {
  boost::asio::io_context io_context;
  boost::asio::ip::tcp::acceptor acceptor(io_context,
                                          {boost::asio::ip::make_address("127.0.0.1"), 0});
  return acceptor.local_endpoint().port();
}

// The parsed JSON answer, kept alive with its parser.
struct Json {
  simdjson::dom::parser parser;
  simdjson::dom::element root;
};

std::unique_ptr<Json> Parse(const std::string& body) {
  auto json = std::make_unique<Json>();
  EXPECT_EQ(json->parser.parse(body).get(json->root), simdjson::SUCCESS) << body;
  return json;
}

class OwnerVerificationTest : public testing::Test {
 protected:
  OwnerVerificationTest() {
    // Base's slot stays put, so "the base context" is a known number; the ERs' slots move.
    base_ = StartLocalnet(false, Pubkey(), absl::Hours(1));
    er1_ = StartLocalnet(true, kEr1, absl::Milliseconds(2));
    er2_ = StartLocalnet(true, kEr2, absl::Milliseconds(2));

    DelegateOnBase(*base_, kFresh, SystemAccount(1000), kEr2);
    er2_->bank().SetAccount(kFresh, Account{2222, kOwnerProgram, "", false});
    base_->bank().SetAccount(kStale, SystemAccount(3333));
    DelegateOnBase(*base_, kKnown, SystemAccount(44), kEr1);
    er1_->bank().SetAccount(kKnown, Account{4444, kOwnerProgram, "", false});
    base_->bank().SetAccount(kPlain, SystemAccount(5555));

    for (Localnet* net : {base_.get(), er1_.get(), er2_.get()}) {
      net->bank().SetAccount(kMint, MintAccount());
    }
    DelegateOnBase(*base_, kFreshToken,
                   Account{2'039'280, localnet::TokenProgramId(), TokenAccountData(100), false},
                   kEr2);
    er2_->bank().SetAccount(
        kFreshToken, Account{2'039'280, localnet::TokenProgramId(), TokenAccountData(777), false});
    base_->bank().SetAccount(
        kStaleToken, Account{2'039'280, localnet::TokenProgramId(), TokenAccountData(555), false});

    snapshots_.Publish(State().Build(100));
  }

  ~OwnerVerificationTest() override {
    if (server_) server_->Stop();
    for (auto* net : {&er1_, &er2_, &base_}) {
      if (*net) (*net)->Stop();
    }
  }

  // What the router's state holds: kStale, kKnown and kStaleToken delegated to er1.
  static SnapshotBuilder State() {
    SnapshotBuilder builder;
    builder.Delegate(kStale, kEr1).Delegate(kKnown, kEr1).Delegate(kStaleToken, kEr1);
    return builder;
  }

  std::unique_ptr<Localnet> StartLocalnet(bool er, const Pubkey& identity,
                                          absl::Duration slot_interval) {
    LocalnetOptions options;
    options.port = 0;
    options.io_threads = 1;
    options.slot_interval = slot_interval;
    if (er) {
      options.er_mode = true;
      options.identity = identity;
      options.fee_lamports_per_signature = 0;
      options.base_url = "http://127.0.0.1:" + std::to_string(ClosedPort());
      options.base_timeout = absl::Seconds(1);
    }
    auto net = std::make_unique<Localnet>(options, &clock_);
    absl::Status status = net->Start();
    EXPECT_TRUE(status.ok()) << status;
    return net;
  }

  static std::string Url(const Localnet& net) {
    return "http://127.0.0.1:" + std::to_string(net.http_port());
  }

  void Start(bool verify_owner, bool verify_owner_multiple) {
    RouterOptions options;
    options.upstreams = {
        {"base", {{Url(*base_), 1}}}, {"er1", {{Url(*er1_), 1}}}, {"er2", {{Url(*er2_), 1}}}};
    options.ers = {{kEr1, "er1", "", 0, 50, ""}, {kEr2, "er2", "", 0, 50, ""}};
    options.routing.default_er = "er1";
    options.upstream.request_timeout = absl::Seconds(5);
    options.verify_owner = verify_owner;
    options.verify_owner_multiple = verify_owner_multiple;
    absl::StatusOr<std::unique_ptr<RouterContext>> context =
        RouterContext::Create(std::move(options), &snapshots_, &clock_, &metrics_);
    ASSERT_TRUE(context.ok()) << context.status();
    context_ = *std::move(context);
    HttpServerOptions server_options;
    server_options.threads = 1;
    server_ = std::make_unique<HttpServer>(server_options, context_->HandlerFactory(), &metrics_);
    ASSERT_TRUE(server_->Start().ok());
    client_ = std::make_unique<TestClient>(server_->port());
  }

  std::string Post(const std::string& method, const std::string& params) {
    ClientResponse response = client_->Post(Call(method, params));
    EXPECT_EQ(response.status, 200u) << response.body;
    return response.body;
  }

  // result.value of getBalance through the router.
  uint64_t Balance(const Pubkey& account) {
    const std::string body = Post("getBalance", "[" + Quoted(account) + "]");
    uint64_t lamports = 0;
    EXPECT_EQ(Parse(body)->root["result"]["value"].get_uint64().get(lamports), simdjson::SUCCESS)
        << body;
    return lamports;
  }

  // result.value.amount of getTokenAccountBalance through the router, or the error message.
  std::string TokenAmount(const Pubkey& account) {
    const std::string body = Post("getTokenAccountBalance", "[" + Quoted(account) + "]");
    auto json = Parse(body);
    std::string_view text;
    if (json->root["result"]["value"]["amount"].get_string().get(text) == simdjson::SUCCESS) {
      return std::string(text);
    }
    if (json->root["error"]["message"].get_string().get(text) == simdjson::SUCCESS) {
      return "error: " + std::string(text);
    }
    return "unexpected: " + body;
  }

  // getMultipleAccounts through the router: per element its lamports, or -1 for null.
  struct AccountsAnswer {
    std::vector<int64_t> lamports;
    std::vector<std::string> owners;
    uint64_t context_slot = 0;
  };
  AccountsAnswer Accounts(const std::vector<Pubkey>& keys) {
    const std::string body =
        Post("getMultipleAccounts", "[" + KeyList(keys) + R"(,{"encoding":"base64"}])");
    auto json = Parse(body);
    AccountsAnswer out;
    simdjson::dom::array values;
    EXPECT_EQ(json->root["result"]["value"].get_array().get(values), simdjson::SUCCESS) << body;
    EXPECT_EQ(json->root["result"]["context"]["slot"].get_uint64().get(out.context_slot),
              simdjson::SUCCESS);
    for (simdjson::dom::element value : values) {
      uint64_t lamports = 0;
      std::string_view owner;
      if (value.is_null() || value["lamports"].get_uint64().get(lamports) != simdjson::SUCCESS ||
          value["owner"].get_string().get(owner) != simdjson::SUCCESS) {
        out.lamports.push_back(-1);
        out.owners.emplace_back();
        continue;
      }
      out.lamports.push_back(static_cast<int64_t>(lamports));
      out.owners.emplace_back(owner);
    }
    return out;
  }

  uint64_t Reroutes(const std::string& method, const std::string& to) const {
    const std::string series = R"(switchyard_api_owner_reroutes_by_method_total{method=")" +
                               method + R"(",to=")" + to + R"("} )";
    const std::string text = registry_.RenderPrometheus();
    const size_t at = text.find(series);
    if (at == std::string::npos) return 999;
    return std::stoull(text.substr(at + series.size()));
  }

  SystemClock clock_;
  std::unique_ptr<Localnet> base_;
  std::unique_ptr<Localnet> er1_;
  std::unique_ptr<Localnet> er2_;
  SnapshotHolder snapshots_;
  MetricsRegistry registry_;
  ApiMetrics metrics_{registry_};
  std::unique_ptr<RouterContext> context_;
  std::unique_ptr<HttpServer> server_;
  std::unique_ptr<TestClient> client_;
};

TEST_F(OwnerVerificationTest, GetBalanceOfADelegationTheStateHasNotSeenIsTheErs) {
  Start(/*verify_owner=*/true, /*verify_owner_multiple=*/false);
  EXPECT_EQ(Balance(kFresh), 2222u);  // er2's, not base's 1000
  EXPECT_EQ(Reroutes("getBalance", "er"), 1u);
  EXPECT_EQ(metrics_.owner_reroutes.value(), 1u);
}

TEST_F(OwnerVerificationTest, GetBalanceOfADelegationTheErDoesNotHaveIsBases) {
  Start(true, false);
  EXPECT_EQ(Balance(kStale), 3333u);  // base's; er1 would answer 0
  EXPECT_EQ(Reroutes("getBalance", "base"), 1u);
}

TEST_F(OwnerVerificationTest, GetBalanceOfOtherAccountsIsTheTargetsAnswer) {
  Start(true, false);
  EXPECT_EQ(Balance(kKnown), 4444u);
  // Base's answer passes through byte for byte (base's slot does not move here).
  TestClient direct(base_->http_port());
  const std::string call = Call("getBalance", "[" + Quoted(kPlain) + "]");
  EXPECT_EQ(client_->Post(call).body, direct.Post(call).body);
  EXPECT_EQ(metrics_.owner_reroutes.value(), 0u);
}

TEST_F(OwnerVerificationTest, GetBalanceWithoutVerificationIsTheUnverifiedAnswer) {
  Start(/*verify_owner=*/false, false);
  EXPECT_EQ(Balance(kFresh), 1000u);  // base's
  EXPECT_EQ(Balance(kStale), 0u);     // er1's
  EXPECT_EQ(metrics_.owner_reroutes.value(), 0u);
  // In limbo verification is on whatever the option says.
  snapshots_.Publish(State().Build(101, Slot{90}));
  EXPECT_EQ(Balance(kFresh), 2222u);
  EXPECT_EQ(Balance(kStale), 3333u);
}

TEST_F(OwnerVerificationTest, GetTokenAccountBalanceFollowsTheOwnerLikeGetBalance) {
  Start(true, false);
  EXPECT_EQ(TokenAmount(kFreshToken), "777");  // er2's; base's is not a token account now
  EXPECT_EQ(TokenAmount(kStaleToken), "555");  // base's; er1 does not have it
  EXPECT_EQ(Reroutes("getTokenAccountBalance", "er"), 1u);
  EXPECT_EQ(Reroutes("getTokenAccountBalance", "base"), 1u);
}

TEST_F(OwnerVerificationTest, GetTokenAccountBalanceWithoutVerificationIsTheUnverifiedAnswer) {
  Start(false, false);
  EXPECT_EQ(TokenAmount(kFreshToken), "error: Invalid param: not a Token account");
  EXPECT_EQ(TokenAmount(kStaleToken), "error: Invalid param: not a Token account");
}

TEST_F(OwnerVerificationTest, GetAccountInfoOfADelegationTheStateHasNotSeenIsTheErs) {
  Start(true, false);
  auto json = Parse(Post("getAccountInfo", "[" + Quoted(kFresh) + R"(,{"encoding":"base64"}])"));
  uint64_t lamports = 0;
  std::string_view owner;
  ASSERT_EQ(json->root["result"]["value"]["lamports"].get_uint64().get(lamports),
            simdjson::SUCCESS);
  ASSERT_EQ(json->root["result"]["value"]["owner"].get_string().get(owner), simdjson::SUCCESS);
  EXPECT_EQ(lamports, 2222u);
  EXPECT_EQ(owner, kOwnerProgram.ToBase58());
  EXPECT_EQ(Reroutes("getAccountInfo", "er"), 1u);
}

TEST_F(OwnerVerificationTest, GetMultipleAccountsTakesEveryElementFromTheRightChain) {
  Start(true, /*verify_owner_multiple=*/true);
  // Split: base [fresh, plain, missing], er1 [stale, known].
  AccountsAnswer answer = Accounts({kFresh, kStale, kPlain, kKnown, kMissing});
  EXPECT_EQ(answer.lamports, (std::vector<int64_t>{2222, 3333, 5555, 4444, -1}));
  EXPECT_EQ(answer.owners[0], kOwnerProgram.ToBase58());
  EXPECT_EQ(answer.owners[1], localnet::SystemProgramId().ToBase58());
  EXPECT_EQ(answer.context_slot, base_->bank().slot());
  EXPECT_EQ(Reroutes("getMultipleAccounts", "er"), 1u);
  EXPECT_EQ(Reroutes("getMultipleAccounts", "base"), 1u);
}

TEST_F(OwnerVerificationTest, GetMultipleAccountsForwardedWholeIsVerifiedToo) {
  Start(true, true);
  // All on base by the state.
  AccountsAnswer on_base = Accounts({kPlain, kFresh});
  EXPECT_EQ(on_base.lamports, (std::vector<int64_t>{5555, 2222}));
  EXPECT_EQ(on_base.context_slot, base_->bank().slot());
  // All on er1 by the state; the re-asked element brings base's context.
  AccountsAnswer on_er = Accounts({kKnown, kStale});
  EXPECT_EQ(on_er.lamports, (std::vector<int64_t>{4444, 3333}));
  EXPECT_EQ(on_er.context_slot, base_->bank().slot());
  // Nothing to re-ask.
  EXPECT_EQ(Accounts({kPlain, kMissing}).lamports, (std::vector<int64_t>{5555, -1}));
}

TEST_F(OwnerVerificationTest, GetMultipleAccountsWithoutVerificationIsTheUnverifiedAnswer) {
  Start(true, /*verify_owner_multiple=*/false);
  AccountsAnswer answer = Accounts({kFresh, kStale, kPlain, kKnown, kMissing});
  EXPECT_EQ(answer.lamports, (std::vector<int64_t>{1000, -1, 5555, 4444, -1}));
  EXPECT_EQ(answer.owners[0], DelegationProgramId().ToBase58());
  EXPECT_EQ(metrics_.owner_reroutes.value(), 0u);
}

TEST_F(OwnerVerificationTest, GetMultipleAccountsInLimboIsVerifiedWithoutTheOption) {
  Start(false, false);
  snapshots_.Publish(State().Build(101, Slot{90}));
  AccountsAnswer answer = Accounts({kFresh, kStale, kPlain, kKnown, kMissing});
  EXPECT_EQ(answer.lamports, (std::vector<int64_t>{2222, 3333, 5555, 4444, -1}));
}

}  // namespace
}  // namespace switchyard::api_test
