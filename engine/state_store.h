#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "common/pubkey.h"
#include "common/slot.h"
#include "engine/account_map.h"
#include "engine/account_state.h"
#include "engine/event.h"
#include "engine/state_digest.h"

namespace switchyard {

// Where the fold stands in one partition of the log.
struct PartitionCursor {
  int64_t next_offset = 0;          // the first record not yet folded into the state
  Slot sealed_slot = 0;             // the highest SlotSealed read from this partition (0: none)
  std::optional<Slot> limbo_since;  // set by StreamGap, cleared by Resynced

  friend bool operator==(const PartitionCursor&, const PartitionCursor&) = default;
};

// Totals since the state was created; persisted with it.
struct FoldCounters {
  uint64_t applied = 0;        // account events that changed the state
  uint64_t ignored_stale = 0;  // account events older than the account's last event
  uint64_t quarantined = 0;    // records that failed to decode
  uint64_t seals = 0;
  uint64_t stream_gaps = 0;
  uint64_t resyncs = 0;

  friend bool operator==(const FoldCounters&, const FoldCounters&) = default;
};

// Everything but the accounts: the fold's position in the log and what it has computed.
struct FoldPosition {
  std::vector<PartitionCursor> partitions;
  Slot applied_slot = 0;
  StateDigest digest;
  uint64_t next_seq = 0;  // the sequence number of the next history row
  FoldCounters counters;

  std::optional<Slot> LimboSince() const;
};

// One row of an account's history: every account event folded, in fold order.
struct HistoryEntry {
  Slot slot = 0;
  uint64_t seq = 0;
  bool ignored = false;  // true when the fold ignored the event as stale
  Event event;
};

// A record that could not be decoded, kept with its place in the log.
struct QuarantineEntry {
  int32_t partition = 0;
  int64_t offset = 0;
  std::string reason;
  std::string record;
};

// The changes of one fold batch; a StateStore writes them atomically.
struct FoldBatch {
  struct AccountWrite {
    Pubkey account;
    AccountState state;
  };
  struct HistoryRow {
    Pubkey account;
    Slot slot = 0;
    uint64_t seq = 0;
    bool ignored = false;
    // The event's log record, byte for byte: `record_size` bytes of `history_records` from
    // `record_begin` (RecordOf).
    uint32_t record_size = 0;
    size_t record_begin = 0;
  };
  std::vector<AccountWrite> accounts;  // in fold order; a later write to an account wins
  std::vector<HistoryRow> history;
  // The records of `history`, one after the other: one buffer for a batch's records rather
  // than one allocation for each.
  std::string history_records;
  std::vector<QuarantineEntry> quarantine;
  std::vector<std::pair<Slot, StateDigest>> sealed_digests;  // digest at each applied slot reached
  FoldPosition position;                                     // after the batch

  bool HasChanges() const {
    return !accounts.empty() || !history.empty() || !quarantine.empty() || !sealed_digests.empty();
  }
  void AddHistory(const Pubkey& account, Slot slot, uint64_t seq, bool ignored,
                  std::string_view record) {
    history.push_back({account, slot, seq, ignored, static_cast<uint32_t>(record.size()),
                       history_records.size()});
    history_records.append(record);
  }
  std::string_view RecordOf(const HistoryRow& row) const {
    return std::string_view(history_records).substr(row.record_begin, row.record_size);
  }
  // Drops the contents and keeps the vectors' memory, for the next batch (Fold::Recycle).
  void Clear() {
    accounts.clear();
    history.clear();
    history_records.clear();
    quarantine.clear();
    sealed_digests.clear();
  }
};

// The state as loaded at start-up.
struct LoadedState {
  AccountMap accounts;
  FoldPosition position;
};

// Read access to the history of the folded state, for audits: the router's history methods
// and the command line. Implementations are thread-safe; every call may block on the disk, so
// no I/O thread calls it.
class HistoryReader {
 public:
  virtual ~HistoryReader() = default;

  // Every row of the account, in (slot, seq) order.
  virtual absl::StatusOr<std::vector<HistoryEntry>> History(const Pubkey& account) = 0;
  // The account's rows with from_slot <= slot <= to_slot, in (slot, seq) order, at most
  // `limit` of them (the first ones).
  virtual absl::StatusOr<std::vector<HistoryEntry>> HistoryBetween(const Pubkey& account,
                                                                   Slot from_slot, Slot to_slot,
                                                                   size_t limit) = 0;
};

// The digest a replica recorded when its applied slot reached `slot` (a sealed digest).
struct SealedDigestAt {
  Slot slot = 0;
  StateDigest digest;

  friend bool operator==(const SealedDigestAt&, const SealedDigestAt&) = default;
};

// Read access to the sealed digests, for comparing replicas: the admin endpoint
// /status/digest and the peer check. Implementations are thread-safe; every call may block on
// the disk, so no I/O thread calls it.
class SealedDigestReader {
 public:
  virtual ~SealedDigestReader() = default;

  // The digest recorded when the applied slot reached `slot`, if it stopped there.
  virtual absl::StatusOr<std::optional<StateDigest>> SealedDigest(Slot slot) = 0;
  // The `count` highest sealed slots at or below `at_or_below`, in ascending slot order.
  virtual absl::StatusOr<std::vector<SealedDigestAt>> LastSealedDigests(Slot at_or_below,
                                                                        size_t count) = 0;
};

// A batch's rows written where nothing reads them yet (StateStore::Stage); Apply makes them
// durable and visible in one atomic step. Dropped unapplied, it leaves the store as it was.
// It must not outlive the store that staged it.
class StagedCommit {
 public:
  virtual ~StagedCommit() = default;
  virtual absl::Status Apply() = 0;
};

// The persistent delegation state. Implemented by storage/ (RocksDbStateStore). Called from
// the fold's thread for writes; reads may come from any thread.
class StateStore : public HistoryReader, public SealedDigestReader {
 public:
  // Memory the store holds for its database, in bytes: its write buffers (memtables, which
  // grow with writes until a flush) and its block cache. Zero where a store cannot tell.
  struct Memory {
    uint64_t memtables = 0;
    uint64_t block_cache = 0;
  };
  virtual Memory MemoryUsage() { return {}; }

  virtual absl::StatusOr<LoadedState> Load() = 0;
  // Writes a batch atomically and durably: all of it or none of it.
  virtual absl::Status Commit(const FoldBatch& batch) = 0;
  // Commit in two steps, so that a writer can build one batch's rows while the batch before
  // it is made durable (docs/architecture.md, "Crash safety"). The batch is not used once
  // Stage returns. One Stage at a time; staged commits are applied one at a time, in the
  // order they were staged, and none while a Commit runs. A store that cannot stage commits
  // at once here and returns a commit with nothing left to apply.
  virtual absl::StatusOr<std::unique_ptr<StagedCommit>> Stage(const FoldBatch& batch) {
    struct Committed final : StagedCommit {
      absl::Status Apply() override { return absl::OkStatus(); }
    };
    if (absl::Status s = Commit(batch); !s.ok()) return s;
    return std::make_unique<Committed>();
  }

  virtual absl::StatusOr<FoldPosition> Position() = 0;
  // The account now (tombstones included), or nullopt for an account never seen.
  virtual absl::StatusOr<std::optional<AccountState>> GetAccount(const Pubkey& account) = 0;
  // The account as of the end of `slot`, rebuilt from its history.
  virtual absl::StatusOr<std::optional<AccountState>> GetAccountAt(const Pubkey& account,
                                                                   Slot slot) = 0;
  virtual absl::StatusOr<std::vector<std::pair<Slot, StateDigest>>> SealedDigests() = 0;
  virtual absl::StatusOr<std::vector<QuarantineEntry>> Quarantine() = 0;
};

// The account's state after every non-ignored history entry at or below `slot`.
std::optional<AccountState> AccountStateAt(const std::vector<HistoryEntry>& history, Slot slot);

// The same, with the last non-ignored row at or below `slot`: the event that made the state
// what it is then (for a delegation, the Delegated event and so its transaction). Both empty
// for an account with no such row.
struct AccountStateAtSlot {
  std::optional<AccountState> state;
  std::optional<HistoryEntry> cause;
};
AccountStateAtSlot AccountStateWithCauseAt(const std::vector<HistoryEntry>& history, Slot slot);

}  // namespace switchyard
