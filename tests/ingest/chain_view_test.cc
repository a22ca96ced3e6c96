#include "ingest/chain_view.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "solana/base64.h"
#include "solana/delegation.h"
#include "tests/support/event_generator.h"

namespace switchyard {
namespace {

using testing::TestKey;

std::string AccountJson(const Pubkey& key, const Pubkey& owner, std::string_view data) {
  return fmt::format(
      R"({{"pubkey":"{}","account":{{"lamports":1000,"owner":"{}","data":["{}","base64"],)"
      R"("executable":false,"rentEpoch":0,"space":{}}}}})",
      key.ToBase58(), owner.ToBase58(), Base64Encode(data), data.size());
}

std::string Response(Slot slot, const std::vector<std::string>& accounts) {
  std::string joined;
  for (const auto& a : accounts) joined += (joined.empty() ? "" : ",") + a;
  return fmt::format(
      R"({{"jsonrpc":"2.0","id":1,"result":{{"context":{{"slot":{}}},"value":[{}]}}}})", slot,
      joined);
}

DelegationRecord Record(uint8_t validator, Slot slot) {
  DelegationRecord r;
  r.authority = TestKey(validator);
  r.owner = TestKey(0xAA);
  r.delegation_slot = slot;
  r.lamports = 5000;
  r.commit_frequency_ms = 30000;
  return r;
}

TEST(ChainViewTest, PairsDelegatedAccountsWithTheirRecordsByPda) {
  const Pubkey program = DelegationProgramId();
  const Pubkey a = TestKey(1);
  const Pubkey b = TestKey(2);
  const Pubkey orphan = TestKey(3);  // owned by the program, but no record
  const std::string body = Response(
      77,
      {AccountJson(a, program, "account a data"),
       AccountJson(DelegationRecordPda(a), program, EncodeDelegationRecord(Record(9, 70))),
       AccountJson(b, program, ""),
       AccountJson(DelegationRecordPda(b), program, EncodeDelegationRecord(Record(8, 71))),
       AccountJson(DelegationMetadataPda(b), program, "meta"), AccountJson(orphan, program, "")});
  auto snapshot = ParseProgramAccountsResponse(body);
  ASSERT_TRUE(snapshot.ok()) << snapshot.status();
  EXPECT_EQ(snapshot->context_slot, 77u);
  ASSERT_EQ(snapshot->accounts.size(), 6u);
  EXPECT_EQ(snapshot->accounts[0].data, "account a data");
  ChainViewCounters counters;
  const std::vector<DelegatedEvent> delegations = DelegationsOf(*snapshot, &counters);
  ASSERT_EQ(delegations.size(), 2u);
  EXPECT_EQ(delegations[0].account, a);
  EXPECT_EQ(delegations[0].validator, TestKey(9));
  EXPECT_EQ(delegations[0].slot, 70u);
  EXPECT_EQ(delegations[0].lamports, 5000u);
  EXPECT_EQ(delegations[1].account, b);
  EXPECT_EQ(delegations[1].validator, TestKey(8));
  EXPECT_EQ(counters.records_malformed, 0u);
}

TEST(ChainViewTest, AWrongSizedRecordIsCountedAndSkipped) {
  const Pubkey program = DelegationProgramId();
  const Pubkey a = TestKey(1);
  auto snapshot = ParseProgramAccountsResponse(
      Response(5, {AccountJson(a, program, ""),
                   AccountJson(DelegationRecordPda(a), program, std::string(95, '\x64'))}));
  ASSERT_TRUE(snapshot.ok());
  ChainViewCounters counters;
  EXPECT_TRUE(DelegationsOf(*snapshot, &counters).empty());
  EXPECT_EQ(counters.records_malformed, 1u);
}

TEST(ChainViewTest, MalformedResponsesAreClearErrors) {
  EXPECT_FALSE(ParseProgramAccountsResponse("not json").ok());
  auto no_context = ParseProgramAccountsResponse(R"({"jsonrpc":"2.0","id":1,"result":[]})");
  ASSERT_FALSE(no_context.ok());
  EXPECT_NE(std::string(no_context.status().message()).find("withContext"), std::string::npos);
  auto error = ParseProgramAccountsResponse(
      R"({"jsonrpc":"2.0","id":1,"error":{"code":-32010,"message":"excluded"}})");
  ASSERT_FALSE(error.ok());
  EXPECT_EQ(error.status().code(), absl::StatusCode::kUnavailable);
  auto bad_key = ParseProgramAccountsResponse(
      R"({"result":{"context":{"slot":1},"value":[{"pubkey":"0OIl","account":{}}]}})");
  ASSERT_FALSE(bad_key.ok());
  EXPECT_NE(std::string(bad_key.status().message()).find("pubkey"), std::string::npos);
}

TEST(ChainViewTest, ReconcileWritesOnlyTheDifferences) {
  auto delegated = [](uint8_t validator, Slot slot) {
    AccountState s;
    s.delegated = true;
    s.validator = TestKey(validator);
    s.owner_program = TestKey(0xAA);
    s.delegation_slot = slot;
    s.last_event_slot = slot;
    s.lamports = 1000 + 1;
    s.commit_frequency_ms = 30000;
    return s;
  };
  std::map<Pubkey, AccountState> state;
  state[TestKey(1)] = delegated(0xEE, 10);  // same on chain: nothing to write
  state[TestKey(2)] = delegated(0xEE, 10);  // gone from the chain: Undelegated
  state[TestKey(3)] = delegated(0xEE, 10);  // re-delegated elsewhere: Delegated
  AccountState tombstone;
  tombstone.last_event_slot = 12;
  state[TestKey(4)] = tombstone;  // undelegated, and not on chain: nothing
  std::vector<DelegatedEvent> chain = {testing::TestDelegation(1, 10),
                                       testing::TestDelegation(3, 20, 0x77),
                                       testing::TestDelegation(5, 21)};
  const std::vector<Event> events = Reconcile(state, chain, 30);
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(std::get<UndelegatedEvent>(events[0]).account, TestKey(2));
  EXPECT_EQ(std::get<UndelegatedEvent>(events[0]).slot, 30u);
  EXPECT_EQ(std::get<DelegatedEvent>(events[1]).account, TestKey(3));
  EXPECT_EQ(std::get<DelegatedEvent>(events[1]).validator, TestKey(0x77));
  EXPECT_EQ(std::get<DelegatedEvent>(events[2]).account, TestKey(5));
}

TEST(ChainViewTest, TheDelegateCandidatesAreTheSuccessfulSignaturesAtTheDelegationSlot) {
  auto signature = [](uint8_t first) {
    std::array<uint8_t, 64> bytes{};
    bytes[0] = first;
    return Signature(bytes);
  };
  auto entry = [](const Signature& s, Slot slot, std::string_view err) {
    return fmt::format(R"({{"blockTime":1,"confirmationStatus":"finalized","err":{},)"
                       R"("memo":null,"signature":"{}","slot":{}}})",
                       err, s.ToBase58(), slot);
  };
  const Signature a = signature(1);
  const Signature b = signature(2);
  const Signature c = signature(3);
  const std::string body =
      fmt::format(R"({{"jsonrpc":"2.0","id":1,"result":[{},{},{}]}})", entry(a, 40, "null"),
                  entry(b, 30, R"({"InstructionError":[0,"Custom"]})"), entry(c, 30, "null"));
  auto listed = ParseSignaturesResponse(body);
  ASSERT_TRUE(listed.ok()) << listed.status();
  ASSERT_EQ(listed->size(), 3u);
  EXPECT_TRUE((*listed)[1].failed);
  EXPECT_EQ((*listed)[2].slot, 30u);
  EXPECT_EQ(DelegateCandidates(*listed, 30), std::vector<Signature>{c});
  EXPECT_TRUE(DelegateCandidates(*listed, 31).empty());
  EXPECT_EQ(ParseSignaturesResponse(R"({"jsonrpc":"2.0","id":1,"error":{"code":-32601}})")
                .status()
                .code(),
            absl::StatusCode::kUnavailable);
}

TEST(ChainViewTest, ReconcileStampsItsSourceAndLeavesUndelegationsUnsigned) {
  std::map<Pubkey, AccountState> state;
  AccountState gone;
  gone.delegated = true;
  gone.validator = TestKey(0xEE);
  state[TestKey(2)] = gone;
  const std::vector<Event> events =
      Reconcile(state, {testing::TestDelegation(5, 21)}, 30, EventSource::kRepair);
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(std::get<UndelegatedEvent>(events[0]).source, EventSource::kRepair);
  EXPECT_FALSE(std::get<UndelegatedEvent>(events[0]).signature.has_value());
  EXPECT_EQ(std::get<DelegatedEvent>(events[1]).source, EventSource::kRepair);
}

}  // namespace
}  // namespace switchyard
