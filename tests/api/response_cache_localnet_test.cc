// The response cache (docs/architecture.md §19) in front of a real localnet base layer: a kept
// account read ends when a newer slot of its target shows in another answer, and when a
// write goes through the router; a write that bypasses the router and no newer slot leave it.
#include <gtest/gtest.h>
#include <simdjson.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include "api/metrics/api_metrics.h"
#include "api/net/http_server.h"
#include "api/rpc/router.h"
#include "common/base58.h"
#include "common/clock.h"
#include "common/metrics.h"
#include "engine/snapshot.h"
#include "localnet/localnet.h"
#include "tests/api/test_client.h"
#include "tests/api/test_support.h"
#include "tests/support/test_transactions.h"

// GCC 12 reports a false -Wrestrict on `"literal" + std::string` (GCC bug 105329).
#pragma GCC diagnostic ignored "-Wrestrict"

namespace switchyard::api_test {
namespace {

using localnet::Account;
using localnet::Localnet;
using localnet::LocalnetOptions;

const Pubkey kWatched = Key(0x31);
const Pubkey kOther = Key(0x32);

std::string Call(const std::string& method, const std::string& params) {
  return R"({"jsonrpc":"2.0","id":7,"method":")" + method + R"(","params":)" + params + "}";
}

struct Balance {
  uint64_t lamports = 0;
  uint64_t slot = 0;
};

Balance ParseBalance(const std::string& body) {
  simdjson::dom::parser parser;
  simdjson::dom::element root;
  Balance balance;
  EXPECT_EQ(parser.parse(body).get(root), simdjson::SUCCESS) << body;
  EXPECT_EQ(root["result"]["value"].get_uint64().get(balance.lamports), simdjson::SUCCESS) << body;
  EXPECT_EQ(root["result"]["context"]["slot"].get_uint64().get(balance.slot), simdjson::SUCCESS)
      << body;
  return balance;
}

class ResponseCacheLocalnetTest : public ::testing::Test {
 protected:
  void StartAll() {
    LocalnetOptions options;
    options.port = 0;
    options.io_threads = 1;
    options.slot_interval = absl::Milliseconds(20);
    options.genesis_accounts = {{payer_.pubkey, 10'000'000'000}};
    base_ = std::make_unique<Localnet>(options, &clock_);
    ASSERT_TRUE(base_->Start().ok());
    base_->bank().SetAccount(kWatched, Account{1000, localnet::SystemProgramId(), "", false});
    base_->bank().SetAccount(kOther, Account{5000, localnet::SystemProgramId(), "", false});

    RouterOptions router;
    router.upstreams = {{"base", {{"http://127.0.0.1:" + std::to_string(base_->http_port()), 1}}}};
    router.verify_owner = false;  // one exchange per read, so the fills are plain to count
    // Kept for an hour unless a slot or a write ends it: only those mechanisms are under test.
    router.cache.slot_ttl = absl::Hours(1);
    snapshots_.Publish(SnapshotBuilder().Build(1));
    absl::StatusOr<std::unique_ptr<RouterContext>> context =
        RouterContext::Create(std::move(router), &snapshots_, &clock_, &metrics_);
    ASSERT_TRUE(context.ok()) << context.status();
    context_ = *std::move(context);
    HttpServerOptions server;
    server.threads = 1;
    server_ = std::make_unique<HttpServer>(server, context_->HandlerFactory(), &metrics_);
    ASSERT_TRUE(server_->Start().ok());
  }

  void TearDown() override {
    if (server_) server_->Stop();
    if (base_) base_->Stop();
  }

  Balance ReadThroughRouter(const Pubkey& account) {
    TestClient client(server_->port());
    return ParseBalance(client.Post(Call("getBalance", "[\"" + account.ToBase58() + "\"]")).body);
  }

  // Straight to the localnet, so that the router sees no slot of it.
  std::string AskBase(const std::string& body) {
    TestClient client(base_->http_port());
    return client.Post(body).body;
  }
  uint64_t BaseSlot() {
    simdjson::dom::parser parser;
    simdjson::dom::element root;
    const std::string body = AskBase(Call("getSlot", "[]"));
    uint64_t slot = 0;
    EXPECT_EQ(parser.parse(body).get(root), simdjson::SUCCESS);
    EXPECT_EQ(root["result"].get_uint64().get(slot), simdjson::SUCCESS) << body;
    return slot;
  }
  void WaitForBaseSlotAbove(uint64_t slot) {
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (BaseSlot() <= slot && std::chrono::steady_clock::now() < end) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    ASSERT_GT(BaseSlot(), slot);
  }
  std::string Transfer(uint64_t lamports) {
    simdjson::dom::parser parser;
    simdjson::dom::element root;
    const std::string body = AskBase(Call("getLatestBlockhash", "[]"));
    std::string_view text;
    EXPECT_EQ(parser.parse(body).get(root), simdjson::SUCCESS);
    EXPECT_EQ(root["result"]["value"]["blockhash"].get_string().get(text), simdjson::SUCCESS);
    absl::StatusOr<Hash> blockhash = Hash::FromBase58(text);
    EXPECT_TRUE(blockhash.ok());
    const std::string tx =
        testing::TransferTransaction(payer_, kWatched, lamports, blockhash.value_or(Hash()));
    return Call("sendTransaction", "[\"" + tx + "\",{\"encoding\":\"base64\"}]");
  }
  // Waits until the localnet shows `lamports` for kWatched (asked directly).
  void WaitForBaseBalance(uint64_t lamports) {
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    uint64_t seen = 0;
    while (std::chrono::steady_clock::now() < end) {
      seen =
          ParseBalance(AskBase(Call("getBalance", "[\"" + kWatched.ToBase58() + "\"]"))).lamports;
      if (seen == lamports) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    FAIL() << "base shows " << seen << ", not " << lamports;
  }
  uint64_t Hits() {
    const std::string text = metrics_.registry.RenderPrometheus();
    const std::string series = "switchyard_cache_hits_total{method=\"getBalance\"} ";
    const size_t at = text.find(series);
    return at == std::string::npos ? 0 : std::stoull(text.substr(at + series.size()));
  }

  testing::Keypair payer_ = testing::MakeKeypair(0x51);
  SystemClock clock_;
  MetricsRegistry registry_;
  ApiMetrics metrics_{registry_};
  SnapshotHolder snapshots_;
  std::unique_ptr<Localnet> base_;
  std::unique_ptr<RouterContext> context_;
  std::unique_ptr<HttpServer> server_;
};

TEST_F(ResponseCacheLocalnetTest, KeptReadEndsWhenAnotherAnswerShowsANewerSlot) {
  StartAll();
  const Balance first = ReadThroughRouter(kWatched);
  EXPECT_EQ(first.lamports, 1000u);
  // Written on the chain, not through the router; the slot moves on.
  base_->bank().SetAccount(kWatched, Account{2000, localnet::SystemProgramId(), "", false});
  WaitForBaseSlotAbove(first.slot);
  // Nothing the router saw says so yet: the kept answer stands, slot and all.
  const Balance kept = ReadThroughRouter(kWatched);
  EXPECT_EQ(kept.lamports, 1000u);
  EXPECT_EQ(kept.slot, first.slot);
  EXPECT_EQ(Hits(), 1u);
  // Another account's answer carries the newer slot: the kept read of kWatched is over.
  const Balance other = ReadThroughRouter(kOther);
  EXPECT_GT(other.slot, first.slot);
  const Balance fresh = ReadThroughRouter(kWatched);
  EXPECT_EQ(fresh.lamports, 2000u);
  EXPECT_GT(fresh.slot, first.slot);
  EXPECT_EQ(Hits(), 1u);
}

TEST_F(ResponseCacheLocalnetTest, WriteThroughTheRouterIsReadBackFresh) {
  StartAll();
  EXPECT_EQ(ReadThroughRouter(kWatched).lamports, 1000u);
  TestClient client(server_->port());
  const std::string sent = client.Post(Transfer(250)).body;
  ASSERT_NE(sent.find("\"result\""), std::string::npos) << sent;
  WaitForBaseBalance(1250);
  // No answer the router saw has a newer slot, but the write went through it.
  EXPECT_EQ(ReadThroughRouter(kWatched).lamports, 1250u);
  EXPECT_EQ(Hits(), 0u);
}

TEST_F(ResponseCacheLocalnetTest, WriteAroundTheRouterLeavesTheKeptRead) {
  StartAll();
  EXPECT_EQ(ReadThroughRouter(kWatched).lamports, 1000u);
  // The same transfer, sent to the localnet directly: the router cannot know.
  const std::string sent = AskBase(Transfer(250));
  ASSERT_NE(sent.find("\"result\""), std::string::npos) << sent;
  WaitForBaseBalance(1250);
  EXPECT_EQ(ReadThroughRouter(kWatched).lamports, 1000u);
  EXPECT_EQ(Hits(), 1u);
}

}  // namespace
}  // namespace switchyard::api_test
