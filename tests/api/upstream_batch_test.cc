// Client batches over real sockets: the plain forwards to one target travel as one upstream
// JSON-RPC batch with fresh ids, their answers are matched back by id, and calls the upstream's
// answer does not carry are sent again one by one.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "tests/api/router_fixture.h"

// GCC 12 reports a false -Wrestrict on `"literal" + std::string` (GCC bug 105329).
#pragma GCC diagnostic ignored "-Wrestrict"

namespace switchyard::api_test {
namespace {

class UpstreamBatchTest : public RouterFixture {
 protected:
  // The cache off, so that identical reads reach the upstreams, and one worker that sees
  // every request.
  void StartOneWorkerWithoutCache() {
    Start([](RouterOptions& options, HttpServerOptions& server) {
      options.cache.enabled = false;
      options.cache.coalesce = false;
      server.threads = 1;
    });
  }
  // `clients` clients at once, each on its own connection making `requests` posts of
  // `request(c, r)`; `expect(c, r)` is the answer each must get. The first wrong answer of each
  // client, "" for none.
  std::vector<std::string> RunClients(int clients, int requests,
                                      const std::function<std::string(int, int)>& request,
                                      const std::function<std::string(int, int)>& expect) {
    std::vector<std::thread> threads;
    std::vector<std::string> problems(clients);
    for (int c = 0; c < clients; ++c) {
      threads.emplace_back([&, c] {
        TestClient client(port());
        for (int r = 0; r < requests; ++r) {
          ClientResponse response = client.Post(request(c, r));
          const std::string expected = expect(c, r);
          if (response.status != 200 || response.body != expected) {
            problems[c] = "HTTP " + std::to_string(response.status) + " " + response.body +
                          " (expected " + expected + ")";
            return;
          }
        }
      });
    }
    for (std::thread& thread : threads) thread.join();
    return problems;
  }
};

// How many calls naming `marker` the upstream received in `bodies`, alone or inside batches;
// `*batched` grows by those inside batches.
size_t CallsReceived(const std::vector<std::string>& bodies, const std::string& marker,
                     size_t* batched) {
  size_t calls = 0;
  for (const std::string& body : bodies) {
    size_t in_body = 0;
    for (size_t at = body.find(marker); at != std::string::npos; at = body.find(marker, at + 1)) {
      ++in_body;
    }
    calls += in_body;
    if (body.front() == '[') *batched += in_body;
  }
  return calls;
}

std::string Call(const std::string& id, const std::string& method, const std::string& params) {
  return R"({"jsonrpc":"2.0","id":)" + id + R"(,"method":")" + method + R"(","params":)" + params +
         "}";
}

// A request of an upstream batch, as the router writes it.
std::string Sent(int id, const std::string& method, const std::string& params) {
  return R"({"jsonrpc":"2.0","id":)" + std::to_string(id) + R"(,"method":")" + method +
         R"(","params":)" + params + "}";
}

std::string Batch(const std::vector<std::string>& calls) {
  std::string body = "[";
  for (size_t i = 0; i < calls.size(); ++i) body += (i ? "," : "") + calls[i];
  return body + "]";
}

// The fake's canned answer to a base-layer method, under `id`.
std::string Answer(const std::string& id, const std::string& from, const std::string& method) {
  return R"({"jsonrpc":"2.0","result":{"from":")" + from + R"(","method":")" + method +
         R"("},"id":)" + id + "}";
}

// getSlot, getEpochInfo and getBlockHeight go to base; getAssetsByOwner to the indexer.
const std::vector<std::string> kBaseCalls = {
    Call(R"("a")", "getSlot", "[]"),
    Call("7", "getEpochInfo", "[]"),
    Call(R"({"k":[1, 2]})", "getBlockHeight", R"([{"commitment":"confirmed"}])"),
};
const std::string kBaseAnswers = "[" + Answer(R"("a")", "base", "getSlot") + "," +
                                 Answer("7", "base", "getEpochInfo") + "," +
                                 Answer(R"({"k":[1, 2]})", "base", "getBlockHeight") + "]";

TEST_F(UpstreamBatchTest, PlainForwardsToOneTargetTravelAsOneUpstreamBatchWithFreshIds) {
  Start();
  TestClient client(port());
  ClientResponse response = client.Post(
      Batch({kBaseCalls[0], kBaseCalls[1], Call("8", "getAssetsByOwner", "[]"), kBaseCalls[2]}));
  ASSERT_EQ(response.status, 200u);
  EXPECT_EQ(response.body, "[" + Answer(R"("a")", "base", "getSlot") + "," +
                               Answer("7", "base", "getEpochInfo") + "," +
                               Answer("8", "indexer", "getAssetsByOwner") + "," +
                               Answer(R"({"k":[1, 2]})", "base", "getBlockHeight") + "]");
  ASSERT_EQ(base_.received().size(), 1u);
  EXPECT_EQ(base_.received()[0],
            Batch({Sent(0, "getSlot", "[]"), Sent(1, "getEpochInfo", "[]"),
                   Sent(2, "getBlockHeight", R"([{"commitment":"confirmed"}])")}));
  // Alone on its target: forwarded as the client wrote it.
  ASSERT_EQ(indexer_.received().size(), 1u);
  EXPECT_EQ(indexer_.received()[0], Call("8", "getAssetsByOwner", "[]"));
  EXPECT_EQ(metrics_.upstream_batches.value(), 1u);
  EXPECT_EQ(metrics_.upstream_batch_calls.value(), 3u);
  EXPECT_EQ(metrics_.upstream_batch_fallbacks.value(), 0u);
}

TEST_F(UpstreamBatchTest, AnswersOutOfOrderAreMatchedByIdAndReturnedInRequestOrder) {
  Start();
  base_.SetResponder([this](const std::string& method, const std::string& body) {
    if (!FakeUpstream::IsBatch(body)) return base_.Canned(method, body);
    std::vector<std::string> answers = base_.CannedAnswers(body);
    std::reverse(answers.begin(), answers.end());
    return FakeReply{FakeReply::Action::kAnswer, 200, JoinBatch(answers)};
  });
  TestClient client(port());
  EXPECT_EQ(client.Post(Batch(kBaseCalls)).body, kBaseAnswers);
  EXPECT_EQ(base_.received_count(), 1u);
  EXPECT_EQ(metrics_.upstream_batch_fallbacks.value(), 0u);
}

TEST_F(UpstreamBatchTest, DuplicateClientIdsEachGetTheirOwnAnswer) {
  Start();
  TestClient client(port());
  ClientResponse response =
      client.Post(Batch({Call("1", "getSlot", "[]"), Call("1", "getEpochInfo", "[]"),
                         Call("1", "getBlockHeight", "[]")}));
  EXPECT_EQ(response.body, "[" + Answer("1", "base", "getSlot") + "," +
                               Answer("1", "base", "getEpochInfo") + "," +
                               Answer("1", "base", "getBlockHeight") + "]");
  ASSERT_EQ(base_.received().size(), 1u);
  EXPECT_EQ(base_.received()[0], Batch({Sent(0, "getSlot", "[]"), Sent(1, "getEpochInfo", "[]"),
                                        Sent(2, "getBlockHeight", "[]")}));
}

TEST_F(UpstreamBatchTest, CallsMissingFromTheBatchAnswerAreSentAgainAlone) {
  Start();
  // The answer for id 1 is left out, and one for an id that was never sent is added.
  base_.SetResponder([this](const std::string& method, const std::string& body) {
    if (!FakeUpstream::IsBatch(body)) return base_.Canned(method, body);
    std::vector<std::string> answers = base_.CannedAnswers(body);
    answers.erase(answers.begin() + 1);
    answers.push_back(R"({"jsonrpc":"2.0","result":"stray","id":9})");
    return FakeReply{FakeReply::Action::kAnswer, 200, JoinBatch(answers)};
  });
  TestClient client(port());
  EXPECT_EQ(client.Post(Batch(kBaseCalls)).body, kBaseAnswers);
  const std::vector<std::string> received = base_.received();
  ASSERT_EQ(received.size(), 2u);
  EXPECT_EQ(received[1], kBaseCalls[1]);  // as the client wrote it
  EXPECT_EQ(metrics_.upstream_batches.value(), 1u);
  EXPECT_EQ(metrics_.upstream_batch_fallbacks.value(), 1u);
}

TEST_F(UpstreamBatchTest, UpstreamRejectingBatchesWithAnHttpErrorGetsEachCallAlone) {
  Start();
  base_.SetResponder([this](const std::string& method, const std::string& body) {
    if (!FakeUpstream::IsBatch(body)) return base_.Canned(method, body);
    return FakeReply{FakeReply::Action::kAnswer, 413, "batch requests are not allowed"};
  });
  TestClient client(port());
  EXPECT_EQ(client.Post(Batch(kBaseCalls)).body, kBaseAnswers);
  const std::vector<std::string> received = base_.received();
  ASSERT_EQ(received.size(), 4u);
  EXPECT_TRUE(FakeUpstream::IsBatch(received[0]));
  // Each call alone as it always goes alone: its bytes, or id 0 for an id upstreams mangle.
  for (const std::string& call : {kBaseCalls[0], kBaseCalls[1],
                                  Sent(0, "getBlockHeight", R"([{"commitment":"confirmed"}])")}) {
    EXPECT_EQ(std::count(received.begin(), received.end(), call), 1) << call;
  }
  EXPECT_EQ(metrics_.upstream_batch_fallbacks.value(), 3u);
  // The refusal is remembered: the next client batch sends each call alone at once.
  EXPECT_EQ(client.Post(Batch(kBaseCalls)).body, kBaseAnswers);
  const std::vector<std::string> again = base_.received();
  ASSERT_EQ(again.size(), 7u);
  for (size_t i = 4; i < again.size(); ++i) EXPECT_FALSE(FakeUpstream::IsBatch(again[i])) << i;
  EXPECT_EQ(metrics_.upstream_batches.value(), 1u);
  EXPECT_EQ(metrics_.upstream_batch_fallbacks.value(), 3u);
}

// MagicBlock's ER answers a batch that holds a method it does not know with one error object.
TEST_F(UpstreamBatchTest, ErAnsweringABatchWithOneErrorObjectGetsEachCallAlone) {
  Start([](RouterOptions& options, HttpServerOptions&) { options.verify_owner = false; });
  er1_.SetResponder([this](const std::string& method, const std::string& body) {
    if (!FakeUpstream::IsBatch(body)) return er1_.Canned(method, body);
    return FakeReply{
        FakeReply::Action::kAnswer, 200,
        R"({"jsonrpc":"2.0","error":{"code":-32601,"message":"Method not found"},"id":null})"};
  });
  TestClient client(port());
  ClientResponse response =
      client.Post(Batch({Call("1", "getAccountInfo", "[" + Quoted(Key(1)) + "]"),
                         Call("2", "getBalance", "[" + Quoted(Key(5)) + "]")}));
  EXPECT_EQ(response.body, "[" + Answer("1", "er1", "getAccountInfo") + "," +
                               Answer("2", "er1", "getBalance") + "]");
  EXPECT_EQ(er1_.received_count(), 3u);
  EXPECT_EQ(metrics_.upstream_batch_fallbacks.value(), 2u);
}

TEST_F(UpstreamBatchTest, BatchAnswerOfOneErrorWithoutAnIdGetsEachCallAlone) {
  Start();
  base_.SetResponder([this](const std::string& method, const std::string& body) {
    if (!FakeUpstream::IsBatch(body)) return base_.Canned(method, body);
    return FakeReply{
        FakeReply::Action::kAnswer, 200,
        R"([{"jsonrpc":"2.0","error":{"code":-32600,"message":"Invalid request"},"id":null}])"};
  });
  TestClient client(port());
  EXPECT_EQ(client.Post(Batch(kBaseCalls)).body, kBaseAnswers);
  EXPECT_EQ(base_.received_count(), 4u);
  EXPECT_EQ(metrics_.upstream_batch_fallbacks.value(), 3u);
}

TEST_F(UpstreamBatchTest, ErrorOfOneElementIsThatCallsAnswer) {
  Start();
  base_.SetResponder([this](const std::string& method, const std::string& body) {
    if (!FakeUpstream::IsBatch(body)) return base_.Canned(method, body);
    std::vector<std::string> answers = base_.CannedAnswers(body);
    answers[1] = R"({"jsonrpc":"2.0","error":{"code":-32005,"message":"Node is behind"},"id":1})";
    return FakeReply{FakeReply::Action::kAnswer, 200, JoinBatch(answers)};
  });
  TestClient client(port());
  EXPECT_EQ(client.Post(Batch(kBaseCalls)).body,
            "[" + Answer(R"("a")", "base", "getSlot") + "," +
                R"({"jsonrpc":"2.0","error":{"code":-32005,"message":"Node is behind"},"id":7},)" +
                Answer(R"({"k":[1, 2]})", "base", "getBlockHeight") + "]");
  EXPECT_EQ(base_.received_count(), 1u);
  EXPECT_EQ(metrics_.upstream_batch_fallbacks.value(), 0u);
}

TEST_F(UpstreamBatchTest, UpstreamBatchThatTimesOutFailsEachOfItsCalls) {
  Start([](RouterOptions& options, HttpServerOptions&) {
    options.upstream.request_timeout = absl::Milliseconds(100);
  });
  base_.SetResponder([](const std::string&, const std::string&) {
    return FakeReply{FakeReply::Action::kHang, 200, ""};
  });
  TestClient client(port());
  const std::string error =
      R"("error":{"code":-32603,"message":"upstream base failed: upstream base timed out"})";
  EXPECT_EQ(client.Post(Batch({kBaseCalls[0], kBaseCalls[1]})).body,
            std::string("[") + R"({"jsonrpc":"2.0",)" + error + R"(,"id":"a"},)" +
                R"({"jsonrpc":"2.0",)" + error + R"(,"id":7}])");
  // A lone endpoint that timed out is not asked again; no call was sent alone.
  EXPECT_EQ(base_.received_count(), 1u);
  EXPECT_EQ(metrics_.upstream_batch_fallbacks.value(), 0u);
}

TEST_F(UpstreamBatchTest, NotificationsTransactionsAndAirdropsKeepTheirOwnExchange) {
  Start();
  const std::string notification = R"({"jsonrpc":"2.0","method":"getSlot","params":[]})";
  const std::string send_a =
      Call("1", "sendTransaction",
           "[\"" + TransactionBase64(MakeTransaction(Key(20), {}, Key(30), 0x51)) +
               R"(",{"encoding":"base64"}])");
  const std::string send_b =
      Call("2", "sendTransaction",
           "[\"" + TransactionBase64(MakeTransaction(Key(21), {}, Key(30), 0x52)) +
               R"(",{"encoding":"base64"}])");
  const std::string airdrop_a = Call("3", "requestAirdrop", "[" + Quoted(Key(22)) + ",1]");
  const std::string airdrop_b = Call("4", "requestAirdrop", "[" + Quoted(Key(23)) + ",1]");
  TestClient client(port());
  ClientResponse response =
      client.Post(Batch({notification, send_a, send_b, airdrop_a, airdrop_b, notification}));
  EXPECT_EQ(response.body, std::string("[") +
                               R"({"jsonrpc":"2.0","result":"sent-to-base","id":1},)" +
                               R"({"jsonrpc":"2.0","result":"sent-to-base","id":2},)" +
                               Answer("3", "base", "requestAirdrop") + "," +
                               Answer("4", "base", "requestAirdrop") + "]");
  ASSERT_TRUE(base_.WaitForRequests(6));
  std::vector<std::string> received = base_.received();
  std::sort(received.begin(), received.end());
  std::vector<std::string> expected = {notification, send_a,    send_b,
                                       airdrop_a,    airdrop_b, notification};
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(received, expected);
  EXPECT_EQ(metrics_.upstream_batches.value(), 0u);
}

// One client batch with calls for base, for an ER, for the router itself, with owner
// verification, and an invalid one: each kind goes its own way, the answers come back in
// request order. A read whose owner is checked in its own answer is batched, and one judged by a
// probe takes its probe into the batch.
TEST_F(UpstreamBatchTest, MixedBatchSendsThePlainAndAnswerCheckedForwardsAsUpstreamBatches) {
  Start();
  const std::string one = "[[" + Quoted(Key(1)) + "]]";
  const std::string five = "[[" + Quoted(Key(5)) + "]]";
  const std::vector<std::string> calls = {
      Call("1", "getSlot", "[]"),                                      // base, batched
      Call("2", "getAccountInfo", "[" + Quoted(Key(9)) + "]"),         // base, batched, verified
      Call("3", "getMultipleAccounts", one),                           // er1, batched
      Call("4", "getIdentity", "[]"),                                  // the router
      Call("5", "getBalance", "[" + Quoted(Key(1)) + "]"),             // er1, batched, probed
      "7",                                                             // invalid
      Call("6", "getEpochInfo", "[]"),                                 // base, batched
      Call("8", "getMultipleAccounts", five),                          // er1, batched
      Call("9", "getMultipleAccounts", "[[" + Quoted(Key(2)) + "]]"),  // er2, alone
  };
  TestClient client(port());
  ClientResponse response = client.Post(Batch(calls));
  auto accounts = [](const std::string& id, const Pubkey& key, const std::string& from) {
    return R"({"jsonrpc":"2.0","result":{"context":{"apiVersion":"2.1.0","slot":9000},)"
           R"("value":[{"key":")" +
           key.ToBase58() + R"(","from":")" + from + R"("}]},"id":)" + id + "}";
  };
  EXPECT_EQ(response.body,
            "[" + Answer("1", "base", "getSlot") + "," + Answer("2", "base", "getAccountInfo") +
                "," + accounts("3", Key(1), "er1") + "," +
                R"({"jsonrpc":"2.0","result":{"identity":")" + Key(0x99).ToBase58() +
                R"(","fqdn":"https://router.example"},"id":4},)" +
                Answer("5", "er1", "getBalance") + "," +
                R"({"jsonrpc":"2.0","error":{"code":-32600,"message":"Invalid request: not an )"
                R"(object"},"id":null},)" +
                Answer("6", "base", "getEpochInfo") + "," + accounts("8", Key(5), "er1") + "," +
                accounts("9", Key(2), "er2") + "]");
  std::vector<std::string> base = base_.received();
  std::sort(base.begin(), base.end());
  // getAccountInfo, whose owner is checked in its own answer, goes in the batch too.
  EXPECT_EQ(base,
            (std::vector<std::string>{Batch({Sent(0, "getSlot", "[]"),
                                             Sent(1, "getAccountInfo", "[" + Quoted(Key(9)) + "]"),
                                             Sent(2, "getEpochInfo", "[]")})}));
  // One batch to er1: the lists, getBalance, and getBalance's probe after the calls.
  EXPECT_EQ(
      er1_.received(),
      (std::vector<std::string>{Batch(
          {Sent(0, "getMultipleAccounts", one), Sent(1, "getBalance", "[" + Quoted(Key(1)) + "]"),
           Sent(2, "getMultipleAccounts", five),
           Sent(3, "getAccountInfo",
                "[\"" + Key(1).ToBase58() +
                    R"(",{"encoding":"base64","dataSlice":{"offset":0,"length":0}}])")})}));
  EXPECT_EQ(er2_.received(), (std::vector<std::string>{calls[8]}));
  EXPECT_EQ(metrics_.upstream_batches.value(), 2u);
  EXPECT_EQ(metrics_.upstream_batch_calls.value(), 6u);
}

// Reads from many clients at once to a busy upstream, over real sockets and the pipelined
// pool: the ones that arrive together leave in coalesced batches, and every client gets its
// own answer under its own id; no call is lost or sent twice.
TEST_F(UpstreamBatchTest, ConcurrentReadsOfManyClientsAreCoalescedAndEachGetsItsOwnAnswer) {
  StartOneWorkerWithoutCache();
  constexpr int kClients = 12;
  constexpr int kRequests = 40;
  const std::vector<std::string> methods = {"getSlot", "getEpochInfo", "getBlockHeight"};
  auto id = [](int c, int r) { return std::to_string(c * 1000 + r); };
  auto method = [&](int c, int r) { return methods[(c + r) % methods.size()]; };
  for (const std::string& problem : RunClients(
           kClients, kRequests, [&](int c, int r) { return Call(id(c, r), method(c, r), "[]"); },
           [&](int c, int r) { return Answer(id(c, r), "base", method(c, r)); })) {
    EXPECT_EQ(problem, "");
  }
  size_t batched = 0;
  EXPECT_EQ(CallsReceived(base_.received(), "\"method\"", &batched),
            static_cast<size_t>(kClients * kRequests));
  EXPECT_EQ(batched, metrics_.upstream_coalesced_calls.value());
  EXPECT_GT(metrics_.upstream_coalesced_batches.value(), 0u);
  EXPECT_EQ(metrics_.upstream_batch_fallbacks.value(), 0u);
}

// JSON-RPC batches of many clients at once, over real sockets: while base is busy, the calls of
// client batches that arrive together leave in shared upstream batches; each client gets its
// own three answers in its own order, and every call reaches base exactly once.
TEST_F(UpstreamBatchTest, ClientBatchesOfManyClientsShareUpstreamBatchesAndEachGetsItsOwnAnswers) {
  StartOneWorkerWithoutCache();
  constexpr int kClients = 12;
  constexpr int kRequests = 30;
  const std::vector<std::string> methods = {"getSlot", "getEpochInfo", "getBlockHeight"};
  auto id = [](int c, int r, int k) { return std::to_string((c * 1000 + r) * 10 + k); };
  auto method = [&](int c, int r, int k) { return methods[(c + r + k) % methods.size()]; };
  auto request = [&](int c, int r) {
    std::vector<std::string> calls;
    for (int k = 0; k < 3; ++k) calls.push_back(Call(id(c, r, k), method(c, r, k), "[]"));
    return Batch(calls);
  };
  auto expect = [&](int c, int r) {
    std::vector<std::string> answers;
    for (int k = 0; k < 3; ++k) answers.push_back(Answer(id(c, r, k), "base", method(c, r, k)));
    return Batch(answers);
  };
  for (const std::string& problem : RunClients(kClients, kRequests, request, expect)) {
    EXPECT_EQ(problem, "");
  }
  size_t batched = 0;
  EXPECT_EQ(CallsReceived(base_.received(), "\"method\"", &batched),
            static_cast<size_t>(kClients * kRequests * 3));
  EXPECT_GT(metrics_.upstream_coalesced_batches.value(), 0u);
  // Fewer upstream exchanges than client batches: some were shared. (A shared batch that
  // reached its maximum leaves at once; a call left over alone goes as it came.)
  EXPECT_LT(base_.received().size(), static_cast<size_t>(kClients * kRequests));
  EXPECT_EQ(metrics_.upstream_batch_fallbacks.value(), 0u);
}

// getMultipleAccounts of many clients at once, each split over er1 and base, over real sockets:
// the parts of different requests to one target leave in coalesced batches, and each request
// merges its own parts back in key order; every part reaches its target exactly once.
TEST_F(UpstreamBatchTest, SplitListsOfManyClientsAreCoalescedByTargetAndEachMergesItsOwnParts) {
  StartOneWorkerWithoutCache();
  constexpr int kClients = 12;
  constexpr int kRequests = 30;
  // Request (c, r) lists a key on er1 and one on base, in an order that differs between
  // requests; each value names the upstream it came from.
  struct List {
    Pubkey first;
    Pubkey second;
    bool er_first;
  };
  auto list = [&](int c, int r) {
    const Pubkey on_er = (c + r) % 2 ? Key(1) : Key(5);
    const Pubkey on_base = Key(static_cast<uint8_t>(16 + (c * kRequests + r) % 200));
    const bool er_first = r % 3 != 0;
    return List{er_first ? on_er : on_base, er_first ? on_base : on_er, er_first};
  };
  auto id = [](int c, int r) { return std::to_string(c * 1000 + r); };
  auto request = [&](int c, int r) {
    const List l = list(c, r);
    return Call(id(c, r), "getMultipleAccounts",
                "[[" + Quoted(l.first) + "," + Quoted(l.second) + R"(],{"encoding":"base64"}])");
  };
  auto expect = [&](int c, int r) {
    const List l = list(c, r);
    auto value = [](const Pubkey& key, const char* from) {
      return R"({"key":")" + key.ToBase58() + R"(","from":")" + from + R"("})";
    };
    return R"({"jsonrpc":"2.0","result":{"context":{"apiVersion":"2.1.0","slot":500},"value":[)" +
           value(l.first, l.er_first ? "er1" : "base") + "," +
           value(l.second, l.er_first ? "base" : "er1") + R"(]},"id":)" + id(c, r) + "}";
  };
  for (const std::string& problem : RunClients(kClients, kRequests, request, expect)) {
    EXPECT_EQ(problem, "");
  }
  // The parts each upstream received, alone or inside batches.
  size_t batched = 0;
  EXPECT_EQ(CallsReceived(base_.received(), "getMultipleAccounts", &batched),
            static_cast<size_t>(kClients * kRequests));
  EXPECT_EQ(CallsReceived(er1_.received(), "getMultipleAccounts", &batched),
            static_cast<size_t>(kClients * kRequests));
  EXPECT_EQ(batched, metrics_.upstream_coalesced_calls.value());
  EXPECT_GT(metrics_.upstream_coalesced_batches.value(), 0u);
  EXPECT_EQ(metrics_.upstream_batch_fallbacks.value(), 0u);
  EXPECT_EQ(metrics_.rpc_split_accounts.value(), static_cast<uint64_t>(kClients * kRequests));
}

}  // namespace
}  // namespace switchyard::api_test
