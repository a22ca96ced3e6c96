#include "engine/fold.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>

#include "engine/event_codec.h"
#include "tests/support/event_generator.h"

namespace switchyard {
namespace {

using testing::GenerateEvents;
using testing::GeneratorOptions;
using testing::ReferenceFold;

Pubkey Key(uint8_t fill) { return testing::TestKey(fill); }
DelegatedEvent Delegated(uint8_t account, Slot slot, uint8_t validator = 0xEE) {
  return testing::TestDelegation(account, slot, validator);
}

// Feeds a Fold with records per partition, keeping offsets.
class Feeder {
 public:
  explicit Feeder(int32_t partitions, FoldOptions options = {}, LoadedState state = LoadedState())
      : fold_(options, std::move(state), partitions), next_(partitions, 0) {
    for (int32_t p = 0; p < partitions; ++p) next_[p] = fold_.read_offset(p);
  }
  void Add(const Event& event, int32_t partition = 0) { AddRaw(EncodeEvent(event), partition); }
  void AddRaw(const std::string& record, int32_t partition = 0) {
    fold_.Add(partition, next_[partition]++, record);
  }
  Fold& fold() { return fold_; }

 private:
  Fold fold_;
  std::vector<int64_t> next_;
};

TEST(FoldTest, EventsWaitUntilTheirSlotIsSealed) {
  Feeder f(1);
  f.Add(Delegated(1, 5));
  EXPECT_EQ(f.fold().MakeSnapshot()->FindDelegation(Key(1)), std::nullopt);
  EXPECT_EQ(f.fold().position().applied_slot, 0u);
  EXPECT_EQ(f.fold().position().partitions[0].next_offset, 0);  // still pending
  f.Add(SlotSealedEvent{4});
  EXPECT_EQ(f.fold().position().applied_slot, 4u);
  EXPECT_EQ(f.fold().MakeSnapshot()->FindDelegation(Key(1)), std::nullopt);
  f.Add(SlotSealedEvent{5});
  auto snapshot = f.fold().MakeSnapshot();
  ASSERT_NE(snapshot->FindDelegation(Key(1)), std::nullopt);
  EXPECT_EQ(snapshot->FindDelegation(Key(1))->validator, Key(0xEE));
  EXPECT_EQ(snapshot->applied_slot(), 5u);
  EXPECT_EQ(f.fold().position().partitions[0].next_offset, 3);
}

TEST(FoldTest, EachSnapshotListsTheAccountsWrittenSinceThePreviousOne) {
  Feeder f(1);
  f.Add(Delegated(1, 5));
  f.Add(SlotSealedEvent{5});
  auto first = f.fold().MakeSnapshot();
  EXPECT_EQ(first->changes().generation, 1u);
  EXPECT_EQ(first->changes().accounts, nullptr);  // nothing before it to list against

  f.Add(Delegated(2, 6));
  f.Add(Delegated(3, 6));
  f.Add(UndelegatedEvent{Key(1), 6, Signature()});
  f.Add(SlotSealedEvent{6});
  const uint64_t ignored = f.fold().position().counters.ignored_stale;
  f.Add(UndelegatedEvent{Key(3), 2, Signature()});  // late and stale: ignored, not written
  f.Add(SlotSealedEvent{7});                        // it counts for slot 7
  ASSERT_EQ(f.fold().position().counters.ignored_stale, ignored + 1);
  auto second = f.fold().MakeSnapshot();
  EXPECT_EQ(second->changes().generation, 2u);
  ASSERT_NE(second->changes().accounts, nullptr);
  std::vector<Pubkey> listed = *second->changes().accounts;
  std::sort(listed.begin(), listed.end());
  EXPECT_EQ(listed, (std::vector<Pubkey>{Key(1), Key(2), Key(3)}));
  EXPECT_EQ(second->changes().accounts->size(), 3u);

  auto third = f.fold().MakeSnapshot();  // nothing written since
  EXPECT_EQ(third->changes().generation, 3u);
  ASSERT_NE(third->changes().accounts, nullptr);
  EXPECT_TRUE(third->changes().accounts->empty());
}

TEST(FoldTest, ASnapshotWithMoreWritesThanItListsHasNoList) {
  Feeder f(1);
  f.fold().MakeSnapshot();
  for (size_t i = 0; i <= Fold::kMaxListedChanges; ++i) {
    f.Add(Delegated(static_cast<uint8_t>(i % 200), 10 + i / 200));
  }
  f.Add(SlotSealedEvent{10 + Fold::kMaxListedChanges / 200});
  ASSERT_GT(f.fold().position().counters.applied, Fold::kMaxListedChanges);
  auto full = f.fold().MakeSnapshot();
  EXPECT_EQ(full->changes().generation, 2u);
  EXPECT_EQ(full->changes().accounts, nullptr);
  // The next one lists again.
  f.Add(Delegated(201, 20'000));
  f.Add(SlotSealedEvent{20'000});
  auto next = f.fold().MakeSnapshot();
  ASSERT_NE(next->changes().accounts, nullptr);
  EXPECT_EQ(*next->changes().accounts, std::vector<Pubkey>{Key(201)});
}

TEST(FoldTest, StaleEventIsIgnoredAndCounted) {
  Feeder f(1);
  f.Add(UndelegatedEvent{Key(1), 10, Signature()});
  f.Add(SlotSealedEvent{10});
  f.Add(Delegated(1, 8));      // older than the undelegation: stale
  f.Add(SlotSealedEvent{11});  // it came after SlotSealed(10): it counts for slot 11
  FoldBatch batch = f.fold().TakeBatch();
  EXPECT_EQ(batch.position.counters.ignored_stale, 1u);
  EXPECT_EQ(batch.position.counters.applied, 1u);
  EXPECT_EQ(f.fold().MakeSnapshot()->FindDelegation(Key(1)), std::nullopt);
  ASSERT_EQ(batch.history.size(), 2u);
  EXPECT_FALSE(batch.history[0].ignored);
  EXPECT_TRUE(batch.history[1].ignored);
  EXPECT_EQ(batch.history[1].slot, 8u);
}

TEST(FoldTest, ARecycledBatchLendsItsMemoryToALaterOneAndKeepsNoRowOfIts) {
  // As the runner does: batch 1 is taken and written while batch 2 is folded; batch 1 is
  // given back before batch 2 is taken, and batch 3 is folded into its memory.
  Feeder f(1);
  for (uint8_t a = 1; a <= 40; ++a) f.Add(Delegated(a, 5));
  f.Add(SlotSealedEvent{5});
  FoldBatch first = f.fold().TakeBatch();
  ASSERT_EQ(first.history.size(), 40u);
  ASSERT_EQ(first.accounts.size(), 40u);
  const FoldBatch::HistoryRow* history_memory = first.history.data();
  const FoldBatch::AccountWrite* accounts_memory = first.accounts.data();

  f.Add(Delegated(41, 6));
  f.Add(SlotSealedEvent{6});
  f.fold().Recycle(std::move(first));
  const FoldBatch second = f.fold().TakeBatch();
  ASSERT_EQ(second.history.size(), 1u);
  EXPECT_EQ(second.history[0].account, Key(41));

  f.Add(Delegated(42, 7));
  f.Add(SlotSealedEvent{7});
  const FoldBatch third = f.fold().TakeBatch();
  EXPECT_EQ(third.history.data(), history_memory);
  EXPECT_EQ(third.accounts.data(), accounts_memory);
  ASSERT_EQ(third.history.size(), 1u);
  EXPECT_EQ(third.history[0].account, Key(42));
  EXPECT_EQ(third.history[0].slot, 7u);
  ASSERT_EQ(third.accounts.size(), 1u);
  EXPECT_EQ(third.accounts[0].account, Key(42));
  ASSERT_EQ(third.sealed_digests.size(), 1u);
  EXPECT_EQ(third.sealed_digests[0].first, 7u);
  EXPECT_EQ(third.position.applied_slot, 7u);
  EXPECT_EQ(third.position.counters.applied, 42u);
}

TEST(FoldTest, EventAtTheSameSlotAsTheLastIsApplied) {
  Feeder f(1);
  f.Add(Delegated(1, 10));
  f.Add(UndelegatedEvent{Key(1), 10, Signature()});
  f.Add(Delegated(1, 10, 0x77));
  f.Add(SlotSealedEvent{10});
  const std::optional<AccountState> s = f.fold().MakeSnapshot()->FindDelegation(Key(1));
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->validator, Key(0x77));
  EXPECT_EQ(f.fold().position().counters.applied, 3u);
}

TEST(FoldTest, AppliedSlotIsTheLowestSealedSlotOverPartitions) {
  Feeder f(2);
  f.Add(Delegated(1, 3), 0);
  f.Add(SlotSealedEvent{3}, 0);
  f.Add(SlotSealedEvent{7}, 0);
  EXPECT_EQ(f.fold().position().applied_slot, 0u);  // partition 1 sealed nothing
  f.Add(SlotSealedEvent{2}, 1);
  EXPECT_EQ(f.fold().position().applied_slot, 2u);
  EXPECT_EQ(f.fold().MakeSnapshot()->FindDelegation(Key(1)), std::nullopt);
  f.Add(SlotSealedEvent{5}, 1);
  EXPECT_EQ(f.fold().position().applied_slot, 5u);
  EXPECT_NE(f.fold().MakeSnapshot()->FindDelegation(Key(1)), std::nullopt);
  const FoldBatch batch = f.fold().TakeBatch();
  ASSERT_EQ(batch.sealed_digests.size(), 2u);
  EXPECT_EQ(batch.sealed_digests[0].first, 2u);
  EXPECT_EQ(batch.sealed_digests[1].first, 5u);
  EXPECT_NE(batch.sealed_digests[0].second, batch.sealed_digests[1].second);
}

TEST(FoldTest, StreamGapSetsLimboAndResyncedClearsIt) {
  Feeder f(1);
  f.Add(SlotSealedEvent{10});
  f.Add(StreamGapEvent{10});
  EXPECT_EQ(f.fold().MakeSnapshot()->limbo_since(), std::optional<Slot>(10));
  f.Add(StreamGapEvent{12});  // still in limbo since the first gap
  EXPECT_EQ(f.fold().position().LimboSince(), std::optional<Slot>(10));
  f.Add(ResyncedEvent{15});  // waits for slot 15 to be sealed
  EXPECT_EQ(f.fold().position().LimboSince(), std::optional<Slot>(10));
  f.Add(SlotSealedEvent{15});
  EXPECT_EQ(f.fold().position().LimboSince(), std::nullopt);
  EXPECT_EQ(f.fold().MakeSnapshot()->limbo_since(), std::nullopt);
  EXPECT_EQ(f.fold().position().counters.stream_gaps, 2u);
  EXPECT_EQ(f.fold().position().counters.resyncs, 1u);
}

// The watcher's order when a session ends: the events of the unsealed slot, then the gap.
// Those events wait for a seal that comes only once the stream is back; the gap must not.
TEST(FoldTest, StreamGapQueuedBehindUnsealedEventsTakesEffectAtOnce) {
  Feeder f(2);
  for (int32_t p = 0; p < 2; ++p) f.Add(SlotSealedEvent{10}, p);
  f.Add(Delegated(1, 12), 0);
  f.Add(UndelegatedEvent{Key(2), 11, Signature()}, 1);
  for (int32_t p = 0; p < 2; ++p) f.Add(StreamGapEvent{10}, p);
  EXPECT_EQ(f.fold().MakeSnapshot()->limbo_since(), std::optional<Slot>(10));
  EXPECT_EQ(f.fold().TakeBatch().position.LimboSince(), std::optional<Slot>(10));
  // The next session: its backfill seals the context slot, then says Resynced.
  for (int32_t p = 0; p < 2; ++p) f.Add(SlotSealedEvent{14}, p);
  EXPECT_EQ(f.fold().MakeSnapshot()->FindDelegation(Key(1))->validator, Key(0xEE));
  for (int32_t p = 0; p < 2; ++p) f.Add(ResyncedEvent{14}, p);
  EXPECT_EQ(f.fold().position().LimboSince(), std::optional<Slot>(10));
  for (int32_t p = 0; p < 2; ++p) f.Add(SlotSealedEvent{15}, p);
  EXPECT_EQ(f.fold().MakeSnapshot()->limbo_since(), std::nullopt);
  EXPECT_EQ(f.fold().position().counters.stream_gaps, 2u);
}

TEST(FoldTest, AResyncedReadBeforeAGapDoesNotEndItsLimbo) {
  Feeder f(1);
  f.Add(SlotSealedEvent{10});
  f.Add(ResyncedEvent{10});  // counts for slot 11: pending
  f.Add(StreamGapEvent{10});
  EXPECT_EQ(f.fold().position().LimboSince(), std::optional<Slot>(10));
  f.Add(SlotSealedEvent{11});  // folds the Resynced, which came before the gap
  EXPECT_EQ(f.fold().position().LimboSince(), std::optional<Slot>(10));
  f.Add(ResyncedEvent{11});
  f.Add(SlotSealedEvent{12});
  EXPECT_EQ(f.fold().position().LimboSince(), std::nullopt);
}

TEST(FoldTest, ALimboBegunAheadOfItsRecordSurvivesARestart) {
  Feeder f(1);
  f.Add(SlotSealedEvent{10});
  f.Add(Delegated(1, 12));
  f.Add(StreamGapEvent{10});
  FoldBatch batch = f.fold().TakeBatch();
  ASSERT_EQ(batch.position.partitions[0].next_offset, 1);  // the gap is read again
  LoadedState state;
  state.position = batch.position;
  Feeder resumed(1, {}, std::move(state));
  EXPECT_EQ(resumed.fold().position().LimboSince(), std::optional<Slot>(10));
  resumed.Add(Delegated(1, 12));
  resumed.Add(StreamGapEvent{10});
  resumed.Add(SlotSealedEvent{12});
  resumed.Add(ResyncedEvent{12});
  EXPECT_EQ(resumed.fold().position().LimboSince(), std::optional<Slot>(10));
  resumed.Add(SlotSealedEvent{13});
  EXPECT_EQ(resumed.fold().position().LimboSince(), std::nullopt);
}

TEST(FoldTest, CorruptRecordIsQuarantinedWithItsOffsetAndFoldingGoesOn) {
  Feeder f(1);
  f.Add(Delegated(1, 1));
  std::string bad = EncodeEvent(Delegated(2, 1));
  bad[10] ^= 0x40;
  f.AddRaw(bad);
  std::string future = EncodeEvent(SlotSealedEvent{1});
  future[0] = 9;  // a version this build does not know
  f.AddRaw(future);
  f.Add(Delegated(3, 1));
  f.Add(SlotSealedEvent{1});
  FoldBatch batch = f.fold().TakeBatch();
  ASSERT_EQ(batch.quarantine.size(), 2u);
  EXPECT_EQ(batch.quarantine[0].offset, 1);
  EXPECT_EQ(batch.quarantine[0].record, bad);
  EXPECT_NE(batch.quarantine[0].reason.find("checksum"), std::string::npos);
  EXPECT_EQ(batch.quarantine[1].offset, 2);
  EXPECT_NE(batch.quarantine[1].reason.find("version 9"), std::string::npos);
  EXPECT_EQ(batch.position.counters.quarantined, 2u);
  auto snapshot = f.fold().MakeSnapshot();
  EXPECT_NE(snapshot->FindDelegation(Key(1)), std::nullopt);
  EXPECT_EQ(snapshot->FindDelegation(Key(2)), std::nullopt);
  EXPECT_NE(snapshot->FindDelegation(Key(3)), std::nullopt);
  EXPECT_EQ(batch.position.partitions[0].next_offset, 5);
}

// A partition a slot ahead of the other never drains its queue: each seal of the other folds
// one slot of it and leaves the next. The queue drops what it folded as it goes; every record
// must still reach its history row, and a corrupt one the quarantine, byte for byte.
TEST(FoldTest, AQueueThatNeverDrainsKeepsEachRecordForItsRow) {
  Feeder f(2);
  constexpr Slot kSlots = 12;
  constexpr int kPerSlot = 1000;
  std::vector<std::string> expected;  // the records of the history rows, in fold order
  std::string corrupt;
  auto add_slot = [&](Slot slot) {
    for (int i = 0; i < kPerSlot; ++i) {
      std::string record =
          EncodeEvent(Delegated(static_cast<uint8_t>(i), slot, static_cast<uint8_t>(slot * 7 + i)));
      if (slot == 8 && i == 500) {
        record[10] ^= 0x40;
        corrupt = record;
      } else {
        expected.push_back(record);
      }
      f.AddRaw(record, 0);
    }
    f.Add(SlotSealedEvent{slot}, 0);
  };
  add_slot(1);
  for (Slot slot = 2; slot <= kSlots; ++slot) {
    add_slot(slot);
    f.Add(SlotSealedEvent{slot - 1}, 1);
    ASSERT_EQ(f.fold().position().applied_slot, slot - 1);
    // Slot `slot`'s records and seal wait in partition 0.
    EXPECT_EQ(f.fold().position().partitions[0].next_offset,
              static_cast<int64_t>((slot - 1) * (kPerSlot + 1)));
  }
  f.Add(SlotSealedEvent{kSlots}, 1);
  const FoldBatch batch = f.fold().TakeBatch();
  ASSERT_EQ(batch.history.size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    ASSERT_EQ(batch.RecordOf(batch.history[i]), expected[i]) << "row " << i;
  }
  ASSERT_EQ(batch.quarantine.size(), 1u);
  EXPECT_EQ(batch.quarantine[0].record, corrupt);
  EXPECT_EQ(batch.quarantine[0].offset, static_cast<int64_t>(7 * (kPerSlot + 1) + 500));
  EXPECT_EQ(batch.position.partitions[0].next_offset,
            static_cast<int64_t>(kSlots * (kPerSlot + 1)));
}

TEST(FoldTest, SnapshotDoesNotSeeLaterWrites) {
  Feeder f(1);
  f.Add(Delegated(1, 1));
  f.Add(SlotSealedEvent{1});
  auto before = f.fold().MakeSnapshot();
  f.Add(UndelegatedEvent{Key(1), 2, Signature()});
  f.Add(Delegated(2, 2));
  f.Add(SlotSealedEvent{2});
  auto after = f.fold().MakeSnapshot();
  EXPECT_NE(before->FindDelegation(Key(1)), std::nullopt);
  EXPECT_EQ(before->FindDelegation(Key(2)), std::nullopt);
  EXPECT_EQ(before->delegated_count(), 1u);
  EXPECT_EQ(after->FindDelegation(Key(1)), std::nullopt);
  EXPECT_NE(after->FindDelegation(Key(2)), std::nullopt);
  EXPECT_EQ(after->delegated_count(), 1u);
  EXPECT_NE(before->digest(), after->digest());
}

TEST(FoldTest, MatchesTheReferenceFoldAtEverySealedSlot) {
  GeneratorOptions options;
  options.accounts = 300;
  options.slots = 200;
  options.events_per_slot = 20;
  options.gap_probability = 0.05;
  const std::vector<Event> events = GenerateEvents(options);
  ReferenceFold reference;
  Feeder f(1);
  std::vector<std::pair<Slot, StateDigest>> sealed;
  for (const Event& e : events) {
    reference.Apply(e);
    f.Add(e);
    FoldBatch batch = f.fold().TakeBatch();
    sealed.insert(sealed.end(), batch.sealed_digests.begin(), batch.sealed_digests.end());
  }
  ASSERT_EQ(sealed.size(), options.slots);
  for (const auto& [slot, digest] : sealed) {
    EXPECT_EQ(digest, reference.sealed_digests.at(slot)) << "slot " << slot;
  }
  EXPECT_EQ(f.fold().position().digest, reference.digest);
  EXPECT_GT(reference.ignored_stale, 0u);
  EXPECT_EQ(f.fold().position().counters.ignored_stale, reference.ignored_stale);
  EXPECT_EQ(f.fold().delegated_count(), reference.Delegated().size());
}

// Splits a single-partition stream into `partitions` partitions the way the log does:
// account events by key, watermarks and stream markers to every partition.
std::vector<std::vector<Event>> Partition(const std::vector<Event>& events, int partitions) {
  std::vector<std::vector<Event>> out(partitions);
  for (const Event& e : events) {
    if (const Pubkey* account = AccountOf(e)) {
      out[account->data()[7] % partitions].push_back(e);
    } else {
      for (auto& p : out) p.push_back(e);
    }
  }
  return out;
}

// Property: however partitions interleave, the fold reaches the same digest at every slot
// it stops at, and the same final state, as the reference fold of the single stream.
TEST(FoldTest, DigestIsIndependentOfPartitionInterleaving) {
  for (uint64_t seed = 1; seed <= 12; ++seed) {
    GeneratorOptions options;
    options.seed = seed;
    options.accounts = 50 + seed * 10;
    options.slots = 60;
    options.events_per_slot = 15;
    options.late_fraction = 0;  // late events make intermediate digests timing-dependent
    const std::vector<Event> events = GenerateEvents(options);
    ReferenceFold reference;
    for (const Event& e : events) reference.Apply(e);

    const int partitions = 1 + static_cast<int>(seed % 4);
    const auto split = Partition(events, partitions);
    std::mt19937_64 rng(seed);
    Feeder f(partitions);
    std::vector<size_t> next(partitions, 0);
    size_t remaining = 0;
    for (const auto& p : split) remaining += p.size();
    while (remaining > 0) {
      const int p = static_cast<int>(rng() % partitions);
      if (next[p] == split[p].size()) continue;
      f.Add(split[p][next[p]++], p);
      --remaining;
      for (const auto& [slot, digest] : f.fold().TakeBatch().sealed_digests) {
        ASSERT_EQ(digest, reference.sealed_digests.at(slot)) << "seed " << seed << " slot " << slot;
      }
    }
    EXPECT_EQ(f.fold().position().applied_slot, options.first_slot + options.slots - 1);
    EXPECT_EQ(f.fold().position().digest, reference.digest) << "seed " << seed;
  }
}

// Regression: a late record (a correction whose slot another SlotSealed of its partition
// already covered) was folded into whatever slot was applied when it happened to be read, so
// two replicas reading the partitions in different orders recorded different digests for one
// slot, and a replica's digest for its applied slot could change. It counts for the next slot
// now: with late records too, every interleaving shows the reference digest at every applied
// slot, after every record fed.
TEST(FoldTest, LateRecordsCountForTheNextSlotWhateverThePartitionInterleaving) {
  for (uint64_t seed = 1; seed <= 12; ++seed) {
    GeneratorOptions options;
    options.seed = seed;
    options.accounts = 40 + seed * 5;
    options.slots = 60;
    options.events_per_slot = 15;
    options.late_fraction = 0.2;
    options.gap_probability = 0.05;
    const std::vector<Event> events = GenerateEvents(options);
    ReferenceFold reference;
    for (const Event& e : events) reference.Apply(e);

    const int partitions = 2 + static_cast<int>(seed % 3);
    const auto split = Partition(events, partitions);
    std::mt19937_64 rng(seed * 7);
    Feeder f(partitions);
    std::vector<size_t> next(partitions, 0);
    size_t remaining = 0;
    for (const auto& p : split) remaining += p.size();
    while (remaining > 0) {
      const int p = static_cast<int>(rng() % partitions);
      if (next[p] == split[p].size()) continue;
      f.Add(split[p][next[p]++], p);
      --remaining;
      const Slot applied = f.fold().position().applied_slot;
      if (applied >= options.first_slot) {
        ASSERT_EQ(f.fold().position().digest, reference.sealed_digests.at(applied))
            << "seed " << seed << ": the state at applied slot " << applied << " moved";
      }
      for (const auto& [slot, digest] : f.fold().TakeBatch().sealed_digests) {
        ASSERT_EQ(digest, reference.sealed_digests.at(slot)) << "seed " << seed << " slot " << slot;
      }
    }
    EXPECT_EQ(f.fold().position().digest, reference.digest) << "seed " << seed;
  }
}

TEST(FoldTest, DigestIsEqualForEqualStatesReachedDifferently) {
  Feeder a(1);
  a.Add(Delegated(1, 1));
  a.Add(Delegated(2, 2));
  a.Add(SlotSealedEvent{2});
  Feeder b(1);
  b.Add(Delegated(2, 1, 0x55));
  b.Add(Delegated(3, 1));
  b.Add(Delegated(2, 2));
  b.Add(UndelegatedEvent{Key(3), 2, Signature()});
  b.Add(Delegated(1, 1));
  b.Add(SlotSealedEvent{2});
  EXPECT_EQ(a.fold().position().digest, b.fold().position().digest);
  Feeder c(1);
  c.Add(Delegated(1, 1));
  c.Add(SlotSealedEvent{2});
  EXPECT_NE(a.fold().position().digest, c.fold().position().digest);
}

// A restart resumes from the committed position: re-reading from next_offset rebuilds the
// pending records, and the result equals an uninterrupted fold.
TEST(FoldTest, RestartFromACommittedPositionGivesTheSameResult) {
  GeneratorOptions options;
  options.slots = 40;
  const std::vector<Event> events = GenerateEvents(options);
  const auto split = Partition(events, 2);
  Feeder whole(2);
  for (int p = 0; p < 2; ++p) {
    for (const Event& e : split[p]) whole.Add(e, p);
  }

  // Fold a prefix of each partition, "commit", and restart from the committed state.
  Feeder first(2);
  for (int p = 0; p < 2; ++p) {
    for (size_t i = 0; i < split[p].size() / (p + 2); ++i) first.Add(split[p][i], p);
  }
  FoldBatch committed = first.fold().TakeBatch();
  LoadedState state{first.fold().accounts(), committed.position};
  Feeder second(2, FoldOptions(), std::move(state));
  for (int p = 0; p < 2; ++p) {
    for (size_t i = static_cast<size_t>(second.fold().read_offset(p)); i < split[p].size(); ++i) {
      second.Add(split[p][i], p);
    }
  }
  EXPECT_EQ(second.fold().position().digest, whole.fold().position().digest);
  EXPECT_EQ(second.fold().position().applied_slot, whole.fold().position().applied_slot);
  EXPECT_EQ(second.fold().position().partitions, whole.fold().position().partitions);
  EXPECT_EQ(second.fold().position().counters, whole.fold().position().counters);
  EXPECT_EQ(second.fold().position().next_seq, whole.fold().position().next_seq);
}

// Regression: a restarted fold took the SlotSealed records it had read ahead before the
// restart (stored as the partitions' sealed slots) for granted, so its applied slot jumped
// past records it had not re-read yet, and it recorded other digests for those slots than a
// fold that never stopped. Whatever the interleaving and the moment of the restart, the
// digests recorded at every slot are those of an uninterrupted fold.
TEST(FoldTest, ARestartRecordsTheSameDigestAtEverySlot) {
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    GeneratorOptions options;
    options.seed = seed;
    options.accounts = 30;
    options.slots = 40;
    options.events_per_slot = 6;
    options.late_fraction = 0.2;
    const std::vector<Event> events = GenerateEvents(options);
    const int partitions = 2 + static_cast<int>(seed % 3);
    const auto split = Partition(events, partitions);
    // One interleaving of the partitions, fed whole, and fed with a restart in the middle.
    std::mt19937_64 rng(seed);
    std::vector<std::pair<int, size_t>> order;
    std::vector<size_t> next(partitions, 0);
    size_t left = 0;
    for (const auto& p : split) left += p.size();
    while (left > 0) {
      const int p = static_cast<int>(rng() % partitions);
      if (next[p] == split[p].size()) continue;
      order.emplace_back(p, next[p]++);
      --left;
    }
    std::map<Slot, StateDigest> whole_digests;
    Feeder whole(partitions);
    for (const auto& [p, i] : order) {
      whole.Add(split[p][i], p);
      for (const auto& [slot, digest] : whole.fold().TakeBatch().sealed_digests) {
        whole_digests[slot] = digest;
      }
    }

    const size_t cut = order.size() / 3 + seed * 7 % (order.size() / 3);
    std::map<Slot, StateDigest> digests;
    Feeder first(partitions);
    for (size_t k = 0; k < cut; ++k)
      first.Add(split[order[k].first][order[k].second], order[k].first);
    FoldBatch committed = first.fold().TakeBatch();
    for (const auto& [slot, digest] : committed.sealed_digests) digests[slot] = digest;
    LoadedState state{first.fold().accounts(), committed.position};
    Feeder second(partitions, FoldOptions(), std::move(state));
    // The restarted fold re-reads each partition from its next_offset, in an interleaving
    // of its own: a consumer fetches its partitions in no fixed order.
    std::vector<size_t> reread(partitions);
    size_t remaining = 0;
    for (int p = 0; p < partitions; ++p) {
      reread[p] = static_cast<size_t>(second.fold().read_offset(p));
      remaining += split[p].size() - reread[p];
    }
    std::mt19937_64 rng2(seed * 31);
    while (remaining > 0) {
      const int p = static_cast<int>(rng2() % partitions);
      if (reread[p] == split[p].size()) continue;
      second.Add(split[p][reread[p]++], p);
      --remaining;
      for (const auto& [slot, digest] : second.fold().TakeBatch().sealed_digests) {
        digests[slot] = digest;
      }
    }
    EXPECT_EQ(digests, whole_digests) << "seed " << seed << ", restart after " << cut;
    EXPECT_EQ(second.fold().position().digest, whole.fold().position().digest);
  }
}

TEST(FoldTest, StopSlotCapsTheAppliedSlot) {
  FoldOptions options;
  options.stop_at_slot = 3;
  Feeder f(1, options);
  f.Add(Delegated(1, 2));
  f.Add(SlotSealedEvent{2});
  EXPECT_FALSE(f.fold().ReachedStop());
  f.Add(Delegated(2, 4));
  f.Add(SlotSealedEvent{4});
  EXPECT_TRUE(f.fold().ReachedStop());
  EXPECT_EQ(f.fold().position().applied_slot, 3u);
  EXPECT_EQ(f.fold().MakeSnapshot()->FindDelegation(Key(2)), std::nullopt);
}

TEST(FoldTest, SaturatedWhenAPartitionAheadHoldsAFullQueue) {
  FoldOptions options;
  options.max_pending_per_partition = 3;
  Feeder f(2, options);
  for (Slot s = 1; s <= 3; ++s) f.Add(Delegated(1, s), 0);
  f.Add(SlotSealedEvent{3}, 0);  // partition 0 is ahead of partition 1
  EXPECT_TRUE(f.fold().Saturated(0));
  EXPECT_FALSE(f.fold().Saturated(1));
  f.Add(SlotSealedEvent{3}, 1);
  EXPECT_FALSE(f.fold().Saturated(0));
  EXPECT_NE(f.fold().MakeSnapshot()->FindDelegation(Key(1)), std::nullopt);
}

// Regression: a lone partition with more pending records than the bound, before its next
// SlotSealed, was paused and could never read that seal.
TEST(FoldTest, PartitionHoldingTheAppliedSlotBackIsNeverSaturated) {
  FoldOptions options;
  options.max_pending_per_partition = 3;
  Feeder f(1, options);
  for (uint8_t a = 1; a <= 6; ++a) f.Add(Delegated(a, 2));
  EXPECT_FALSE(f.fold().Saturated(0));
  f.Add(SlotSealedEvent{2});
  EXPECT_EQ(f.fold().delegated_count(), 6u);
}

TEST(AccountStateTest, EncodingRoundTripsAndRejectsBadInput) {
  AccountState s;
  s.validator = Key(1);
  s.owner_program = Key(2);
  s.delegation_slot = 3;
  s.lamports = 4;
  s.commit_frequency_ms = 5;
  s.last_event_slot = 6;
  s.delegated = true;
  std::string bytes;
  EncodeAccountState(s, &bytes);
  ASSERT_EQ(bytes.size(), kAccountStateSize);
  EXPECT_EQ(DecodeAccountState(bytes), s);
  EXPECT_EQ(DecodeAccountState(bytes.substr(1)), std::nullopt);
  bytes.back() = 2;
  EXPECT_EQ(DecodeAccountState(bytes), std::nullopt);
}

TEST(StateDigestTest, HexRoundTrips) {
  StateDigest d = StateDigest::FromParts(0x0123456789abcdefULL, 0xfedcba9876543210ULL);
  EXPECT_EQ(d.ToHex(), "0123456789abcdeffedcba9876543210");
  EXPECT_EQ(StateDigest::FromHex(d.ToHex()), d);
  EXPECT_EQ(StateDigest::FromHex("xyz"), std::nullopt);
}

}  // namespace
}  // namespace switchyard

namespace switchyard {
namespace {

TEST(SnapshotHolderTest, ListenersHearEachPublicationUntilRemoved) {
  SnapshotHolder holder;
  std::vector<Slot> heard;
  const uint64_t id = holder.AddListener(
      [&](const std::shared_ptr<const Snapshot>& s) { heard.push_back(s->applied_slot()); });
  holder.Publish(std::make_shared<const Snapshot>(AccountMap(), 5, StateDigest(), std::nullopt, 0));
  holder.Publish(std::make_shared<const Snapshot>(AccountMap(), 6, StateDigest(), std::nullopt, 0));
  holder.RemoveListener(id);
  holder.Publish(std::make_shared<const Snapshot>(AccountMap(), 7, StateDigest(), std::nullopt, 0));
  EXPECT_EQ(heard, (std::vector<Slot>{5, 6}));
  EXPECT_EQ(holder.Current()->applied_slot(), 7u);
}

}  // namespace
}  // namespace switchyard
