#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/account_map.h"
#include "engine/snapshot.h"
#include "engine/state_store.h"

namespace switchyard {

struct FoldOptions {
  // Records read but not yet foldable (their slot is above the applied slot) that one
  // partition may hold before Saturated() asks the reader to stop reading it.
  size_t max_pending_per_partition = 200'000;
  // Replay: the applied slot never passes this slot.
  std::optional<Slot> stop_at_slot;
};

// Folds log records into the delegation state; pure logic, no I/O. Owned and called by one
// thread (the fold runner, or a test).
//
// Records are fed per partition in offset order. A SlotSealed(S) record raises its
// partition's sealed slot; the applied slot is the lowest sealed slot over all partitions
// (capped by `stop_at_slot`). A record is folded only once its slot is at or below the
// applied slot, and in its partition's order, so the state is always that of a whole slot.
// A record that comes after a SlotSealed(S) of its partition although its slot is at or below
// S (a late record: a correction, a repair) counts for slot S + 1: the state at an applied
// slot holds exactly the records before that slot's SlotSealed in every partition, whatever
// order the partitions were read in, so every replica shows the same digest for a slot.
// A StreamGap takes effect the moment it is read, ahead of the records queued before it in
// its partition (they may wait for a seal that will not come until the stream is back):
// limbo must reach the routing at once. It changes no digest. A Resynced clears the limbo
// only when it comes after the partition's last StreamGap.
// Records that fail to decode are quarantined in order. Everything the fold changes is
// collected into the next FoldBatch, whose position says where to resume after a restart:
// re-reading from each partition's `next_offset` rebuilds the records still pending.
class Fold {
 public:
  Fold(FoldOptions options, LoadedState state, int32_t partition_count);

  int32_t partition_count() const { return static_cast<int32_t>(partitions_.size()); }
  // The offset of the next record to feed from `partition`.
  int64_t read_offset(int32_t partition) const { return partitions_[partition].read_offset; }
  // True while `partition` holds as many pending records as allowed and is ahead of the
  // applied slot: the reader should stop reading it until the other partitions catch up.
  bool Saturated(int32_t partition) const;
  // True once every partition has sealed `stop_at_slot` (only with a stop slot).
  bool ReachedStop() const;

  // Feeds the record at `offset` of `partition`; offsets of a partition must increase.
  void Add(int32_t partition, int64_t offset, std::string_view record);

  // The changes since the previous call. The batch folded next is filled into the vectors of
  // the batch last given to Recycle, if any.
  FoldBatch TakeBatch();
  // Gives a written batch back, its contents dropped, so that the batch begun at the next
  // TakeBatch reuses its vectors' memory instead of growing new ones: a catch-up's batches are
  // tens of megabytes, and fresh memory costs a copy at each doubling and a page fault per page.
  void Recycle(FoldBatch batch);
  // An immutable snapshot of the state now, with the accounts written since the previous one
  // (Snapshot::changes). Cheap: shares the account map's shards.
  std::shared_ptr<const Snapshot> MakeSnapshot();
  // A snapshot lists at most this many written accounts; past it, its list is unknown.
  static constexpr size_t kMaxListedChanges = 1 << 16;

  const FoldPosition& position() const { return position_; }
  const AccountMap& accounts() const { return accounts_; }
  size_t delegated_count() const { return delegated_count_; }

 private:
  struct PendingRecord {
    int64_t offset = 0;
    // The applied slot from which it may be folded: its own slot, or for a late record
    // (see above) the slot after the last SlotSealed before it in its partition.
    Slot fold_slot = 0;
    std::optional<Event> event;  // empty: failed to decode
    // The record, kept for history rows and quarantine (PartitionQueue::RecordOf).
    size_t record_begin = 0;
    size_t record_size = 0;
    std::string error;
  };
  // A partition's records read and not yet folded, oldest first. They live in a vector from
  // `head` on, their bytes in one string, and both are emptied, not freed, whenever the queue
  // drains (at every seal, in order), so that a record queued costs no allocation.
  struct PartitionQueue {
    int64_t read_offset = 0;
    // The highest SlotSealed fed so far. A SlotSealed leaves the queue only once the applied
    // slot reaches it, so at a committed position every SlotSealed before `next_offset` is at
    // or below the applied slot: a fold resumed there starts from the applied slot.
    Slot last_seal = 0;
    // The offset of the last StreamGap read (-1: none since the fold started): a Resynced
    // before it does not end the limbo that gap began.
    int64_t last_gap_offset = -1;
    std::vector<PendingRecord> pending;
    size_t head = 0;
    std::string records;

    size_t size() const { return pending.size() - head; }
    bool empty() const { return head == pending.size(); }
    PendingRecord& front() { return pending[head]; }
    // The record `ahead` places behind the front, or null past the end.
    const PendingRecord* Peek(size_t ahead) const {
      return head + ahead < pending.size() ? &pending[head + ahead] : nullptr;
    }
    std::string_view RecordOf(const PendingRecord& r) const {
      return std::string_view(records).substr(r.record_begin, r.record_size);
    }
    PendingRecord& Push(int64_t offset);
    void PopFront();
  };

  Slot ComputeAppliedSlot() const;
  void Drain(int32_t partition);
  // Folds the head record of the partition if it may be folded now; false when it must wait.
  bool FoldHead(int32_t partition);
  void FoldAccountEvent(const Event& event, std::string_view record);

  FoldOptions options_;
  AccountMap accounts_;
  FoldPosition position_;
  std::vector<PartitionQueue> partitions_;
  size_t delegated_count_ = 0;
  FoldBatch batch_;
  FoldBatch spare_;  // given back by Recycle, empty
  // The accounts written since the last MakeSnapshot, while there are at most
  // kMaxListedChanges of them.
  std::vector<Pubkey> changed_;
  bool changed_overflow_ = false;
  uint64_t generation_ = 0;  // snapshots made
};

}  // namespace switchyard
