#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/pubkey_hash.h"
#include "engine/state_store.h"

namespace rocksdb {
class DB;
class ColumnFamilyHandle;
class WriteBatch;
struct ReadOptions;
class Slice;
class Status;
}  // namespace rocksdb

namespace switchyard {
namespace storage_internal {
class Database;
}  // namespace storage_internal

struct RocksDbStateStoreOptions {
  // fsync the write-ahead log on every commit, so a committed batch survives power loss.
  bool sync_commits = true;
  size_t block_cache_bytes = 32 << 20;
  bool create_if_missing = true;
  // Open as a RocksDB secondary instance (read-only, beside a primary that may be folding
  // into the same directory in another process, caught up with it at open), with its own
  // info log under `secondary_path`. Commit then fails; nothing is migrated.
  bool secondary = false;
  std::string secondary_path;
  // A commit of at least this many history rows (a catch-up, a replay) is written as table
  // files ingested in one atomic, durable step instead of through the write-ahead log and the
  // memtables; 0: never (docs/architecture.md, "Crash safety").
  size_t ingest_min_rows = 25'000;
};

// The delegation state in RocksDB. Column families:
//   state            account -> AccountState (tombstones included)
//   history          account | slot (BE) | seq (BE) -> flags | the seq (BE) that keys the
//                    history_by_slot row holding the event's record: each account's rows
//   history_by_slot  slot (BE) | seq of its first row (BE) -> per row: account | flags |
//                    seq (BE) | record size | the event's log record, byte for byte: the
//                    records in slot order, up to 16 rows of one slot and one commit per key.
//                    Each record is stored once, here
//   meta             schema version, applied slot, digest, fold position, counters, and
//                    "sealed/" | slot (BE) -> the digest when the applied slot reached that slot
//   quarantine       partition (BE) | offset (BE) -> reason and the undecodable record
// Each Commit is one WriteBatch, or for a large one, one table file per family, built under
// `ingest/` in the store's directory and ingested together; Stage builds either without
// applying it. Thread-safe.
class RocksDbStateStore final : public StateStore {
 public:
  // 2: history_by_slot, one row per event. 3: history_by_slot packed per slot and commit,
  // the records in history. 4: the records in history_by_slot, history an index of them
  // (docs/architecture.md, "The state in RocksDB"). A store of an older schema opened as a
  // primary is moved to schema 4 at open.
  static constexpr uint32_t kSchemaVersion = 4;

  // Opens or creates the store at `path`. A store written by a newer schema version is
  // refused with a message naming both versions.
  static absl::StatusOr<std::unique_ptr<RocksDbStateStore>> Open(
      const std::string& path, const RocksDbStateStoreOptions& options = {});
  ~RocksDbStateStore() override;

  // Calls `row` for every history row with from_slot <= slot <= to_slot, in (slot, seq)
  // order, from one consistent view of the store, holding one row at a time; stops at the
  // first error `row` returns. FailedPrecondition on a store of an older schema opened as a
  // secondary.
  absl::Status ForEachHistoryRow(Slot from_slot, Slot to_slot,
                                 absl::FunctionRef<absl::Status(const HistoryEntry&)> row);
  absl::StatusOr<std::vector<HistoryEntry>> HistoryBetween(const Pubkey& account, Slot from_slot,
                                                           Slot to_slot, size_t limit) override;

  absl::StatusOr<LoadedState> Load() override;
  absl::Status Commit(const FoldBatch& batch) override;
  // Builds the batch's table files (or, for a small batch, its write batch); Apply ingests
  // them (or writes it). Ingestion that fails in Apply is not retried through the write-ahead
  // log, as Commit's is: the batch is gone by then.
  absl::StatusOr<std::unique_ptr<StagedCommit>> Stage(const FoldBatch& batch) override;
  absl::StatusOr<FoldPosition> Position() override;
  absl::StatusOr<std::optional<AccountState>> GetAccount(const Pubkey& account) override;
  absl::StatusOr<std::optional<AccountState>> GetAccountAt(const Pubkey& account,
                                                           Slot slot) override;
  absl::StatusOr<std::vector<HistoryEntry>> History(const Pubkey& account) override;
  absl::StatusOr<std::optional<StateDigest>> SealedDigest(Slot slot) override;
  absl::StatusOr<std::vector<SealedDigestAt>> LastSealedDigests(Slot at_or_below,
                                                                size_t count) override;
  absl::StatusOr<std::vector<std::pair<Slot, StateDigest>>> SealedDigests() override;
  absl::StatusOr<std::vector<QuarantineEntry>> Quarantine() override;
  Memory MemoryUsage() override;

  // Commits written as table files since open.
  uint64_t ingested_commits() const { return ingested_commits_.load(); }

  // Number of rows in the history column family (for audits and tests).
  absl::StatusOr<uint64_t> CountHistoryRows();

  // What a full scan of the state family finds: the digest recomputed from the rows (not
  // the one stored with the position), and the number of rows.
  struct StateScan {
    StateDigest digest;
    uint64_t accounts = 0;   // rows, tombstones included
    uint64_t delegated = 0;  // rows that delegate
  };
  absl::StatusOr<StateScan> ScanState();

  // A RocksDB checkpoint of the whole store in `dir` (which must not exist): every family as
  // of one moment, so the position in it matches its rows; table files are hard links when
  // `dir` is on the same file system. Safe while a fold commits.
  absl::Status CreateCheckpoint(const std::string& dir);

 private:
  // A row of a commit to put: the first eight bytes of its key and its index in the batch.
  struct KeyOrder {
    uint64_t prefix = 0;
    size_t index = 0;
  };

  // A history row whose record is still to be read from history_by_slot.
  struct RecordRef {
    size_t index = 0;  // in the reader's output
    Slot slot = 0;
    uint64_t seq = 0;
    uint64_t slot_key_seq = 0;  // the seq in the key of the history_by_slot row holding it
  };

  RocksDbStateStore(std::unique_ptr<storage_internal::Database> database,
                    const RocksDbStateStoreOptions& options, std::string ingest_dir);
  absl::Status CheckSchemaVersion(const std::string& path, bool secondary);
  // Moves every record of a store of schema 1 to 3 from its history row to a history_by_slot
  // row of its own, then records the schema version. Resumes a move cut short.
  absl::Status MigrateToSchema4();
  // Reads the record of each of `refs` into out[ref.index], with `read`.
  absl::Status ReadRecords(const rocksdb::ReadOptions& read, const std::vector<RecordRef>& refs,
                           std::vector<HistoryEntry>& out);
  class StagedTableFiles;
  class StagedWrite;

  // Whether a batch is large enough to be written as table files.
  bool Ingests(const FoldBatch& batch) const;
  // The batch's rows put into one table file per family, to be ingested together. On failure
  // nothing is applied.
  absl::StatusOr<std::unique_ptr<StagedCommit>> StageTableFiles(const FoldBatch& batch)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(commit_mu_);
  // The batch's rows in a write batch, to be written through the write-ahead log.
  absl::StatusOr<std::unique_ptr<StagedCommit>> StageWrite(const FoldBatch& batch)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(commit_mu_);
  // A commit's rows of one column family go through a PutRow, in key order: into the write
  // batch, or into the family's table file (rocksdb_state_commit.cc).
  using PutRow = absl::FunctionRef<rocksdb::Status(const rocksdb::Slice&, const rocksdb::Slice&)>;
  // The state rows: each account's last write in the batch.
  absl::Status PutStateRows(const FoldBatch& batch, PutRow put)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(commit_mu_);
  // The history_by_slot rows that hold the records, then the history rows that index them.
  absl::Status PutHistoryRows(const FoldBatch& batch, PutRow by_slot, PutRow history)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(commit_mu_);
  // The quarantined records; in meta the position and the sealed digests.
  absl::Status PutMetaRows(const FoldBatch& batch, PutRow quarantine, PutRow meta);

  std::unique_ptr<storage_internal::Database> database_;
  rocksdb::DB* db_;  // owned by database_
  rocksdb::ColumnFamilyHandle* state_cf_;
  rocksdb::ColumnFamilyHandle* history_cf_;
  rocksdb::ColumnFamilyHandle* meta_cf_;
  rocksdb::ColumnFamilyHandle* quarantine_cf_;
  rocksdb::ColumnFamilyHandle* by_slot_cf_;  // null in a schema-1 store opened as a secondary
  bool sync_commits_;
  size_t ingest_min_rows_;
  std::string ingest_dir_;
  std::atomic<uint64_t> ingested_commits_{0};
  // False on a secondary of an older schema, whose records are not in slot order yet.
  bool slot_order_ready_ = true;
  // A write batch given back by the last staged write, so that its buffer keeps its pages.
  absl::Mutex spare_mu_;
  std::unique_ptr<rocksdb::WriteBatch> spare_batch_ ABSL_GUARDED_BY(spare_mu_);
  // Commit's and Stage's buffers, kept across commits so that their memory is reused.
  absl::Mutex commit_mu_;
  std::string commit_key_ ABSL_GUARDED_BY(commit_mu_);
  std::string commit_value_ ABSL_GUARDED_BY(commit_mu_);
  std::string commit_packed_ ABSL_GUARDED_BY(commit_mu_);
  absl::flat_hash_set<Pubkey, PubkeyHash> written_ ABSL_GUARDED_BY(commit_mu_);
  std::vector<std::pair<Slot, size_t>> slot_rows_ ABSL_GUARDED_BY(commit_mu_);
  std::vector<uint64_t> slot_key_of_ ABSL_GUARDED_BY(commit_mu_);
  std::vector<KeyOrder> order_ ABSL_GUARDED_BY(commit_mu_);
  std::vector<KeyOrder> sort_rows_ ABSL_GUARDED_BY(commit_mu_);         // SortByKey's scratch
  std::vector<uint32_t> sort_bucket_ends_ ABSL_GUARDED_BY(commit_mu_);  // likewise
};

}  // namespace switchyard
