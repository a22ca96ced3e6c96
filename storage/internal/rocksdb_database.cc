#include "storage/internal/rocksdb_database.h"

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
      new Database(std::unique_ptr<rocksdb::DB>(raw), std::move(handles)));
}

Database::~Database() {
  (void)db_->Flush(rocksdb::FlushOptions(), handles_);
  for (auto* h : handles_) (void)db_->DestroyColumnFamilyHandle(h);
}

}  // namespace switchyard::storage_internal
