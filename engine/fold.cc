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
  return partitions_[partition].size() >= options_.max_pending_per_partition &&
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

Fold::PendingRecord& Fold::PartitionQueue::Push(int64_t offset) {
  PendingRecord& record = pending.emplace_back();
  record.offset = offset;
  record.record_begin = records.size();
  return record;
}

void Fold::PartitionQueue::PopFront() {
  ++head;
  if (head == pending.size()) {
    // Drained: keep the memory for the next slot's records, unless a long wait (a partition
    // far ahead of the others) grew it well past what one slot needs.
    constexpr size_t kKeptRecords = 1 << 16;
    if (pending.capacity() > kKeptRecords) {
      std::vector<PendingRecord>().swap(pending);
      std::string().swap(records);
    }
    pending.clear();
    records.clear();
    head = 0;
    return;
  }
  // A queue that never drains (its partition's seals wait for the others') drops the records
  // folded so far once they are most of it, so that it stays within twice what it holds.
  if (head >= 4096 && head * 2 >= pending.size()) {
    const size_t drop_bytes = pending[head].record_begin;
    pending.erase(pending.begin(), pending.begin() + static_cast<std::ptrdiff_t>(head));
    records.erase(0, drop_bytes);
    for (PendingRecord& r : pending) r.record_begin -= drop_bytes;
    head = 0;
  }
}

void Fold::Add(int32_t partition, int64_t offset, std::string_view record) {
  PartitionQueue& queue = partitions_[partition];
  queue.read_offset = offset + 1;
  PendingRecord& pending = queue.Push(offset);
  absl::StatusOr<Event> event = DecodeEvent(record);
  bool keep_record = true;
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
    keep_record = AccountOf(*event) != nullptr;
    pending.event = *std::move(event);
  } else {
    pending.error = std::string(event.status().message());
  }
  if (keep_record) {
    queue.records.append(record);
    pending.record_size = record.size();
  }

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
  while (!queue.empty() && FoldHead(partition)) {
    queue.PopFront();
    if (const PendingRecord* ahead = queue.Peek(kAhead); ahead != nullptr && ahead->event) {
      if (const Pubkey* account = AccountOf(*ahead->event)) accounts_.Prefetch(*account);
    }
  }
  cursor.next_offset = queue.empty() ? queue.read_offset : queue.front().offset;
}

bool Fold::FoldHead(int32_t partition) {
  PartitionQueue& queue = partitions_[partition];
  PendingRecord& head = queue.front();
  auto& cursor = position_.partitions[partition];
  if (!head.event) {
    batch_.quarantine.push_back(
        {partition, head.offset, std::move(head.error), std::string(queue.RecordOf(head))});
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
    if (head.offset > queue.last_gap_offset) cursor.limbo_since.reset();
    ++position_.counters.resyncs;
  } else {
    FoldAccountEvent(event, queue.RecordOf(head));
  }
  return true;
}

void Fold::FoldAccountEvent(const Event& event, std::string_view record) {
  const Pubkey& account = *AccountOf(event);
  const std::optional<AccountState> found = accounts_.Find(account);
  const AccountState* current = found ? &*found : nullptr;
  const ApplyResult result = ApplyAccountEvent(current, event);
  const bool ignored = result.outcome == ApplyOutcome::kIgnoredStale;
  batch_.AddHistory(account, SlotOf(event), position_.next_seq++, ignored, record);
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
