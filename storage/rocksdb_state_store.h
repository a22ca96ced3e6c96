#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/state_store.h"

namespace rocksdb {
class DB;
class ColumnFamilyHandle;
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
};

// The delegation state in RocksDB. Column families:
//   state       account -> AccountState (tombstones included)
//   history     account | slot (BE) | seq (BE) -> flags | the event's log record
//   meta        schema version, applied slot, digest, fold position, counters, and
//               "sealed/" | slot (BE) -> the digest when the applied slot reached that slot
//   quarantine  partition (BE) | offset (BE) -> reason and the undecodable record
// Each Commit is one WriteBatch. Thread-safe.
class RocksDbStateStore final : public StateStore {
 public:
  static constexpr uint32_t kSchemaVersion = 1;

  // Opens or creates the store at `path`. A store written by a newer schema version is
  // refused with a message naming both versions.
  static absl::StatusOr<std::unique_ptr<RocksDbStateStore>> Open(
      const std::string& path, const RocksDbStateStoreOptions& options = {});
  ~RocksDbStateStore() override;

  absl::StatusOr<LoadedState> Load() override;
  absl::Status Commit(const FoldBatch& batch) override;
  absl::StatusOr<FoldPosition> Position() override;
  absl::StatusOr<std::optional<AccountState>> GetAccount(const Pubkey& account) override;
  absl::StatusOr<std::optional<AccountState>> GetAccountAt(const Pubkey& account,
                                                           Slot slot) override;
  absl::StatusOr<std::vector<HistoryEntry>> History(const Pubkey& account) override;
  absl::StatusOr<std::optional<StateDigest>> SealedDigest(Slot slot) override;
  absl::StatusOr<std::vector<std::pair<Slot, StateDigest>>> SealedDigests() override;
  absl::StatusOr<std::vector<QuarantineEntry>> Quarantine() override;

  // Number of rows in the history column family (for audits and tests).
  absl::StatusOr<uint64_t> CountHistoryRows();

 private:
  RocksDbStateStore(std::unique_ptr<storage_internal::Database> database, bool sync_commits);
  absl::Status CheckSchemaVersion(const std::string& path);

  std::unique_ptr<storage_internal::Database> database_;
  rocksdb::DB* db_;  // owned by database_
  rocksdb::ColumnFamilyHandle* state_cf_;
  rocksdb::ColumnFamilyHandle* history_cf_;
  rocksdb::ColumnFamilyHandle* meta_cf_;
  rocksdb::ColumnFamilyHandle* quarantine_cf_;
  bool sync_commits_;
};

}  // namespace switchyard
