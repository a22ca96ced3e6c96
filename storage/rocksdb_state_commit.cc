// RocksDbStateStore::Commit: a fold batch as the rows of the state store's column families,
// written through the write-ahead log or, for a large commit, as table files ingested in one
// step (docs/architecture.md, "Crash safety").
#include <rocksdb/db.h>
#include <rocksdb/write_batch.h>

#include <filesystem>
#include <memory>
#include <system_error>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/endian.h"
#include "common/status.h"
#include "spdlog/spdlog.h"
#include "storage/internal/rocksdb_database.h"
#include "storage/internal/rocksdb_status.h"
#include "storage/internal/state_rows.h"
#include "storage/rocksdb_state_store.h"

namespace switchyard {
namespace {

using storage_internal::AppendSlotRow;
using storage_internal::AssignHistoryKey;
using storage_internal::AsSlice;
using storage_internal::BySlotKey;
using storage_internal::EncodeDigest;
using storage_internal::EncodePosition;
using storage_internal::FromRocksDb;
using storage_internal::KeyPrefix;
using storage_internal::kHistoryIgnored;
using storage_internal::kHistoryInSlotRow;
using storage_internal::kPositionKey;
using storage_internal::kRowsPerSlotKey;
using storage_internal::kSealedPrefix;
using storage_internal::PutInKeyOrder;
using storage_internal::SealedKey;
using storage_internal::SortByKey;

constexpr char kCommitting[] = "committing a fold batch to the state store";

}  // namespace

// A batch's table files, built, waiting to be ingested.
class RocksDbStateStore::StagedTableFiles final : public StagedCommit {
 public:
  StagedTableFiles(RocksDbStateStore& store, std::unique_ptr<storage_internal::TableFiles> files)
      : store_(store), files_(std::move(files)) {}
  absl::Status Apply() override {
    RETURN_IF_ERROR(files_->Ingest(kCommitting));
    store_.ingested_commits_.fetch_add(1);
    return absl::OkStatus();
  }

 private:
  RocksDbStateStore& store_;
  std::unique_ptr<storage_internal::TableFiles> files_;  // its destructor removes what is left
};

// A batch's rows in a write batch, waiting to be written; the write batch goes back to the
// store for the next one.
class RocksDbStateStore::StagedWrite final : public StagedCommit {
 public:
  StagedWrite(RocksDbStateStore& store, std::unique_ptr<rocksdb::WriteBatch> batch)
      : store_(store), batch_(std::move(batch)) {}
  ~StagedWrite() override {
    batch_->Clear();
    absl::MutexLock lock(&store_.spare_mu_);
    store_.spare_batch_ = std::move(batch_);
  }
  absl::Status Apply() override {
    rocksdb::WriteOptions write;
    write.sync = store_.sync_commits_;
    return store_.database_->Write(write, batch_.get(), kCommitting);
  }
  rocksdb::WriteBatch& batch() { return *batch_; }

 private:
  RocksDbStateStore& store_;
  std::unique_ptr<rocksdb::WriteBatch> batch_;
};

bool RocksDbStateStore::Ingests(const FoldBatch& batch) const {
  return ingest_min_rows_ > 0 && batch.history.size() >= ingest_min_rows_;
}

absl::Status RocksDbStateStore::Commit(const FoldBatch& batch) {
  absl::MutexLock lock(&commit_mu_);
  if (Ingests(batch)) {
    absl::StatusOr<std::unique_ptr<StagedCommit>> files = StageTableFiles(batch);
    absl::Status ingested = files.ok() ? (*files)->Apply() : files.status();
    if (ingested.ok()) return ingested;
    // Nothing of the batch was applied: it is written as a small commit is.
    spdlog::warn("{}; writing it through the write-ahead log instead", ingested.ToString());
  }
  ASSIGN_OR_RETURN(std::unique_ptr<StagedCommit> write, StageWrite(batch));
  return write->Apply();
}

absl::StatusOr<std::unique_ptr<StagedCommit>> RocksDbStateStore::Stage(const FoldBatch& batch) {
  absl::MutexLock lock(&commit_mu_);
  if (Ingests(batch)) {
    absl::StatusOr<std::unique_ptr<StagedCommit>> files = StageTableFiles(batch);
    if (files.ok()) return files;
    spdlog::warn("{}; writing it through the write-ahead log instead", files.status().ToString());
  }
  return StageWrite(batch);
}

absl::StatusOr<std::unique_ptr<StagedCommit>> RocksDbStateStore::StageWrite(
    const FoldBatch& batch) {
  std::unique_ptr<rocksdb::WriteBatch> wb;
  {
    absl::MutexLock lock(&spare_mu_);
    wb = std::move(spare_batch_);
  }
  if (wb == nullptr) wb = std::make_unique<rocksdb::WriteBatch>();
  auto staged = std::make_unique<StagedWrite>(*this, std::move(wb));
  auto into = [&wb = staged->batch()](rocksdb::ColumnFamilyHandle* family) {
    return [&wb, family](const rocksdb::Slice& key, const rocksdb::Slice& value) {
      return wb.Put(family, key, value);
    };
  };
  RETURN_IF_ERROR(PutStateRows(batch, into(state_cf_)));
  RETURN_IF_ERROR(PutHistoryRows(batch, into(by_slot_cf_), into(history_cf_)));
  RETURN_IF_ERROR(PutMetaRows(batch, into(quarantine_cf_), into(meta_cf_)));
  return staged;
}

absl::StatusOr<std::unique_ptr<StagedCommit>> RocksDbStateStore::StageTableFiles(
    const FoldBatch& batch) {
  std::error_code ec;
  std::filesystem::create_directories(ingest_dir_, ec);
  if (ec) {
    return absl::InternalError(
        absl::StrCat(kCommitting, ": cannot make the directory ", ingest_dir_, ": ", ec.message()));
  }
  auto files = std::make_unique<storage_internal::TableFiles>(*database_, ingest_dir_);
  auto into = [&](rocksdb::ColumnFamilyHandle* family) {
    return [&file = files->For(family)](const rocksdb::Slice& key, const rocksdb::Slice& value) {
      return file.Put(key, value);
    };
  };
  RETURN_IF_ERROR(PutStateRows(batch, into(state_cf_)));
  RETURN_IF_ERROR(PutHistoryRows(batch, into(by_slot_cf_), into(history_cf_)));
  RETURN_IF_ERROR(PutMetaRows(batch, into(quarantine_cf_), into(meta_cf_)));
  return std::make_unique<StagedTableFiles>(*this, std::move(files));
}

absl::Status RocksDbStateStore::PutStateRows(const FoldBatch& batch, PutRow put) {
  std::string& value = commit_value_;
  // Only the last write of each account in the batch matters. Abseil's clear() frees a table
  // of more than 127 slots: sized once here, it is not grown again through every power of two
  // on each commit.
  written_.clear();
  written_.reserve(batch.accounts.size());
  order_.clear();
  for (size_t i = batch.accounts.size(); i-- > 0;) {
    const Pubkey& account = batch.accounts[i].account;
    if (written_.insert(account).second) order_.push_back({KeyPrefix(account), i});
  }
  // The rows go in key order, sorted here in one small array: each vector memtable then holds
  // one run of ordered keys per commit, so the flush's sort and its walk read the arena in a
  // few sequential streams instead of at random, and table files need them so.
  // bench/README.md, "Commits in key order".
  SortByKey(
      order_,
      [&](size_t a, size_t b) { return batch.accounts[a].account < batch.accounts[b].account; },
      sort_rows_, sort_bucket_ends_);
  return PutInKeyOrder(order_, batch.accounts, [&](size_t, const FoldBatch::AccountWrite& write) {
    value.clear();
    EncodeAccountState(write.state, &value);
    return FromRocksDb(put(AsSlice(write.account), value), "batch put");
  });
}

absl::Status RocksDbStateStore::PutHistoryRows(const FoldBatch& batch, PutRow by_slot,
                                               PutRow history) {
  const std::vector<FoldBatch::HistoryRow>& rows = batch.history;
  // The records, in history_by_slot. A batch holds the rows of few slots, nearly always in
  // slot order: consecutive rows of a slot are packed together, and a slot met again later in
  // the batch (a late record) is gathered by a second pass.
  std::string& packed = commit_packed_;
  slot_rows_.clear();
  for (size_t i = 0; i < rows.size(); ++i) slot_rows_.emplace_back(rows[i].slot, i);
  auto by_slot_order = [](const auto& a, const auto& b) { return a.first < b.first; };
  if (!std::is_sorted(slot_rows_.begin(), slot_rows_.end(), by_slot_order)) {
    std::stable_sort(slot_rows_.begin(), slot_rows_.end(), by_slot_order);
  }
  // slot_key_of_[i]: the key seq of the history_by_slot row that holds rows[i]'s record.
  slot_key_of_.resize(rows.size());
  for (size_t i = 0; i < slot_rows_.size();) {
    const Slot slot = slot_rows_[i].first;
    const uint64_t first_seq = rows[slot_rows_[i].second].seq;
    packed.clear();
    for (size_t n = 0; i < slot_rows_.size() && slot_rows_[i].first == slot && n < kRowsPerSlotKey;
         ++i, ++n) {
      const size_t index = slot_rows_[i].second;
      const FoldBatch::HistoryRow& row = rows[index];
      AppendSlotRow(row.account, row.ignored, row.seq, batch.RecordOf(row), &packed);
      slot_key_of_[index] = first_seq;
    }
    RETURN_IF_ERROR(FromRocksDb(by_slot(BySlotKey(slot, first_seq), packed), "batch put"));
  }
  // The index of each account's history, in key order.
  order_.clear();
  for (size_t i = 0; i < rows.size(); ++i) {
    order_.push_back({KeyPrefix(rows[i].account), i});
  }
  SortByKey(
      order_,
      [&](size_t a, size_t b) {
        return std::tie(rows[a].account, rows[a].slot, rows[a].seq) <
               std::tie(rows[b].account, rows[b].slot, rows[b].seq);
      },
      sort_rows_, sort_bucket_ends_);
  std::string& value = commit_value_;
  std::string& key = commit_key_;
  return PutInKeyOrder(order_, rows, [&](size_t index, const FoldBatch::HistoryRow& row) {
    AssignHistoryKey(row.account, row.slot, row.seq, &key);
    value.clear();
    value.push_back(static_cast<char>((row.ignored ? kHistoryIgnored : 0) | kHistoryInSlotRow));
    AppendU64BE(&value, slot_key_of_[index]);
    return FromRocksDb(history(key, value), "batch put");
  });
}

absl::Status RocksDbStateStore::PutMetaRows(const FoldBatch& batch, PutRow quarantine,
                                            PutRow meta) {
  // In key order, as for the other families: the quarantine's by partition and offset, and
  // in meta the position before the sealed digests.
  std::vector<const QuarantineEntry*> entries;
  for (const QuarantineEntry& q : batch.quarantine) entries.push_back(&q);
  std::sort(entries.begin(), entries.end(), [](const QuarantineEntry* x, const QuarantineEntry* y) {
    return std::tie(x->partition, x->offset) < std::tie(y->partition, y->offset);
  });
  for (const QuarantineEntry* q : entries) {
    std::string key;
    AppendU64BE(&key, static_cast<uint32_t>(q->partition));
    AppendU64BE(&key, static_cast<uint64_t>(q->offset));
    std::string value;
    AppendU32LE(&value, static_cast<uint32_t>(q->reason.size()));
    value += q->reason;
    value += q->record;
    RETURN_IF_ERROR(FromRocksDb(quarantine(key, value), "batch put"));
  }
  static_assert(std::string_view(kPositionKey) < std::string_view(kSealedPrefix));
  RETURN_IF_ERROR(FromRocksDb(meta(kPositionKey, EncodePosition(batch.position)), "batch put"));
  for (const auto& [slot, digest] : batch.sealed_digests) {
    RETURN_IF_ERROR(FromRocksDb(meta(SealedKey(slot), EncodeDigest(digest)), "batch put"));
  }
  return absl::OkStatus();
}

}  // namespace switchyard
