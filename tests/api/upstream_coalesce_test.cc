// Adaptive upstream batching over a fake UpstreamClient: reads of different requests that arrive
// together while their target is busy leave as one upstream JSON-RPC batch; an idle target, a
// write or a call without an id never waits.
#include <gtest/gtest.h>

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "tests/api/pipeline_fixture.h"

// GCC 12 reports a false -Wrestrict on `"literal" + std::string` (GCC bug 105329).
#pragma GCC diagnostic ignored "-Wrestrict"

namespace switchyard::api_test {
namespace {

std::string Call(const std::string& id, const std::string& method,
                 const std::string& params = "[]") {
  return R"({"jsonrpc":"2.0","id":)" + id + R"(,"method":")" + method + R"(","params":)" + params +
         "}";
}

// Element `id` of an upstream batch as the router writes it.
std::string Element(int id, const std::string& method, const std::string& params = "[]") {
  return R"({"jsonrpc":"2.0","id":)" + std::to_string(id) + R"(,"method":")" + method +
         R"(","params":)" + params + "}";
}

std::string Result(const std::string& id, const std::string& result) {
  return R"({"jsonrpc":"2.0","result":)" + result + R"(,"id":)" + id + "}";
}

class CoalesceTest : public PipelineTest {
 protected:
  CoalesceTest() {
    Configure([](RouterOptions&) {});
  }
  // The cache off, so that identical reads are not shared before they reach an upstream.
  void Configure(const std::function<void(RouterOptions&)>& adjust) {
    Build([&](RouterOptions& options) {
      options.cache.enabled = false;
      options.cache.coalesce = false;
      adjust(options);
    });
  }
  // Answers send `i` (0: the oldest still out) with `response` and runs the loop.
  void AnswerAt(size_t i, absl::StatusOr<UpstreamResponse> response) {
    FakeClient::Sent sent = std::move((*sent_)[i]);
    sent_->erase(sent_->begin() + static_cast<ptrdiff_t>(i));
    sent.done(std::move(response));
    io_.poll();
    io_.restart();
  }
  // A read to base left unanswered: base is busy from then on.
  void Busy() {
    Post(Call(R"("busy")", "getSlot"));
    ASSERT_EQ(sent_->size(), 1u);
  }
  // Base and er1 busy: a read to each left unanswered.
  void BothBusy() {
    Busy();
    Post(Call(R"("busy-er")", "getAccountInfo", "[" + Quoted(Key(1)) + "]"));
    ASSERT_EQ(sent_->size(), 2u);
    ASSERT_EQ((*sent_)[1].target, "er1");
  }
  // The index in sent_ of the first send to `target` after the first `from`.
  size_t SentTo(const std::string& target, size_t from = 2) const {
    for (size_t i = from; i < sent_->size(); ++i) {
      if ((*sent_)[i].target == target) return i;
    }
    ADD_FAILURE() << "nothing sent to " << target;
    return sent_->size();
  }
  // Base and er1 busy, then getMultipleAccounts of [Key(1), Key(9)] (id 1) and of
  // [Key(1), Key(8)] (id 2) together: a batch of their parts to each.
  void TwoSplitLists();
  // er1's batch answered: Key(1) as "A1" in both.
  void AnswerErParts();
};

// The params of getMultipleAccounts of `keys` in base64, and a result listing `values`.
std::string ListParams(const std::vector<Pubkey>& keys) {
  std::string list;
  for (const Pubkey& key : keys) list += (list.empty() ? "" : ",") + Quoted(key);
  return "[[" + list + R"(],{"encoding":"base64"}])";
}
std::string ListResult(const std::string& values, int slot) {
  return R"({"context":{"slot":)" + std::to_string(slot) + R"(},"value":[)" + values + "]}";
}
std::string Merged(const std::string& id, const std::string& values, int slot) {
  return R"({"jsonrpc":"2.0","result":)" + ListResult(values, slot) + R"(,"id":)" + id + "}";
}

void CoalesceTest::TwoSplitLists() {
  BothBusy();
  PostTogether({Call("1", "getMultipleAccounts", ListParams({Key(1), Key(9)})),
                Call("2", "getMultipleAccounts", ListParams({Key(1), Key(8)}))});
  ASSERT_EQ(sent_->size(), 4u);
}

void CoalesceTest::AnswerErParts() {
  AnswerAt(SentTo("er1"),
           UpstreamResponse{200, "[" + Result("0", ListResult(AccountValue("A1"), 9)) + "," +
                                     Result("1", ListResult(AccountValue("A1"), 9)) + "]"});
}

TEST_F(CoalesceTest, ReadsArrivingTogetherWhileTheTargetIsBusyLeaveAsOneBatch) {
  Busy();
  PostTogether({Call("1", "getSlot"), Call(R"("b")", "getBlockHeight"),
                Call("3", "getAccountInfo", "[" + Quoted(Key(9)) + "]")});
  ASSERT_EQ(sent_->size(), 2u);
  const FakeClient::Sent& batch = (*sent_)[1];
  EXPECT_EQ(batch.target, "base");
  EXPECT_EQ(batch.policy, RetryPolicy::kSafe);
  EXPECT_EQ(batch.body, "[" + Element(0, "getSlot") + "," + Element(1, "getBlockHeight") + "," +
                            Element(2, "getAccountInfo", "[" + Quoted(Key(9)) + "]") + "]");
  EXPECT_EQ(metrics_.upstream_coalesced_batches.value(), 1u);
  EXPECT_EQ(metrics_.upstream_coalesced_calls.value(), 3u);
  EXPECT_EQ(metrics_.upstream_batches.value(), 0u);  // that counter is for client batches

  // The batch answers out of order, before the busy read; each request gets its own element
  // under its own id.
  AnswerAt(1, UpstreamResponse{200, "[" + AccountAnswer(2, kSystemProgram) + "," +
                                        Result("0", "41") + "," + Result("1", "40") + "]"});
  ASSERT_TRUE(answers_[0] && answers_[1] && answers_[2]);
  EXPECT_EQ(answers_[0]->body, Result("1", "41"));
  EXPECT_EQ(answers_[1]->body, Result(R"("b")", "40"));
  EXPECT_EQ(answers_[2]->body, AccountAnswer(3, kSystemProgram));
  EXPECT_FALSE(answer_.has_value());
  Answer(200, Result(R"("busy")", "42"));
  ASSERT_TRUE(answer_.has_value());
  EXPECT_EQ(answer_->body, Result(R"("busy")", "42"));
}

TEST_F(CoalesceTest, AReadToAnIdleTargetLeavesAtOnce) {
  HttpRequest request;
  request.method = "POST";
  request.target = "/";
  request.body = Call("1", "getSlot");
  router_->Handle(std::move(request), [this](HttpResponse response) { answer_ = response; });
  // Sent before the worker's loop runs again: no wait for a batch.
  ASSERT_EQ(sent_->size(), 1u);
  EXPECT_EQ(sent_->front().body, Call("1", "getSlot"));
  io_.poll();
  io_.restart();
  EXPECT_EQ(metrics_.upstream_coalesced_batches.value(), 0u);
}

TEST_F(CoalesceTest, OneReadWaitingAloneLeavesAsItCame) {
  Busy();
  PostTogether({Call("1", "getSlot")});
  ASSERT_EQ(sent_->size(), 2u);
  EXPECT_EQ((*sent_)[1].body, Call("1", "getSlot"));
  EXPECT_EQ(metrics_.upstream_coalesced_batches.value(), 0u);
}

TEST_F(CoalesceTest, WritesAndCallsWithoutAnIdNeverWait) {
  Busy();
  const std::string airdrop = "[" + Quoted(Key(9)) + ",1000]";
  PostTogether({Call("1", "requestAirdrop", airdrop), Call("2", "requestAirdrop", airdrop),
                R"({"jsonrpc":"2.0","method":"getSlot"})",
                R"({"jsonrpc":"2.0","method":"getBlockHeight"})"});
  ASSERT_EQ(sent_->size(), 5u);
  EXPECT_EQ((*sent_)[1].body, Call("1", "requestAirdrop", airdrop));
  EXPECT_NE((*sent_)[1].policy, RetryPolicy::kSafe);
  EXPECT_EQ((*sent_)[2].body, Call("2", "requestAirdrop", airdrop));
  for (size_t i : {3, 4}) {
    EXPECT_EQ((*sent_)[i].body.front(), '{') << (*sent_)[i].body;
    EXPECT_NE((*sent_)[i].body.find(i == 3 ? "getSlot" : "getBlockHeight"), std::string::npos);
  }
  EXPECT_EQ(metrics_.upstream_coalesced_batches.value(), 0u);
}

TEST_F(CoalesceTest, ReadsWithDifferentMinimumSlotsGoInDifferentBatches) {
  Busy();
  const std::string at50 = R"([{"minContextSlot":50}])";
  const std::string at60 = R"([{"minContextSlot":60}])";
  PostTogether({Call("1", "getSlot", at50), Call("2", "getSlot", at60),
                Call("3", "getBlockHeight", at50), Call("4", "getBlockHeight", at60)});
  ASSERT_EQ(sent_->size(), 3u);
  EXPECT_EQ((*sent_)[1].min_slot, 50u);
  EXPECT_EQ((*sent_)[1].body,
            "[" + Element(0, "getSlot", at50) + "," + Element(1, "getBlockHeight", at50) + "]");
  EXPECT_EQ((*sent_)[2].min_slot, 60u);
  EXPECT_EQ((*sent_)[2].body,
            "[" + Element(0, "getSlot", at60) + "," + Element(1, "getBlockHeight", at60) + "]");
}

TEST_F(CoalesceTest, ReadsToDifferentTargetsGoInDifferentBatches) {
  Busy();
  Post(Call("0", "getAccountInfo", "[" + Quoted(Key(1)) + "]"));  // er1 busy too
  ASSERT_EQ(sent_->size(), 2u);
  PostTogether({Call("1", "getAccountInfo", "[" + Quoted(Key(1)) + "]"), Call("2", "getSlot"),
                Call("3", "getAccountInfo", "[" + Quoted(Key(1)) + "]"), Call("4", "getSlot")});
  ASSERT_EQ(sent_->size(), 4u);
  EXPECT_EQ((*sent_)[2].target, "er1");
  EXPECT_EQ((*sent_)[2].body, "[" + Element(0, "getAccountInfo", "[" + Quoted(Key(1)) + "]") + "," +
                                  Element(1, "getAccountInfo", "[" + Quoted(Key(1)) + "]") + "]");
  EXPECT_EQ((*sent_)[3].target, "base");
  EXPECT_EQ((*sent_)[3].body, "[" + Element(0, "getSlot") + "," + Element(1, "getSlot") + "]");
}

TEST_F(CoalesceTest, AFullBatchLeavesWithoutWaitingForTheTurnToEnd) {
  Configure([](RouterOptions& options) { options.upstream_batch_max = 2; });
  Busy();
  for (const char* id : {"1", "2", "3"}) {
    HttpRequest request;
    request.method = "POST";
    request.target = "/";
    request.body = Call(id, "getSlot");
    router_->Handle(std::move(request), [](HttpResponse) {});
  }
  // Before the loop runs: the first two filled a batch, the third waits.
  ASSERT_EQ(sent_->size(), 2u);
  EXPECT_EQ((*sent_)[1].body, "[" + Element(0, "getSlot") + "," + Element(1, "getSlot") + "]");
  io_.poll();
  io_.restart();
  ASSERT_EQ(sent_->size(), 3u);
  EXPECT_EQ((*sent_)[2].body, Call("3", "getSlot"));
}

TEST_F(CoalesceTest, OffWhenTheBatchMaximumIsBelowTwo) {
  Configure([](RouterOptions& options) { options.upstream_batch_max = 1; });
  Busy();
  PostTogether({Call("1", "getSlot"), Call("2", "getSlot")});
  ASSERT_EQ(sent_->size(), 3u);
  EXPECT_EQ((*sent_)[1].body, Call("1", "getSlot"));
  EXPECT_EQ((*sent_)[2].body, Call("2", "getSlot"));
}

TEST_F(CoalesceTest, ABusierThresholdKeepsReadsAloneUntilItIsReached) {
  Configure([](RouterOptions& options) { options.upstream_batch_after = 3; });
  Busy();
  // In flight: 1, then 2 and 3 as the first two leave alone; the last two wait and batch.
  PostTogether(
      {Call("1", "getSlot"), Call("2", "getSlot"), Call("3", "getSlot"), Call("4", "getSlot")});
  ASSERT_EQ(sent_->size(), 4u);
  EXPECT_EQ((*sent_)[1].body, Call("1", "getSlot"));
  EXPECT_EQ((*sent_)[2].body, Call("2", "getSlot"));
  EXPECT_EQ((*sent_)[3].body, "[" + Element(0, "getSlot") + "," + Element(1, "getSlot") + "]");
}

TEST_F(CoalesceTest, AFailedBatchIsTheFailureOfEachCall) {
  Busy();
  PostTogether({Call("1", "getSlot"), Call("2", "getBlockHeight")});
  ASSERT_EQ(sent_->size(), 2u);
  AnswerAt(1, absl::DeadlineExceededError("upstream timed out"));
  for (size_t i = 0; i < 2; ++i) {
    ASSERT_TRUE(answers_[i].has_value());
    EXPECT_NE(answers_[i]->body.find("upstream base failed: upstream timed out"), std::string::npos)
        << answers_[i]->body;
    EXPECT_NE(answers_[i]->body.find(R"("id":)" + std::to_string(i + 1)), std::string::npos);
  }
  EXPECT_EQ(sent_->size(), 1u);  // not sent again: the pool already spent the call's attempts
}

TEST_F(CoalesceTest, AnElementMissingFromTheAnswerIsSentAgainAlone) {
  Busy();
  PostTogether({Call("1", "getSlot"), Call("2", "getBlockHeight")});
  ASSERT_EQ(sent_->size(), 2u);
  AnswerAt(1, UpstreamResponse{200, "[" + Result("0", "41") + "]"});
  ASSERT_TRUE(answers_[0].has_value());
  EXPECT_EQ(answers_[0]->body, Result("1", "41"));
  EXPECT_FALSE(answers_[1].has_value());
  ASSERT_EQ(sent_->size(), 2u);
  EXPECT_EQ((*sent_)[1].body, Call("2", "getBlockHeight"));
  EXPECT_EQ(metrics_.upstream_batch_fallbacks.value(), 1u);
  AnswerAt(1, UpstreamResponse{200, Result("2", "40")});
  ASSERT_TRUE(answers_[1].has_value());
  EXPECT_EQ(answers_[1]->body, Result("2", "40"));
}

// Sent alone, a read that a node cannot answer now goes to another endpoint; inside a batch it
// is sent again alone so that it can.
TEST_F(CoalesceTest, AnElementANodeCannotAnswerNowIsSentAgainAlone) {
  Busy();
  PostTogether({Call("1", "getSlot"), Call("2", "getBlockHeight")});
  AnswerAt(
      1,
      UpstreamResponse{
          200,
          "[" + Result("0", "41") +
              R"(,{"jsonrpc":"2.0","error":{"code":-32005,"message":"Node is unhealthy"},"id":1}])"});
  ASSERT_TRUE(answers_[0].has_value());
  EXPECT_EQ(answers_[0]->body, Result("1", "41"));
  EXPECT_FALSE(answers_[1].has_value());
  ASSERT_EQ(sent_->size(), 2u);
  EXPECT_EQ((*sent_)[1].body, Call("2", "getBlockHeight"));
  EXPECT_EQ((*sent_)[1].policy, RetryPolicy::kSafe);
}

// MagicBlock's ER answers a whole batch with one error when one element names a method it does
// not have: the calls go alone, and the method that turns out unknown is not batched again.
TEST_F(CoalesceTest, AWholeBatchErrorSendsTheCallsAloneAndAnUnknownMethodStaysAlone) {
  Busy();
  PostTogether({Call("1", "getSlot"), Call("2", "getBlockHeight")});
  ASSERT_EQ(sent_->size(), 2u);
  const std::string not_found =
      R"({"jsonrpc":"2.0","error":{"code":-32601,"message":"Method not found"},"id":null})";
  AnswerAt(1, UpstreamResponse{200, not_found});
  ASSERT_EQ(sent_->size(), 3u);
  EXPECT_EQ((*sent_)[1].body, Call("1", "getSlot"));
  EXPECT_EQ((*sent_)[2].body, Call("2", "getBlockHeight"));
  EXPECT_EQ(metrics_.upstream_batch_fallbacks.value(), 2u);
  AnswerAt(
      2,
      UpstreamResponse{
          200, R"({"jsonrpc":"2.0","error":{"code":-32601,"message":"Method not found"},"id":2})"});
  AnswerAt(1, UpstreamResponse{200, Result("1", "41")});
  ASSERT_TRUE(answers_[0] && answers_[1]);
  EXPECT_EQ(answers_[0]->body, Result("1", "41"));
  EXPECT_NE(answers_[1]->body.find("-32601"), std::string::npos) << answers_[1]->body;

  // The unknown method now goes alone at once; the others still batch.
  PostTogether({Call("3", "getBlockHeight"), Call("4", "getSlot"), Call("5", "getEpochInfo")});
  ASSERT_EQ(sent_->size(), 3u);
  EXPECT_EQ((*sent_)[1].body, Call("3", "getBlockHeight"));
  EXPECT_EQ((*sent_)[2].body, "[" + Element(0, "getSlot") + "," + Element(1, "getEpochInfo") + "]");
}

TEST_F(CoalesceTest, AnHttpErrorForABatchSendsTheCallsAloneAndNoBatchFollowsForAWhile) {
  Busy();
  PostTogether({Call("1", "getSlot"), Call("2", "getBlockHeight")});
  AnswerAt(1, UpstreamResponse{413, "batch too large"});
  ASSERT_EQ(sent_->size(), 3u);
  EXPECT_EQ((*sent_)[1].body, Call("1", "getSlot"));
  EXPECT_EQ((*sent_)[2].body, Call("2", "getBlockHeight"));
  PostTogether({Call("3", "getSlot"), Call("4", "getSlot")});
  ASSERT_EQ(sent_->size(), 5u);
  EXPECT_EQ((*sent_)[3].body, Call("3", "getSlot"));
  EXPECT_EQ((*sent_)[4].body, Call("4", "getSlot"));
  EXPECT_EQ(metrics_.upstream_coalesced_batches.value(), 1u);
}

TEST_F(CoalesceTest, AnOverloadedAnswerToABatchIsEachCallsAnswerAsIfAlone) {
  Busy();
  PostTogether({Call("1", "getSlot"), Call("2", "getBlockHeight")});
  AnswerAt(1, UpstreamResponse{429, "Too Many Requests"});
  EXPECT_EQ(sent_->size(), 1u);  // nothing sent again: the pool already retried the batch
  for (size_t i = 0; i < 2; ++i) {
    ASSERT_TRUE(answers_[i].has_value());
    EXPECT_NE(answers_[i]->body.find("HTTP 429"), std::string::npos) << answers_[i]->body;
  }
  // Batches are not refused for it.
  PostTogether({Call("3", "getSlot"), Call("4", "getSlot")});
  ASSERT_EQ(sent_->size(), 2u);
  EXPECT_EQ((*sent_)[1].body.front(), '[');
}

TEST_F(CoalesceTest, ShutdownAnswersTheReadsWaitingForABatch) {
  Busy();
  std::vector<std::optional<HttpResponse>> answers(2);
  for (size_t i = 0; i < answers.size(); ++i) {
    HttpRequest request;
    request.method = "POST";
    request.target = "/";
    request.body = Call(std::to_string(i + 1), "getSlot");
    router_->Handle(std::move(request),
                    [&answers, i](HttpResponse response) { answers[i] = std::move(response); });
  }
  ASSERT_EQ(sent_->size(), 1u);  // both wait for the end of the turn
  router_->Shutdown();
  for (size_t i = 0; i < answers.size(); ++i) {
    ASSERT_TRUE(answers[i].has_value()) << i;
    EXPECT_NE(answers[i]->body.find("upstream base failed"), std::string::npos) << answers[i]->body;
  }
  ASSERT_TRUE(answer_.has_value());  // and the busy read
}

// The owner check of getAccountInfo runs on each coalesced element's answer: the one that shows
// the delegation program goes on to its ER alone.
TEST_F(CoalesceTest, CoalescedReadsAreCheckedByTheirOwnAnswers) {
  Busy();
  const Pubkey moved = Key(9);  // undelegated in the snapshot, delegated on base
  const Pubkey plain = Key(8);
  PostTogether({Call("1", "getAccountInfo", "[" + Quoted(moved) + "]"),
                Call("2", "getAccountInfo", "[" + Quoted(plain) + "]")});
  ASSERT_EQ(sent_->size(), 2u);
  AnswerAt(1, UpstreamResponse{200, "[" + AccountAnswer(0, kDelegationProgramId) + "," +
                                        AccountAnswer(1, kSystemProgram) + "]"});
  ASSERT_TRUE(answers_[1].has_value());
  EXPECT_EQ(answers_[1]->body, AccountAnswer(2, kSystemProgram));
  EXPECT_FALSE(answers_[0].has_value());
  // The moved account's record is read from base, then the read goes to its ER.
  ASSERT_EQ(sent_->size(), 2u);
  EXPECT_NE((*sent_)[1].body.find(DelegationRecordPda(moved).ToBase58()), std::string::npos);
  AnswerAt(1, UpstreamResponse{
                  200, ListAnswerBody(AccountValue(kDelegationProgramId, RecordData(kEr1)))});
  ASSERT_EQ(sent_->size(), 2u);
  EXPECT_EQ((*sent_)[1].target, "er1");
  AnswerAt(1, UpstreamResponse{200, AccountAnswer(1, kSystemProgram)});
  ASSERT_TRUE(answers_[0].has_value());
  EXPECT_EQ(answers_[0]->body, AccountAnswer(1, kSystemProgram));
  EXPECT_EQ(metrics_.owner_reroutes.value(), 1u);
}

// --- client batches: their calls join the batch waiting for a busy target ---

// Two calls to base of two client batches, as a batch of two.
std::vector<std::string> TwoClientBatches() {
  const std::string b64 = R"(,{"encoding":"base64"}])";
  return {"[" + Call("1", "getAccountInfo", "[" + Quoted(Key(9)) + b64) + "," +
              Call("2", "getAccountInfo", "[" + Quoted(Key(8)) + b64) + "]",
          "[" + Call(R"("c")", "getAccountInfo", "[" + Quoted(Key(7)) + b64) + "," +
              Call(R"("d")", "getAccountInfo", "[" + Quoted(Key(6)) + b64) + "]"};
}

TEST_F(CoalesceTest, ClientBatchesArrivingTogetherWhileTheTargetIsBusyShareOneUpstreamBatch) {
  Busy();
  PostTogether(TwoClientBatches());
  ASSERT_EQ(sent_->size(), 2u);
  const FakeClient::Sent& batch = (*sent_)[1];
  EXPECT_EQ(batch.target, "base");
  EXPECT_EQ(batch.policy, RetryPolicy::kSafe);
  const std::string b64 = R"(,{"encoding":"base64"}])";
  EXPECT_EQ(batch.body, "[" + Element(0, "getAccountInfo", "[" + Quoted(Key(9)) + b64) + "," +
                            Element(1, "getAccountInfo", "[" + Quoted(Key(8)) + b64) + "," +
                            Element(2, "getAccountInfo", "[" + Quoted(Key(7)) + b64) + "," +
                            Element(3, "getAccountInfo", "[" + Quoted(Key(6)) + b64) + "]");
  EXPECT_EQ(metrics_.upstream_coalesced_batches.value(), 1u);
  EXPECT_EQ(metrics_.upstream_coalesced_calls.value(), 4u);
  EXPECT_EQ(metrics_.upstream_batches.value(), 0u);

  // Answered out of order: each client batch gets its own calls' answers, under their ids.
  AnswerAt(1, UpstreamResponse{200, "[" + AccountAnswer(3, kSystemProgram) + "," +
                                        AccountAnswer(1, kSystemProgram) + "," +
                                        AccountAnswer(0, kSystemProgram) + "," +
                                        AccountAnswer(2, kSystemProgram) + "]"});
  ASSERT_TRUE(answers_[0] && answers_[1]);
  EXPECT_EQ(answers_[0]->body,
            "[" + AccountAnswer(1, kSystemProgram) + "," + AccountAnswer(2, kSystemProgram) + "]");
  EXPECT_NE(answers_[1]->body.find(R"("id":"c")"), std::string::npos) << answers_[1]->body;
  EXPECT_NE(answers_[1]->body.find(R"("id":"d")"), std::string::npos) << answers_[1]->body;
  EXPECT_EQ(answers_[1]->body.find(R"("id":0)"), std::string::npos) << answers_[1]->body;
}

// A client batch to an idle target leaves at once as its own upstream batch, and is in flight
// from then on: the client batch behind it in the same turn waits for the turn's batch.
TEST_F(CoalesceTest, AClientBatchToAnIdleTargetLeavesAtOnceAndTheNextOneWaitsForTheTurnsBatch) {
  PostTogether(TwoClientBatches());
  ASSERT_EQ(sent_->size(), 2u);
  EXPECT_EQ(metrics_.upstream_batches.value(), 1u);
  EXPECT_NE((*sent_)[0].body.find(Quoted(Key(9))), std::string::npos) << (*sent_)[0].body;
  EXPECT_EQ(metrics_.upstream_coalesced_batches.value(), 1u);
  EXPECT_EQ(metrics_.upstream_coalesced_calls.value(), 2u);
  EXPECT_NE((*sent_)[1].body.find(Quoted(Key(7))), std::string::npos) << (*sent_)[1].body;
  AnswerAt(1, UpstreamResponse{200, "[" + AccountAnswer(0, kSystemProgram) + "," +
                                        AccountAnswer(1, kSystemProgram) + "]"});
  AnswerAt(0, UpstreamResponse{200, "[" + AccountAnswer(0, kSystemProgram) + "," +
                                        AccountAnswer(1, kSystemProgram) + "]"});
  ASSERT_TRUE(answers_[0] && answers_[1]);
  EXPECT_EQ(answers_[0]->body,
            "[" + AccountAnswer(1, kSystemProgram) + "," + AccountAnswer(2, kSystemProgram) + "]");
}

// A balance judged by a probe joins the busy target's batch, and so does its probe; the
// probe still decides (here: null on the ER, so the balance goes to base).
TEST_F(CoalesceTest, ABalanceInAClientBatchToABusyTargetJoinsTheBatchWithItsProbe) {
  BothBusy();
  PostTogether(
      {"[" + Call(R"("b")", "getBalance", "[" + Quoted(Key(1)) + "]") + "," +
       Call(R"("s")", "getAccountInfo", "[" + Quoted(Key(1)) + R"(,{"encoding":"base64"}])") +
       "]"});
  ASSERT_EQ(sent_->size(), 3u);
  const FakeClient::Sent& batch = (*sent_)[2];
  EXPECT_EQ(batch.target, "er1");
  EXPECT_EQ(metrics_.upstream_batches.value(), 0u);
  EXPECT_EQ(metrics_.upstream_coalesced_batches.value(), 1u);
  EXPECT_EQ(metrics_.upstream_coalesced_calls.value(), 3u);
  // The balance, its probe, then the account read.
  const std::string k1 = Quoted(Key(1));
  EXPECT_EQ(
      batch.body,
      "[" + Element(0, "getBalance", "[" + k1 + "]") + "," +
          Element(1, "getAccountInfo",
                  "[" + k1 + R"(,{"encoding":"base64","dataSlice":{"offset":0,"length":0}}])") +
          "," + Element(2, "getAccountInfo", "[" + k1 + R"(,{"encoding":"base64"}])") + "]");
  AnswerAt(2,
           UpstreamResponse{
               200, R"([{"jsonrpc":"2.0","result":{"context":{"slot":3},"value":0},"id":0})"
                    R"(,{"jsonrpc":"2.0","result":{"context":{"slot":3},"value":null},"id":1},)" +
                        AccountAnswer(2, kSystemProgram) + "]"});
  EXPECT_FALSE(answers_[0].has_value()) << "the null probe sends the balance to base";
  ASSERT_EQ(sent_->size(), 3u);
  EXPECT_EQ((*sent_)[2].target, "base");
  EXPECT_NE((*sent_)[2].body.find("getBalance"), std::string::npos) << (*sent_)[2].body;
  AnswerAt(2, UpstreamResponse{
                  200, R"({"jsonrpc":"2.0","result":{"context":{"slot":9},"value":42},"id":"b"})"});
  ASSERT_TRUE(answers_[0].has_value());
  EXPECT_NE(answers_[0]->body.find(R"("value":42},"id":"b")"), std::string::npos)
      << answers_[0]->body;
  EXPECT_NE(answers_[0]->body.find(R"("id":"s")"), std::string::npos) << answers_[0]->body;
  EXPECT_EQ(metrics_.owner_reroutes.value(), 1u);
}

// --- the router's own reads: the parts of split account lists ---

TEST_F(CoalesceTest, PartsOfSplitListsArrivingTogetherLeaveAsOneBatchPerTarget) {
  BothBusy();
  PostTogether({Call("1", "getMultipleAccounts", ListParams({Key(1), Key(9)})),
                Call(R"("b")", "getMultipleAccounts", ListParams({Key(8), Key(1)}))});
  ASSERT_EQ(sent_->size(), 4u);
  const size_t to_er = SentTo("er1");
  const size_t to_base = SentTo("base");
  ASSERT_LT(to_er, sent_->size());
  ASSERT_LT(to_base, sent_->size());
  EXPECT_EQ((*sent_)[to_er].body,
            "[" + Element(0, "getMultipleAccounts", ListParams({Key(1)})) + "," +
                Element(1, "getMultipleAccounts", ListParams({Key(1)})) + "]");
  EXPECT_EQ((*sent_)[to_base].body,
            "[" + Element(0, "getMultipleAccounts", ListParams({Key(9)})) + "," +
                Element(1, "getMultipleAccounts", ListParams({Key(8)})) + "]");
  EXPECT_EQ((*sent_)[to_base].policy, RetryPolicy::kSafe);
  EXPECT_EQ(metrics_.upstream_coalesced_batches.value(), 2u);
  EXPECT_EQ(metrics_.upstream_coalesced_calls.value(), 4u);

  // Base answers out of order; er1 answers each part differently. Each list merges its own.
  const std::vector<std::string> base_values = {AccountValue("B9"), AccountValue("B8")};
  AnswerAt(to_base, UpstreamResponse{200, "[" + Result("1", ListResult(base_values[1], 60)) + "," +
                                              Result("0", ListResult(base_values[0], 60)) + "]"});
  EXPECT_FALSE(answers_[0] || answers_[1]);
  AnswerAt(SentTo("er1"),
           UpstreamResponse{200, "[" + Result("0", ListResult(AccountValue("A1"), 9)) + "," +
                                     Result("1", ListResult(AccountValue("A1b"), 9)) + "]"});
  ASSERT_TRUE(answers_[0] && answers_[1]);
  EXPECT_EQ(answers_[0]->body, Merged("1", AccountValue("A1") + "," + base_values[0], 60));
  EXPECT_EQ(answers_[1]->body, Merged(R"("b")", base_values[1] + "," + AccountValue("A1b"), 60));
  EXPECT_EQ(metrics_.rpc_split_accounts.value(), 2u);
}

TEST_F(CoalesceTest, APartANodeCannotAnswerNowIsSentAgainAloneAndItsListStillMerges) {
  ASSERT_NO_FATAL_FAILURE(TwoSplitLists());
  AnswerErParts();
  AnswerAt(SentTo("base"),
           UpstreamResponse{200, "[" + Result("1", ListResult(AccountValue("B8"), 60)) + "," +
                                     R"({"jsonrpc":"2.0","error":{"code":-32005,)"
                                     R"("message":"Node is unhealthy"},"id":0}])"});
  ASSERT_TRUE(answers_[1]);
  EXPECT_EQ(answers_[1]->body, Merged("2", AccountValue("A1") + "," + AccountValue("B8"), 60));
  EXPECT_FALSE(answers_[0]);
  // Key(9)'s part again, by itself, as the router asks for a part.
  ASSERT_EQ(sent_->size(), 3u);
  EXPECT_EQ((*sent_)[2].target, "base");
  EXPECT_EQ((*sent_)[2].body,
            R"({"jsonrpc":"2.0","id":1,"method":"getMultipleAccounts","params":)" +
                ListParams({Key(9)}) + "}");
  EXPECT_EQ(metrics_.upstream_batch_fallbacks.value(), 1u);
  AnswerAt(2, UpstreamResponse{200, ListAnswerBody(AccountValue("B9"), 61)});
  ASSERT_TRUE(answers_[0]);
  EXPECT_EQ(answers_[0]->body, Merged("1", AccountValue("A1") + "," + AccountValue("B9"), 61));
}

TEST_F(CoalesceTest, AFailedBatchOfPartsIsTheFailureOfEachList) {
  ASSERT_NO_FATAL_FAILURE(TwoSplitLists());
  AnswerErParts();
  AnswerAt(SentTo("base"), absl::DeadlineExceededError("upstream timed out"));
  for (size_t i : {0, 1}) {
    ASSERT_TRUE(answers_[i]);
    EXPECT_NE(answers_[i]->body.find("upstream base failed: upstream timed out"), std::string::npos)
        << answers_[i]->body;
  }
  EXPECT_EQ(sent_->size(), 2u);  // nothing sent again: the pool had its attempts
}

TEST_F(CoalesceTest, AWholeBatchErrorSendsThePartsAloneAndAnUnknownMethodStaysAlone) {
  ASSERT_NO_FATAL_FAILURE(TwoSplitLists());
  AnswerAt(SentTo("base"),
           UpstreamResponse{200, "[" + Result("0", ListResult(AccountValue("B9"), 60)) + "," +
                                     Result("1", ListResult(AccountValue("B8"), 60)) + "]"});
  // er1 answers the batch with one error object, as an upstream that fails a whole batch for a
  // method it does not know.
  const std::string unknown =
      R"({"jsonrpc":"2.0","error":{"code":-32601,"message":"Method not found"},"id":null})";
  AnswerAt(SentTo("er1"), UpstreamResponse{200, unknown});
  ASSERT_EQ(sent_->size(), 4u);  // each part again, alone
  EXPECT_EQ((*sent_)[2].target, "er1");
  EXPECT_EQ((*sent_)[3].target, "er1");
  EXPECT_EQ((*sent_)[2].body.front(), '{');
  AnswerAt(2, UpstreamResponse{200, unknown});
  AnswerAt(2, UpstreamResponse{200, ListAnswerBody(AccountValue("A1"), 9)});
  ASSERT_TRUE(answers_[0] && answers_[1]);
  EXPECT_NE(answers_[0]->body.find("-32601"), std::string::npos) << answers_[0]->body;
  EXPECT_EQ(answers_[1]->body, Merged("2", AccountValue("A1") + "," + AccountValue("B8"), 60));

  // From then on er1's parts go alone even while it is busy; base's still go together.
  PostTogether({Call("3", "getMultipleAccounts", ListParams({Key(1), Key(9)})),
                Call("4", "getMultipleAccounts", ListParams({Key(1), Key(8)}))});
  size_t to_er = 0;
  size_t to_base = 0;
  for (size_t i = 2; i < sent_->size(); ++i) {
    if ((*sent_)[i].target == "er1") {
      ++to_er;
      EXPECT_EQ((*sent_)[i].body.front(), '{') << (*sent_)[i].body;
    } else {
      ++to_base;
      EXPECT_EQ((*sent_)[i].body.front(), '[') << (*sent_)[i].body;
    }
  }
  EXPECT_EQ(to_er, 2u);
  EXPECT_EQ(to_base, 1u);
}

}  // namespace
}  // namespace switchyard::api_test
