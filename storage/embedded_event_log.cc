#include "storage/embedded_event_log.h"

#include <rocksdb/db.h>
#include <rocksdb/options.h>
#include <rocksdb/write_batch.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/endian.h"
#include "common/status.h"
#include "storage/internal/rocksdb_database.h"
#include "storage/internal/rocksdb_status.h"

namespace switchyard {
namespace {

using storage_internal::FromRocksDb;

constexpr char kLogCf[] = "log";
// In the default family: the first sequence number kept, once DropBefore has run.
constexpr char kStartKey[] = "start_offset";

std::string OffsetKey(int64_t offset) {
  std::string key;
  AppendU64BE(&key, static_cast<uint64_t>(offset));
  return key;
}

}  // namespace

class EmbeddedEventLog::Reader final : public EventLogReader {
 public:
  explicit Reader(const EmbeddedEventLog* log) : log_(log) {}

  int32_t partition_count() const override { return 1; }

  absl::Status Seek(int32_t partition, int64_t offset) override {
    if (partition != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("the embedded log has one partition, not ", partition + 1));
    }
    next_ = offset;
    iterator_.reset();
    return absl::OkStatus();
  }

  void Pause(int32_t, bool paused) override { paused_ = paused; }

  absl::StatusOr<size_t> Poll(size_t max_records, absl::Duration timeout,
                              absl::FunctionRef<void(const LogRecordView&)> on_record) override {
    if (paused_ || max_records == 0) return size_t{0};
    if (!log_->WaitForOffset(next_, timeout)) return size_t{0};
    if (const int64_t start = log_->start_offset(); next_ < start) {
      return absl::DataLossError(absl::StrCat("embedded log has a hole: expected offset ", next_,
                                              ", the log starts at ", start));
    }
    if (!iterator_) {
      rocksdb::ReadOptions read;
      read.readahead_size = 2 << 20;
      iterator_.reset(log_->database_->db()->NewIterator(read, log_->log_cf_));
      iterator_->Seek(OffsetKey(next_));
    } else {
      // Records appended since the iterator was made are not visible to it: refresh.
      RETURN_IF_ERROR(FromRocksDb(iterator_->Refresh(), "refreshing the log iterator"));
      iterator_->Seek(OffsetKey(next_));
    }
    size_t delivered = 0;
    for (; iterator_->Valid() && delivered < max_records; iterator_->Next()) {
      const rocksdb::Slice key = iterator_->key();
      if (key.size() != 8) return absl::DataLossError("malformed embedded log key");
      const auto offset = static_cast<int64_t>(LoadU64BE(AsBytes(key.data())));
      if (offset != next_) {
        return absl::DataLossError(
            absl::StrCat("embedded log has a hole: expected offset ", next_, ", found ", offset));
      }
      const rocksdb::Slice value = iterator_->value();
      on_record(LogRecordView{0, offset, std::string_view(value.data(), value.size())});
      ++next_;
      ++delivered;
    }
    RETURN_IF_ERROR(FromRocksDb(iterator_->status(), "reading the embedded log"));
    return delivered;
  }

  absl::StatusOr<int64_t> EndOffset(int32_t) override { return log_->end_offset(); }
  absl::StatusOr<int64_t> StartOffset(int32_t) override { return log_->start_offset(); }

 private:
  const EmbeddedEventLog* log_;
  int64_t next_ = 0;
  bool paused_ = false;
  std::unique_ptr<rocksdb::Iterator> iterator_;
};

EmbeddedEventLog::EmbeddedEventLog(std::unique_ptr<storage_internal::Database> database,
                                   int64_t start, int64_t end,
                                   const EmbeddedEventLogOptions& options)
    : database_(std::move(database)),
      log_cf_(database_->family(1)),
      sync_appends_(options.sync_appends),
      memtable_bytes_(options.memtable_bytes),
      start_(start),
      end_(end) {}

EmbeddedEventLog::~EmbeddedEventLog() = default;

absl::StatusOr<std::unique_ptr<EmbeddedEventLog>> EmbeddedEventLog::Open(
    const std::string& path, const EmbeddedEventLogOptions& options) {
  rocksdb::ColumnFamilyOptions cf_options;
  cf_options.compression = rocksdb::kLZ4Compression;
  // The records of the last hundreds of megabytes sit in the upper levels (level 0 and 1), and
  // they are the ones read at once: a replica that restarts or lags folds them. Those levels
  // are not compressed, so that neither the flush of appends nor the fold's reading pays for
  // LZ4 (about a quarter of reading a record, bench/ANALYSIS.md "The fold runner in
  // instructions"); the levels below, the bulk of a long log, are.
  cf_options.compression_per_level.assign(static_cast<size_t>(cf_options.num_levels),
                                          rocksdb::kLZ4Compression);
  cf_options.compression_per_level[0] = rocksdb::kNoCompression;
  cf_options.compression_per_level[1] = rocksdb::kNoCompression;
  cf_options.write_buffer_size = 64 << 20;
  // Small memtable blocks, as for the state store (storage/rocksdb_state_store.cc), so that
  // switchyard_log_memtable_bytes follows what is resident.
  cf_options.arena_block_size = 64 << 10;
  ASSIGN_OR_RETURN(auto database,
                   storage_internal::Database::Open(
                       path, "the event log",
                       storage_internal::Database::DefaultOptions(options.create_if_missing),
                       {{rocksdb::kDefaultColumnFamilyName, cf_options}, {kLogCf, cf_options}}));
  int64_t end = 0;
  {
    std::unique_ptr<rocksdb::Iterator> it(
        database->db()->NewIterator(rocksdb::ReadOptions(), database->family(1)));
    it->SeekToLast();
    if (it->Valid()) {
      if (it->key().size() != 8) return absl::DataLossError("malformed embedded log key");
      end = static_cast<int64_t>(LoadU64BE(AsBytes(it->key().data()))) + 1;
    }
    RETURN_IF_ERROR(FromRocksDb(it->status(), "finding the end of the event log"));
  }
  int64_t start = 0;
  std::string stored;
  rocksdb::Status s =
      database->db()->Get(rocksdb::ReadOptions(), database->family(0), kStartKey, &stored);
  if (!s.IsNotFound()) {
    RETURN_IF_ERROR(FromRocksDb(s, "reading the start of the event log"));
    if (stored.size() != 8) return absl::DataLossError("malformed embedded log start offset");
    start = static_cast<int64_t>(LoadU64BE(AsBytes(stored.data())));
  }
  // Every record dropped: numbering goes on after the last one.
  end = std::max(end, start);
  return std::unique_ptr<EmbeddedEventLog>(
      new EmbeddedEventLog(std::move(database), start, end, options));
}

absl::Status EmbeddedEventLog::DropBefore(int64_t offset) {
  absl::MutexLock lock(&mu_);
  const int64_t start = std::min(offset, end_);
  if (start <= start_) return absl::OkStatus();
  rocksdb::WriteBatch batch;
  RETURN_IF_ERROR(
      FromRocksDb(batch.Put(database_->family(0), kStartKey, OffsetKey(start)), "batch put"));
  RETURN_IF_ERROR(
      FromRocksDb(batch.DeleteRange(log_cf_, OffsetKey(start_), OffsetKey(start)), "batch delete"));
  rocksdb::WriteOptions write;
  write.sync = true;
  RETURN_IF_ERROR(database_->Write(write, &batch, "dropping early records of the event log"));
  start_ = start;
  return absl::OkStatus();
}

int64_t EmbeddedEventLog::start_offset() const {
  absl::MutexLock lock(&mu_);
  return start_;
}

absl::Status EmbeddedEventLog::Append(std::span<const OutgoingRecord> records) {
  absl::MutexLock lock(&mu_);
  rocksdb::WriteBatch batch;
  int64_t next = end_;
  for (const OutgoingRecord& r : records) {
    if (r.partition && *r.partition != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("the embedded log has one partition; record addressed to ", *r.partition));
    }
    RETURN_IF_ERROR(FromRocksDb(batch.Put(log_cf_, OffsetKey(next++), r.payload), "batch put"));
  }
  rocksdb::WriteOptions write;
  write.sync = sync_appends_;
  RETURN_IF_ERROR(database_->Write(write, &batch, "appending to the event log"));
  end_ = next;
  if (memtable_bytes_ != nullptr) {
    uint64_t bytes = 0;
    database_->db()->GetAggregatedIntProperty(rocksdb::DB::Properties::kSizeAllMemTables, &bytes);
    memtable_bytes_->Set(static_cast<int64_t>(bytes));
  }
  return absl::OkStatus();
}

std::unique_ptr<EventLogReader> EmbeddedEventLog::NewReader() {
  return std::make_unique<Reader>(this);
}

int64_t EmbeddedEventLog::end_offset() const {
  absl::MutexLock lock(&mu_);
  return end_;
}

bool EmbeddedEventLog::WaitForOffset(int64_t offset, absl::Duration timeout) const {
  absl::MutexLock lock(&mu_);
  auto ready = [this, offset]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return end_ > offset; };
  return mu_.AwaitWithTimeout(absl::Condition(&ready), timeout);
}

}  // namespace switchyard
