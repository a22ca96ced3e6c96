// The request pipeline (api/rpc) over a fake UpstreamClient: no sockets, no server. The test
// thread is the worker: it calls Handle and runs the worker's io_context.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "tests/api/pipeline_fixture.h"

// GCC 12 reports a false -Wrestrict on `"literal" + std::string` (GCC bug 105329).
#pragma GCC diagnostic ignored "-Wrestrict"

namespace switchyard::api_test {
namespace {

TEST_F(PipelineTest, AReadGoesToTheTargetOfItsAccountAndItsAnswerPassesThrough) {
  const std::string body = R"({"jsonrpc":"2.0","id":3,"method":"getAccountInfo","params":[")" +
                           Key(1).ToBase58() + R"(",{"encoding":"base64"}]})";
  Post(body);
  ASSERT_EQ(sent_->size(), 1u);
  EXPECT_EQ(sent_->front().target, "er1");
  EXPECT_EQ(sent_->front().body, body);
  EXPECT_EQ(sent_->front().policy, RetryPolicy::kSafe);
  EXPECT_FALSE(sent_->front().large_answer);  // one account: pipelined with others
  EXPECT_FALSE(answer_.has_value());
  const std::string upstream = AccountAnswer(3, "11111111111111111111111111111111");
  Answer(200, upstream);
  ASSERT_TRUE(answer_.has_value());
  EXPECT_EQ(answer_->status, 200u);
  EXPECT_EQ(answer_->body, upstream);

  Post(R"({"jsonrpc":"2.0","id":4,"method":"getAccountInfo","params":[")" + Key(9).ToBase58() +
       R"("]})");
  ASSERT_EQ(sent_->size(), 1u);
  EXPECT_EQ(sent_->front().target, "base");
}

TEST_F(PipelineTest, AClusterReadGoesToBase) {
  Post(R"({"jsonrpc":"2.0","id":1,"method":"getSlot"})");
  ASSERT_EQ(sent_->size(), 1u);
  EXPECT_EQ(sent_->front().target, "base");
  Answer(200, R"({"jsonrpc":"2.0","result":42,"id":1})");
  EXPECT_EQ(answer_->body, R"({"jsonrpc":"2.0","result":42,"id":1})");
}

TEST_F(PipelineTest, ABatchOfPlainForwardsIsOneUpstreamBatchAnsweredInRequestOrder) {
  Post(R"([{"jsonrpc":"2.0","id":"a","method":"getSlot"},)"
       R"({"jsonrpc":"2.0","id":"b","method":"getBlockHeight"},)"
       R"({"jsonrpc":"2.0","id":"c","method":"getEpochInfo"}])");
  ASSERT_EQ(sent_->size(), 1u);
  EXPECT_EQ(sent_->front().target, "base");
  EXPECT_EQ(sent_->front().body.front(), '[');
  // The upstream answers out of order, under the ids the router gave it.
  Answer(200, R"([{"jsonrpc":"2.0","result":3,"id":2},{"jsonrpc":"2.0","result":1,"id":0},)"
              R"({"jsonrpc":"2.0","result":2,"id":1}])");
  ASSERT_TRUE(answer_.has_value());
  EXPECT_EQ(answer_->body,
            R"([{"jsonrpc":"2.0","result":1,"id":"a"},{"jsonrpc":"2.0","result":2,"id":"b"},)"
            R"({"jsonrpc":"2.0","result":3,"id":"c"}])");
  EXPECT_EQ(metrics_.upstream_batches.value(), 1u);
}

TEST_F(PipelineTest, AnUpstreamFailureIsAJsonRpcErrorOfTheCall) {
  Post(R"({"jsonrpc":"2.0","id":8,"method":"getSlot"})");
  ASSERT_EQ(sent_->size(), 1u);
  FakeClient::Sent sent = std::move(sent_->front());
  sent_->pop_front();
  sent.done(absl::UnavailableError("connection refused"));
  io_.poll();
  ASSERT_TRUE(answer_.has_value());
  EXPECT_NE(answer_->body.find(R"("error":{"code":)"), std::string::npos) << answer_->body;
  EXPECT_NE(answer_->body.find(R"("id":8)"), std::string::npos) << answer_->body;
}

TEST_F(PipelineTest, TheGateHoldsARequestUntilItsSlotAndAnswers412AtItsDeadline) {
  Post(R"({"jsonrpc":"2.0","id":1,"method":"getSlot"})", {{"X-Min-Slot", "150"}});
  EXPECT_TRUE(sent_->empty());
  EXPECT_FALSE(answer_.has_value());
  snapshots_.Publish(SnapshotBuilder().Delegate(Key(1), kEr1).Build(150));
  io_.run_for(std::chrono::milliseconds(5));  // the listener's post reaches the gate
  io_.restart();
  ASSERT_EQ(sent_->size(), 1u) << "released when the applied slot reached 150";
  Answer(200, R"({"jsonrpc":"2.0","result":150,"id":1})");
  EXPECT_EQ(answer_->status, 200u);

  // Nothing reaches 999: the gate's timer answers 412 after max_gate_wait (30 ms).
  Post(R"({"jsonrpc":"2.0","id":2,"method":"getSlot"})", {{"X-Min-Slot", "999"}});
  EXPECT_FALSE(answer_.has_value());
  io_.run_for(std::chrono::milliseconds(200));
  ASSERT_TRUE(answer_.has_value());
  EXPECT_EQ(answer_->status, 412u);
  EXPECT_EQ(metrics_.gate_rejections.value(), 1u);
  EXPECT_TRUE(sent_->empty());
}

TEST_F(PipelineTest, ShutdownReachesTheUpstreams) {
  router_->Shutdown();
  EXPECT_TRUE(*shut_down_);
}

// --- owner verification of a single read (Verification::kOwnerOfAnswer) ---

TEST_F(PipelineTest, BaseShowingTheDelegationProgramSendsTheReadToTheErItsRecordNames) {
  const Pubkey account = Key(9);  // undelegated in the snapshot
  const std::string body = R"({"jsonrpc":"2.0","id":5,"method":"getAccountInfo","params":[)" +
                           Quoted(account) + R"(,{"encoding":"base64"}]})";
  Post(body);
  ASSERT_EQ(sent_->size(), 1u);
  EXPECT_EQ(Oldest().target, "base");
  Answer(200, AccountAnswer(5, kDelegationProgramId));
  // The record is read from base: one getMultipleAccounts of its PDA.
  ASSERT_EQ(sent_->size(), 1u);
  EXPECT_EQ(Oldest().target, "base");
  EXPECT_NE(Oldest().body.find("getMultipleAccounts"), std::string::npos);
  EXPECT_NE(Oldest().body.find(DelegationRecordPda(account).ToBase58()), std::string::npos);
  Answer(200, ListAnswerBody(AccountValue(kDelegationProgramId, RecordData(kEr1))));
  ASSERT_EQ(sent_->size(), 1u);
  EXPECT_EQ(Oldest().target, "er1");
  EXPECT_EQ(Oldest().body, body);
  EXPECT_FALSE(answer_.has_value());
  const std::string er_answer = AccountAnswer(5, kSystemProgram);
  Answer(200, er_answer);
  ASSERT_TRUE(answer_.has_value());
  EXPECT_EQ(answer_->body, er_answer);
  EXPECT_EQ(metrics_.owner_reroutes.value(), 1u);
}

// Reads whose owner is checked in their own answer share an upstream batch; the check runs
// on each element's answer, and only the one that shows the delegation program is re-routed.
TEST_F(PipelineTest, BatchedReadsAreCheckedByTheirOwnAnswersAndRerouteAlone) {
  const Pubkey moved = Key(9);  // undelegated in the snapshot, delegated on base
  const Pubkey plain = Key(8);
  const std::string moved_call =
      R"({"jsonrpc":"2.0","id":"m","method":"getAccountInfo","params":[)" + Quoted(moved) +
      R"(,{"encoding":"base64"}]})";
  Post("[" + moved_call + R"(,{"jsonrpc":"2.0","id":"p","method":"getAccountInfo","params":[)" +
       Quoted(plain) + R"(,{"encoding":"base64"}]}])");
  ASSERT_EQ(sent_->size(), 1u);
  EXPECT_EQ(Oldest().target, "base");
  EXPECT_EQ(Oldest().body.front(), '[');
  EXPECT_NE(Oldest().body.find(moved.ToBase58()), std::string::npos);
  EXPECT_NE(Oldest().body.find(plain.ToBase58()), std::string::npos);
  Answer(200, "[" + AccountAnswer(0, kDelegationProgramId) + "," +
                  AccountAnswer(1, kSystemProgram) + "]");
  EXPECT_FALSE(answer_.has_value());
  // Only the read that showed the delegation program goes on: its record, then its ER.
  ASSERT_EQ(sent_->size(), 1u);
  EXPECT_NE(Oldest().body.find(DelegationRecordPda(moved).ToBase58()), std::string::npos);
  Answer(200, ListAnswerBody(AccountValue(kDelegationProgramId, RecordData(kEr1))));
  ASSERT_EQ(sent_->size(), 1u);
  EXPECT_EQ(Oldest().target, "er1");
  EXPECT_EQ(Oldest().body, moved_call);
  Answer(200, AccountAnswer(7, kSystemProgram));
  ASSERT_TRUE(answer_.has_value());
  const std::string body = answer_->body;
  EXPECT_EQ(body.front(), '[');
  EXPECT_LT(body.find(R"("id":"m")"), body.find(R"("id":"p")")) << body;
  EXPECT_EQ(body.find(kDelegationProgramId), std::string::npos) << body;
  EXPECT_EQ(metrics_.upstream_batches.value(), 1u);
  EXPECT_EQ(metrics_.owner_reroutes.value(), 1u);
}

TEST_F(PipelineTest, ARecordThatCannotBeReadLeavesBasesAnswer) {
  Post(R"({"jsonrpc":"2.0","id":5,"method":"getAccountInfo","params":[)" + Quoted(Key(9)) + "]}");
  const std::string base_answer = AccountAnswer(5, kDelegationProgramId);
  Answer(200, base_answer);
  ASSERT_EQ(sent_->size(), 1u);
  Fail(absl::DeadlineExceededError("timed out"));  // the record read times out
  ASSERT_TRUE(answer_.has_value());
  EXPECT_EQ(answer_->body, base_answer);
  EXPECT_TRUE(sent_->empty());
  EXPECT_EQ(metrics_.owner_reroutes.value(), 0u);
}

TEST_F(PipelineTest, AnErWithoutADelegatedAccountSendsTheReadToBase) {
  const std::string body =
      R"({"jsonrpc":"2.0","id":6,"method":"getAccountInfo","params":[)" + Quoted(Key(1)) + "]}";
  Post(body);
  EXPECT_EQ(Oldest().target, "er1");
  Answer(200, R"({"jsonrpc":"2.0","result":{"context":{"slot":3},"value":null},"id":6})");
  ASSERT_EQ(sent_->size(), 1u);
  EXPECT_EQ(Oldest().target, "base");
  EXPECT_EQ(Oldest().body, body);
  // The re-asked upstream fails: that is the answer.
  Fail(absl::UnavailableError("connection refused"));
  ASSERT_TRUE(answer_.has_value());
  EXPECT_NE(answer_->body.find("-32603"), std::string::npos) << answer_->body;
  EXPECT_NE(answer_->body.find("upstream base failed"), std::string::npos) << answer_->body;
}

// --- the owner probe (Verification::kOwnerProbe) ---

TEST_F(PipelineTest, ABalanceGoesOutWithAProbeAndANullProbeSendsItToBase) {
  const std::string body = R"({"jsonrpc":"2.0","id":7,"method":"getBalance","params":[)" +
                           Quoted(Key(1)) + R"(,{"commitment":"confirmed"}]})";
  Post(body);
  ASSERT_EQ(sent_->size(), 2u);
  EXPECT_EQ((*sent_)[0].target, "er1");
  EXPECT_EQ((*sent_)[0].body, body);
  EXPECT_EQ((*sent_)[1].target, "er1");
  EXPECT_NE(
      (*sent_)[1].body.find(R"("dataSlice":{"offset":0,"length":0},"commitment":"confirmed")"),
      std::string::npos)
      << (*sent_)[1].body;
  Answer(200, R"({"jsonrpc":"2.0","result":{"context":{"slot":3},"value":0},"id":7})");
  EXPECT_FALSE(answer_.has_value()) << "the probe decides";
  Answer(200, R"({"jsonrpc":"2.0","result":{"context":{"slot":3},"value":null},"id":1})");
  ASSERT_EQ(sent_->size(), 1u);
  EXPECT_EQ(Oldest().target, "base");
  const std::string base_answer =
      R"({"jsonrpc":"2.0","result":{"context":{"slot":9},"value":42},"id":7})";
  Answer(200, base_answer);
  ASSERT_TRUE(answer_.has_value());
  EXPECT_EQ(answer_->body, base_answer);
}

// In a batch the probe rides along: a balance of a delegated account goes to its ER in one
// upstream batch with its probe; a null probe sends the balance to base, alone.
TEST_F(PipelineTest, ABatchedBalanceTakesItsProbeAlongAndANullProbeSendsItToBase) {
  Post(R"([{"jsonrpc":"2.0","id":"b","method":"getBalance","params":[)" + Quoted(Key(1)) +
       R"(]},{"jsonrpc":"2.0","id":"s","method":"getAccountInfo","params":[)" + Quoted(Key(1)) +
       R"(,{"encoding":"base64"}]}])");
  ASSERT_EQ(sent_->size(), 1u);
  EXPECT_EQ(Oldest().target, "er1");
  EXPECT_NE(Oldest().body.find(R"("id":2,"method":"getAccountInfo")"), std::string::npos)
      << Oldest().body;
  EXPECT_NE(Oldest().body.find(R"("dataSlice":{"offset":0,"length":0})"), std::string::npos);
  Answer(200, R"([{"jsonrpc":"2.0","result":{"context":{"slot":3},"value":0},"id":0},)" +
                  AccountAnswer(1, kSystemProgram) +
                  R"(,{"jsonrpc":"2.0","result":{"context":{"slot":3},"value":null},"id":2}])");
  EXPECT_FALSE(answer_.has_value()) << "the null probe sends the balance to base";
  ASSERT_EQ(sent_->size(), 1u);
  EXPECT_EQ(Oldest().target, "base");
  EXPECT_NE(Oldest().body.find("getBalance"), std::string::npos);
  Answer(200, R"({"jsonrpc":"2.0","result":{"context":{"slot":9},"value":42},"id":"b"})");
  ASSERT_TRUE(answer_.has_value());
  EXPECT_NE(answer_->body.find(R"("value":42},"id":"b")"), std::string::npos) << answer_->body;
  EXPECT_NE(answer_->body.find(R"("owner":"11111111111111111111111111111111")"), std::string::npos)
      << answer_->body;
  EXPECT_EQ(metrics_.upstream_batches.value(), 1u);
}

TEST_F(PipelineTest, AFailedProbeLeavesTheAnswerAsItIs) {
  Post(R"({"jsonrpc":"2.0","id":7,"method":"getBalance","params":[)" + Quoted(Key(1)) + "]}");
  ASSERT_EQ(sent_->size(), 2u);
  const std::string er_answer =
      R"({"jsonrpc":"2.0","result":{"context":{"slot":3},"value":0},"id":7})";
  // The probe fails first, then the call answers.
  FakeClient::Sent call = std::move((*sent_)[0]);
  sent_->pop_front();
  Fail(absl::UnavailableError("reset"));
  EXPECT_FALSE(answer_.has_value());
  call.done(UpstreamResponse{200, er_answer});
  io_.poll();
  ASSERT_TRUE(answer_.has_value());
  EXPECT_EQ(answer_->body, er_answer);
  EXPECT_TRUE(sent_->empty());
}

// --- split account lists (kSplitAccounts, merged by key) ---

TEST_F(PipelineTest, AListOnTwoChainsIsSplitAndMergedInKeyOrderWithBasesContext) {
  Post(R"({"jsonrpc":"2.0","id":"m","method":"getMultipleAccounts","params":[[)" + Quoted(Key(1)) +
       "," + Quoted(Key(9)) + R"(],{"encoding":"base64"}]})");
  ASSERT_EQ(sent_->size(), 2u);
  EXPECT_EQ((*sent_)[0].target, "er1");
  EXPECT_NE((*sent_)[0].body.find("[[" + Quoted(Key(1)) + R"(],{"encoding":"base64"}])"),
            std::string::npos)
      << (*sent_)[0].body;
  EXPECT_EQ((*sent_)[1].target, "base");
  EXPECT_NE((*sent_)[1].body.find("[[" + Quoted(Key(9)) + "]"), std::string::npos);
  // Account lists may answer large: neither part is pipelined with other requests.
  EXPECT_TRUE((*sent_)[0].large_answer);
  EXPECT_TRUE((*sent_)[1].large_answer);
  Answer(200, ListAnswerBody(AccountValue("A1"), 3));
  EXPECT_FALSE(answer_.has_value());
  Answer(200, ListAnswerBody(AccountValue("B9"), 50));
  ASSERT_TRUE(answer_.has_value());
  EXPECT_EQ(answer_->body, R"({"jsonrpc":"2.0","result":{"context":{"slot":50},"value":[)" +
                               AccountValue("A1") + "," + AccountValue("B9") + R"(]},"id":"m"})");
  EXPECT_EQ(metrics_.rpc_split_accounts.value(), 1u);
}

TEST_F(PipelineTest, OneFailedLegOfASplitIsTheAnswer) {
  Post(R"({"jsonrpc":"2.0","id":2,"method":"getMultipleAccounts","params":[[)" + Quoted(Key(1)) +
       "," + Quoted(Key(9)) + "]]}");
  ASSERT_EQ(sent_->size(), 2u);
  Answer(200, ListAnswerBody(AccountValue("A1")));
  Fail(absl::DeadlineExceededError("upstream timed out"));
  ASSERT_TRUE(answer_.has_value());
  EXPECT_NE(answer_->body.find("-32603"), std::string::npos) << answer_->body;
  EXPECT_NE(answer_->body.find("upstream base failed: upstream timed out"), std::string::npos)
      << answer_->body;
}

TEST_F(PipelineTest, AVerifiedListReasksBothChainsAtOnceAndSplicesTheAnswers) {
  snapshots_.Publish(SnapshotBuilder().Delegate(Key(1), kEr1).Build(100, /*limbo_since=*/90));
  // Key(1) on er1, Key(9) and Key(8) on base.
  Post(R"({"jsonrpc":"2.0","id":3,"method":"getMultipleAccounts","params":[[)" + Quoted(Key(9)) +
       "," + Quoted(Key(1)) + "," + Quoted(Key(8)) + "]]}");
  ASSERT_EQ(sent_->size(), 2u);
  EXPECT_EQ((*sent_)[0].target, "base");
  EXPECT_EQ((*sent_)[1].target, "er1");
  // Base shows Key(9) owned by the delegation program; er1 does not have Key(1).
  Answer(200, ListAnswerBody(AccountValue(kDelegationProgramId) + "," + AccountValue("B8"), 60));
  Answer(200, ListAnswerBody("null", 4));
  // Both re-asks are out at once: Key(1) of base, Key(9)'s record of base.
  ASSERT_EQ(sent_->size(), 2u);
  EXPECT_EQ((*sent_)[0].target, "base");
  EXPECT_NE((*sent_)[0].body.find("[[" + Quoted(Key(1)) + "]"), std::string::npos);
  EXPECT_NE((*sent_)[1].body.find(DelegationRecordPda(Key(9)).ToBase58()), std::string::npos);
  Answer(200, ListAnswerBody(AccountValue("B1"), 61));
  EXPECT_FALSE(answer_.has_value());
  Answer(200, ListAnswerBody(AccountValue(kDelegationProgramId, RecordData(kEr1))));
  ASSERT_EQ(sent_->size(), 1u);
  EXPECT_EQ(Oldest().target, "er1");
  EXPECT_NE(Oldest().body.find("[[" + Quoted(Key(9)) + "]"), std::string::npos);
  Answer(200, ListAnswerBody(AccountValue("E9"), 5));
  ASSERT_TRUE(answer_.has_value());
  EXPECT_EQ(answer_->body, R"({"jsonrpc":"2.0","result":{"context":{"slot":60},"value":[)" +
                               AccountValue("E9") + "," + AccountValue("B1") + "," +
                               AccountValue("B8") + R"(]},"id":3})");
  EXPECT_EQ(metrics_.owner_reroutes.value(), 2u);
}

TEST_F(PipelineTest, AFailedReaskOfAVerifiedListIsTheAnswer) {
  snapshots_.Publish(SnapshotBuilder().Delegate(Key(1), kEr1).Build(100, /*limbo_since=*/90));
  Post(R"({"jsonrpc":"2.0","id":3,"method":"getMultipleAccounts","params":[[)" + Quoted(Key(1)) +
       "]]}");
  ASSERT_EQ(sent_->size(), 1u);
  EXPECT_EQ(Oldest().target, "er1");
  Answer(200, ListAnswerBody("null"));
  ASSERT_EQ(sent_->size(), 1u);
  EXPECT_EQ(Oldest().target, "base");
  Answer(200, R"({"jsonrpc":"2.0","error":{"code":-32005,"message":"busy"},"id":1})");
  ASSERT_TRUE(answer_.has_value());
  EXPECT_EQ(answer_->body, R"({"jsonrpc":"2.0","error":{"code":-32005,"message":"busy"},"id":3})");
}

TEST_F(PipelineTest, AListWholeOnAnErTakesBasesContextWhenBaseIsReasked) {
  snapshots_.Publish(SnapshotBuilder().Delegate(Key(1), kEr1).Build(100, /*limbo_since=*/90));
  Post(R"({"jsonrpc":"2.0","id":3,"method":"getMultipleAccounts","params":[[)" + Quoted(Key(1)) +
       "]]}");
  Answer(200, ListAnswerBody("null", 4));
  ASSERT_EQ(sent_->size(), 1u);
  EXPECT_EQ(Oldest().target, "base");
  Answer(200, ListAnswerBody(AccountValue("B1"), 61));
  ASSERT_TRUE(answer_.has_value());
  EXPECT_EQ(answer_->body, R"({"jsonrpc":"2.0","result":{"context":{"slot":61},"value":[)" +
                               AccountValue("B1") + R"(]},"id":3})");
}

// --- signatures (kSignatures) ---

TEST_F(PipelineTest, AnUnknownTransactionIsAskedOfEveryoneAndTheFirstNonNullWins) {
  std::array<uint8_t, 64> bytes;
  bytes.fill(3);
  const std::string sig = Signature(bytes).ToBase58();
  Post(R"({"jsonrpc":"2.0","id":4,"method":"getTransaction","params":[")" + sig + R"("]})");
  ASSERT_EQ(sent_->size(), 2u);
  EXPECT_EQ((*sent_)[0].target, "base");
  EXPECT_EQ((*sent_)[1].target, "er1");
  Answer(200, R"({"jsonrpc":"2.0","result":null,"id":1})");
  Answer(200, R"({"jsonrpc":"2.0","result":{"slot":12},"id":1})");
  ASSERT_TRUE(answer_.has_value());
  EXPECT_EQ(answer_->body, R"({"jsonrpc":"2.0","result":{"slot":12},"id":4})");
  EXPECT_EQ(metrics_.rpc_signature_fanouts.value(), 1u);
}

TEST_F(PipelineTest, SignatureStatusesTakeEachElementFromTheFirstAnswerThatHasIt) {
  std::array<uint8_t, 64> bytes;
  bytes.fill(3);
  const std::string a = Signature(bytes).ToBase58();
  bytes.fill(4);
  const std::string b = Signature(bytes).ToBase58();
  Post(R"({"jsonrpc":"2.0","id":4,"method":"getSignatureStatuses","params":[[")" + a + R"(",")" +
       b + R"("]]})");
  ASSERT_EQ(sent_->size(), 2u);
  Fail(absl::UnavailableError("base down"));  // one leg fails: the other still answers
  Answer(200, ListAnswerBody(R"(null,{"slot":8})", 9));
  ASSERT_TRUE(answer_.has_value());
  EXPECT_EQ(
      answer_->body,
      R"({"jsonrpc":"2.0","result":{"context":{"slot":9},"value":[null,{"slot":8}]},"id":4})");
}

// --- transactions in limbo (Verification::kByRecords) ---

TEST_F(PipelineTest, ATransactionInLimboIsPlacedByItsRecordsOrRefusedWhenBaseCannotSay) {
  snapshots_.Publish(SnapshotBuilder().Delegate(Key(1), kEr1).Build(100, /*limbo_since=*/90));
  const std::string tx = TransactionBase64(MakeTransaction(Key(1), {}, Key(30)));
  const std::string body = R"({"jsonrpc":"2.0","id":9,"method":"sendTransaction","params":[")" +
                           tx + R"(",{"encoding":"base64"}]})";
  Post(body);
  ASSERT_EQ(sent_->size(), 1u);
  EXPECT_EQ(Oldest().target, "base");
  EXPECT_NE(Oldest().body.find(DelegationRecordPda(Key(1)).ToBase58()), std::string::npos);
  // Base has no record any more: the account is undelegated, the transaction goes to base.
  Answer(200, ListAnswerBody("null"));
  ASSERT_EQ(sent_->size(), 1u);
  EXPECT_EQ(Oldest().target, "base");
  EXPECT_EQ(Oldest().body, body);
  EXPECT_EQ(Oldest().policy, RetryPolicy::kOtherEndpointOnly);
  Answer(200, R"({"jsonrpc":"2.0","result":"sig","id":9})");
  EXPECT_EQ(answer_->body, R"({"jsonrpc":"2.0","result":"sig","id":9})");
  EXPECT_EQ(metrics_.limbo_transaction_reroutes.value(), 1u);

  Post(body);
  Fail(absl::DeadlineExceededError("timed out"));
  ASSERT_TRUE(answer_.has_value());
  EXPECT_NE(answer_->body.find("the delegation state is being repaired"), std::string::npos)
      << answer_->body;
  EXPECT_TRUE(sent_->empty());
}

// --- the router's own methods ---

TEST_F(PipelineTest, BlockhashForAccountsAsksTheErOfTheAccountsForItsLatestBlockhash) {
  Post(R"({"jsonrpc":"2.0","id":1,"method":"getBlockhashForAccounts","params":[[)" +
       Quoted(Key(1)) + "]]}");
  ASSERT_EQ(sent_->size(), 1u);
  EXPECT_EQ(Oldest().target, "er1");
  EXPECT_NE(Oldest().body.find(R"("method":"getLatestBlockhash")"), std::string::npos);
  Answer(200, R"({"jsonrpc":"2.0","result":{"context":{"slot":1},"value":{"blockhash":"H",)"
              R"("lastValidBlockHeight":5}},"id":1})");
  EXPECT_EQ(answer_->body,
            R"({"jsonrpc":"2.0","result":{"blockhash":"H","lastValidBlockHeight":5},"id":1})");
}

TEST_F(PipelineTest, ABlockhashThatCannotBeReadIsAnInternalError) {
  Post(R"({"jsonrpc":"2.0","id":1,"method":"getBlockhashForAccounts","params":[[]]})");
  ASSERT_EQ(sent_->size(), 1u);
  EXPECT_EQ(Oldest().target, "base");
  Fail(absl::DeadlineExceededError("timed out"));
  ASSERT_TRUE(answer_.has_value());
  EXPECT_NE(answer_->body.find("-32603"), std::string::npos) << answer_->body;
  EXPECT_NE(answer_->body.find("upstream base failed: timed out"), std::string::npos)
      << answer_->body;
  Post(R"({"jsonrpc":"2.0","id":2,"method":"getBlockhashForAccounts","params":[[]]})");
  Answer(200, R"({"jsonrpc":"2.0","result":{"context":{"slot":1}},"id":1})");
  EXPECT_NE(answer_->body.find("upstream answered no blockhash"), std::string::npos)
      << answer_->body;
}

TEST_F(PipelineTest, LocalMethodsSendNothing) {
  Post(R"({"jsonrpc":"2.0","id":1,"method":"getDelegationStatus","params":[)" + Quoted(Key(9)) +
       "]}");
  EXPECT_TRUE(sent_->empty());
  ASSERT_TRUE(answer_.has_value());
  EXPECT_EQ(answer_->body, R"({"jsonrpc":"2.0","result":{"isDelegated":false},"id":1})");
  Post(R"({"jsonrpc":"2.0","id":2,"method":"getIdentity"})");
  EXPECT_TRUE(sent_->empty());
  EXPECT_NE(answer_->body.find(kEr1.ToBase58()), std::string::npos) << answer_->body;
}

// --- the awaitable adapter ---

TEST_F(PipelineTest, AnUpstreamThatAnswersBeforeSendReturnsStillResumesThePlan) {
  // After Shutdown the fake fails every Send inside Send itself.
  router_->Shutdown();
  Post(R"({"jsonrpc":"2.0","id":5,"method":"getAccountInfo","params":[)" + Quoted(Key(9)) + "]}");
  ASSERT_TRUE(answer_.has_value());
  EXPECT_NE(answer_->body.find("upstream base failed: shut down"), std::string::npos)
      << answer_->body;
  Post(R"({"jsonrpc":"2.0","id":6,"method":"getMultipleAccounts","params":[[)" + Quoted(Key(1)) +
       "," + Quoted(Key(9)) + "]]}");
  ASSERT_TRUE(answer_.has_value());
  EXPECT_NE(answer_->body.find("shut down"), std::string::npos) << answer_->body;
}

}  // namespace
}  // namespace switchyard::api_test
