#include "storage/periodic_snapshots.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <filesystem>
#include <system_error>
#include <vector>

#include "storage/state_snapshot.h"

namespace switchyard {
namespace {

namespace fs = std::filesystem;

constexpr std::string_view kPrefix = "snapshot-";

// The complete snapshots under `dir` (those with a manifest), oldest first: their names hold
// the creation time, zero-padded, so they sort by it.
std::vector<fs::path> Snapshots(const fs::path& dir) {
  std::vector<fs::path> out;
  std::error_code ec;
  for (const fs::directory_entry& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(kPrefix, 0) == 0 && !entry.is_symlink() &&
        fs::exists(entry.path() / "snapshot.manifest", ec)) {
      out.push_back(entry.path());
    }
  }
  std::ranges::sort(out);
  return out;
}

}  // namespace

PeriodicSnapshotMetrics::PeriodicSnapshotMetrics(MetricsRegistry& r)
    : created(r.AddCounter("switchyard_snapshots_created_total",
                           "State snapshots made by [snapshot] interval_s")),
      failures(r.AddCounter("switchyard_snapshot_failures_total",
                            "Periodic state snapshots that failed (retried at the next interval)")),
      last_applied_slot(r.AddGauge("switchyard_snapshot_last_applied_slot",
                                   "Applied slot of the newest periodic snapshot")),
      last_created_unix_seconds(r.AddGauge("switchyard_snapshot_last_created_unix_seconds",
                                           "When the newest periodic snapshot was made")) {}

PeriodicSnapshots::PeriodicSnapshots(PeriodicSnapshotOptions options, RocksDbStateStore* store,
                                     PeriodicSnapshotMetrics* metrics)
    : options_(std::move(options)), store_(store), metrics_(metrics) {}

PeriodicSnapshots::~PeriodicSnapshots() { Stop(); }

void PeriodicSnapshots::Start() {
  thread_ = std::thread([this] {
    for (;;) {
      {
        absl::MutexLock lock(&mu_);
        mu_.AwaitWithTimeout(absl::Condition(&stopping_), options_.interval);
        if (stopping_) return;
      }
      if (absl::StatusOr<std::string> made = MakeOne(); !made.ok()) {
        if (metrics_ != nullptr) metrics_->failures.Increment();
        spdlog::warn("snapshot: {}; retrying in {}", std::string(made.status().message()),
                     absl::FormatDuration(options_.interval));
      }
    }
  });
}

void PeriodicSnapshots::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

absl::StatusOr<std::string> PeriodicSnapshots::MakeOne() {
  const fs::path root(options_.dir);
  std::error_code ec;
  fs::create_directories(root, ec);
  if (ec) {
    return absl::UnavailableError(
        fmt::format("cannot create the snapshot directory {}: {}", options_.dir, ec.message()));
  }
  int64_t ms = absl::ToUnixMillis(absl::Now());
  fs::path dir;
  do {
    dir = root / fmt::format("{}{:016d}", kPrefix, ms++);
  } while (fs::exists(dir, ec));
  absl::StatusOr<SnapshotManifest> manifest = CreateStateSnapshot(*store_, dir.string());
  if (!manifest.ok()) {
    fs::remove_all(dir, ec);  // a directory without a manifest is no snapshot
    return manifest.status();
  }
  // `latest` is replaced in one rename, so it always names a complete snapshot.
  const fs::path link = root / "latest";
  const fs::path next_link = root / "latest.new";
  fs::remove(next_link, ec);
  fs::create_directory_symlink(dir.filename(), next_link, ec);
  if (!ec) fs::rename(next_link, link, ec);
  if (ec) {
    spdlog::warn("snapshot: cannot point {} at {}: {}", link.string(), dir.string(), ec.message());
  }
  const std::vector<fs::path> snapshots = Snapshots(root);
  for (size_t i = 0; i + options_.keep < snapshots.size(); ++i) {
    if (snapshots[i] == dir) continue;
    fs::remove_all(snapshots[i], ec);
    if (ec) {
      spdlog::warn("snapshot: cannot delete {}: {}", snapshots[i].string(), ec.message());
    }
  }
  if (metrics_ != nullptr) {
    metrics_->created.Increment();
    metrics_->last_applied_slot.Set(static_cast<int64_t>(manifest->applied_slot));
    metrics_->last_created_unix_seconds.Set(absl::ToUnixSeconds(manifest->created));
  }
  spdlog::info("snapshot: made {} at applied slot {} ({} bytes)", dir.string(),
               manifest->applied_slot, manifest->total_bytes());
  return dir.string();
}

}  // namespace switchyard
