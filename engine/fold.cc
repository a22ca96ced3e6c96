#include "engine/fold.h"

#include <algorithm>
#include <limits>

#include "engine/event_codec.h"

namespace switchyard {

std::optional<Slot> FoldPosition::LimboSince() const {
  std::optional<Slot> since;
  for (const auto& p : partitions) {
    if (p.limbo_since && (!since || *p.limbo_since < *since)) since = p.limbo_since;
  }
  return since;
}

std::optional<AccountState> AccountStateAt(const std::vector<HistoryEntry>& history, Slot slot) {
  return AccountStateWithCauseAt(history, slot).state;
}

AccountStateAtSlot AccountStateWithCauseAt(const std::vector<HistoryEntry>& history, Slot slot) {
  AccountStateAtSlot out;
  const HistoryEntry* cause = nullptr;
  for (const auto& entry : history) {
    if (entry.ignored || entry.slot > slot) continue;
    out.state = ApplyAccountEvent(out.state ? &*out.state : nullptr, entry.event).next;
    cause = &entry;
  }
  if (cause != nullptr) out.cause = *cause;
  return out;
}

Fold::Fold(FoldOptions options, LoadedState state, int32_t partition_count)
    : options_(options),
      accounts_(std::move(state.accounts)),
      position_(std::move(state.position)),
      partitions_(static_cast<size_t>(std::max(partition_count, 1))) {
  position_.partitions.resize(partitions_.size());
  for (size_t p = 0; p < partitions_.size(); ++p) {
    partitions_[p].read_offset = position_.partitions[p].next_offset;
    partitions_[p].last_seal = position_.applied_slot;
    // A SlotSealed above the applied slot was still pending, at or after next_offset: it is
    // read again. Counting it before then would apply records not yet read again.
    auto& cursor = position_.partitions[p];
    cursor.sealed_slot = std::min(cursor.sealed_slot, position_.applied_slot);
  }
  accounts_.ForEach([this](const Pubkey&, const AccountState& s) {
    if (s.delegated) ++delegated_count_;
  });
}

bool Fold::Saturated(int32_t partition) const {
  // Only a partition that is ahead (it sealed more than the applied slot) waits for the
  // others; the partition that holds the applied slot back must keep reading towards its
  // next SlotSealed, however much it holds.
  return partitions_[partition].pending.size() >= options_.max_pending_per_partition &&
         position_.partitions[partition].sealed_slot > position_.applied_slot;
}

bool Fold::ReachedStop() const {
  if (!options_.stop_at_slot) return false;
  for (const auto& p : position_.partitions) {
    if (p.sealed_slot < *options_.stop_at_slot) return false;
  }
  return true;
}

Slot Fold::ComputeAppliedSlot() const {
  Slot applied = std::numeric_limits<Slot>::max();
  for (const auto& p : position_.partitions) applied = std::min(applied, p.sealed_slot);
  if (options_.stop_at_slot) applied = std::min(applied, *options_.stop_at_slot);
  return std::max(applied, position_.applied_slot);
}

void Fold::Add(int32_t partition, int64_t offset, std::string_view record) {
  PartitionQueue& queue = partitions_[partition];
  queue.read_offset = offset + 1;
  PendingRecord pending;
  pending.offset = offset;
  absl::StatusOr<Event> event = DecodeEvent(record);
  if (event.ok()) {
    if (const auto* seal = std::get_if<SlotSealedEvent>(&*event)) {
      auto& cursor = position_.partitions[partition];
      cursor.sealed_slot = std::max(cursor.sealed_slot, seal->slot);
      pending.fold_slot = seal->slot;
      queue.last_seal = std::max(queue.last_seal, seal->slot);
    } else if (const auto* gap = std::get_if<StreamGapEvent>(&*event)) {
      // A lost stream reaches the routing at once, whatever is queued before it.
      auto& cursor = position_.partitions[partition];
      if (!cursor.limbo_since) cursor.limbo_since = gap->slot;
      queue.last_gap_offset = offset;
      pending.fold_slot = SlotOf(*event);
    } else {
      pending.fold_slot = std::max(SlotOf(*event), queue.last_seal + 1);
    }
    if (AccountOf(*event) != nullptr) pending.record = std::string(record);
    pending.event = *std::move(event);
  } else {
    pending.error = std::string(event.status().message());
    pending.record = std::string(record);
  }
  queue.pending.push_back(std::move(pending));

  const Slot applied = ComputeAppliedSlot();
  if (applied == position_.applied_slot) {
    Drain(partition);
    return;
  }
  position_.applied_slot = applied;
  for (int32_t p = 0; p < partition_count(); ++p) Drain(p);
  batch_.sealed_digests.emplace_back(applied, position_.digest);
}

void Fold::Drain(int32_t partition) {
  PartitionQueue& queue = partitions_[partition];
  auto& cursor = position_.partitions[partition];
  // Once a seal lets a slot's records fold, each touches its account's cell at random in a
  // large map: the cell of the record a few places ahead is asked for first, so that the
  // cache misses overlap instead of following one another.
  constexpr size_t kAhead = 8;
  while (!queue.pending.empty() && FoldHead(partition)) {
    queue.pending.pop_front();
    if (queue.pending.size() > kAhead && queue.pending[kAhead].event) {
      if (const Pubkey* account = AccountOf(*queue.pending[kAhead].event)) {
        accounts_.Prefetch(*account);
      }
    }
  }
  cursor.next_offset = queue.pending.empty() ? queue.read_offset : queue.pending.front().offset;
}

bool Fold::FoldHead(int32_t partition) {
  PendingRecord& head = partitions_[partition].pending.front();
  auto& cursor = position_.partitions[partition];
  if (!head.event) {
    batch_.quarantine.push_back(
        {partition, head.offset, std::move(head.error), std::move(head.record)});
    ++position_.counters.quarantined;
    return true;
  }
  const Event& event = *head.event;
  if (head.fold_slot > position_.applied_slot) return false;
  if (std::holds_alternative<SlotSealedEvent>(event)) {
    ++position_.counters.seals;
    return true;
  }
  if (std::holds_alternative<StreamGapEvent>(event)) {
    ++position_.counters.stream_gaps;  // the limbo began when it was read (Add)
  } else if (std::holds_alternative<ResyncedEvent>(event)) {
    if (head.offset > partitions_[partition].last_gap_offset) cursor.limbo_since.reset();
    ++position_.counters.resyncs;
  } else {
    FoldAccountEvent(event, std::move(head.record));
  }
  return true;
}

void Fold::FoldAccountEvent(const Event& event, std::string record) {
  const Pubkey& account = *AccountOf(event);
  const std::optional<AccountState> found = accounts_.Find(account);
  const AccountState* current = found ? &*found : nullptr;
  const ApplyResult result = ApplyAccountEvent(current, event);
  const bool ignored = result.outcome == ApplyOutcome::kIgnoredStale;
  batch_.history.push_back(
      {account, SlotOf(event), position_.next_seq++, ignored, std::move(record)});
  if (ignored) {
    ++position_.counters.ignored_stale;
    return;
  }
  ++position_.counters.applied;
  if (current != nullptr) {
    position_.digest.Remove(account, *current);
    if (current->delegated) --delegated_count_;
  }
  position_.digest.Add(account, result.next);
  if (result.next.delegated) ++delegated_count_;
  accounts_.Upsert(account, result.next);
  batch_.accounts.push_back({account, result.next});
  if (!changed_overflow_) {
    if (changed_.size() < kMaxListedChanges) {
      changed_.push_back(account);
    } else {
      changed_overflow_ = true;
      std::vector<Pubkey>().swap(changed_);
    }
  }
}

FoldBatch Fold::TakeBatch() {
  FoldBatch out = std::move(batch_);
  batch_ = std::move(spare_);
  spare_ = FoldBatch();
  out.position = position_;
  return out;
}

void Fold::Recycle(FoldBatch batch) {
  batch.Clear();
  spare_ = std::move(batch);
}

std::shared_ptr<const Snapshot> Fold::MakeSnapshot() {
  SnapshotChanges changes;
  changes.generation = ++generation_;
  // The first snapshot has no predecessor to list changes against.
  if (generation_ > 1 && !changed_overflow_) {
    changes.accounts = std::make_shared<const std::vector<Pubkey>>(std::move(changed_));
  }
  changed_ = {};
  changed_overflow_ = false;
  return std::make_shared<const Snapshot>(accounts_, position_.applied_slot, position_.digest,
                                          position_.LimboSince(), delegated_count_,
                                          std::move(changes));
}

}  // namespace switchyard
