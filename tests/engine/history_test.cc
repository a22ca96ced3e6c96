#include <gtest/gtest.h>

#include <algorithm>

#include "engine/event_codec.h"
#include "engine/event_text.h"
#include "engine/history_diff.h"
#include "fmt/format.h"
#include "tests/support/event_generator.h"

namespace switchyard {
namespace {

using testing::TestDelegation;
using testing::TestKey;

HistoryEntry Row(Slot slot, uint64_t seq, Event event, bool ignored = false) {
  return HistoryEntry{slot, seq, ignored, std::move(event)};
}

std::vector<HistoryEntry> SampleHistory() {
  DelegatedEvent first = TestDelegation(1, 10, 0xE1);
  Signature signature;
  signature.data()[0] = 7;
  first.signature = signature;
  DelegatedEvent second = TestDelegation(1, 30, 0xE2);
  second.source = EventSource::kRepair;
  return {Row(10, 0, first),
          Row(20, 1, UndelegatedEvent{TestKey(1), 20, signature, EventSource::kLive}),
          Row(30, 2, second), Row(25, 3, TestDelegation(1, 25, 0xE3), /*ignored=*/true)};
}

TEST(HistoryDiffTest, NamesEachKindOfChangeWithItsEvents) {
  std::vector<HistoryEntry> history = SampleHistory();
  std::sort(history.begin(), history.end(),
            [](const HistoryEntry& a, const HistoryEntry& b) { return a.slot < b.slot; });
  auto delegated = DiffAccount(TestKey(1), history, 5, 15);
  ASSERT_TRUE(delegated.has_value());
  EXPECT_EQ(delegated->change, DelegationChange::kDelegated);
  ASSERT_EQ(delegated->events.size(), 1u);
  EXPECT_EQ(delegated->events[0].slot, 10u);

  auto undelegated = DiffAccount(TestKey(1), history, 15, 22);
  ASSERT_TRUE(undelegated.has_value());
  EXPECT_EQ(undelegated->change, DelegationChange::kUndelegated);

  auto moved = DiffAccount(TestKey(1), history, 35, 15);  // either order
  ASSERT_TRUE(moved.has_value());
  EXPECT_EQ(moved->change, DelegationChange::kMoved);
  EXPECT_EQ(moved->before->validator, TestKey(0xE2));
  EXPECT_EQ(moved->after->validator, TestKey(0xE1));
  EXPECT_EQ(moved->events.size(), 3u);  // 20, 25 (ignored) and 30

  EXPECT_FALSE(DiffAccount(TestKey(1), history, 22, 24).has_value());  // undelegated at both
  EXPECT_FALSE(DiffAccount(TestKey(1), history, 11, 15).has_value());  // the same delegation
}

TEST(HistoryDiffTest, ADelegationToTheSameValidatorAgainIsRedelegated) {
  const std::vector<HistoryEntry> history = {
      Row(10, 0, TestDelegation(1, 10)),
      Row(20, 1, UndelegatedEvent{TestKey(1), 20, std::nullopt, EventSource::kLive}),
      Row(30, 2, TestDelegation(1, 30))};
  auto diff = DiffAccount(TestKey(1), history, 15, 35);
  ASSERT_TRUE(diff.has_value());
  EXPECT_EQ(diff->change, DelegationChange::kRedelegated);
}

TEST(HistoryStateTest, TheCauseIsTheLastCountedRowAtOrBelowTheSlot) {
  std::vector<HistoryEntry> history = SampleHistory();
  std::sort(history.begin(), history.end(),
            [](const HistoryEntry& a, const HistoryEntry& b) { return a.slot < b.slot; });
  AccountStateAtSlot at = AccountStateWithCauseAt(history, 27);
  ASSERT_TRUE(at.state.has_value());
  EXPECT_FALSE(at.state->delegated);
  ASSERT_TRUE(at.cause.has_value());
  EXPECT_EQ(at.cause->slot, 20u);  // the ignored row of slot 25 does not count
  at = AccountStateWithCauseAt(history, 5);
  EXPECT_FALSE(at.state.has_value());
  EXPECT_FALSE(at.cause.has_value());
}

TEST(EventTextTest, RowsShowUnknownSignaturesAndTheirSource) {
  const std::vector<HistoryEntry> history = SampleHistory();
  const std::string first = HistoryEntryToJson(history[0]);
  EXPECT_EQ(first,
            fmt::format(R"({{"seq":0,"ignored":false,"kind":"delegated","account":"{}",)"
                        R"("validator":"{}","owner":"{}","slot":10,"lamports":1001,)"
                        R"("commit_frequency_ms":30000,"signature":"{}","source":"live"}})",
                        TestKey(1).ToBase58(), TestKey(0xE1).ToBase58(), TestKey(0xAA).ToBase58(),
                        std::get<DelegatedEvent>(history[0].event).signature->ToBase58()));
  EXPECT_NE(HistoryEntryToJson(history[2]).find(R"("signature":"unknown","source":"repair")"),
            std::string::npos);
  EXPECT_EQ(HistoryEntryToCsv(history[1]),
            fmt::format("20,1,undelegated,{},,,,,{},live,false", TestKey(1).ToBase58(),
                        std::get<UndelegatedEvent>(history[1].event).signature->ToBase58()));
  const std::string_view header = HistoryCsvHeader();
  const std::string row = HistoryEntryToCsv(history[3]);
  EXPECT_EQ(std::count(header.begin(), header.end(), ','), std::count(row.begin(), row.end(), ','));
}

}  // namespace
}  // namespace switchyard
