#include "storage/rocksdb_state_store.h"

#include <gtest/gtest.h>
#include <rocksdb/db.h>
#include <rocksdb/write_batch.h>

#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/endian.h"
#include "engine/event_codec.h"
#include "engine/fold.h"
#include "tests/support/event_generator.h"
#include "tests/support/temp_dir.h"

namespace switchyard {
namespace {

using testing::TempDir;

Pubkey Key(uint8_t fill) { return testing::TestKey(fill); }
DelegatedEvent Delegated(uint8_t account, Slot slot, uint8_t validator = 0xEE) {
  return testing::TestDelegation(account, slot, validator);
}

// Folds events (one partition) and returns the batch.
FoldBatch FoldEvents(Fold& fold, int64_t& offset, const std::vector<Event>& events) {
  for (const Event& e : events) fold.Add(0, offset++, EncodeEvent(e));
  return fold.TakeBatch();
}

TEST(RocksDbStateStoreTest, CommitThenLoadRestoresStateAndPosition) {
  TempDir dir;
  testing::GeneratorOptions options;
  options.slots = 30;
  options.gap_probability = 0.1;
  const std::vector<Event> events = testing::GenerateEvents(options);
  FoldPosition position;
  StateDigest digest;
  {
    auto store = RocksDbStateStore::Open(dir.Sub("state"));
    ASSERT_TRUE(store.ok()) << store.status();
    auto loaded = (*store)->Load();
    ASSERT_TRUE(loaded.ok());
    Fold fold(FoldOptions(), std::move(*loaded), 1);
    int64_t offset = 0;
    const size_t half = events.size() / 2;
    ASSERT_TRUE(
        (*store)->Commit(FoldEvents(fold, offset, {events.begin(), events.begin() + half})).ok());
    ASSERT_TRUE(
        (*store)->Commit(FoldEvents(fold, offset, {events.begin() + half, events.end()})).ok());
    position = fold.position();
  }
  auto store = RocksDbStateStore::Open(dir.Sub("state"));
  ASSERT_TRUE(store.ok()) << store.status();
  auto loaded = (*store)->Load();
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->position.applied_slot, position.applied_slot);
  EXPECT_EQ(loaded->position.digest, position.digest);
  EXPECT_EQ(loaded->position.partitions, position.partitions);
  EXPECT_EQ(loaded->position.counters, position.counters);
  EXPECT_EQ(loaded->position.next_seq, position.next_seq);
  // The loaded accounts reproduce the digest.
  StateDigest recomputed;
  size_t delegated = 0;
  loaded->accounts.ForEach([&](const Pubkey& k, const AccountState& s) {
    recomputed.Add(k, s);
    delegated += s.delegated;
  });
  EXPECT_EQ(recomputed, position.digest);
  testing::ReferenceFold reference;
  for (const Event& e : events) reference.Apply(e);
  EXPECT_EQ(delegated, reference.Delegated().size());
  auto sealed = (*store)->SealedDigests();
  ASSERT_TRUE(sealed.ok());
  ASSERT_EQ(sealed->size(), options.slots);
  for (const auto& [slot, d] : *sealed) EXPECT_EQ(d, reference.sealed_digests.at(slot));
  auto rows = (*store)->CountHistoryRows();
  ASSERT_TRUE(rows.ok());
  EXPECT_EQ(*rows, reference.account_events);
}

// The memory the store reports: its memtables grow with what is committed.
TEST(RocksDbStateStoreTest, MemoryUsageGrowsWithCommitsInTheMemtables) {
  TempDir dir;
  testing::GeneratorOptions options;
  options.slots = 200;
  const std::vector<Event> events = testing::GenerateEvents(options);
  auto store = RocksDbStateStore::Open(dir.Sub("state"));
  ASSERT_TRUE(store.ok()) << store.status();
  auto loaded = (*store)->Load();
  ASSERT_TRUE(loaded.ok());
  const StateStore::Memory empty = (*store)->MemoryUsage();
  Fold fold(FoldOptions(), std::move(*loaded), 1);
  int64_t offset = 0;
  const size_t half = events.size() / 2;
  ASSERT_TRUE(
      (*store)->Commit(FoldEvents(fold, offset, {events.begin(), events.begin() + half})).ok());
  const StateStore::Memory first = (*store)->MemoryUsage();
  ASSERT_TRUE(
      (*store)->Commit(FoldEvents(fold, offset, {events.begin() + half, events.end()})).ok());
  const StateStore::Memory second = (*store)->MemoryUsage();
  EXPECT_GT(first.memtables, empty.memtables);
  EXPECT_GT(second.memtables, first.memtables);
}

TEST(RocksDbStateStoreTest, HistoryAndAccountAsOfSlot) {
  TempDir dir;
  auto store = RocksDbStateStore::Open(dir.Sub("state"));
  ASSERT_TRUE(store.ok());
  Fold fold(FoldOptions(), LoadedState(), 1);
  int64_t offset = 0;
  ASSERT_TRUE((*store)
                  ->Commit(FoldEvents(fold, offset,
                                      {Delegated(1, 10, 0x01), SlotSealedEvent{10},
                                       UndelegatedEvent{Key(1), 20, Signature()},
                                       SlotSealedEvent{20}, Delegated(1, 15, 0x02),  // stale
                                       Delegated(1, 30, 0x03), SlotSealedEvent{30}}))
                  .ok());
  auto history = (*store)->History(Key(1));
  ASSERT_TRUE(history.ok());
  ASSERT_EQ(history->size(), 4u);
  EXPECT_EQ((*history)[0].slot, 10u);
  EXPECT_EQ((*history)[1].slot, 15u);
  EXPECT_TRUE((*history)[1].ignored);
  EXPECT_EQ((*history)[2].slot, 20u);
  EXPECT_EQ(KindOf((*history)[2].event), EventKind::kUndelegated);
  EXPECT_EQ((*history)[3].slot, 30u);

  auto at = [&](Slot s) { return *(*store)->GetAccountAt(Key(1), s); };
  EXPECT_EQ(at(9), std::nullopt);
  ASSERT_TRUE(at(10).has_value());
  EXPECT_TRUE(at(10)->delegated);
  EXPECT_EQ(at(10)->validator, Key(0x01));
  EXPECT_FALSE(at(25)->delegated);  // the stale delegation at 15 does not count
  EXPECT_EQ(at(30)->validator, Key(0x03));
  auto now = (*store)->GetAccount(Key(1));
  ASSERT_TRUE(now.ok());
  EXPECT_EQ(**now, *at(30));
  EXPECT_EQ(*(*store)->GetAccount(Key(2)), std::nullopt);
  EXPECT_EQ((*(*store)->History(Key(2))).size(), 0u);
}

TEST(RocksDbStateStoreTest, LastSealedDigestsAreTheHighestAtOrBelowASlotInSlotOrder) {
  TempDir dir;
  auto store = RocksDbStateStore::Open(dir.Sub("state"));
  ASSERT_TRUE(store.ok());
  Fold fold(FoldOptions(), LoadedState(), 1);
  int64_t offset = 0;
  ASSERT_TRUE((*store)
                  ->Commit(FoldEvents(
                      fold, offset,
                      {Delegated(1, 10), SlotSealedEvent{10}, Delegated(2, 20), SlotSealedEvent{20},
                       SlotSealedEvent{30}, Delegated(3, 40), SlotSealedEvent{40}}))
                  .ok());
  auto all = (*store)->SealedDigests();
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->size(), 4u);
  auto slots = [&](Slot at_or_below, size_t count) {
    std::vector<Slot> out;
    auto last = (*store)->LastSealedDigests(at_or_below, count);
    EXPECT_TRUE(last.ok()) << last.status();
    for (const SealedDigestAt& s : *last) {
      EXPECT_EQ(s.digest, *(*store)->SealedDigest(s.slot)) << s.slot;
      out.push_back(s.slot);
    }
    return out;
  };
  EXPECT_EQ(slots(std::numeric_limits<Slot>::max(), 1), std::vector<Slot>{40});
  EXPECT_EQ(slots(std::numeric_limits<Slot>::max(), 10), (std::vector<Slot>{10, 20, 30, 40}));
  EXPECT_EQ(slots(35, 2), (std::vector<Slot>{20, 30}));
  EXPECT_EQ(slots(30, 2), (std::vector<Slot>{20, 30}));
  EXPECT_EQ(slots(9, 5), std::vector<Slot>{});
  EXPECT_EQ(slots(40, 0), std::vector<Slot>{});
  EXPECT_EQ((*store)->LastSealedDigests(20, 1)->front().digest, (*all)[1].second);
}

TEST(RocksDbStateStoreTest, QuarantinedRecordsArePersistedWithTheirOffsets) {
  TempDir dir;
  auto store = RocksDbStateStore::Open(dir.Sub("state"));
  ASSERT_TRUE(store.ok());
  Fold fold(FoldOptions(), LoadedState(), 1);
  fold.Add(0, 0, EncodeEvent(Delegated(1, 1)));
  fold.Add(0, 1, "garbage");
  fold.Add(0, 2, EncodeEvent(SlotSealedEvent{1}));
  ASSERT_TRUE((*store)->Commit(fold.TakeBatch()).ok());
  auto quarantine = (*store)->Quarantine();
  ASSERT_TRUE(quarantine.ok());
  ASSERT_EQ(quarantine->size(), 1u);
  EXPECT_EQ((*quarantine)[0].offset, 1);
  EXPECT_EQ((*quarantine)[0].record, "garbage");
  EXPECT_FALSE((*quarantine)[0].reason.empty());
  EXPECT_EQ((*(*store)->Position()).counters.quarantined, 1u);
}

TEST(RocksDbStateStoreTest, NewerSchemaVersionIsRefusedNamingBothVersions) {
  TempDir dir;
  { ASSERT_TRUE(RocksDbStateStore::Open(dir.Sub("state")).ok()); }
  {
    // Rewrite the schema version as a future build would.
    rocksdb::DBOptions options;
    std::vector<rocksdb::ColumnFamilyDescriptor> families;
    for (const char* name :
         {"default", "state", "history", "meta", "quarantine", "history_by_slot"}) {
      families.emplace_back(name, rocksdb::ColumnFamilyOptions());
    }
    std::vector<rocksdb::ColumnFamilyHandle*> handles;
    rocksdb::DB* db = nullptr;
    ASSERT_TRUE(rocksdb::DB::Open(options, dir.Sub("state"), families, &handles, &db).ok());
    ASSERT_TRUE(db->Put(rocksdb::WriteOptions(), handles[3], "schema_version",
                        std::string("\x07\x00\x00\x00", 4))
                    .ok());
    for (auto* h : handles) db->DestroyColumnFamilyHandle(h);
    delete db;
  }
  auto store = RocksDbStateStore::Open(dir.Sub("state"));
  ASSERT_FALSE(store.ok());
  const std::string message(store.status().message());
  EXPECT_NE(message.find("schema version 7"), std::string::npos) << message;
  EXPECT_NE(message.find(absl::StrCat("version ", RocksDbStateStore::kSchemaVersion)),
            std::string::npos)
      << message;
}

// Rows of several accounts, folded in one batch per call.
std::vector<Event> SlotOrderEvents() {
  return {Delegated(3, 10),
          Delegated(1, 11),
          SlotSealedEvent{11},
          Delegated(2, 12),
          UndelegatedEvent{Key(3), 13, std::nullopt, EventSource::kReconciliation},
          SlotSealedEvent{13},
          Delegated(1, 14, 0x77),
          SlotSealedEvent{14}};
}

std::vector<std::pair<Slot, Pubkey>> RowsBySlot(RocksDbStateStore& store, Slot from, Slot to) {
  std::vector<std::pair<Slot, Pubkey>> out;
  absl::Status s = store.ForEachHistoryRow(from, to, [&](const HistoryEntry& entry) {
    out.emplace_back(entry.slot, *AccountOf(entry.event));
    return absl::OkStatus();
  });
  EXPECT_TRUE(s.ok()) << s;
  return out;
}

void FoldInto(RocksDbStateStore& store, const std::vector<Event>& events) {
  auto loaded = store.Load();
  ASSERT_TRUE(loaded.ok());
  Fold fold(FoldOptions(), std::move(*loaded), 1);
  int64_t offset = 0;
  ASSERT_TRUE(store.Commit(FoldEvents(fold, offset, events)).ok());
}

TEST(RocksDbStateStoreTest, HistoryRowsReadInSlotOrderAcrossAccounts) {
  TempDir dir;
  auto store = RocksDbStateStore::Open(dir.Sub("state"));
  ASSERT_TRUE(store.ok()) << store.status();
  FoldInto(**store, SlotOrderEvents());
  const std::vector<std::pair<Slot, Pubkey>> all = {
      {10, Key(3)}, {11, Key(1)}, {12, Key(2)}, {13, Key(3)}, {14, Key(1)}};
  EXPECT_EQ(RowsBySlot(**store, 0, 100), all);
  EXPECT_EQ(RowsBySlot(**store, 11, 13),
            (std::vector<std::pair<Slot, Pubkey>>{{11, Key(1)}, {12, Key(2)}, {13, Key(3)}}));
  EXPECT_TRUE(RowsBySlot(**store, 15, 100).empty());
  // One account's rows by slot range and limit.
  auto rows = (*store)->HistoryBetween(Key(1), 12, 20, 10);
  ASSERT_TRUE(rows.ok());
  ASSERT_EQ(rows->size(), 1u);
  EXPECT_EQ((*rows)[0].slot, 14u);
  rows = (*store)->HistoryBetween(Key(1), 0, 20, 1);
  ASSERT_TRUE(rows.ok());
  ASSERT_EQ(rows->size(), 1u);
  EXPECT_EQ((*rows)[0].slot, 11u);
  // The reconciliation's undelegation keeps its source and its unknown signature.
  rows = (*store)->History(Key(3));
  ASSERT_TRUE(rows.ok());
  ASSERT_EQ(rows->size(), 2u);
  const auto& u = std::get<UndelegatedEvent>((*rows)[1].event);
  EXPECT_EQ(u.source, EventSource::kReconciliation);
  EXPECT_FALSE(u.signature.has_value());
}

TEST(RocksDbStateStoreTest, ASecondaryBesideTheOpenPrimarySeesWhatItCommitted) {
  TempDir dir;
  auto primary = RocksDbStateStore::Open(dir.Sub("state"));
  ASSERT_TRUE(primary.ok()) << primary.status();
  FoldInto(**primary, SlotOrderEvents());
  RocksDbStateStoreOptions options;
  options.secondary = true;
  options.secondary_path = dir.Sub("secondary");
  auto secondary = RocksDbStateStore::Open(dir.Sub("state"), options);
  ASSERT_TRUE(secondary.ok()) << secondary.status();
  EXPECT_EQ(RowsBySlot(**secondary, 0, 100).size(), 5u);
  auto state = (*secondary)->GetAccount(Key(1));
  ASSERT_TRUE(state.ok());
  ASSERT_TRUE(state->has_value());
  EXPECT_EQ((*state)->validator, Key(0x77));
  EXPECT_FALSE((*secondary)->Commit(FoldBatch()).ok());  // read-only
}

// The raw database of a closed store, with its column families (handles in the store's
// order: default, state, history, meta, quarantine, history_by_slot).
struct RawStore {
  explicit RawStore(const std::string& path) {
    std::vector<rocksdb::ColumnFamilyDescriptor> families;
    for (const char* name :
         {"default", "state", "history", "meta", "quarantine", "history_by_slot"}) {
      families.emplace_back(name, rocksdb::ColumnFamilyOptions());
    }
    rocksdb::DB* raw = nullptr;
    EXPECT_TRUE(rocksdb::DB::Open(rocksdb::DBOptions(), path, families, &handles, &raw).ok());
    db.reset(raw);
  }
  ~RawStore() {
    for (auto* h : handles) db->DestroyColumnFamilyHandle(h);
  }
  size_t Keys(size_t family) {
    std::unique_ptr<rocksdb::Iterator> it(db->NewIterator(rocksdb::ReadOptions(), handles[family]));
    size_t n = 0;
    for (it->SeekToFirst(); it->Valid(); it->Next()) ++n;
    return n;
  }
  std::unique_ptr<rocksdb::DB> db;
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
};

// Rewrites a closed store of schema 4 as schema 3 wrote it: each record back in its history
// row (flags | record), and history_by_slot an index of account | flags | seq per row.
void DowngradeToSchema3(const std::string& path) {
  RawStore raw(path);
  std::unique_ptr<rocksdb::Iterator> it(
      raw.db->NewIterator(rocksdb::ReadOptions(), raw.handles[5]));
  rocksdb::WriteBatch wb;
  for (it->SeekToFirst(); it->Valid(); it->Next()) {
    std::string_view rest(it->value().data(), it->value().size());
    std::string index;
    while (!rest.empty()) {
      ASSERT_GE(rest.size(), 45u);
      const std::string account(rest.substr(0, 32));
      const char flags = rest[32];
      const std::string seq(rest.substr(33, 8));
      const uint32_t size = LoadU32LE(AsBytes(rest.data() + 41));
      const std::string record(rest.substr(45, size));
      rest.remove_prefix(45 + size);
      index += account + flags + seq;
      ASSERT_TRUE(wb.Put(raw.handles[2], account + it->key().ToString().substr(0, 8) + seq,
                         std::string(1, flags) + record)
                      .ok());
    }
    ASSERT_TRUE(wb.Put(raw.handles[5], it->key(), index).ok());
  }
  ASSERT_TRUE(wb.Put(raw.handles[3], "schema_version", std::string("\x03\x00\x00\x00", 4)).ok());
  ASSERT_TRUE(raw.db->Write(rocksdb::WriteOptions(), &wb).ok());
}

// A store of schema 3 holding SlotOrderEvents(), in one commit.
void MakeSchemaThreeStore(const std::string& path) {
  {
    auto store = RocksDbStateStore::Open(path);
    ASSERT_TRUE(store.ok()) << store.status();
    FoldInto(**store, SlotOrderEvents());
  }
  DowngradeToSchema3(path);
}

// Deletes every history_by_slot row, as a move to schema 4 does first.
void ClearSlotRows(RawStore& raw) {
  const std::string all_end(17, '\xff');  // every slot key is 16 bytes
  ASSERT_TRUE(raw.db->DeleteRange(rocksdb::WriteOptions(), raw.handles[5], "", all_end).ok());
}

// Each history row's value, by key.
std::map<std::string, std::string> HistoryValues(const std::string& path) {
  RawStore raw(path);
  std::map<std::string, std::string> out;
  std::unique_ptr<rocksdb::Iterator> it(
      raw.db->NewIterator(rocksdb::ReadOptions(), raw.handles[2]));
  for (it->SeekToFirst(); it->Valid(); it->Next())
    out[it->key().ToString()] = it->value().ToString();
  return out;
}

// Opens the store under `dir`/state as a secondary: slot-order reads fail (the records are not
// in slot order in a store of an older schema), while `account`'s history still reads `rows`
// rows.
void ExpectNoSlotIndexOnASecondary(TempDir& dir, const Pubkey& account, size_t rows) {
  RocksDbStateStoreOptions options;
  options.secondary = true;
  options.secondary_path = dir.Sub("secondary");
  auto secondary = RocksDbStateStore::Open(dir.Sub("state"), options);
  ASSERT_TRUE(secondary.ok()) << secondary.status();
  absl::Status s =
      (*secondary)->ForEachHistoryRow(0, 100, [](const HistoryEntry&) { return absl::OkStatus(); });
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  auto history = (*secondary)->History(account);
  ASSERT_TRUE(history.ok()) << history.status();
  EXPECT_EQ(history->size(), rows);
}

TEST(RocksDbStateStoreTest, ASchemaOneStoreIsMovedToSchemaFourWhenOpenedAsPrimary) {
  TempDir dir;
  MakeSchemaThreeStore(dir.Sub("state"));
  {
    // Back to schema 1: no slot index, version 1.
    rocksdb::DBOptions options;
    std::vector<rocksdb::ColumnFamilyDescriptor> families;
    for (const char* name :
         {"default", "state", "history", "meta", "quarantine", "history_by_slot"}) {
      families.emplace_back(name, rocksdb::ColumnFamilyOptions());
    }
    std::vector<rocksdb::ColumnFamilyHandle*> handles;
    rocksdb::DB* db = nullptr;
    ASSERT_TRUE(rocksdb::DB::Open(options, dir.Sub("state"), families, &handles, &db).ok());
    ASSERT_TRUE(db->DropColumnFamily(handles[5]).ok());
    ASSERT_TRUE(db->Put(rocksdb::WriteOptions(), handles[3], "schema_version",
                        std::string("\x01\x00\x00\x00", 4))
                    .ok());
    for (auto* h : handles) db->DestroyColumnFamilyHandle(h);
    delete db;
  }
  // Opened as a secondary, the store has no slot index to read; the account history reads.
  ExpectNoSlotIndexOnASecondary(dir, Key(1), 2);
  auto store = RocksDbStateStore::Open(dir.Sub("state"));
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_EQ(RowsBySlot(**store, 0, 100).size(), 5u);
}

TEST(RocksDbStateStoreTest, SlotRowsPackEachSlotOfACommitAndKeepSlotThenFoldOrder) {
  TempDir dir;
  {
    auto store = RocksDbStateStore::Open(dir.Sub("state"));
    ASSERT_TRUE(store.ok()) << store.status();
    auto loaded = (*store)->Load();
    ASSERT_TRUE(loaded.ok());
    Fold fold(FoldOptions(), std::move(*loaded), 1);
    int64_t offset = 0;
    // Commit 1: three rows at slot 10, one at 11, and a late row of slot 10 after slot 10 was
    // sealed (folded with slot 11, listed under its own slot 10).
    ASSERT_TRUE((*store)
                    ->Commit(FoldEvents(
                        fold, offset,
                        {Delegated(1, 10), Delegated(2, 10), Delegated(3, 10), SlotSealedEvent{10},
                         Delegated(4, 11), Delegated(5, 10), SlotSealedEvent{11}}))
                    .ok());
    // Commit 2: a late row of slot 11, and slot 12.
    ASSERT_TRUE((*store)
                    ->Commit(FoldEvents(fold, offset,
                                        {Delegated(6, 11), Delegated(7, 12), SlotSealedEvent{12}}))
                    .ok());
    const std::vector<std::pair<Slot, Pubkey>> all = {{10, Key(1)}, {10, Key(2)}, {10, Key(3)},
                                                      {10, Key(5)}, {11, Key(4)}, {11, Key(6)},
                                                      {12, Key(7)}};
    EXPECT_EQ(RowsBySlot(**store, 0, 100), all);
    EXPECT_EQ(RowsBySlot(**store, 11, 11),
              (std::vector<std::pair<Slot, Pubkey>>{{11, Key(4)}, {11, Key(6)}}));
    std::vector<uint64_t> seqs;
    ASSERT_TRUE((*store)
                    ->ForEachHistoryRow(0, 100,
                                        [&](const HistoryEntry& e) {
                                          seqs.push_back(e.seq);
                                          return absl::OkStatus();
                                        })
                    .ok());
    EXPECT_EQ(seqs, (std::vector<uint64_t>{0, 1, 2, 4, 3, 5, 6}));
  }
  RawStore raw(dir.Sub("state"));
  // Slot 10 and 11 of commit 1, slot 11 and 12 of commit 2: four keys for seven rows.
  EXPECT_EQ(raw.Keys(5), 4u);
  EXPECT_EQ(raw.Keys(2), 7u);
}

TEST(RocksDbStateStoreTest, ASlotRowHoldsAtMostSixteenRecordsAndEachAccountReadsItsOwn) {
  TempDir dir;
  std::vector<Event> events;
  for (int i = 0; i < 150; ++i) events.push_back(Delegated(static_cast<uint8_t>(i), 10));
  events.push_back(SlotSealedEvent{10});
  {
    auto store = RocksDbStateStore::Open(dir.Sub("state"));
    ASSERT_TRUE(store.ok()) << store.status();
    FoldInto(**store, events);
    const auto rows = RowsBySlot(**store, 0, 100);
    ASSERT_EQ(rows.size(), 150u);
    for (int i = 0; i < 150; ++i) EXPECT_EQ(rows[i].second, Key(static_cast<uint8_t>(i))) << i;
    // Rows at the ends of slot rows, and the last row of the last, shorter one.
    for (int i : {0, 15, 16, 100, 144, 149}) {
      auto history = (*store)->History(Key(static_cast<uint8_t>(i)));
      ASSERT_TRUE(history.ok()) << history.status();
      ASSERT_EQ(history->size(), 1u) << i;
      EXPECT_EQ((*history)[0].seq, static_cast<uint64_t>(i));
      EXPECT_EQ(std::get<DelegatedEvent>((*history)[0].event), std::get<DelegatedEvent>(events[i]));
    }
  }
  RawStore raw(dir.Sub("state"));
  EXPECT_EQ(raw.Keys(5), 10u);  // nine of 16 rows, one of 6
  EXPECT_EQ(raw.Keys(2), 150u);
}

TEST(RocksDbStateStoreTest, ASchemaThreeStoreIsMovedToSchemaFourWhenOpenedAsPrimary) {
  TempDir dir;
  std::vector<HistoryEntry> before;
  {
    auto store = RocksDbStateStore::Open(dir.Sub("state"));
    ASSERT_TRUE(store.ok()) << store.status();
    FoldInto(**store, SlotOrderEvents());
    auto history = (*store)->History(Key(1));
    ASSERT_TRUE(history.ok());
    before = *history;
  }
  DowngradeToSchema3(dir.Sub("state"));
  const auto schema3 = HistoryValues(dir.Sub("state"));
  ASSERT_EQ(schema3.size(), 5u);
  for (const auto& [key, value] : schema3) EXPECT_GT(value.size(), 9u);  // flags | record
  ExpectNoSlotIndexOnASecondary(dir, Key(1), 2);
  {
    auto store = RocksDbStateStore::Open(dir.Sub("state"));
    ASSERT_TRUE(store.ok()) << store.status();
    EXPECT_EQ(RowsBySlot(**store, 0, 100),
              (std::vector<std::pair<Slot, Pubkey>>{
                  {10, Key(3)}, {11, Key(1)}, {12, Key(2)}, {13, Key(3)}, {14, Key(1)}}));
    auto history = (*store)->History(Key(1));
    ASSERT_TRUE(history.ok()) << history.status();
    ASSERT_EQ(history->size(), before.size());
    for (size_t i = 0; i < before.size(); ++i) {
      EXPECT_EQ((*history)[i].slot, before[i].slot);
      EXPECT_EQ((*history)[i].seq, before[i].seq);
      EXPECT_EQ((*history)[i].event, before[i].event);
    }
  }
  // Each history row names a slot row of its own now: flags | its own seq.
  const auto moved = HistoryValues(dir.Sub("state"));
  ASSERT_EQ(moved.size(), 5u);
  for (const auto& [key, value] : moved) {
    ASSERT_EQ(value.size(), 9u);
    EXPECT_EQ(value.substr(1), key.substr(40, 8));
  }
  RawStore raw(dir.Sub("state"));
  std::string schema;
  ASSERT_TRUE(raw.db->Get(rocksdb::ReadOptions(), raw.handles[3], "schema_version", &schema).ok());
  EXPECT_EQ(schema, std::string("\x04\x00\x00\x00", 4));
  EXPECT_TRUE(raw.db->Get(rocksdb::ReadOptions(), raw.handles[3], "migrating_to_schema_4", &schema)
                  .IsNotFound());
}

// A move to schema 4 cut short (the old index cleared and one record moved, as the move's
// first writes leave it) resumes at the next open and moves the rest.
TEST(RocksDbStateStoreTest, AMoveToSchemaFourCutShortResumes) {
  TempDir dir;
  MakeSchemaThreeStore(dir.Sub("state"));
  {
    RawStore raw(dir.Sub("state"));
    ClearSlotRows(raw);
    ASSERT_TRUE(
        raw.db->Put(rocksdb::WriteOptions(), raw.handles[3], "migrating_to_schema_4", "").ok());
    std::unique_ptr<rocksdb::Iterator> it(
        raw.db->NewIterator(rocksdb::ReadOptions(), raw.handles[2]));
    it->SeekToFirst();
    ASSERT_TRUE(it->Valid());
    const std::string key = it->key().ToString();
    const std::string value = it->value().ToString();
    std::string slot_row = key.substr(0, 32) + value[0] + key.substr(40, 8);
    AppendU32LE(&slot_row, static_cast<uint32_t>(value.size() - 1));
    slot_row += value.substr(1);
    ASSERT_TRUE(
        raw.db->Put(rocksdb::WriteOptions(), raw.handles[5], key.substr(32), slot_row).ok());
    ASSERT_TRUE(raw.db
                    ->Put(rocksdb::WriteOptions(), raw.handles[2], key,
                          std::string(1, static_cast<char>(value[0] | 2)) + key.substr(40, 8))
                    .ok());
  }
  auto store = RocksDbStateStore::Open(dir.Sub("state"));
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_EQ(RowsBySlot(**store, 0, 100),
            (std::vector<std::pair<Slot, Pubkey>>{
                {10, Key(3)}, {11, Key(1)}, {12, Key(2)}, {13, Key(3)}, {14, Key(1)}}));
  for (uint8_t k : {1, 2, 3}) {
    auto history = (*store)->History(Key(k));
    ASSERT_TRUE(history.ok()) << history.status();
    EXPECT_EQ(history->size(), k == 2 ? 1u : 2u);
  }
}

// A history row whose slot row is missing, and a slot row cut short: reads fail with DataLoss,
// naming what is wrong, instead of returning less.
TEST(RocksDbStateStoreTest, AMissingOrTruncatedSlotRowIsDataLoss) {
  TempDir dir;
  {
    auto store = RocksDbStateStore::Open(dir.Sub("state"));
    ASSERT_TRUE(store.ok()) << store.status();
    FoldInto(**store, SlotOrderEvents());
  }
  {
    RawStore raw(dir.Sub("state"));
    std::unique_ptr<rocksdb::Iterator> it(
        raw.db->NewIterator(rocksdb::ReadOptions(), raw.handles[5]));
    it->SeekToFirst();
    ASSERT_TRUE(it->Valid());
    const std::string key = it->key().ToString();  // slot 10: Key(3)'s first row
    const std::string value = it->value().ToString();
    ASSERT_TRUE(
        raw.db->Put(rocksdb::WriteOptions(), raw.handles[5], key, value.substr(0, value.size() - 3))
            .ok());
    it->Next();
    ASSERT_TRUE(it->Valid());  // slot 11: Key(1)'s first row
    ASSERT_TRUE(raw.db->Delete(rocksdb::WriteOptions(), raw.handles[5], it->key()).ok());
  }
  auto store = RocksDbStateStore::Open(dir.Sub("state"));
  ASSERT_TRUE(store.ok()) << store.status();
  auto truncated = (*store)->History(Key(3));
  EXPECT_EQ(truncated.status().code(), absl::StatusCode::kDataLoss) << truncated.status();
  auto missing = (*store)->History(Key(1));
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kDataLoss) << missing.status();
  EXPECT_NE(missing.status().message().find("slot 11"), std::string::npos) << missing.status();
  absl::Status scan =
      (*store)->ForEachHistoryRow(0, 100, [](const HistoryEntry&) { return absl::OkStatus(); });
  EXPECT_EQ(scan.code(), absl::StatusCode::kDataLoss) << scan;
  // Key(2)'s row is intact.
  auto intact = (*store)->History(Key(2));
  ASSERT_TRUE(intact.ok()) << intact.status();
  EXPECT_EQ(intact->size(), 1u);
}

TEST(RocksDbStateStoreTest, ASchemaTwoStoreWithItsIndexOfOneRowPerEventIsMovedToSchemaFour) {
  TempDir dir;
  MakeSchemaThreeStore(dir.Sub("state"));
  {
    // Back to schema 2: history_by_slot holds slot | seq -> account | flags | record.
    RawStore raw(dir.Sub("state"));
    ClearSlotRows(raw);
    std::unique_ptr<rocksdb::Iterator> it(
        raw.db->NewIterator(rocksdb::ReadOptions(), raw.handles[2]));
    for (it->SeekToFirst(); it->Valid(); it->Next()) {
      const std::string key = it->key().ToString();
      const std::string value = key.substr(0, 32) + it->value().ToString();
      ASSERT_TRUE(raw.db->Put(rocksdb::WriteOptions(), raw.handles[5], key.substr(32), value).ok());
    }
    ASSERT_TRUE(raw.db
                    ->Put(rocksdb::WriteOptions(), raw.handles[3], "schema_version",
                          std::string("\x02\x00\x00\x00", 4))
                    .ok());
  }
  ExpectNoSlotIndexOnASecondary(dir, Key(3), 2);
  auto store = RocksDbStateStore::Open(dir.Sub("state"));
  ASSERT_TRUE(store.ok()) << store.status();
  const std::vector<std::pair<Slot, Pubkey>> all = {
      {10, Key(3)}, {11, Key(1)}, {12, Key(2)}, {13, Key(3)}, {14, Key(1)}};
  EXPECT_EQ(RowsBySlot(**store, 0, 100), all);
}

// Everything a store holds, in comparable form.
struct StoreContents {
  std::map<std::string, AccountState> accounts;
  Slot applied_slot = 0;
  std::string digest;
  uint64_t next_seq = 0;
  std::vector<PartitionCursor> partitions;
  std::vector<std::pair<Slot, StateDigest>> sealed;
  std::vector<std::tuple<int32_t, int64_t, std::string, std::string>> quarantine;
  std::vector<std::tuple<Slot, uint64_t, bool, std::string>> history;        // in slot order
  std::vector<std::tuple<Slot, uint64_t, bool, std::string>> first_account;  // its own rows

  friend bool operator==(const StoreContents&, const StoreContents&) = default;
};

StoreContents ContentsOf(RocksDbStateStore& store, const Pubkey& account) {
  StoreContents c;
  auto loaded = store.Load();
  EXPECT_TRUE(loaded.ok()) << loaded.status();
  if (!loaded.ok()) return c;
  loaded->accounts.ForEach([&](const Pubkey& k, const AccountState& s) {
    c.accounts.emplace(std::string(reinterpret_cast<const char*>(k.data()), Pubkey::kSize), s);
  });
  c.applied_slot = loaded->position.applied_slot;
  c.digest = loaded->position.digest.ToHex();
  c.next_seq = loaded->position.next_seq;
  c.partitions = loaded->position.partitions;
  auto sealed = store.SealedDigests();
  EXPECT_TRUE(sealed.ok());
  if (sealed.ok()) c.sealed = *sealed;
  auto quarantine = store.Quarantine();
  EXPECT_TRUE(quarantine.ok());
  if (quarantine.ok()) {
    for (const auto& q : *quarantine)
      c.quarantine.emplace_back(q.partition, q.offset, q.reason, q.record);
  }
  EXPECT_TRUE(store
                  .ForEachHistoryRow(0, std::numeric_limits<Slot>::max(),
                                     [&](const HistoryEntry& e) {
                                       c.history.emplace_back(e.slot, e.seq, e.ignored,
                                                              EncodeEvent(e.event));
                                       return absl::OkStatus();
                                     })
                  .ok());
  auto rows = store.History(account);
  EXPECT_TRUE(rows.ok()) << rows.status();
  if (rows.ok()) {
    for (const auto& e : *rows) {
      c.first_account.emplace_back(e.slot, e.seq, e.ignored, EncodeEvent(e.event));
    }
  }
  return c;
}

// The same records folded into a store that writes every commit and into one that ingests
// the large ones as table files, in commits of varied size with a quarantined record in a large
// one: the two hold the same, open and after a reopen.
TEST(RocksDbStateStoreTest, LargeCommitsIngestedAsTableFilesReadAsWrittenOnes) {
  TempDir dir;
  testing::GeneratorOptions generator;
  generator.accounts = 300;
  generator.slots = 200;
  generator.events_per_slot = 20;
  const std::vector<Event> events = testing::GenerateEvents(generator);
  RocksDbStateStoreOptions written_options;
  written_options.ingest_min_rows = 0;
  RocksDbStateStoreOptions ingested_options;
  ingested_options.ingest_min_rows = 200;
  const size_t sizes[] = {30, 900, 150, 1500, 10, 400};
  Pubkey account;
  {
    auto written = RocksDbStateStore::Open(dir.Sub("written"), written_options);
    auto ingested = RocksDbStateStore::Open(dir.Sub("ingested"), ingested_options);
    ASSERT_TRUE(written.ok() && ingested.ok());
    Fold fold(FoldOptions(), LoadedState(), 1);
    int64_t offset = 0;
    size_t commits = 0;
    for (size_t i = 0, n = 0; i < events.size(); ++n) {
      const size_t end = std::min(events.size(), i + sizes[n % std::size(sizes)]);
      if (n == 3) fold.Add(0, offset++, "not a record");
      for (; i < end; ++i) fold.Add(0, offset++, EncodeEvent(events[i]));
      const FoldBatch batch = fold.TakeBatch();
      if (n == 3) {
        EXPECT_EQ(batch.quarantine.size(), 1u);
      }
      ASSERT_TRUE((*written)->Commit(batch).ok());
      ASSERT_TRUE((*ingested)->Commit(batch).ok());
      ++commits;
    }
    EXPECT_EQ((*written)->ingested_commits(), 0u);
    EXPECT_GT((*ingested)->ingested_commits(), 0u);
    EXPECT_LT((*ingested)->ingested_commits(), commits);
    account = *AccountOf(events.front());
    const StoreContents expected = ContentsOf(**written, account);
    EXPECT_EQ(expected.quarantine.size(), 1u);
    EXPECT_GT(expected.first_account.size(), 1u);
    EXPECT_EQ(ContentsOf(**ingested, account), expected);
  }
  auto written = RocksDbStateStore::Open(dir.Sub("written"), written_options);
  auto ingested = RocksDbStateStore::Open(dir.Sub("ingested"), ingested_options);
  ASSERT_TRUE(written.ok() && ingested.ok());
  EXPECT_EQ(ContentsOf(**ingested, account), ContentsOf(**written, account));
  // No table file is left behind where they are built.
  EXPECT_TRUE(std::filesystem::is_empty(dir.Sub("ingested") + "/ingest"));
}

// When the table files cannot be made (here a file stands where their directory goes), the
// commit is written through the write-ahead log instead, whole.
TEST(RocksDbStateStoreTest, ACommitThatCannotBeIngestedIsWrittenInstead) {
  TempDir dir;
  RocksDbStateStoreOptions options;
  options.ingest_min_rows = 1;
  auto store = RocksDbStateStore::Open(dir.Sub("state"), options);
  ASSERT_TRUE(store.ok()) << store.status();
  FoldInto(**store, SlotOrderEvents());
  EXPECT_EQ((*store)->ingested_commits(), 1u);
  std::filesystem::remove_all(dir.Sub("state") + "/ingest");
  std::ofstream(dir.Sub("state") + "/ingest") << "not a directory";
  auto loaded = (*store)->Load();
  ASSERT_TRUE(loaded.ok());
  Fold fold(FoldOptions(), std::move(*loaded), 1);
  int64_t offset = 8;
  ASSERT_TRUE(
      (*store)->Commit(FoldEvents(fold, offset, {Delegated(4, 15), SlotSealedEvent{15}})).ok());
  EXPECT_EQ((*store)->ingested_commits(), 1u);
  auto history = (*store)->History(Key(4));
  ASSERT_TRUE(history.ok()) << history.status();
  ASSERT_EQ(history->size(), 1u);
  auto position = (*store)->Position();
  ASSERT_TRUE(position.ok());
  EXPECT_EQ(position->applied_slot, 15u);
  EXPECT_EQ(position->partitions[0].next_offset, 10);
}

}  // namespace
}  // namespace switchyard
