#include "storage/internal/rocksdb_database.h"

#include <algorithm>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "storage/internal/rocksdb_status.h"

namespace switchyard::storage_internal {

rocksdb::DBOptions Database::DefaultOptions(bool create_if_missing) {
  rocksdb::DBOptions options;
  options.create_if_missing = create_if_missing;
  options.create_missing_column_families = true;
  options.max_background_jobs = 2;
  // Restart speed: keep recovered write-ahead-log data in the memtable instead of flushing it
  // during Open; a clean close flushes.
  options.avoid_flush_during_recovery = true;
  return options;
}

absl::StatusOr<std::unique_ptr<Database>> Database::Open(
    const std::string& path, std::string_view what, const rocksdb::DBOptions& options,
    const std::vector<rocksdb::ColumnFamilyDescriptor>& families) {
  if (options.create_if_missing) {
    std::error_code ec;
    std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
  }
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  rocksdb::DB* raw = nullptr;
  RETURN_IF_ERROR(FromRocksDb(rocksdb::DB::Open(options, path, families, &handles, &raw),
                              absl::StrCat("opening ", std::string(what), " at ", path)));
  return std::unique_ptr<Database>(
      new Database(std::unique_ptr<rocksdb::DB>(raw), std::move(handles), false));
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
  auto database = std::unique_ptr<Database>(new Database(std::move(db), std::move(handles), true));
  RETURN_IF_ERROR(FromRocksDb(caught_up, absl::StrCat("catching up with the primary of ",
                                                      std::string(what), " at ", path)));
  return database;
}

Database::~Database() {
  if (!secondary_) (void)db_->Flush(rocksdb::FlushOptions(), handles_);
  for (auto* h : handles_) {
    if (h != nullptr) (void)db_->DestroyColumnFamilyHandle(h);
  }
}

}  // namespace switchyard::storage_internal
