#include "api/admin/snapshot_export.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <future>
#include <string>

#include "absl/synchronization/notification.h"
#include "api/admin/admin_handler.h"
#include "common/clock.h"
#include "tests/support/temp_dir.h"

namespace switchyard {
namespace {

namespace fs = std::filesystem;

// SHA-256 of "abc" (FIPS 180-2, appendix B.1) and of "".
constexpr char kAbcSha256[] = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";
constexpr char kEmptySha256[] = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

class SnapshotExportsTest : public ::testing::Test {
 protected:
  // A snapshot maker that writes a manifest and one table file, as the app's does.
  static absl::StatusOr<std::string> Make(const std::string& dir) {
    fs::create_directories(fs::path(dir) / "state");
    std::ofstream(fs::path(dir) / "snapshot.manifest") << "";
    std::ofstream(fs::path(dir) / "state" / "000012.sst") << "abc";
    return std::string(R"({"applied_slot":7})");
  }

  std::string Id(const std::string& listing) {
    const size_t at = listing.find(R"("id":")") + 6;
    return listing.substr(at, listing.find('"', at) - at);
  }

  testing::TempDir dir_;
  ManualClock clock_{absl::FromUnixMillis(1764763200000)};
  const absl::Duration ttl_ = absl::Minutes(10);
};

TEST_F(SnapshotExportsTest, AnExportListsEveryFileWithItsSha256AndIsReadInChunks) {
  SnapshotExports exports(dir_.Sub("exports"), ttl_, &clock_);
  absl::StatusOr<std::string> listing = exports.Make(&Make);
  ASSERT_TRUE(listing.ok()) << listing.status();
  EXPECT_EQ(*listing, std::string(R"({"id":"1764763200000-1","snapshot":{"applied_slot":7},)") +
                          R"("files":[{"name":"snapshot.manifest","size":0,"sha256":")" +
                          kEmptySha256 + R"("},{"name":"state/000012.sst","size":3,"sha256":")" +
                          kAbcSha256 + R"("}]})");
  const std::string id = Id(*listing);
  EXPECT_EQ(*exports.Listing(id), *listing);
  EXPECT_EQ(*exports.ReadChunk(id, "state/000012.sst", 0, 2), "ab");
  EXPECT_EQ(*exports.ReadChunk(id, "state/000012.sst", 2, 2), "c");
  EXPECT_EQ(*exports.ReadChunk(id, "state/000012.sst", 3, 2), "");
  EXPECT_TRUE(absl::IsOutOfRange(exports.ReadChunk(id, "state/000012.sst", 4, 2).status()));
  // Only what the listing names is read: not another file, nor a path out of the export.
  EXPECT_TRUE(absl::IsNotFound(exports.ReadChunk(id, "state/CURRENT", 0, 2).status()));
  EXPECT_TRUE(absl::IsNotFound(exports.ReadChunk(id, "../exports", 0, 2).status()));
  EXPECT_TRUE(absl::IsNotFound(exports.ReadChunk("0-0", "state/000012.sst", 0, 2).status()));
}

TEST_F(SnapshotExportsTest, ANewerExportReplacesTheOlderOne) {
  SnapshotExports exports(dir_.Sub("exports"), ttl_, &clock_);
  const std::string first = Id(*exports.Make(&Make));
  const std::string second = Id(*exports.Make(&Make));
  EXPECT_NE(first, second);
  EXPECT_FALSE(fs::exists(dir_.Sub("exports/" + first)));
  EXPECT_TRUE(fs::exists(dir_.Sub("exports/" + second + "/state/000012.sst")));
  EXPECT_TRUE(absl::IsNotFound(exports.Listing(first).status()));
  EXPECT_TRUE(exports.Listing(second).ok());
}

TEST_F(SnapshotExportsTest, AnExportUnreadForTheTtlIsRemoved) {
  SnapshotExports exports(dir_.Sub("exports"), ttl_, &clock_);
  const std::string id = Id(*exports.Make(&Make));
  clock_.Advance(ttl_ - absl::Seconds(1));
  ASSERT_TRUE(exports.ReadChunk(id, "state/000012.sst", 0, 1).ok());  // a read keeps it
  clock_.Advance(ttl_ - absl::Seconds(1));
  exports.ExpireIdle();
  EXPECT_TRUE(exports.Listing(id).ok());
  clock_.Advance(ttl_ + absl::Seconds(1));
  exports.ExpireIdle();
  EXPECT_TRUE(absl::IsNotFound(exports.Listing(id).status()));
  EXPECT_FALSE(fs::exists(dir_.Sub("exports/" + id)));
}

TEST_F(SnapshotExportsTest, AFailedExportLeavesNothingAndTheDirectoryGoesWithTheExports) {
  {
    SnapshotExports exports(dir_.Sub("exports"), ttl_, &clock_);
    absl::StatusOr<std::string> failed = exports.Make([](const std::string& dir) {
      fs::create_directories(dir);
      std::ofstream(fs::path(dir) / "partial") << "x";
      return absl::StatusOr<std::string>(absl::UnavailableError("disk full"));
    });
    EXPECT_EQ(failed.status(), absl::UnavailableError("disk full"));
    EXPECT_TRUE(fs::is_empty(dir_.Sub("exports")));
    ASSERT_TRUE(exports.Make(&Make).ok());
  }
  EXPECT_FALSE(fs::exists(dir_.Sub("exports")));
}

// The admin context's endpoints around the exports: one snapshot at a time (409 while one is
// being made, also for POST /admin/snapshot), reads by offset, and their counters.
TEST_F(SnapshotExportsTest, TheAdminContextMakesOneExportAtATimeAndCountsItsReads) {
  MetricsRegistry registry;
  AdminMetrics metrics(registry);
  SnapshotHolder snapshots;
  UpstreamMonitor upstreams(UpstreamMonitorOptions{}, &registry);
  AdminOptions options;
  options.snapshot_export_dir = dir_.Sub("exports");
  AdminContext admin(
      options, &snapshots, &registry, &upstreams,
      [] { return absl::StatusOr<std::vector<PartitionStatus>>(std::vector<PartitionStatus>()); },
      &metrics);
  absl::Notification release;
  admin.SetSnapshotMaker([&](const std::string& dir) {
    release.WaitForNotification();
    return Make(dir);
  });
  std::promise<HttpResponse> made;
  admin.ExportSnapshot([&](HttpResponse response) { made.set_value(std::move(response)); });
  std::optional<HttpResponse> busy;
  admin.ExportSnapshot([&](HttpResponse response) { busy = std::move(response); });
  ASSERT_TRUE(busy.has_value());
  EXPECT_EQ(busy->status, 409u);
  HttpRequest snapshot_request;
  snapshot_request.target = "/admin/snapshot?dir=" + dir_.Sub("elsewhere");
  std::optional<HttpResponse> snapshot_busy;
  admin.MakeSnapshot(snapshot_request, [&](HttpResponse r) { snapshot_busy = std::move(r); });
  ASSERT_TRUE(snapshot_busy.has_value());
  EXPECT_EQ(snapshot_busy->status, 409u);
  release.Notify();
  const HttpResponse listing = made.get_future().get();
  ASSERT_EQ(listing.status, 200u) << listing.body;
  const std::string base = "/admin/snapshot/export/" + Id(listing.body);

  auto read = [&](const std::string& target) {
    std::promise<HttpResponse> answered;
    admin.ReadExport(target, [&](HttpResponse r) { answered.set_value(std::move(r)); });
    return answered.get_future().get();
  };
  EXPECT_EQ(read(base).body, listing.body);
  const HttpResponse chunk = read(base + "/state/000012.sst?offset=1");
  EXPECT_EQ(chunk.status, 200u);
  EXPECT_EQ(chunk.body, "bc");
  EXPECT_EQ(chunk.content_type, "application/octet-stream");
  EXPECT_EQ(read(base + "/state/000012.sst?offset=x").status, 400u);
  EXPECT_EQ(read(base + "/state/000012.sst?offset=4").status, 400u);
  EXPECT_EQ(read(base + "/state/CURRENT").status, 404u);
  EXPECT_EQ(metrics.exports_made.value(), 1u);
  EXPECT_EQ(metrics.exports_refused.value(), 1u);
  EXPECT_EQ(metrics.export_reads.value(), 2u);
  EXPECT_EQ(metrics.export_reads_refused.value(), 3u);
  EXPECT_EQ(metrics.export_bytes.value(), 2u);
}

}  // namespace
}  // namespace switchyard
