#include "api/routing/route_decision.h"

#include <gtest/gtest.h>

#include "solana/delegation.h"
#include "tests/api/test_support.h"

// GCC 12 reports a false -Wrestrict on `"literal" + std::string` (GCC bug 105329).
#pragma GCC diagnostic ignored "-Wrestrict"

namespace switchyard {
namespace {

using api_test::Key;
using api_test::MakeTransaction;
using api_test::SnapshotBuilder;
using api_test::TransactionBase64;

const Pubkey kEr1 = Key(0xE1);
const Pubkey kEr2 = Key(0xE2);
const Pubkey kUnknownEr = Key(0xE9);

class RouteDecisionTest : public testing::Test {
 protected:
  RouteDecisionTest() {
    table_.er_by_identity[kEr1] = "er1";
    table_.er_by_identity[kEr2] = "er2";
    table_.er_targets = {"er1", "er2"};
    table_.default_er = "er1";
    table_.method_rules = {{"getAsset*", "indexer"},
                           {"getAssetProof", "proofs"},
                           {"get*", "wide"},
                           {"getSlot", "base"}};
    snapshot_ = SnapshotBuilder()
                    .Delegate(Key(1), kEr1)
                    .Delegate(Key(2), kEr2)
                    .Delegate(Key(3), Pubkey())
                    .Delegate(Key(4), kUnknownEr)
                    .Delegate(Key(5), kEr1)
                    .Build();
  }

  RouteDecision Decide(const std::string& method, const std::string& params) {
    RpcCall call;
    call.id = "1";
    call.method = method;
    call.params = params;
    return DecideRoute(
        call, *snapshot_, table_,
        [&](const Pubkey& t) -> const std::vector<Pubkey>* {
          auto it = tables_.find(t);
          return it == tables_.end() ? nullptr : &it->second;
        },
        [&](const Signature& s) -> std::optional<std::string> {
          auto it = signatures_.find(s);
          if (it == signatures_.end()) return std::nullopt;
          return it->second;
        });
  }

  static std::string Quoted(const Pubkey& key) { return "\"" + key.ToBase58() + "\""; }

  RoutingTable table_;
  std::shared_ptr<const Snapshot> snapshot_;
  absl::flat_hash_map<Pubkey, std::vector<Pubkey>> tables_;
  absl::flat_hash_map<Signature, std::string> signatures_;
};

TEST_F(RouteDecisionTest, SingleAccountReadsGoToTheAccountsEr) {
  for (const std::string& method :
       std::vector<std::string>{"getAccountInfo", "getBalance", "getTokenAccountBalance"}) {
    RouteDecision d = Decide(method, "[" + Quoted(Key(2)) + "]");
    EXPECT_EQ(d.action, RouteAction::kForward) << method;
    EXPECT_EQ(d.target, "er2") << method;
    EXPECT_TRUE(d.delegated);
    EXPECT_EQ(d.account, Key(2));
  }
}

TEST_F(RouteDecisionTest, UndelegatedAccountGoesToBase) {
  RouteDecision d = Decide("getAccountInfo", "[" + Quoted(Key(9)) + ",{\"encoding\":\"base64\"}]");
  EXPECT_EQ(d.action, RouteAction::kForward);
  EXPECT_EQ(d.target, "base");
  EXPECT_FALSE(d.delegated);
}

TEST_F(RouteDecisionTest, AllZeroAuthorityGoesToTheDefaultEr) {
  EXPECT_EQ(Decide("getBalance", "[" + Quoted(Key(3)) + "]").target, "er1");
  table_.default_er.clear();
  RouteDecision d = Decide("getBalance", "[" + Quoted(Key(3)) + "]");
  EXPECT_EQ(d.action, RouteAction::kError);
  EXPECT_EQ(RpcErrorFromStatus(d.error).code, -32604);
}

TEST_F(RouteDecisionTest, UnconfiguredValidatorIsAnErrorThatNamesIt) {
  RouteDecision d = Decide("getAccountInfo", "[" + Quoted(Key(4)) + "]");
  ASSERT_EQ(d.action, RouteAction::kError);
  RpcError error = RpcErrorFromStatus(d.error);
  EXPECT_EQ(error.code, -32604);
  EXPECT_NE(error.message.find(kUnknownEr.ToBase58()), std::string::npos) << error.message;
}

TEST_F(RouteDecisionTest, AnUndecodablePubkeyIsARouterErrorAndAMissingOneInvalidParams) {
  EXPECT_EQ(RpcErrorFromStatus(Decide("getBalance", R"(["nope"])").error).code, -32604);
  EXPECT_EQ(RpcErrorFromStatus(Decide("getBalance", "[]").error).code, -32602);
  EXPECT_EQ(RpcErrorFromStatus(Decide("getBalance", "[5]").error).code, -32602);
}

TEST_F(RouteDecisionTest, MultipleAccountsSplitByTargetInOrder) {
  RouteDecision d = Decide("getMultipleAccounts", "[[" + Quoted(Key(9)) + "," + Quoted(Key(1)) +
                                                      "," + Quoted(Key(2)) + "," + Quoted(Key(8)) +
                                                      "," + Quoted(Key(5)) + "]]");
  ASSERT_EQ(d.action, RouteAction::kSplitAccounts);
  ASSERT_EQ(d.parts.size(), 3u);
  EXPECT_EQ(d.parts[0].target, "base");
  EXPECT_EQ(d.parts[0].indexes, (std::vector<size_t>{0, 3}));
  EXPECT_EQ(d.parts[1].target, "er1");
  EXPECT_EQ(d.parts[1].indexes, (std::vector<size_t>{1, 4}));
  EXPECT_EQ(d.parts[2].target, "er2");
  EXPECT_EQ(d.parts[2].indexes, (std::vector<size_t>{2}));
  EXPECT_EQ(d.keys.size(), 5u);
}

TEST_F(RouteDecisionTest, MultipleAccountsOnOneTargetAreForwardedWhole) {
  RouteDecision d =
      Decide("getMultipleAccounts", "[[" + Quoted(Key(1)) + "," + Quoted(Key(5)) + "]]");
  EXPECT_EQ(d.action, RouteAction::kForward);
  EXPECT_EQ(d.target, "er1");
}

TEST_F(RouteDecisionTest, MultipleAccountsCarryTheDecodedKeysAndTheParamsAfterTheList) {
  RouteDecision d = Decide("getMultipleAccounts", "[[" + Quoted(Key(9)) + "," + Quoted(Key(1)) +
                                                      R"(], {"encoding" : "base64"},7])");
  ASSERT_EQ(d.action, RouteAction::kSplitAccounts);
  EXPECT_EQ(d.accounts, (std::vector<Pubkey>{Key(9), Key(1)}));
  EXPECT_EQ(d.params_after_list, R"(,{"encoding" : "base64"},7)");
  RouteDecision whole = Decide("getMultipleAccounts", "[[" + Quoted(Key(5)) + "]]");
  ASSERT_EQ(whole.action, RouteAction::kForward);
  EXPECT_EQ(whole.accounts, (std::vector<Pubkey>{Key(5)}));
  EXPECT_EQ(whole.params_after_list, "");
}

TEST_F(RouteDecisionTest, VerificationFollowsTheMethodAndTheConfiguration) {
  const std::string one = "[" + Quoted(Key(2)) + "]";
  const std::string list = "[[" + Quoted(Key(2)) + "]]";
  const std::string split = "[[" + Quoted(Key(2)) + "," + Quoted(Key(9)) + "]]";
  table_.verify = {true, true};
  EXPECT_EQ(Decide("getAccountInfo", one).verification, Verification::kOwnerOfAnswer);
  EXPECT_EQ(Decide("getBalance", one).verification, Verification::kOwnerProbe);
  EXPECT_EQ(Decide("getTokenAccountBalance", one).verification, Verification::kOwnerProbe);
  EXPECT_EQ(Decide("getMultipleAccounts", list).verification, Verification::kAccountList);
  EXPECT_EQ(Decide("getMultipleAccounts", list).merge, MergeKind::kAccountsByKey);
  EXPECT_EQ(Decide("getMultipleAccounts", split).verification, Verification::kAccountList);
  EXPECT_EQ(Decide("getMultipleAccounts", "[[]]").verification, Verification::kNone);
  EXPECT_EQ(Decide("getSlot", "[]").verification, Verification::kNone);
  EXPECT_EQ(Decide("getSlot", "[]").merge, MergeKind::kPassThrough);
  table_.verify = {true, false};
  EXPECT_EQ(Decide("getMultipleAccounts", list).verification, Verification::kNone);
  EXPECT_EQ(Decide("getMultipleAccounts", list).merge, MergeKind::kPassThrough);
  EXPECT_EQ(Decide("getMultipleAccounts", split).verification, Verification::kNone);
  EXPECT_EQ(Decide("getMultipleAccounts", split).merge, MergeKind::kAccountsByKey);
  table_.verify = {false, true};
  EXPECT_EQ(Decide("getAccountInfo", one).verification, Verification::kNone);
  table_.verify = {false, false};
  EXPECT_EQ(Decide("getAccountInfo", one).verification, Verification::kNone);
  EXPECT_EQ(Decide("getBalance", one).verification, Verification::kNone);
  // In limbo every verification applies, whatever the configuration.
  snapshot_ = SnapshotBuilder().Delegate(Key(2), kEr2).Build(100, /*limbo_since=*/90);
  EXPECT_EQ(Decide("getAccountInfo", one).verification, Verification::kOwnerOfAnswer);
  EXPECT_EQ(Decide("getMultipleAccounts", list).verification, Verification::kAccountList);
}

TEST_F(RouteDecisionTest, ResendFollowsWhetherTheMethodActsOnTheChain) {
  EXPECT_EQ(Decide("getSlot", "[]").resend, Resend::kSafe);
  EXPECT_EQ(Decide("getAccountInfo", "[" + Quoted(Key(2)) + "]").resend, Resend::kSafe);
  EXPECT_EQ(Decide("requestAirdrop", "[" + Quoted(Key(2)) + ",1]").resend, Resend::kNever);
  Transaction tx = MakeTransaction(Key(20), {Key(21)}, Key(30));
  const std::string params = "[\"" + TransactionBase64(tx) + "\",{\"encoding\":\"base64\"}]";
  EXPECT_EQ(Decide("sendTransaction", params).resend, Resend::kOtherEndpointOnly);
  EXPECT_EQ(Decide("simulateTransaction", params).resend, Resend::kSafe);
}

TEST_F(RouteDecisionTest, ATransactionInLimboIsPlacedByItsRecords) {
  snapshot_ = SnapshotBuilder()
                  .Delegate(Key(1), kEr1)
                  .Delegate(Key(5), kEr1)
                  .Build(100, /*limbo_since=*/90);
  Transaction tx = MakeTransaction(Key(1), {Key(5)}, Key(30));
  RouteDecision d =
      Decide("sendTransaction", "[\"" + TransactionBase64(tx) + "\",{\"encoding\":\"base64\"}]");
  EXPECT_EQ(d.action, RouteAction::kForward);
  EXPECT_EQ(d.verification, Verification::kByRecords);
  EXPECT_EQ(d.writable_in_doubt, (std::vector<Pubkey>{Key(1), Key(5)}));
  // Calling the delegation program still goes to base without a records check.
  tx = MakeTransaction(Key(1), {Key(2)}, DelegationProgramId());
  d = Decide("sendTransaction", "[\"" + TransactionBase64(tx) + "\",{\"encoding\":\"base64\"}]");
  EXPECT_EQ(d.target, "base");
  EXPECT_EQ(d.verification, Verification::kNone);
}

TEST_F(RouteDecisionTest, UpstreamBatchesGroupThePlainForwardsByTarget) {
  const std::string tx_a = TransactionBase64(MakeTransaction(Key(20), {}, Key(30), 1));
  const std::string tx_b = TransactionBase64(MakeTransaction(Key(21), {}, Key(30), 2));
  absl::StatusOr<RpcBody> body = ParseRpcBody(
      "[" + std::string(R"({"jsonrpc":"2.0","id":0,"method":"getSlot"},)") +
          R"({"jsonrpc":"2.0","id":1,"method":"getAccountInfo","params":[)" + Quoted(Key(1)) +
          "]}," + R"({"jsonrpc":"2.0","id":2,"method":"getBalance","params":[)" + Quoted(Key(5)) +
          "]}," + R"({"jsonrpc":"2.0","id":3,"method":"getEpochInfo"},)" +
          R"({"jsonrpc":"2.0","method":"getBlockHeight"},)" +
          R"({"jsonrpc":"2.0","id":5,"method":"sendTransaction","params":[")" + tx_a +
          R"(",{"encoding":"base64"}]},)" +
          R"({"jsonrpc":"2.0","id":6,"method":"sendTransaction","params":[")" + tx_b +
          R"(",{"encoding":"base64"}]},)" +
          R"({"jsonrpc":"2.0","id":7,"method":"requestAirdrop","params":[)" + Quoted(Key(22)) +
          R"(,1]},)" + R"({"jsonrpc":"2.0","id":8,"method":"requestAirdrop","params":[)" +
          Quoted(Key(23)) + R"(,1]},)" + R"({"jsonrpc":"2.0","id":9,"method":"getIdentity"},)" +
          R"({"jsonrpc":"2.0","id":10,"method":"getAssetsByOwner"},)" +
          R"({"jsonrpc":"2.0","id":11,"method":"getBlockTime","params":[1]}])",
      {});
  ASSERT_TRUE(body.ok()) << body.status();
  auto decide_all = [&] {
    std::vector<RouteDecision> decisions;
    for (const RpcCall& call : body->calls) {
      decisions.push_back(DecideRoute(
          call, *snapshot_, table_,
          [](const Pubkey&) -> const std::vector<Pubkey>* { return nullptr; },
          [](const Signature&) -> std::optional<std::string> { return std::nullopt; }));
    }
    return decisions;
  };
  table_.verify = {false, false};
  std::vector<RouteDecision> decisions = decide_all();
  // The table's rules send get* (but getSlot) to "wide".
  std::vector<UpstreamBatch> batches = PlanUpstreamBatches(*body, decisions);
  ASSERT_EQ(batches.size(), 2u);
  EXPECT_EQ(batches[0].target, "er1");
  EXPECT_EQ(batches[0].calls, (std::vector<size_t>{1, 2}));
  EXPECT_EQ(batches[1].target, "wide");
  EXPECT_EQ(batches[1].calls, (std::vector<size_t>{3, 11}));
  // With verification the same: getAccountInfo is checked by its own answer and getBalance by
  // a probe that rides in the same batch; base still has only getSlot.
  table_.verify = {true, true};
  batches = PlanUpstreamBatches(*body, decide_all());
  ASSERT_EQ(batches.size(), 2u);
  EXPECT_EQ(batches[0].target, "er1");
  EXPECT_EQ(batches[0].calls, (std::vector<size_t>{1, 2}));
  EXPECT_EQ(batches[1].target, "wide");
  // A single call is never put into an upstream batch.
  body->batch = false;
  EXPECT_TRUE(PlanUpstreamBatches(*body, decisions).empty());
}

TEST_F(RouteDecisionTest, MoreThanTheLimitOfAccountsIsInvalidParams) {
  std::string list;
  for (int i = 0; i < 101; ++i) list += std::string(i ? "," : "") + Quoted(Key(9));
  RouteDecision d = Decide("getMultipleAccounts", "[[" + list + "]]");
  ASSERT_EQ(d.action, RouteAction::kError);
  EXPECT_EQ(RpcErrorFromStatus(d.error).code, -32602);
}

TEST_F(RouteDecisionTest, TransactionWithOnlyUndelegatedWritablesGoesToBase) {
  Transaction tx = MakeTransaction(Key(20), {Key(21)}, Key(30));
  RouteDecision d =
      Decide("sendTransaction", "[\"" + TransactionBase64(tx) + "\",{\"encoding\":\"base64\"}]");
  EXPECT_EQ(d.action, RouteAction::kForward);
  EXPECT_EQ(d.target, "base");
  EXPECT_EQ(d.signature, tx.id());
}

TEST_F(RouteDecisionTest, TransactionDelegatedToOneErGoesThere) {
  Transaction tx = MakeTransaction(Key(1), {Key(5)}, Key(30));
  RouteDecision d = Decide("simulateTransaction",
                           "[\"" + TransactionBase64(tx) + "\",{\"encoding\":\"base64\"}]");
  EXPECT_EQ(d.action, RouteAction::kForward);
  EXPECT_EQ(d.target, "er1");
}

TEST_F(RouteDecisionTest, Base58TransactionIsTheDefaultEncoding) {
  Transaction tx = MakeTransaction(Key(2), {}, Key(30));
  RouteDecision d = Decide("sendTransaction", "[\"" + api_test::TransactionBase58(tx) + "\"]");
  EXPECT_EQ(d.target, "er2");
}

TEST_F(RouteDecisionTest, TransactionOnTwoErsIsAClearError) {
  Transaction tx = MakeTransaction(Key(1), {Key(2)}, Key(30));
  RouteDecision d =
      Decide("sendTransaction", "[\"" + TransactionBase64(tx) + "\",{\"encoding\":\"base64\"}]");
  ASSERT_EQ(d.action, RouteAction::kError);
  RpcError error = RpcErrorFromStatus(d.error);
  EXPECT_EQ(error.code, -32604);
  EXPECT_NE(error.message.find("two ERs"), std::string::npos) << error.message;
}

TEST_F(RouteDecisionTest, TransactionMixingDelegatedAndUndelegatedIsAClearError) {
  Transaction tx = MakeTransaction(Key(20), {Key(1)}, Key(30));
  RouteDecision d =
      Decide("sendTransaction", "[\"" + TransactionBase64(tx) + "\",{\"encoding\":\"base64\"}]");
  ASSERT_EQ(d.action, RouteAction::kError);
  EXPECT_EQ(RpcErrorFromStatus(d.error).code, -32604);
  EXPECT_NE(RpcErrorFromStatus(d.error).message.find("undelegated"), std::string::npos);
}

TEST_F(RouteDecisionTest, TransactionCallingTheDelegationProgramGoesToBase) {
  Transaction tx = MakeTransaction(Key(1), {Key(2)}, DelegationProgramId());
  RouteDecision d =
      Decide("sendTransaction", "[\"" + TransactionBase64(tx) + "\",{\"encoding\":\"base64\"}]");
  EXPECT_EQ(d.action, RouteAction::kForward);
  EXPECT_EQ(d.target, "base");
}

TEST_F(RouteDecisionTest, V0TransactionNeedsItsLookupTablesThenRoutesByThem) {
  Transaction tx = MakeTransaction(Key(1), {}, Key(30));
  tx.versioned = true;
  tx.version = 0;
  tx.lookups.push_back(AddressTableLookup{Key(0x77), {1}, {}});
  const std::string params = "[\"" + TransactionBase64(tx) + "\",{\"encoding\":\"base64\"}]";
  RouteDecision d = Decide("sendTransaction", params);
  ASSERT_EQ(d.action, RouteAction::kNeedLookupTables);
  EXPECT_EQ(d.missing_tables, std::vector<Pubkey>{Key(0x77)});

  tables_[Key(0x77)] = {Key(40), Key(5)};  // index 1 → Key(5), delegated to er1
  d = Decide("sendTransaction", params);
  EXPECT_EQ(d.action, RouteAction::kForward);
  EXPECT_EQ(d.target, "er1");
  tables_[Key(0x77)] = {Key(40), Key(2)};  // → er2: conflicts with the payer on er1
  EXPECT_EQ(Decide("sendTransaction", params).action, RouteAction::kError);
}

TEST_F(RouteDecisionTest, UndecodableTransactionIsARouterErrorAndAnUnknownEncodingInvalidParams) {
  RouteDecision d = Decide("sendTransaction", R"(["AAAA",{"encoding":"base64"}])");
  EXPECT_EQ(RpcErrorFromStatus(d.error).code, -32604);
  d = Decide("sendTransaction", R"(["AAAA",{"encoding":"hex"}])");
  EXPECT_EQ(RpcErrorFromStatus(d.error).code, -32602);
}

TEST_F(RouteDecisionTest, SignaturesSplitByMemoryAndUnknownOnesFanOut) {
  std::array<uint8_t, 64> bytes;
  std::vector<Signature> sigs;
  for (uint8_t i = 1; i <= 3; ++i) {
    bytes.fill(i);
    sigs.push_back(Signature(bytes));
  }
  signatures_[sigs[0]] = "er1";
  signatures_[sigs[2]] = "base";
  RouteDecision d =
      Decide("getSignatureStatuses", "[[\"" + sigs[0].ToBase58() + "\",\"" + sigs[1].ToBase58() +
                                         "\",\"" + sigs[2].ToBase58() + "\"]]");
  ASSERT_EQ(d.action, RouteAction::kSignatures);
  ASSERT_EQ(d.parts.size(), 2u);
  EXPECT_EQ(d.parts[0].target, "er1");
  EXPECT_EQ(d.parts[0].indexes, std::vector<size_t>{0});
  EXPECT_EQ(d.parts[1].target, "base");
  EXPECT_EQ(d.parts[1].indexes, std::vector<size_t>{2});
  EXPECT_EQ(d.unknown, std::vector<size_t>{1});

  d = Decide("getTransaction", "[\"" + sigs[0].ToBase58() + "\"]");
  EXPECT_EQ(d.action, RouteAction::kForward);
  EXPECT_EQ(d.target, "er1");
  d = Decide("getTransaction", "[\"" + sigs[1].ToBase58() + "\"]");
  EXPECT_EQ(d.action, RouteAction::kSignatures);
  EXPECT_EQ(d.unknown, std::vector<size_t>{0});
}

TEST_F(RouteDecisionTest, EmptyListsGoToBaseWhole) {
  RouteDecision d = Decide("getSignatureStatuses", "[[]]");
  EXPECT_EQ(d.action, RouteAction::kForward);
  EXPECT_EQ(d.target, "base");
  d = Decide("getMultipleAccounts", "[[]]");
  EXPECT_EQ(d.action, RouteAction::kForward);
  EXPECT_EQ(d.target, "base");
}

TEST_F(RouteDecisionTest, OtherMethodsFollowLongestPrefixRules) {
  EXPECT_EQ(Decide("getAssetsByOwner", "[]").target, "indexer");
  EXPECT_EQ(Decide("getAssetProof", "[]").target, "proofs");  // exact beats prefix
  EXPECT_EQ(Decide("getSlot", "[]").target, "base");          // exact beats "get*"
  EXPECT_EQ(Decide("getProgramAccounts", "[]").target, "wide");
  table_.method_rules.clear();
  EXPECT_EQ(Decide("getProgramAccounts", "[]").target, "base");
  EXPECT_EQ(Decide("getLatestBlockhash", "[]").target, "base");
}

TEST_F(RouteDecisionTest, UnknownMethodIsMethodNotFoundUnlessForwarded) {
  RouteDecision d = Decide("fooBar", "[]");
  ASSERT_EQ(d.action, RouteAction::kError);
  EXPECT_EQ(RpcErrorFromStatus(d.error).code, -32601);
  table_.forward_unknown_methods = true;
  EXPECT_EQ(Decide("fooBar", "[]").target, "base");
}

TEST_F(RouteDecisionTest, RouterMethodsAreAnsweredLocally) {
  EXPECT_EQ(Decide("getIdentity", "[]").local, LocalMethod::kIdentity);
  EXPECT_EQ(Decide("getRoutes", "[]").local, LocalMethod::kRoutes);
  EXPECT_EQ(Decide("getIdentity", "[]").action, RouteAction::kLocal);
  RouteDecision d = Decide("getDelegationStatus", "[" + Quoted(Key(1)) + "]");
  EXPECT_EQ(d.action, RouteAction::kLocal);
  EXPECT_EQ(d.local, LocalMethod::kDelegationStatus);
  EXPECT_EQ(d.account, Key(1));
  EXPECT_EQ(RpcErrorFromStatus(Decide("getDelegationStatus", R"(["nope"])").error).code, -32604);
  EXPECT_EQ(RpcErrorFromStatus(Decide("getDelegationStatus", "[]").error).code, -32602);
}

TEST_F(RouteDecisionTest, BlockhashForAccountsAsksTheErOfTheFirstDelegatedAccount) {
  RouteDecision d = Decide("getBlockhashForAccounts", "[[" + Quoted(Key(9)) + "," + Quoted(Key(2)) +
                                                          "," + Quoted(Key(1)) + "]]");
  EXPECT_EQ(d.action, RouteAction::kLatestBlockhash);
  EXPECT_EQ(d.merge, MergeKind::kResultValue);
  EXPECT_EQ(d.target, "er2");
  EXPECT_EQ(Decide("getBlockhashForAccounts", "[[" + Quoted(Key(9)) + "]]").target, "base");
  EXPECT_EQ(Decide("getBlockhashForAccounts", "[[]]").target, "base");
  // A key after the first delegated one is not looked at.
  EXPECT_EQ(Decide("getBlockhashForAccounts", "[[" + Quoted(Key(1)) + R"(,"nope"]])").target,
            "er1");
  EXPECT_EQ(RpcErrorFromStatus(Decide("getBlockhashForAccounts", R"([["nope"]])").error).code,
            -32604);
}

TEST_F(RouteDecisionTest, SignatureMergeFollowsTheMethod) {
  std::array<uint8_t, 64> bytes;
  bytes.fill(9);
  const std::string sig = Signature(bytes).ToBase58();
  EXPECT_EQ(Decide("getTransaction", "[\"" + sig + "\"]").merge, MergeKind::kFirstTransaction);
  EXPECT_EQ(Decide("getSignatureStatuses", "[[\"" + sig + "\"]]").merge,
            MergeKind::kStatusesBySignature);
}

}  // namespace
}  // namespace switchyard
