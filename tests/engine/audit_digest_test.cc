#include "engine/audit_digest.h"

#include <gtest/gtest.h>

#include "tests/support/event_generator.h"

namespace switchyard {
namespace {

using testing::TestKey;

HistoryEntry Row(Slot slot, uint64_t seq, Event event, bool ignored = false) {
  HistoryEntry row;
  row.slot = slot;
  row.seq = seq;
  row.ignored = ignored;
  row.event = std::move(event);
  return row;
}

DelegatedEvent Delegation(uint8_t account, Slot slot, uint64_t lamports) {
  DelegatedEvent d;
  d.account = TestKey(account);
  d.validator = TestKey(0x22);
  d.owner_program = TestKey(0x33);
  d.slot = slot;
  d.lamports = lamports;
  d.commit_frequency_ms = 30000;
  return d;
}

TEST(AuditDigestBuilderTest, TheMessageIsTheHeaderThenOneRecordPerDelegatedAccountInByteOrder) {
  AuditDigestBuilder builder(10);
  builder.AddHistoryRow(Row(3, 0, Delegation(0x20, 3, 5)));
  builder.AddHistoryRow(Row(4, 1, Delegation(0x10, 4, 7)));
  builder.AddHistoryRow(Row(5, 2, Delegation(0x30, 5, 9)));
  builder.AddHistoryRow(Row(6, 3, UndelegatedEvent{TestKey(0x30), 6, std::nullopt}));
  const std::string message = builder.Message();
  ASSERT_EQ(message.size(), kAuditDigestTagSize + 16 + 2 * kAuditRecordSize);
  EXPECT_EQ(message.substr(0, kAuditDigestTagSize), "switchyard-audit-digest-v1");
  EXPECT_EQ(message.substr(kAuditDigestTagSize, 16),
            std::string("\x0a\0\0\0\0\0\0\0\x02\0\0\0\0\0\0\0", 16));
  const size_t first = kAuditDigestTagSize + 16;
  EXPECT_EQ(message.substr(first, 32), std::string(32, '\x10'));
  EXPECT_EQ(message.substr(first + kAuditRecordSize, 32), std::string(32, '\x20'));
  EXPECT_EQ(message.substr(first + 104, 8), std::string("\x07\0\0\0\0\0\0\0", 8));  // lamports
  auto digest = builder.Finish();
  ASSERT_TRUE(digest.ok());
  EXPECT_EQ(digest->accounts, 2u);
  EXPECT_EQ(digest->slot, 10u);
  EXPECT_EQ(digest->ToHex().size(), 64u);
}

TEST(AuditDigestBuilderTest, RowsAboveTheSlotAndRowsTheFoldIgnoredChangeNothing) {
  AuditDigestBuilder plain(10);
  plain.AddHistoryRow(Row(4, 0, Delegation(0x10, 4, 7)));
  AuditDigestBuilder noisy(10);
  noisy.AddHistoryRow(Row(4, 0, Delegation(0x10, 4, 7)));
  noisy.AddHistoryRow(Row(2, 1, UndelegatedEvent{TestKey(0x10), 2, std::nullopt}, true));
  noisy.AddHistoryRow(Row(11, 2, UndelegatedEvent{TestKey(0x10), 11, std::nullopt}));
  noisy.AddHistoryRow(Row(12, 3, Delegation(0x40, 12, 1)));
  EXPECT_EQ(noisy.Message(), plain.Message());
  EXPECT_EQ(noisy.Finish()->ToHex(), plain.Finish()->ToHex());
  AuditDigestBuilder other_slot(11);
  other_slot.AddHistoryRow(Row(4, 0, Delegation(0x10, 4, 7)));
  EXPECT_NE(other_slot.Finish()->ToHex(), plain.Finish()->ToHex());
}

}  // namespace
}  // namespace switchyard
