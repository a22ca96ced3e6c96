#pragma once

#include <rocksdb/db.h>
#include <rocksdb/options.h>
#include <rocksdb/write_batch.h>

#include <atomic>
#include <deque>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace rocksdb {
class SstFileWriter;
}  // namespace rocksdb

namespace switchyard::storage_internal {

// A RocksDB database opened with its column families, shared by the state store and the
// embedded log. Owns the handles; closing flushes the memtables, so that the next Open has no
// write-ahead log to replay. Thread-safe as RocksDB is.
class Database {
 public:
  // The options both stores use; `create_if_missing` also creates the parent directory.
  static rocksdb::DBOptions DefaultOptions(bool create_if_missing);

  // Opens `path`; `what` names the database in errors ("the event log").
  static absl::StatusOr<std::unique_ptr<Database>> Open(
      const std::string& path, std::string_view what, const rocksdb::DBOptions& options,
      const std::vector<rocksdb::ColumnFamilyDescriptor>& families);
  // Opens `path` as a RocksDB secondary instance: read-only, beside a primary that may be
  // running in another process, caught up with it once (TryCatchUpWithPrimary). Its own info
  // log goes to `secondary_path`. Only the families of `families` that exist are opened;
  // family(i) is null for the others.
  static absl::StatusOr<std::unique_ptr<Database>> OpenSecondary(
      const std::string& path, const std::string& secondary_path, std::string_view what,
      rocksdb::DBOptions options, const std::vector<rocksdb::ColumnFamilyDescriptor>& families);
  ~Database();

  rocksdb::DB* db() const { return db_.get(); }
  const std::string& path() const { return path_; }
  // Opened by OpenSecondary: its view is the primary's at open and does not move.
  bool secondary() const { return secondary_; }

  // Writes `batch`; `what` names the write in errors ("committing a fold batch"), which also
  // name the database's path. A failed write (a full disk, an I/O error) may leave RocksDB in
  // its background-error mode, where it refuses every write: the next Write first asks it to
  // resume (DB::Resume), so that writing starts again by itself once the cause is gone.
  absl::Status Write(const rocksdb::WriteOptions& options, rocksdb::WriteBatch* batch,
                     std::string_view what);
  // The handle of the i-th family given to Open.
  rocksdb::ColumnFamilyHandle* family(size_t i) const { return handles_[i]; }

 private:
  Database(std::unique_ptr<rocksdb::DB> db, std::vector<rocksdb::ColumnFamilyHandle*> handles,
           bool secondary, std::string path)
      : db_(std::move(db)),
        handles_(std::move(handles)),
        secondary_(secondary),
        path_(std::move(path)) {}

  std::unique_ptr<rocksdb::DB> db_;
  std::vector<rocksdb::ColumnFamilyHandle*> handles_;
  bool secondary_ = false;
  std::string path_;
  std::atomic<bool> write_failed_{false};    // the last Write failed: resume before the next
  std::atomic<uint64_t> ingested_files_{0};  // names the next set of table files

  friend class TableFiles;
};

// Rows written straight into table files, one per column family, then ingested together in one
// atomic, durable step (DB::IngestExternalFiles: the files and the MANIFEST are fsynced), past
// the write-ahead log and the memtables. Each family's keys must come in strictly ascending
// order. Nothing is applied before Ingest; the files left are removed by the destructor.
class TableFiles {
 public:
  // One family's file, opened at its first row, each with the family's own table format and
  // comparator, uncompressed (compaction compresses it as the family says).
  class File {
   public:
    rocksdb::Status Put(const rocksdb::Slice& key, const rocksdb::Slice& value);

   private:
    friend class TableFiles;
    rocksdb::DB* db_ = nullptr;
    rocksdb::ColumnFamilyHandle* family_ = nullptr;
    std::string path_;
    std::unique_ptr<rocksdb::SstFileWriter> writer_;
    rocksdb::Status status_;  // the first failure, returned by every later Put and by Ingest
  };

  // The files are built in `dir`, which must exist, on the database's file system.
  TableFiles(Database& database, const std::string& dir);
  ~TableFiles();
  TableFiles(const TableFiles&) = delete;
  TableFiles& operator=(const TableFiles&) = delete;

  // The file of `family`, made at the first call for it.
  File& For(rocksdb::ColumnFamilyHandle* family);
  // Finishes every file that got rows (each is fsynced) and ingests them; `what` names the
  // write in errors. Fails, applying nothing, if a Put failed or if anything here fails.
  absl::Status Ingest(std::string_view what);

 private:
  Database& database_;
  std::string prefix_;
  std::deque<File> files_;  // stable addresses
};

}  // namespace switchyard::storage_internal
