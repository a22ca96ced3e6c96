// storage_internal::TableFiles: rows put straight into one table file per column family and
// ingested together, or, when something fails, nothing applied and no file left.
#include <gtest/gtest.h>
#include <rocksdb/db.h>

#include <filesystem>
#include <string>
#include <vector>

#include "storage/internal/rocksdb_database.h"
#include "tests/support/temp_dir.h"

namespace switchyard {
namespace {

using storage_internal::Database;
using storage_internal::TableFiles;

class TableFilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::filesystem::create_directories(dir_.Sub("ingest"));
    auto database =
        Database::Open(dir_.Sub("db"), "the test database", Database::DefaultOptions(true),
                       {{rocksdb::kDefaultColumnFamilyName, {}}, {"a", {}}, {"b", {}}});
    ASSERT_TRUE(database.ok()) << database.status();
    database_ = std::move(*database);
  }

  // Every key and value of family i, in order.
  std::vector<std::string> Rows(size_t i) {
    std::vector<std::string> rows;
    std::unique_ptr<rocksdb::Iterator> it(
        database_->db()->NewIterator(rocksdb::ReadOptions(), database_->family(i)));
    for (it->SeekToFirst(); it->Valid(); it->Next()) {
      rows.push_back(it->key().ToString() + "=" + it->value().ToString());
    }
    EXPECT_TRUE(it->status().ok());
    return rows;
  }

  bool IngestDirEmpty() { return std::filesystem::is_empty(dir_.Sub("ingest")); }

  testing::TempDir dir_;
  std::unique_ptr<Database> database_;
};

TEST_F(TableFilesTest, TheFamiliesRowsAreIngestedTogetherAndTheFilesGo) {
  {
    TableFiles files(*database_, dir_.Sub("ingest"));
    TableFiles::File& a = files.For(database_->family(1));
    TableFiles::File& b = files.For(database_->family(2));
    EXPECT_EQ(&files.For(database_->family(1)), &a);
    ASSERT_TRUE(a.Put("k1", "v1").ok());
    ASSERT_TRUE(b.Put("x", "y").ok());
    ASSERT_TRUE(a.Put("k2", "v2").ok());
    // A family named but given no row has no file: the others are ingested without it.
    files.For(database_->family(0));
    EXPECT_TRUE(Rows(1).empty()) << "nothing is applied before Ingest";
    ASSERT_TRUE(files.Ingest("ingesting the test rows").ok());
  }
  EXPECT_EQ(Rows(1), (std::vector<std::string>{"k1=v1", "k2=v2"}));
  EXPECT_EQ(Rows(2), (std::vector<std::string>{"x=y"}));
  EXPECT_TRUE(Rows(0).empty());
  EXPECT_TRUE(IngestDirEmpty());
}

TEST_F(TableFilesTest, AFailedPutLeavesNothingAppliedAndNoFile) {
  {
    TableFiles files(*database_, dir_.Sub("ingest"));
    ASSERT_TRUE(files.For(database_->family(2)).Put("x", "y").ok());
    TableFiles::File& a = files.For(database_->family(1));
    ASSERT_TRUE(a.Put("k2", "v2").ok());
    EXPECT_FALSE(a.Put("k1", "v1").ok()) << "keys must come in ascending order";
    EXPECT_FALSE(IngestDirEmpty());
  }  // given up without Ingest
  EXPECT_TRUE(Rows(1).empty());
  EXPECT_TRUE(Rows(2).empty());
  EXPECT_TRUE(IngestDirEmpty());
}

// Ingest after a failed Put fails too: the rows put before the failure are not applied
// without the rest.
TEST_F(TableFilesTest, IngestAfterAFailedPutAppliesNothing) {
  TableFiles files(*database_, dir_.Sub("ingest"));
  ASSERT_TRUE(files.For(database_->family(2)).Put("x", "y").ok());
  TableFiles::File& a = files.For(database_->family(1));
  ASSERT_TRUE(a.Put("k2", "v2").ok());
  ASSERT_FALSE(a.Put("k1", "v1").ok());
  EXPECT_FALSE(a.Put("k3", "v3").ok()) << "a file that failed takes no more rows";
  absl::Status ingested = files.Ingest("ingesting the test rows");
  EXPECT_FALSE(ingested.ok());
  EXPECT_NE(ingested.message().find("ingesting the test rows"), std::string::npos) << ingested;
  EXPECT_TRUE(Rows(1).empty());
  EXPECT_TRUE(Rows(2).empty());
}

TEST_F(TableFilesTest, FilesThatCannotBeMadeFailWithoutApplyingAnything) {
  TableFiles files(*database_, dir_.Sub("no such directory"));
  EXPECT_FALSE(files.For(database_->family(1)).Put("k", "v").ok());
  EXPECT_FALSE(files.Ingest("ingesting the test rows").ok());
  EXPECT_TRUE(Rows(1).empty());
}

}  // namespace
}  // namespace switchyard
