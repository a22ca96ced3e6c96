#include "storage/embedded_event_log.h"

#include <gtest/gtest.h>
#include <rocksdb/db.h>
#include <rocksdb/table_properties.h>

#include <thread>

#include "tests/support/temp_dir.h"

namespace switchyard {
namespace {

using testing::TempDir;

std::vector<OutgoingRecord> Records(int from, int n) {
  std::vector<OutgoingRecord> out;
  for (int i = from; i < from + n; ++i) out.push_back({"k", "record-" + std::to_string(i), {}});
  return out;
}

std::vector<std::pair<int64_t, std::string>> PollAll(EventLogReader& reader, size_t max) {
  std::vector<std::pair<int64_t, std::string>> out;
  auto n = reader.Poll(max, absl::ZeroDuration(), [&](const LogRecordView& r) {
    out.emplace_back(r.offset, std::string(r.payload));
  });
  EXPECT_TRUE(n.ok());
  return out;
}

// The records just appended, those a replica catching up reads first, are flushed to level 0
// without compression (the lower levels are LZ4): read back from the closed log's table files.
TEST(EmbeddedEventLogTest, RecentRecordsAreStoredUncompressed) {
  TempDir dir;
  {
    auto log = EmbeddedEventLog::Open(dir.Sub("log"));
    ASSERT_TRUE(log.ok()) << log.status();
    ASSERT_TRUE((*log)->Append(Records(0, 2000)).ok());
  }  // closing flushes the memtable to a table file at level 0
  rocksdb::DB* raw = nullptr;
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  const std::vector<rocksdb::ColumnFamilyDescriptor> families = {
      {rocksdb::kDefaultColumnFamilyName, rocksdb::ColumnFamilyOptions()},
      {"log", rocksdb::ColumnFamilyOptions()}};
  ASSERT_TRUE(
      rocksdb::DB::OpenForReadOnly(rocksdb::DBOptions(), dir.Sub("log"), families, &handles, &raw)
          .ok());
  std::unique_ptr<rocksdb::DB> db(raw);
  rocksdb::TablePropertiesCollection tables;
  ASSERT_TRUE(db->GetPropertiesOfAllTables(handles[1], &tables).ok());
  ASSERT_FALSE(tables.empty());
  for (const auto& [file, properties] : tables) {
    EXPECT_EQ(properties->compression_name, "NoCompression") << file;
    EXPECT_GT(properties->num_entries, 0u) << file;
  }
  for (auto* handle : handles) ASSERT_TRUE(db->DestroyColumnFamilyHandle(handle).ok());
}

TEST(EmbeddedEventLogTest, AppendsAreReadBackInOrderFromAnyOffset) {
  TempDir dir;
  auto log = EmbeddedEventLog::Open(dir.Sub("log"));
  ASSERT_TRUE(log.ok()) << log.status();
  ASSERT_TRUE((*log)->Append(Records(0, 5)).ok());
  ASSERT_TRUE((*log)->Append(Records(5, 5)).ok());
  EXPECT_EQ((*log)->end_offset(), 10);
  auto reader = (*log)->NewReader();
  auto first = PollAll(*reader, 4);
  ASSERT_EQ(first.size(), 4u);
  EXPECT_EQ(first[0], std::make_pair(int64_t{0}, std::string("record-0")));
  auto rest = PollAll(*reader, 100);
  ASSERT_EQ(rest.size(), 6u);
  EXPECT_EQ(rest.back(), std::make_pair(int64_t{9}, std::string("record-9")));
  ASSERT_TRUE(reader->Seek(0, 7).ok());
  auto from7 = PollAll(*reader, 100);
  ASSERT_EQ(from7.size(), 3u);
  EXPECT_EQ(from7[0].first, 7);
}

TEST(EmbeddedEventLogTest, SurvivesReopenAndContinuesNumbering) {
  TempDir dir;
  {
    auto log = EmbeddedEventLog::Open(dir.Sub("log"));
    ASSERT_TRUE((*log)->Append(Records(0, 3)).ok());
  }
  auto log = EmbeddedEventLog::Open(dir.Sub("log"));
  ASSERT_TRUE(log.ok());
  EXPECT_EQ((*log)->end_offset(), 3);
  ASSERT_TRUE((*log)->Append(Records(3, 2)).ok());
  auto reader = (*log)->NewReader();
  auto all = PollAll(*reader, 100);
  ASSERT_EQ(all.size(), 5u);
  EXPECT_EQ(all[4], std::make_pair(int64_t{4}, std::string("record-4")));
}

TEST(EmbeddedEventLogTest, PollWaitsForAnAppendUntilItsTimeout) {
  TempDir dir;
  auto log = EmbeddedEventLog::Open(dir.Sub("log"));
  auto reader = (*log)->NewReader();
  // Nothing there: returns after the timeout with nothing.
  auto none = reader->Poll(10, absl::Milliseconds(20), [](const LogRecordView&) {});
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(*none, 0u);
  std::thread writer([&] { ASSERT_TRUE((*log)->Append(Records(0, 1)).ok()); });
  std::vector<std::string> got;
  auto n = reader->Poll(10, absl::Seconds(30),
                        [&](const LogRecordView& r) { got.emplace_back(r.payload); });
  writer.join();
  ASSERT_TRUE(n.ok());
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0], "record-0");
}

TEST(EmbeddedEventLogTest, PausedReaderReadsNothing) {
  TempDir dir;
  auto log = EmbeddedEventLog::Open(dir.Sub("log"));
  ASSERT_TRUE((*log)->Append(Records(0, 2)).ok());
  auto reader = (*log)->NewReader();
  reader->Pause(0, true);
  EXPECT_EQ(PollAll(*reader, 10).size(), 0u);
  reader->Pause(0, false);
  EXPECT_EQ(PollAll(*reader, 10).size(), 2u);
}

TEST(EmbeddedEventLogTest, OnlyPartitionZeroExists) {
  TempDir dir;
  auto log = EmbeddedEventLog::Open(dir.Sub("log"));
  EXPECT_EQ((*log)->partition_count(), 1);
  std::vector<OutgoingRecord> wrong = {{"k", "x", 3}};
  EXPECT_FALSE((*log)->Append(wrong).ok());
  EXPECT_EQ((*log)->end_offset(), 0);
  EXPECT_FALSE((*log)->NewReader()->Seek(1, 0).ok());
}

TEST(EmbeddedEventLogTest, DropBeforeMovesTheStartAndReadersBelowItFindAHole) {
  TempDir dir;
  {
    auto log = EmbeddedEventLog::Open(dir.Sub("log"));
    ASSERT_TRUE((*log)->Append(Records(0, 10)).ok());
    ASSERT_TRUE((*log)->DropBefore(4).ok());
    EXPECT_EQ((*log)->start_offset(), 4);
    EXPECT_EQ((*log)->end_offset(), 10);
    auto reader = (*log)->NewReader();
    auto start = reader->StartOffset(0);
    ASSERT_TRUE(start.ok());
    EXPECT_EQ(*start, 4);
    auto hole = reader->Poll(10, absl::ZeroDuration(), [](const LogRecordView&) {});
    EXPECT_EQ(hole.status().code(), absl::StatusCode::kDataLoss) << hole.status();
    ASSERT_TRUE(reader->Seek(0, 4).ok());
    auto kept = PollAll(*reader, 100);
    ASSERT_EQ(kept.size(), 6u);
    EXPECT_EQ(kept[0], std::make_pair(int64_t{4}, std::string("record-4")));
  }
  // The start survives a reopen, and numbering goes on from the end.
  auto log = EmbeddedEventLog::Open(dir.Sub("log"));
  ASSERT_TRUE(log.ok()) << log.status();
  EXPECT_EQ((*log)->start_offset(), 4);
  EXPECT_EQ((*log)->end_offset(), 10);
}

TEST(EmbeddedEventLogTest, DroppingEveryRecordKeepsTheNumberingAcrossAReopen) {
  TempDir dir;
  {
    auto log = EmbeddedEventLog::Open(dir.Sub("log"));
    ASSERT_TRUE((*log)->Append(Records(0, 5)).ok());
    ASSERT_TRUE((*log)->DropBefore(100).ok());  // capped at the end
    EXPECT_EQ((*log)->start_offset(), 5);
  }
  auto log = EmbeddedEventLog::Open(dir.Sub("log"));
  ASSERT_TRUE(log.ok()) << log.status();
  EXPECT_EQ((*log)->start_offset(), 5);
  EXPECT_EQ((*log)->end_offset(), 5);
  ASSERT_TRUE((*log)->Append(Records(5, 1)).ok());
  auto reader = (*log)->NewReader();
  ASSERT_TRUE(reader->Seek(0, 5).ok());
  auto all = PollAll(*reader, 10);
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0], std::make_pair(int64_t{5}, std::string("record-5")));
}

}  // namespace
}  // namespace switchyard
