// The request pipeline end to end over real sockets: JSON-RPC answers, routing, splitting,
// transactions, signatures, the consistency gate, retries and the router's own methods.
#include <gtest/gtest.h>

#include <algorithm>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>

#include "solana/base64.h"
#include "solana/delegation.h"
#include "tests/api/router_fixture.h"

// GCC 12 reports a false -Wrestrict on `"literal" + std::string` (GCC bug 105329).
#pragma GCC diagnostic ignored "-Wrestrict"

namespace switchyard::api_test {
namespace {

class RouterTest : public RouterFixture {};

std::string Call(const std::string& id, const std::string& method, const std::string& params) {
  return R"({"jsonrpc":"2.0","id":)" + id + R"(,"method":")" + method + R"(","params":)" + params +
         "}";
}

TEST_F(RouterTest, UpstreamAnswerPassesThroughByteForByte) {
  Start();
  base_.SetResponder([](const std::string&, const std::string&) {
    return FakeReply{FakeReply::Action::kAnswer, 200,
                     R"({"jsonrpc":"2.0","result":  {"x" : 1.50},"id":"a"})"};
  });
  TestClient client(port());
  ClientResponse response = client.Post(Call(R"("a")", "getSlot", "[]"));
  EXPECT_EQ(response.body, R"({"jsonrpc":"2.0","result":  {"x" : 1.50},"id":"a"})");
  // The request went out with its original bytes.
  ASSERT_EQ(base_.received().size(), 1u);
  EXPECT_EQ(base_.received()[0], Call(R"("a")", "getSlot", "[]"));
}

TEST_F(RouterTest, IdsThatUpstreamsMangleComeBackByteForByte) {
  Start();
  TestClient client(port());
  for (const std::string& id : std::vector<std::string>{R"({"k":[1, 2]})", "[true]", "1.0e2", "-3",
                                                        R"("\u0041")", "false", "null"}) {
    ClientResponse response = client.Post(Call(id, "getSlot", "[]"));
    ASSERT_EQ(response.status, 200u);
    EXPECT_EQ(response.body,
              R"({"jsonrpc":"2.0","result":{"from":"base","method":"getSlot"},"id":)" + id + "}")
        << id;
  }
}

TEST_F(RouterTest, ErrorsTravelWithHttp200) {
  Start();
  TestClient client(port());
  ClientResponse response = client.Post("{not json");
  EXPECT_EQ(response.status, 200u);
  EXPECT_EQ(
      response.body,
      R"({"jsonrpc":"2.0","error":{"code":-32700,"message":"Parse error: invalid JSON"},"id":null})");
  response = client.Post("[]");
  EXPECT_NE(response.body.find("-32600"), std::string::npos);
  response = client.Post(Call("3", "noSuchMethod", "[]"));
  EXPECT_NE(response.body.find("-32601"), std::string::npos);
  EXPECT_NE(response.body.find(R"("id":3)"), std::string::npos);
  response = client.Post(Call("4", "getBalance", R"(["not-a-key"])"));
  EXPECT_NE(response.body.find("-32604"), std::string::npos);
  response = client.Post(std::string("\"\xff\""));
  EXPECT_NE(response.body.find("-32700"), std::string::npos);
  EXPECT_EQ(response.status, 200u);
}

TEST_F(RouterTest, BatchAnswersInRequestOrderWithoutNotifications) {
  Start();
  TestClient client(port());
  const std::string body = "[" + Call(R"("first")", "getSlot", "[]") + "," +
                           R"({"jsonrpc":"2.0","method":"getSlot"},)" +
                           Call(R"({"n":2})", "getBalance", "[" + Quoted(Key(2)) + "]") + "," +
                           R"(7,)" + Call("1.5", "getAssetsByOwner", "[]") + "]";
  ClientResponse response = client.Post(body);
  ASSERT_EQ(response.status, 200u);
  EXPECT_EQ(
      response.body,
      std::string("[") +
          R"({"jsonrpc":"2.0","result":{"from":"base","method":"getSlot"},"id":"first"},)" +
          R"({"jsonrpc":"2.0","result":{"from":"er2","method":"getBalance"},"id":{"n":2}},)" +
          R"({"jsonrpc":"2.0","error":{"code":-32600,"message":"Invalid request: not an object"},"id":null},)" +
          R"({"jsonrpc":"2.0","result":{"from":"indexer","method":"getAssetsByOwner"},"id":1.5}])");
  EXPECT_TRUE(base_.WaitForRequests(2));  // the notification was forwarded too
}

// A batch of ten requestAirdrop calls with ids 0 to 9: a call that must not be sent twice
// never goes in an upstream batch, so each is its own upstream exchange.
std::string TenUnbatchedCalls() {
  std::string body = "[";
  for (int i = 0; i < 10; ++i) {
    body += (i ? "," : "") + Call(std::to_string(i), "requestAirdrop",
                                  "[\"" + Key(static_cast<uint8_t>(40 + i)).ToBase58() + "\", 1]");
  }
  return body + "]";
}

// A batch wider than the connection limit: the calls beyond it wait for a connection instead
// of failing, and no more connections than the limit are opened.
TEST_F(RouterTest, CallsBeyondTheConnectionLimitWaitForAConnection) {
  Start([](RouterOptions& options, HttpServerOptions& server) {
    options.upstream.max_connections_per_endpoint = 2;
    server.threads = 1;
  });
  ClientResponse response = TestClient(port()).Post(TenUnbatchedCalls());
  ASSERT_EQ(response.status, 200u);
  for (int i = 0; i < 10; ++i) {
    EXPECT_NE(response.body.find(R"("method":"requestAirdrop"},"id":)" + std::to_string(i) + "}"),
              std::string::npos)
        << i << ": " << response.body;
  }
  EXPECT_EQ(response.body.find("error"), std::string::npos) << response.body;
  EXPECT_EQ(base_.received_count(), 10u);
  EXPECT_LE(base_.max_outstanding(), 2u);
  EXPECT_LE(base_.connections_accepted(), 2u);
}

// The wait queue is bounded: beyond it, calls fail at once with a clear error.
TEST_F(RouterTest, CallsBeyondTheWaitQueueFailClearly) {
  Start([](RouterOptions& options, HttpServerOptions& server) {
    options.upstream.max_connections_per_endpoint = 1;
    options.upstream.max_waiting_per_endpoint = 2;
    server.threads = 1;
  });
  ClientResponse response = TestClient(port()).Post(TenUnbatchedCalls());
  ASSERT_EQ(response.status, 200u);
  size_t answered = 0;
  size_t busy = 0;
  for (size_t at = 0; (at = response.body.find(R"("from":"base")", at)) != std::string::npos;
       ++at) {
    ++answered;
  }
  for (size_t at = 0; (at = response.body.find("1 connections busy and 2 requests waiting", at)) !=
                      std::string::npos;
       ++at) {
    ++busy;
  }
  EXPECT_EQ(answered, 3u) << response.body;  // one on the connection, two waiting
  EXPECT_EQ(busy, 7u) << response.body;
}

TEST_F(RouterTest, OnlyNotificationsGetNoBody) {
  Start();
  TestClient client(port());
  ClientResponse response = client.Post(R"({"jsonrpc":"2.0","method":"getSlot"})");
  EXPECT_EQ(response.status, 204u);
  EXPECT_EQ(response.body, "");
}

TEST_F(RouterTest, BatchOverTheLimitIsAClearError) {
  Start([](RouterOptions& options, HttpServerOptions&) { options.codec.max_batch_size = 2; });
  TestClient client(port());
  ClientResponse response =
      client.Post("[" + Call("1", "getSlot", "[]") + "," + Call("2", "getSlot", "[]") + "," +
                  Call("3", "getSlot", "[]") + "]");
  EXPECT_EQ(response.status, 200u);
  EXPECT_EQ(response.body,
            R"({"jsonrpc":"2.0","error":{"code":-32600,"message":"Invalid request: batch of 3 )"
            R"(requests exceeds the limit of 2"},"id":null})");
  EXPECT_EQ(base_.received_count(), 0u);
}

TEST_F(RouterTest, SingleAccountReadsGoToTheirEr) {
  Start();
  TestClient client(port());
  EXPECT_NE(client.Post(Call("1", "getAccountInfo", "[" + Quoted(Key(1)) + "]")).body.find("er1"),
            std::string::npos);
  EXPECT_NE(client.Post(Call("1", "getBalance", "[" + Quoted(Key(9)) + "]")).body.find("base"),
            std::string::npos);
  EXPECT_EQ(er1_.received_count(), 1u);
  EXPECT_EQ(base_.received_count(), 2u);  // getBalance and its owner probe
}

TEST_F(RouterTest, MultipleAccountsAreSplitAcrossBaseAndTwoErsAndMergedInOrder) {
  Start();
  TestClient client(port());
  const std::vector<Pubkey> keys = {Key(9), Key(1), Key(2), Key(8), Key(5)};
  std::string list;
  for (const Pubkey& key : keys) list += (list.empty() ? "" : ",") + Quoted(key);
  ClientResponse response =
      client.Post(Call("42", "getMultipleAccounts", "[[" + list + R"(],{"encoding":"base64"}])"));
  ASSERT_EQ(response.status, 200u);
  const std::vector<std::string> from = {"base", "er1", "er2", "base", "er1"};
  std::string values;
  for (size_t i = 0; i < keys.size(); ++i) {
    values += (i ? "," : "") + std::string(R"({"key":")") + keys[i].ToBase58() + R"(","from":")" +
              from[i] + R"("})";
  }
  EXPECT_EQ(response.body,
            R"({"jsonrpc":"2.0","result":{"context":{"apiVersion":"2.1.0","slot":500},"value":[)" +
                values + R"(]},"id":42})");
  ASSERT_EQ(er2_.received().size(), 1u);
  EXPECT_EQ(er2_.received()[0],
            R"({"jsonrpc":"2.0","id":1,"method":"getMultipleAccounts","params":[[)" +
                Quoted(Key(2)) + R"(],{"encoding":"base64"}]})");
  EXPECT_EQ(metrics_.rpc_split_accounts.value(), 1u);
}

TEST_F(RouterTest, SendTransactionGoesToTheErWithItsOriginalBytesAndIsRemembered) {
  Start();
  TestClient client(port());
  Transaction tx = MakeTransaction(Key(1), {Key(5)}, Key(30), 0x11);
  const std::string body =
      Call("1", "sendTransaction", "[\"" + TransactionBase64(tx) + R"(",{"encoding":"base64"}])");
  ClientResponse response = client.Post(body);
  EXPECT_EQ(response.body, R"({"jsonrpc":"2.0","result":"sent-to-er1","id":1})");
  ASSERT_EQ(er1_.received().size(), 1u);
  EXPECT_EQ(er1_.received()[0], body);
  EXPECT_EQ(context_->signatures().Find(tx.id()), "er1");
}

// Each signature of a transaction with two signers finds it, not only the first.
TEST_F(RouterTest, EverySignatureOfASentTransactionIsRemembered) {
  Start();
  TestClient client(port());
  Transaction tx = MakeTransaction(Key(1), {Key(5)}, Key(30), 0x12);
  std::array<uint8_t, 64> second;
  second.fill(0x13);
  tx.signatures.push_back(Signature(second));
  tx.header.num_required_signatures = 2;  // Key(5) signs too
  ClientResponse response = client.Post(
      Call("1", "sendTransaction", "[\"" + TransactionBase64(tx) + R"(",{"encoding":"base64"}])"));
  ASSERT_EQ(response.body, R"({"jsonrpc":"2.0","result":"sent-to-er1","id":1})");
  EXPECT_EQ(context_->signatures().Find(tx.signatures[0]), "er1");
  EXPECT_EQ(context_->signatures().Find(tx.signatures[1]), "er1");
}

TEST_F(RouterTest, MixedTargetTransactionIsRejected) {
  Start();
  TestClient client(port());
  Transaction tx = MakeTransaction(Key(1), {Key(2)}, Key(30));
  ClientResponse response = client.Post(
      Call("1", "sendTransaction", "[\"" + TransactionBase64(tx) + R"(",{"encoding":"base64"}])"));
  EXPECT_NE(response.body.find("two ERs"), std::string::npos) << response.body;
  EXPECT_EQ(er1_.received_count() + er2_.received_count() + base_.received_count(), 0u);
}

TEST_F(RouterTest, V0TransactionResolvesItsLookupTableFromBaseOnce) {
  Start();
  // Table Key(0x77) holds [Key(40), Key(5)]; Key(5) is delegated to er1.
  std::string data(56, '\0');
  data[0] = 1;
  data += std::string(reinterpret_cast<const char*>(Key(40).data()), 32);
  data += std::string(reinterpret_cast<const char*>(Key(5).data()), 32);
  base_.SetResponder([&](const std::string& method, const std::string& body) {
    if (method != "getAccountInfo") return base_.Canned(method, body);
    return FakeReply{FakeReply::Action::kAnswer, 200,
                     R"({"jsonrpc":"2.0","result":{"context":{"slot":1},"value":{"data":[")" +
                         Base64Encode(data) + R"(","base64"],"owner":"x"}},"id":1})"};
  });
  Transaction tx = MakeTransaction(Key(1), {}, Key(30));
  tx.versioned = true;
  tx.lookups.push_back(AddressTableLookup{Key(0x77), {1}, {}});
  TestClient client(port());
  for (int i = 0; i < 2; ++i) {
    ClientResponse response = client.Post(Call(
        "1", "sendTransaction", "[\"" + TransactionBase64(tx) + R"(",{"encoding":"base64"}])"));
    EXPECT_EQ(response.body, R"({"jsonrpc":"2.0","result":"sent-to-er1","id":1})");
  }
  EXPECT_EQ(base_.received_count(), 1u);  // the table was cached
  EXPECT_EQ(metrics_.lookup_table_fetches.value(), 1u);
}

TEST_F(RouterTest, SignatureStatusesSplitKnownAndFanOutUnknown) {
  Start();
  TestClient client(port());
  Transaction tx = MakeTransaction(Key(1), {}, Key(30), 0x21);
  client.Post(
      Call("1", "sendTransaction", "[\"" + TransactionBase64(tx) + R"(",{"encoding":"base64"}])"));
  std::array<uint8_t, 64> bytes;
  bytes.fill(0x22);
  const std::string unknown = Signature(bytes).ToBase58();
  const std::string known = tx.id().ToBase58();
  er1_.AddKnownSignature(known);
  er2_.AddKnownSignature(unknown);
  ClientResponse response =
      client.Post(Call("5", "getSignatureStatuses", "[[\"" + unknown + "\",\"" + known + "\"]]"));
  EXPECT_EQ(response.body,
            R"({"jsonrpc":"2.0","result":{"context":{"apiVersion":"2.1.0","slot":500},"value":[)"
            R"({"key":")" +
                unknown + R"(","from":"er2"},{"key":")" + known + R"(","from":"er1"}]},"id":5})");
  // er1 got the transaction, the known signature, and the unknown one; base and er2 only the
  // unknown one.
  EXPECT_EQ(er1_.received_count(), 3u);
  EXPECT_EQ(er2_.received_count(), 1u);
  EXPECT_EQ(base_.received_count(), 1u);
}

TEST_F(RouterTest, GetTransactionOfAnUnknownSignatureAsksEveryone) {
  Start();
  std::array<uint8_t, 64> bytes;
  bytes.fill(0x31);
  const std::string signature = Signature(bytes).ToBase58();
  er2_.AddKnownSignature(signature);
  TestClient client(port());
  ClientResponse response = client.Post(Call("\"t\"", "getTransaction", "[\"" + signature + "\"]"));
  EXPECT_EQ(response.body, R"({"jsonrpc":"2.0","result":{"slot":7,"from":"er2"},"id":"t"})");
  EXPECT_EQ(base_.received_count() + er1_.received_count() + er2_.received_count(), 3u);
}

TEST_F(RouterTest, MinSlotAboveTheAppliedSlotGets412AfterTheWait) {
  Start([](RouterOptions& options, HttpServerOptions&) {
    options.max_gate_wait = absl::Milliseconds(50);
  });
  TestClient client(port());
  ClientResponse response = client.Post(Call("9", "getSlot", "[]"), {{"X-Min-Slot", "105"}});
  EXPECT_EQ(response.status, 412u);
  EXPECT_EQ(response.body,
            R"({"jsonrpc":"2.0","error":{"code":-32016,"message":"Minimum context slot has not )"
            R"(been reached","data":{"contextSlot":100}},"id":9})");
  EXPECT_EQ(response.headers["X-Delegation-Slot"], "100");
  EXPECT_EQ(base_.received_count(), 0u);
  EXPECT_EQ(metrics_.gate_rejections.value(), 1u);
}

// A browser page reads the 412 too: the HTTP layer marks the router's answer.
TEST_F(RouterTest, A412CarriesTheCorsHeaders) {
  Start([](RouterOptions& options, HttpServerOptions& server) {
    options.max_gate_wait = absl::Milliseconds(50);
    server.cors.allowed_origins = {"*"};
  });
  TestClient client(port());
  ClientResponse response = client.Post(Call("9", "getSlot", "[]"),
                                        {{"X-Min-Slot", "105"}, {"Origin", "https://app.example"}});
  EXPECT_EQ(response.status, 412u);
  EXPECT_EQ(response.headers["Access-Control-Allow-Origin"], "*");
  EXPECT_EQ(response.headers["Access-Control-Expose-Headers"], "X-Delegation-Slot");
  EXPECT_EQ(response.headers["X-Delegation-Slot"], "100");
}

TEST_F(RouterTest, MinContextSlotWaitsForTheEngineThenAnswers) {
  Start([](RouterOptions& options, HttpServerOptions&) {
    options.max_gate_wait = absl::Seconds(20);
    options.verify_owner = false;  // only the call goes to er1, no owner probe
  });
  TestClient client(port());
  const std::string body =
      Call("9", "getBalance", "[" + Quoted(Key(1)) + R"(,{"minContextSlot":106}])");
  client.WriteRaw(TestClient::Request(body));
  ASSERT_TRUE(WaitFor([&] { return metrics_.gate_waits.value() == 1; }));
  snapshots_.Publish(SnapshotBuilder().Delegate(Key(1), kEr1Identity).Build(106));
  ClientResponse response = client.Read();
  EXPECT_EQ(response.status, 200u);
  EXPECT_EQ(response.headers["X-Delegation-Slot"], "106");
  // The minimum is a slot of the base layer: the ER, whose slots run on their own clock, gets
  // the call without it.
  ASSERT_EQ(er1_.received().size(), 1u);
  EXPECT_EQ(er1_.received()[0], R"({"jsonrpc":"2.0","id":9,"method":"getBalance","params":[")" +
                                    Key(1).ToBase58() + R"(",{}]})");
}

TEST_F(RouterTest, MinContextSlotGoesToBaseAsWritten) {
  Start([](RouterOptions& options, HttpServerOptions&) { options.verify_owner = false; });
  TestClient client(port());
  const std::string body =
      Call("9", "getBalance",
           "[" + Quoted(Key(3)) + R"(,{"commitment":"confirmed","minContextSlot":100}])");
  ClientResponse response = client.Post(body);
  EXPECT_EQ(response.status, 200u);
  ASSERT_EQ(base_.received().size(), 1u);
  EXPECT_EQ(base_.received()[0], body);
}

// A split list: base's part keeps minContextSlot, each ER's part goes without it.
TEST_F(RouterTest, ASplitListSendsMinContextSlotToBaseOnly) {
  Start([](RouterOptions& options, HttpServerOptions&) { options.verify_owner_multiple = false; });
  TestClient client(port());
  ClientResponse response =
      client.Post(Call("42", "getMultipleAccounts",
                       "[[" + Quoted(Key(9)) + "," + Quoted(Key(2)) +
                           R"(],{"encoding":"base64","minContextSlot":100}])"));
  ASSERT_EQ(response.status, 200u);
  ASSERT_EQ(base_.received().size(), 1u);
  EXPECT_EQ(base_.received()[0],
            R"({"jsonrpc":"2.0","id":1,"method":"getMultipleAccounts","params":[[)" +
                Quoted(Key(9)) + R"(],{"encoding":"base64","minContextSlot":100}]})");
  ASSERT_EQ(er2_.received().size(), 1u);
  EXPECT_EQ(er2_.received()[0],
            R"({"jsonrpc":"2.0","id":1,"method":"getMultipleAccounts","params":[[)" +
                Quoted(Key(2)) + R"(],{"encoding":"base64"}]})");
}

TEST_F(RouterTest, AnUnmetMinContextSlotIsASolanaErrorWithHttp200) {
  Start([](RouterOptions& options, HttpServerOptions&) {
    options.max_gate_wait = absl::Milliseconds(50);
  });
  TestClient client(port());
  ClientResponse response = client.Post(Call("9", "getSlot", R"([{"minContextSlot":105}])"));
  EXPECT_EQ(response.status, 200u);
  EXPECT_EQ(response.body,
            R"({"jsonrpc":"2.0","error":{"code":-32016,"message":"Minimum context slot has not )"
            R"(been reached","data":{"contextSlot":100}},"id":9})");
  EXPECT_EQ(base_.received_count(), 0u);
  EXPECT_EQ(metrics_.gate_rejections.value(), 1u);
}

// In a batch, only the calls asking for more than the state reached get -32016; the others
// are answered.
TEST_F(RouterTest, InABatchOnlyTheCallsAskingTooMuchGetTheMinContextSlotError) {
  Start([](RouterOptions& options, HttpServerOptions&) {
    options.max_gate_wait = absl::Milliseconds(50);
  });
  TestClient client(port());
  ClientResponse response =
      client.Post("[" + Call("1", "getSlot", R"([{"minContextSlot":105}])") + "," +
                  Call("2", "getSlot", R"([{"minContextSlot":90}])") + "]");
  EXPECT_EQ(response.status, 200u);
  EXPECT_EQ(response.body,
            R"([{"jsonrpc":"2.0","error":{"code":-32016,"message":"Minimum context slot has not )"
            R"(been reached","data":{"contextSlot":100}},"id":1},)"
            R"({"jsonrpc":"2.0","result":{"from":"base","method":"getSlot"},"id":2}])");
  EXPECT_EQ(base_.received_count(), 1u);
}

TEST_F(RouterTest, UpstreamThatTimesOutIsRetriedOnTheSecondEndpoint) {
  Start(
      [&](RouterOptions& options, HttpServerOptions&) {
        options.upstream.request_timeout = absl::Milliseconds(200);
        options.health.hedge = false;  // the retry, not a hedge, is what this test is about
        // Heavily weighted, so that the choice starts with the endpoint that hangs.
        options.upstreams[0].endpoints = {{base_.url(), 1000}, {base_b_.url(), 1}};
      },
      /*two_base_endpoints=*/true);
  base_.SetResponder([](const std::string&, const std::string&) {
    return FakeReply{FakeReply::Action::kHang, 200, ""};
  });
  TestClient client(port());
  ClientResponse response = client.Post(Call("1", "getSlot", "[]"));
  EXPECT_EQ(response.body,
            R"({"jsonrpc":"2.0","result":{"from":"base","method":"getSlot"},"id":1})");
  EXPECT_EQ(base_.received_count(), 1u);
  EXPECT_EQ(base_b_.received_count(), 1u);
  EXPECT_EQ(metrics_.upstream_retries.value(), 1u);
}

TEST_F(RouterTest, UpstreamTimeoutWithNoOtherEndpointIsAnInternalError) {
  Start([](RouterOptions& options, HttpServerOptions&) {
    options.upstream.request_timeout = absl::Milliseconds(100);
    options.verify_owner = false;  // only the call goes to er1, no owner probe
  });
  er1_.SetResponder([](const std::string&, const std::string&) {
    return FakeReply{FakeReply::Action::kHang, 200, ""};
  });
  TestClient client(port());
  ClientResponse response = client.Post(Call("1", "getBalance", "[" + Quoted(Key(1)) + "]"));
  EXPECT_EQ(response.status, 200u);
  EXPECT_EQ(response.body,
            R"({"jsonrpc":"2.0","error":{"code":-32603,"message":"upstream er1 failed: upstream )"
            R"(er1 timed out"},"id":1})");
  // A lone endpoint that did not answer in time is not asked the same again: a read goes
  // again to the same endpoint only after an I/O error.
  EXPECT_EQ(er1_.received_count(), 1u);
  EXPECT_EQ(metrics_.upstream_failures.value(), 1u);
}

TEST_F(RouterTest, ReadThatMeetsAResetIsRetriedOnTheSecondEndpoint) {
  Start(nullptr, /*two_base_endpoints=*/true);
  base_.SetResponder([](const std::string&, const std::string&) {
    return FakeReply{FakeReply::Action::kReset, 200, ""};
  });
  TestClient client(port());
  for (int i = 1; i <= 4; ++i) {
    ClientResponse response = client.Post(Call(std::to_string(i), "getSlot", "[]"));
    EXPECT_EQ(response.body, R"({"jsonrpc":"2.0","result":{"from":"base","method":"getSlot"},)"
                             R"("id":)" +
                                 std::to_string(i) + "}");
  }
  // Every read the resetting endpoint took went again to the other one.
  EXPECT_EQ(base_b_.received_count(), 4u);
  EXPECT_EQ(metrics_.upstream_retries.value(), base_.received_count());
}

TEST_F(RouterTest, SendTransactionResetAfterItWasWrittenIsNotSentAgain) {
  Start(nullptr, /*two_base_endpoints=*/true);
  auto reset = [](const std::string&, const std::string&) {
    return FakeReply{FakeReply::Action::kReset, 200, ""};
  };
  base_.SetResponder(reset);
  base_b_.SetResponder(reset);
  TestClient client(port());
  Transaction tx = MakeTransaction(Key(20), {}, Key(30));
  ClientResponse response = client.Post(
      Call("1", "sendTransaction", "[\"" + TransactionBase64(tx) + R"(",{"encoding":"base64"}])"));
  EXPECT_NE(response.body.find("-32603"), std::string::npos) << response.body;
  // The node may have taken it: it is not sent to another one either.
  EXPECT_EQ(base_.received_count() + base_b_.received_count(), 1u);
  EXPECT_EQ(metrics_.upstream_retries.value(), 0u);
}

// A loopback port nothing listens on (bound once, then released).
uint16_t UnusedPort() {
  boost::asio::io_context io;
  boost::asio::ip::tcp::acceptor acceptor(io, {boost::asio::ip::make_address("127.0.0.1"), 0});
  return acceptor.local_endpoint().port();
}

TEST_F(RouterTest, SendTransactionGoesToTheOtherEndpointWhenTheFirstCannotBeReached) {
  // A port nothing listens on: the connection fails before a byte of the request is written.
  const std::string unreachable = "http://127.0.0.1:" + std::to_string(UnusedPort());
  Start([&](RouterOptions& options, HttpServerOptions& server) {
    server.threads = 1;
    // Heavily weighted, so that the choice starts with it.
    options.upstreams[0].endpoints = {{unreachable, 1000}, {base_.url(), 1}};
  });
  TestClient client(port());
  for (int i = 1; i <= 3; ++i) {
    Transaction tx = MakeTransaction(Key(20), {}, Key(static_cast<uint8_t>(30 + i)));
    ClientResponse response =
        client.Post(Call(std::to_string(i), "sendTransaction",
                         "[\"" + TransactionBase64(tx) + R"(",{"encoding":"base64"}])"));
    EXPECT_EQ(response.body,
              R"({"jsonrpc":"2.0","result":"sent-to-base","id":)" + std::to_string(i) + "}");
  }
  EXPECT_EQ(base_.received_count(), 3u);
  EXPECT_GE(metrics_.upstream_retries.value(), 1u);
}

TEST_F(RouterTest, SendTransactionIsNeverSentTwiceToTheSameNode) {
  Start();
  base_.SetResponder([](const std::string&, const std::string&) {
    return FakeReply{FakeReply::Action::kReset, 200, ""};
  });
  TestClient client(port());
  Transaction tx = MakeTransaction(Key(20), {}, Key(30));
  ClientResponse response = client.Post(
      Call("1", "sendTransaction", "[\"" + TransactionBase64(tx) + R"(",{"encoding":"base64"}])"));
  EXPECT_NE(response.body.find("-32603"), std::string::npos) << response.body;
  EXPECT_EQ(base_.received_count(), 1u);
  // A read is safe to repeat on the same node.
  client.Post(Call("2", "getSlot", "[]"));
  EXPECT_EQ(base_.received_count(), 3u);
}

TEST_F(RouterTest, ReadOnAConnectionClosedAsTheRequestArrivesGoesAgainAndIsNoFailure) {
  Start();
  base_.SetDropReusedRequests(true);
  TestClient client(port());
  EXPECT_NE(client.Post(Call("1", "getSlot", "[]")).body.find("\"from\":\"base\""),
            std::string::npos);
  // The kept connection takes the next read and is closed without an answer: stale.
  ClientResponse response = client.Post(Call("2", "getSlot", "[]"));
  EXPECT_NE(response.body.find("\"from\":\"base\""), std::string::npos) << response.body;
  EXPECT_EQ(base_.received_count(), 3u);
  EXPECT_EQ(base_.connections_accepted(), 2u);
  EXPECT_EQ(metrics_.upstream_stale_retries.value(), 1u);
  EXPECT_EQ(metrics_.upstream_failures.value(), 0u);
  EXPECT_EQ(metrics_.upstream_retries.value(), 0u);
}

TEST_F(RouterTest, ConnectionTheUpstreamClosedWhileIdleIsNotHandedOutAgain) {
  Start();
  base_.SetIdleClose(absl::Milliseconds(50));
  TestClient client(port());
  EXPECT_NE(client.Post(Call("1", "getSlot", "[]")).body.find("\"from\":\"base\""),
            std::string::npos);
  absl::SleepFor(absl::Milliseconds(300));  // the upstream closes the idle connection
  Transaction tx = MakeTransaction(Key(20), {}, Key(30));
  ClientResponse response = client.Post(
      Call("2", "sendTransaction", "[\"" + TransactionBase64(tx) + R"(",{"encoding":"base64"}])"));
  EXPECT_EQ(response.body, R"({"jsonrpc":"2.0","result":"sent-to-base","id":2})");
  EXPECT_EQ(base_.connections_accepted(), 2u);
  EXPECT_EQ(metrics_.upstream_stale_retries.value(), 0u);
  EXPECT_EQ(metrics_.upstream_failures.value(), 0u);
}

TEST_F(RouterTest, SendTransactionOnAConnectionClosedAsItArrivesIsNotSentAgain) {
  Start();
  base_.SetDropReusedRequests(true);
  TestClient client(port());
  client.Post(Call("1", "getSlot", "[]"));
  Transaction tx = MakeTransaction(Key(20), {}, Key(30));
  const std::string send =
      Call("2", "sendTransaction", "[\"" + TransactionBase64(tx) + R"(",{"encoding":"base64"}])");
  ClientResponse response = client.Post(send);
  EXPECT_NE(response.body.find("-32603"), std::string::npos) << response.body;
  std::vector<std::string> received = base_.received();
  EXPECT_EQ(std::count(received.begin(), received.end(), send), 1);
  EXPECT_EQ(metrics_.upstream_stale_retries.value(), 0u);
}

// Base's answer to getMultipleAccounts of delegation record PDAs: a record naming `validator`
// for each, or null without one.
std::string RecordsAnswer(size_t count, std::optional<Pubkey> validator) {
  std::string values;
  for (size_t i = 0; i < count; ++i) {
    if (i > 0) values += ",";
    if (!validator) {
      values += "null";
      continue;
    }
    DelegationRecord record;
    record.authority = *validator;
    record.owner = Key(0xAA);
    values += R"({"data":[")" + Base64Encode(EncodeDelegationRecord(record)) +
              R"(","base64"],"owner":")" + std::string(kDelegationProgramId) + R"("})";
  }
  return R"({"jsonrpc":"2.0","result":{"context":{"slot":1},"value":[)" + values + R"(]},"id":1})";
}

class LimboRouterTest : public RouterFixture {
 protected:
  LimboRouterTest() {
    // The state, possibly stale, still has Key(1) and Key(5) on er1.
    snapshots_.Publish(SnapshotBuilder()
                           .Delegate(Key(1), kEr1Identity)
                           .Delegate(Key(5), kEr1Identity)
                           .Build(100, /*limbo_since=*/90));
  }
  std::string SendBody() const {
    Transaction tx = MakeTransaction(Key(1), {Key(5)}, Key(30), 0x11);
    return Call("1", "sendTransaction",
                "[\"" + TransactionBase64(tx) + R"(",{"encoding":"base64"}])");
  }
  std::string ReadPdas() const {
    return "[\"" + DelegationRecordPda(Key(1)).ToBase58() + "\",\"" +
           DelegationRecordPda(Key(5)).ToBase58() + "\"]";
  }
};

TEST_F(LimboRouterTest, TransactionGoesWhereTheRecordsOnBaseSayNotWhereTheStateSays) {
  Start();
  base_.SetResponder([](const std::string& method, const std::string&) {
    EXPECT_EQ(method, "getMultipleAccounts");
    return FakeReply{FakeReply::Action::kAnswer, 200, RecordsAnswer(2, kEr2Identity)};
  });
  TestClient client(port());
  ClientResponse response = client.Post(SendBody());
  EXPECT_EQ(response.body, R"({"jsonrpc":"2.0","result":"sent-to-er2","id":1})");
  ASSERT_EQ(base_.received_count(), 1u);
  EXPECT_NE(base_.received()[0].find(ReadPdas()), std::string::npos) << base_.received()[0];
  EXPECT_EQ(er1_.received_count(), 0u);
  EXPECT_EQ(context_->signatures().Find(MakeTransaction(Key(1), {Key(5)}, Key(30), 0x11).id()),
            "er2");
  EXPECT_EQ(metrics_.limbo_transaction_checks.value(), 1u);
  EXPECT_EQ(metrics_.limbo_transaction_reroutes.value(), 1u);
}

TEST_F(LimboRouterTest, TransactionOfAccountsUndelegatedSinceGoesToBase) {
  Start();
  base_.SetResponder([](const std::string& method, const std::string& body) {
    if (method == "getMultipleAccounts") {
      return FakeReply{FakeReply::Action::kAnswer, 200, RecordsAnswer(2, std::nullopt)};
    }
    EXPECT_EQ(method, "sendTransaction") << body;
    return FakeReply{FakeReply::Action::kAnswer, 200,
                     R"({"jsonrpc":"2.0","result":"landed-on-base","id":1})"};
  });
  TestClient client(port());
  ClientResponse response = client.Post(SendBody());
  EXPECT_EQ(response.body, R"({"jsonrpc":"2.0","result":"landed-on-base","id":1})");
  EXPECT_EQ(base_.received_count(), 2u);
  EXPECT_EQ(er1_.received_count(), 0u);
}

TEST_F(LimboRouterTest, TransactionIsNotSentWhenBaseCannotSayWhereItsAccountsAre) {
  Start();
  base_.SetResponder([](const std::string&, const std::string&) {
    return FakeReply{FakeReply::Action::kAnswer, 503, "overloaded"};
  });
  TestClient client(port());
  ClientResponse response = client.Post(SendBody());
  EXPECT_NE(response.body.find("delegation records could not be read"), std::string::npos)
      << response.body;
  EXPECT_EQ(er1_.received_count() + er2_.received_count(), 0u);
}

TEST_F(LimboRouterTest, OutsideLimboTheStateDecidesWithoutAskingBase) {
  snapshots_.Publish(
      SnapshotBuilder().Delegate(Key(1), kEr1Identity).Delegate(Key(5), kEr1Identity).Build(101));
  Start();
  TestClient client(port());
  EXPECT_EQ(client.Post(SendBody()).body, R"({"jsonrpc":"2.0","result":"sent-to-er1","id":1})");
  EXPECT_EQ(base_.received_count(), 0u);
  EXPECT_EQ(metrics_.limbo_transaction_checks.value(), 0u);
}

TEST_F(RouterTest, RouterMethodsAnswerLikeMagicBlocksRouter) {
  Start();
  TestClient client(port());
  EXPECT_EQ(client.Post(Call("1", "getIdentity", "[]")).body,
            R"({"jsonrpc":"2.0","result":{"identity":")" + Key(0x99).ToBase58() +
                R"(","fqdn":"https://router.example"},"id":1})");
  EXPECT_EQ(client.Post(Call("1", "getDelegationStatus", "[" + Quoted(Key(9)) + "]")).body,
            R"({"jsonrpc":"2.0","result":{"isDelegated":false},"id":1})");
  EXPECT_EQ(client.Post(Call("1", "getDelegationStatus", "[" + Quoted(Key(2)) + "]")).body,
            R"({"jsonrpc":"2.0","result":{"isDelegated":true,"fqdn":"https://er2.example",)"
            R"("delegationRecord":{"authority":")" +
                kEr2Identity.ToBase58() + R"(","owner":")" + Key(0xAA).ToBase58() +
                R"(","delegationSlot":10,"lamports":1000}},"id":1})");
  EXPECT_EQ(
      client.Post(Call("1", "getBlockhashForAccounts", "[[" + Quoted(Key(2)) + "]]")).body,
      R"({"jsonrpc":"2.0","result":{"blockhash":"hash-of-er2","lastValidBlockHeight":99},"id":1})");
  ClientResponse routes = client.Post(Call("1", "getRoutes", "[]"));
  EXPECT_NE(routes.body.find(
                R"("fqdn":"https://er1.example","baseFee":0,"blockTimeMs":50,"countryCode":"DE")"),
            std::string::npos)
      << routes.body;
}

// MagicBlock's router answers getIdentity with an ER validator's identity and fqdn (the SDK's
// getClosestValidator): without `router.identity`, the default ER's, else the closest ER's
// (the first while no probe has measured any).
TEST_F(RouterTest, GetIdentityWithoutARouterIdentityAnswersTheDefaultEr) {
  Start([](RouterOptions& options, HttpServerOptions&) {
    options.identity = Pubkey();
    options.fqdn.clear();
    options.routing.default_er = "er2";
  });
  TestClient client(port());
  EXPECT_EQ(client.Post(Call("1", "getIdentity", "[]")).body,
            R"({"jsonrpc":"2.0","result":{"identity":")" + kEr2Identity.ToBase58() +
                R"(","fqdn":"https://er2.example"},"id":1})");
}

TEST_F(RouterTest, GetIdentityWithoutARouterIdentityOrDefaultErAnswersTheFirstEr) {
  Start([](RouterOptions& options, HttpServerOptions&) {
    options.identity = Pubkey();
    options.routing.default_er.clear();
  });
  TestClient client(port());
  EXPECT_EQ(client.Post(Call("7", "getIdentity", "[]")).body,
            R"({"jsonrpc":"2.0","result":{"identity":")" + kEr1Identity.ToBase58() +
                R"(","fqdn":"https://er1.example"},"id":7})");
}

TEST_F(RouterTest, BaseShowingTheDelegationProgramAsOwnerIsReaskedOfTheRecordsEr) {
  Start();
  // Key(7) is unknown to the state, but base says it is delegated; its record names er2.
  DelegationRecord record;
  record.authority = kEr2Identity;
  record.owner = Key(0xAA);
  const std::string record_pda = DelegationRecordPda(Key(7)).ToBase58();
  base_.SetResponder([&, record_pda](const std::string& method, const std::string& body) {
    std::string value;
    if (body.find(record_pda) != std::string::npos) {
      // The record is read with getMultipleAccounts of the record PDAs.
      EXPECT_EQ(method, "getMultipleAccounts");
      value = R"([{"data":[")" + Base64Encode(EncodeDelegationRecord(record)) +
              R"(","base64"],"owner":")" + std::string(kDelegationProgramId) + R"("}])";
    } else {
      value = R"({"data":["","base64"],"owner":")" + std::string(kDelegationProgramId) + R"("})";
    }
    return FakeReply{
        FakeReply::Action::kAnswer, 200,
        R"({"jsonrpc":"2.0","result":{"context":{"slot":1},"value":)" + value + R"(},"id":1})"};
  });
  er2_.SetResponder([](const std::string&, const std::string&) {
    return FakeReply{
        FakeReply::Action::kAnswer, 200,
        R"({"jsonrpc":"2.0","result":{"context":{"slot":2},"value":{"owner":"P"}},"id":1})"};
  });
  TestClient client(port());
  ClientResponse response = client.Post(Call("1", "getAccountInfo", "[" + Quoted(Key(7)) + "]"));
  EXPECT_EQ(response.body,
            R"({"jsonrpc":"2.0","result":{"context":{"slot":2},"value":{"owner":"P"}},"id":1})");
  EXPECT_EQ(base_.received_count(), 2u);  // the account, then its delegation record
  EXPECT_EQ(er2_.received_count(), 1u);
  EXPECT_EQ(metrics_.owner_reroutes.value(), 1u);
}

TEST_F(RouterTest, ErAnsweringNotFoundForADelegatedAccountIsReaskedOfBase) {
  Start();
  er1_.SetResponder([](const std::string&, const std::string&) {
    return FakeReply{FakeReply::Action::kAnswer, 200,
                     R"({"jsonrpc":"2.0","result":{"context":{"slot":2},"value":null},"id":1})"};
  });
  TestClient client(port());
  ClientResponse response = client.Post(Call("1", "getAccountInfo", "[" + Quoted(Key(1)) + "]"));
  EXPECT_EQ(response.body,
            R"({"jsonrpc":"2.0","result":{"from":"base","method":"getAccountInfo"},"id":1})");
  EXPECT_EQ(metrics_.owner_reroutes.value(), 1u);
}

TEST_F(RouterTest, OwnerVerificationCanBeTurnedOffOutsideLimbo) {
  Start([](RouterOptions& options, HttpServerOptions&) { options.verify_owner = false; });
  er1_.SetResponder([](const std::string&, const std::string&) {
    return FakeReply{FakeReply::Action::kAnswer, 200,
                     R"({"jsonrpc":"2.0","result":{"context":{"slot":2},"value":null},"id":1})"};
  });
  TestClient client(port());
  const std::string call = Call("1", "getAccountInfo", "[" + Quoted(Key(1)) + "]");
  EXPECT_NE(client.Post(call).body.find("null"), std::string::npos);
  EXPECT_EQ(metrics_.owner_reroutes.value(), 0u);
  // In limbo it is always on.
  snapshots_.Publish(SnapshotBuilder().Delegate(Key(1), kEr1Identity).Build(101, Slot{90}));
  EXPECT_NE(client.Post(call).body.find("base"), std::string::npos);
  EXPECT_EQ(metrics_.owner_reroutes.value(), 1u);
}

// getBalance shows no owner: a zero-length getAccountInfo of the account, at the call's
// commitment, goes to the same target beside the call itself.
TEST_F(RouterTest, GetBalanceIsProbedWithAZeroLengthGetAccountInfo) {
  Start();
  TestClient client(port());
  const std::string call =
      Call("1", "getBalance", "[" + Quoted(Key(9)) + R"(,{"commitment":"confirmed"}])");
  EXPECT_EQ(client.Post(call).body,
            R"({"jsonrpc":"2.0","result":{"from":"base","method":"getBalance"},"id":1})");
  const std::string probe =
      R"({"jsonrpc":"2.0","id":1,"method":"getAccountInfo","params":[)" + Quoted(Key(9)) +
      R"(,{"encoding":"base64","dataSlice":{"offset":0,"length":0},"commitment":"confirmed"}]})";
  ASSERT_TRUE(base_.WaitForRequests(2));
  const std::vector<std::string> received = base_.received();
  EXPECT_EQ(received.size(), 2u);
  EXPECT_NE(std::find(received.begin(), received.end(), call), received.end());
  EXPECT_NE(std::find(received.begin(), received.end(), probe), received.end());
  EXPECT_EQ(metrics_.owner_reroutes.value(), 0u);
}

TEST_F(RouterTest, HttpsUpstreamThatCannotHandshakeIsAnInternalError) {
  // er2 speaks plain HTTP; asked over https the TLS handshake fails.
  const std::string url = "https://" + er2_.url().substr(std::string("http://").size());
  Start([&](RouterOptions& options, HttpServerOptions&) {
    options.upstreams[2].endpoints = {{url, 1}};
    options.upstream.request_timeout = absl::Seconds(2);
  });
  TestClient client(port());
  ClientResponse response = client.Post(Call("1", "getBalance", "[" + Quoted(Key(2)) + "]"));
  EXPECT_EQ(response.status, 200u);
  EXPECT_NE(response.body.find(R"("code":-32603,"message":"upstream er2 failed)"),
            std::string::npos)
      << response.body;
  EXPECT_EQ(er2_.received_count(), 0u);  // no HTTP request got through
}

TEST_F(RouterTest, UpstreamAnsweringWithoutJsonRpcIsAnInternalError) {
  Start();
  base_.SetResponder([](const std::string&, const std::string&) {
    return FakeReply{FakeReply::Action::kAnswer, 502, "<html>bad gateway</html>"};
  });
  TestClient client(port());
  EXPECT_EQ(client.Post(Call("\"q\"", "getSlot", "[]")).body,
            R"({"jsonrpc":"2.0","error":{"code":-32603,"message":"upstream base answered HTTP 502 )"
            R"(without a JSON-RPC answer"},"id":"q"})");
}

TEST_F(RouterTest, ConfigNamingAMissingUpstreamIsRejected) {
  RouterOptions options;
  options.upstreams = {{"base", {{base_.url(), 1}}}};
  options.routing.method_rules = {{"getAsset*", "indexer"}};
  absl::StatusOr<std::unique_ptr<RouterContext>> context =
      RouterContext::Create(std::move(options), &snapshots_, &clock_, &metrics_);
  ASSERT_FALSE(context.ok());
  EXPECT_NE(std::string(context.status().message()).find("routing.methods.getAsset*"),
            std::string::npos);
}

}  // namespace
}  // namespace switchyard::api_test
