#include "storage/internal/rocksdb_database.h"

#include <rocksdb/env.h>
#include <rocksdb/sst_file_writer.h>

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <deque>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "spdlog/spdlog.h"
#include "storage/internal/rocksdb_status.h"

namespace switchyard::storage_internal {
namespace {

// RocksDB's info log through spdlog at debug level (its warnings and errors only), instead
// of a LOG file in the database's directory. That file shares the database's disk, and
// RocksDB's file logger trips an assertion of its own when it writes again after a write of it
// failed, which a full disk makes happen: the process would abort where it should report the
// error and wait. Debug level, since RocksDB reports routine events as errors (a directory
// that does not exist yet) and the commands print their results on the same output; the
// errors that matter reach the caller as Status.
class SpdlogInfoLog final : public rocksdb::Logger {
 public:
  explicit SpdlogInfoLog(std::string what)
      : rocksdb::Logger(rocksdb::InfoLogLevel::WARN_LEVEL), what_(std::move(what)) {}

  void Logv(const char* format, va_list ap) override {
    Logv(rocksdb::InfoLogLevel::INFO_LEVEL, format, ap);
  }
  void Logv(const rocksdb::InfoLogLevel level, const char* format, va_list ap) override {
    if (level < GetInfoLogLevel()) return;
    char line[1024];
    std::vsnprintf(line, sizeof(line), format, ap);
    std::string_view text(line);
    while (!text.empty() && text.back() == '\n') text.remove_suffix(1);
    spdlog::debug("rocksdb ({}): {}", what_, text);
  }

 private:
  std::string what_;
};

}  // namespace

rocksdb::DBOptions Database::DefaultOptions(bool create_if_missing) {
  rocksdb::DBOptions options;
  options.create_if_missing = create_if_missing;
  options.create_missing_column_families = true;
  options.max_background_jobs = 2;
  // Restart speed: keep recovered write-ahead-log data in the memtable instead of flushing it
  // during Open; a clean close flushes.
  options.avoid_flush_during_recovery = true;
  // No preallocation (fallocate) of write-ahead-log and table files: a write-ahead log would
  // take 1.1 memtables of disk at once (of memory on tmpfs), and a full disk would show only
  // once the preallocated block is used up. Without it, the write that needs the space fails.
  options.allow_fallocate = false;
  return options;
}

absl::StatusOr<std::unique_ptr<Database>> Database::Open(
    const std::string& path, std::string_view what, const rocksdb::DBOptions& options,
    const std::vector<rocksdb::ColumnFamilyDescriptor>& families) {
  if (options.create_if_missing) {
    std::error_code ec;
    std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
  }
  rocksdb::DBOptions with_log = options;
  if (with_log.info_log == nullptr) {
    with_log.info_log =
        std::make_shared<SpdlogInfoLog>(absl::StrCat(std::string(what), " at ", path));
  }
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  rocksdb::DB* raw = nullptr;
  RETURN_IF_ERROR(FromRocksDb(rocksdb::DB::Open(with_log, path, families, &handles, &raw),
                              absl::StrCat("opening ", std::string(what), " at ", path)));
  return std::unique_ptr<Database>(
      new Database(std::unique_ptr<rocksdb::DB>(raw), std::move(handles), false, path));
}

absl::StatusOr<std::unique_ptr<Database>> Database::OpenSecondary(
    const std::string& path, const std::string& secondary_path, std::string_view what,
    rocksdb::DBOptions options, const std::vector<rocksdb::ColumnFamilyDescriptor>& families) {
  const std::string context = absl::StrCat("opening ", std::string(what), " at ", path);
  std::vector<std::string> existing;
  RETURN_IF_ERROR(FromRocksDb(rocksdb::DB::ListColumnFamilies(options, path, &existing), context));
  std::vector<rocksdb::ColumnFamilyDescriptor> present;
  std::vector<size_t> index_of;  // into `families`
  for (size_t i = 0; i < families.size(); ++i) {
    if (std::find(existing.begin(), existing.end(), families[i].name) == existing.end()) continue;
    present.push_back(families[i]);
    index_of.push_back(i);
  }
  options.create_if_missing = false;
  options.create_missing_column_families = false;
  options.max_open_files = -1;  // required of a secondary instance
  std::error_code ec;
  std::filesystem::create_directories(secondary_path, ec);
  std::vector<rocksdb::ColumnFamilyHandle*> opened;
  rocksdb::DB* raw = nullptr;
  RETURN_IF_ERROR(FromRocksDb(
      rocksdb::DB::OpenAsSecondary(options, path, secondary_path, present, &opened, &raw),
      context));
  std::unique_ptr<rocksdb::DB> db(raw);
  // A catch-up that meets the primary in the middle of a write may fail; it is tried again.
  rocksdb::Status caught_up;
  for (int attempt = 0; attempt < 5; ++attempt) {
    caught_up = db->TryCatchUpWithPrimary();
    if (caught_up.ok()) break;
  }
  std::vector<rocksdb::ColumnFamilyHandle*> handles(families.size(), nullptr);
  for (size_t i = 0; i < opened.size(); ++i) handles[index_of[i]] = opened[i];
  auto database =
      std::unique_ptr<Database>(new Database(std::move(db), std::move(handles), true, path));
  RETURN_IF_ERROR(FromRocksDb(caught_up, absl::StrCat("catching up with the primary of ",
                                                      std::string(what), " at ", path)));
  return database;
}

absl::Status Database::Write(const rocksdb::WriteOptions& options, rocksdb::WriteBatch* batch,
                             std::string_view what) {
  const std::string context = absl::StrCat(std::string(what), " at ", path_);
  if (write_failed_.load()) {
    // Busy: RocksDB's own recovery (it polls the free space) is under way; the write below
    // then fails with the background error and is tried again later.
    const rocksdb::Status resumed = db_->Resume();
    if (!resumed.ok() && !resumed.IsBusy()) {
      return FromRocksDb(resumed, absl::StrCat(context, ": resuming after a failed write"));
    }
  }
  const rocksdb::Status s = db_->Write(options, batch);
  write_failed_.store(!s.ok());
  return FromRocksDb(s, context);
}

rocksdb::Status TableFiles::File::Put(const rocksdb::Slice& key, const rocksdb::Slice& value) {
  if (!status_.ok()) return status_;
  if (!writer_) {
    // Uncompressed: the family's compression is applied when compaction, on another core,
    // rewrites the file, not on the committing thread (bench/README.md, "Larger commits").
    rocksdb::Options options = db_->GetOptions(family_);
    options.compression = rocksdb::kNoCompression;
    writer_ = std::make_unique<rocksdb::SstFileWriter>(rocksdb::EnvOptions(), options, family_);
    status_ = writer_->Open(path_);
  }
  if (status_.ok()) status_ = writer_->Put(key, value);
  return status_;
}

TableFiles::TableFiles(Database& database, const std::string& dir)
    : database_(database), prefix_(absl::StrCat(dir, "/", database.ingested_files_.fetch_add(1))) {}

TableFiles::~TableFiles() {
  for (File& file : files_) {
    file.writer_.reset();  // closes the file
    std::error_code ec;
    std::filesystem::remove(file.path_, ec);  // gone already when it was ingested
  }
}

TableFiles::File& TableFiles::For(rocksdb::ColumnFamilyHandle* family) {
  for (File& file : files_) {
    if (file.family_ == family) return file;
  }
  File& file = files_.emplace_back();
  file.db_ = database_.db();
  file.family_ = family;
  file.path_ = absl::StrCat(prefix_, "-", family->GetID(), ".sst");
  return file;
}

absl::Status TableFiles::Ingest(std::string_view what) {
  const std::string context =
      absl::StrCat(std::string(what), " at ", database_.path(), " (as table files)");
  std::vector<rocksdb::IngestExternalFileArg> args;
  for (File& file : files_) {
    RETURN_IF_ERROR(FromRocksDb(file.status_, context));
    if (!file.writer_) continue;
    RETURN_IF_ERROR(FromRocksDb(file.writer_->Finish(), context));
    rocksdb::IngestExternalFileArg& arg = args.emplace_back();
    arg.column_family = file.family_;
    arg.external_files = {file.path_};
    arg.options.move_files = true;           // a hard link, same file system
    arg.options.write_global_seqno = false;  // the sequence goes to the MANIFEST only
  }
  if (args.empty()) return absl::OkStatus();
  return FromRocksDb(database_.db()->IngestExternalFiles(args), context);
}

Database::~Database() {
  if (!secondary_) (void)db_->Flush(rocksdb::FlushOptions(), handles_);
  for (auto* h : handles_) {
    if (h != nullptr) (void)db_->DestroyColumnFamilyHandle(h);
  }
}

}  // namespace switchyard::storage_internal
