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

namespace {

// Routes the puts of a WriteBatch to one table file per column family.
class TableFileRouter final : public rocksdb::WriteBatch::Handler {
 public:
  TableFileRouter(rocksdb::DB* db, const std::vector<rocksdb::ColumnFamilyHandle*>& handles,
                  std::string prefix)
      : db_(db), handles_(handles), prefix_(std::move(prefix)) {}

  rocksdb::Status PutCF(uint32_t family, const rocksdb::Slice& key,
                        const rocksdb::Slice& value) override {
    File* file = FileOf(family);
    if (file == nullptr) return rocksdb::Status::InvalidArgument("a column family not opened");
    if (!file->status.ok()) return file->status;
    return file->writer->Put(key, value);
  }
  rocksdb::Status DeleteCF(uint32_t, const rocksdb::Slice&) override { return NotAPut(); }
  rocksdb::Status SingleDeleteCF(uint32_t, const rocksdb::Slice&) override { return NotAPut(); }
  rocksdb::Status DeleteRangeCF(uint32_t, const rocksdb::Slice&, const rocksdb::Slice&) override {
    return NotAPut();
  }
  rocksdb::Status MergeCF(uint32_t, const rocksdb::Slice&, const rocksdb::Slice&) override {
    return NotAPut();
  }

  // Finishes every file (each is fsynced) and returns the ingestion's arguments.
  rocksdb::Status Finish(std::vector<rocksdb::IngestExternalFileArg>* args) {
    for (File& file : files_) {
      rocksdb::Status s = file.writer->Finish();
      if (!s.ok()) return s;
      rocksdb::IngestExternalFileArg arg;
      arg.column_family = file.family;
      arg.external_files = {file.path};
      arg.options.move_files = true;           // a hard link, same file system
      arg.options.write_global_seqno = false;  // the sequence goes to the MANIFEST only
      args->push_back(std::move(arg));
    }
    return rocksdb::Status::OK();
  }

  // Removes the files left (all of them after a failure; none after an ingestion that moved
  // them).
  void RemoveFiles() {
    files_.clear();  // closes the writers
    for (const std::string& path : paths_) {
      std::error_code ec;
      std::filesystem::remove(path, ec);
    }
  }

 private:
  struct File {
    rocksdb::ColumnFamilyHandle* family = nullptr;
    std::unique_ptr<rocksdb::SstFileWriter> writer;
    std::string path;
    rocksdb::Status status;
  };

  static rocksdb::Status NotAPut() {
    return rocksdb::Status::NotSupported("only puts are written as table files");
  }

  File* FileOf(uint32_t family) {
    for (File& f : files_) {
      if (f.family->GetID() == family) return &f;
    }
    auto handle = std::find_if(handles_.begin(), handles_.end(),
                               [&](auto* h) { return h != nullptr && h->GetID() == family; });
    if (handle == handles_.end()) return nullptr;
    File& file = files_.emplace_back();
    file.family = *handle;
    // The family's own table format, comparator and compression.
    const rocksdb::Options options = db_->GetOptions(file.family);
    file.writer =
        std::make_unique<rocksdb::SstFileWriter>(rocksdb::EnvOptions(), options, file.family);
    file.path = absl::StrCat(prefix_, "-", family, ".sst");
    paths_.push_back(file.path);
    file.status = file.writer->Open(file.path);
    return &file;
  }

  rocksdb::DB* db_;
  const std::vector<rocksdb::ColumnFamilyHandle*>& handles_;
  std::string prefix_;
  std::deque<File> files_;
  std::vector<std::string> paths_;
};

}  // namespace

absl::Status Database::IngestAsTableFiles(const rocksdb::WriteBatch& batch, const std::string& dir,
                                          std::string_view what) {
  const std::string context = absl::StrCat(std::string(what), " at ", path_);
  TableFileRouter router(db_.get(), handles_, absl::StrCat(dir, "/", ingested_files_.fetch_add(1)));
  std::vector<rocksdb::IngestExternalFileArg> args;
  rocksdb::Status s = batch.Iterate(&router);
  if (s.ok()) s = router.Finish(&args);
  if (s.ok()) s = db_->IngestExternalFiles(args);
  router.RemoveFiles();
  return FromRocksDb(s, absl::StrCat(context, " (as table files)"));
}

Database::~Database() {
  if (!secondary_) (void)db_->Flush(rocksdb::FlushOptions(), handles_);
  for (auto* h : handles_) {
    if (h != nullptr) (void)db_->DestroyColumnFamilyHandle(h);
  }
}

}  // namespace switchyard::storage_internal
