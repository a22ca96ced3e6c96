#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/clock.h"

namespace switchyard {

// One file of an exported snapshot: its name below the export's directory
// ("snapshot.manifest", "state/000012.sst"), its size and its SHA-256 (64 hex digits).
struct ExportedFile {
  std::string name;
  uint64_t size = 0;
  std::string sha256;
};

// The snapshot the admin listener offers to new replicas (docs/architecture.md §7, "Over
// HTTP"): one export at a time, made by the app's snapshot maker into ROOT/ID, listed with
// every file's size and SHA-256, read back in bounded chunks, and removed when a newer export
// replaces it, when no one has read it for `ttl`, and when this is destroyed. Owned by the
// AdminContext; every call runs on its snapshot thread only, and may block on the disk.
class SnapshotExports {
 public:
  // Makes a snapshot of the state in a new directory it is given (absent), and returns the
  // snapshot's manifest as JSON.
  using Maker = std::function<absl::StatusOr<std::string>(const std::string& dir)>;

  // Removes whatever an earlier process left in `root`.
  SnapshotExports(std::string root, absl::Duration ttl, const Clock* clock);
  ~SnapshotExports();
  SnapshotExports(const SnapshotExports&) = delete;
  SnapshotExports& operator=(const SnapshotExports&) = delete;

  // Removes the current export and makes a new one; returns its listing as JSON:
  // {"id":ID,"snapshot":MANIFEST,"files":[{"name":…,"size":…,"sha256":…},…]}.
  absl::StatusOr<std::string> Make(const Maker& maker);
  // The listing of export `id`; NotFound once it is gone (replaced or expired).
  absl::StatusOr<std::string> Listing(std::string_view id);
  // Up to `max_bytes` of the listed file `name` of export `id`, from `offset` (an empty
  // string at its end). NotFound for an export or a file that is not there, OutOfRange for an
  // offset past the end.
  absl::StatusOr<std::string> ReadChunk(std::string_view id, std::string_view name, uint64_t offset,
                                        size_t max_bytes);
  // Removes the export when no one has asked for it for longer than the ttl.
  void ExpireIdle();

 private:
  struct Export {
    std::string id;
    std::string dir;
    std::string listing;
    std::map<std::string, ExportedFile, std::less<>> files;
    absl::Duration last_used;  // the clock's Monotonic()
  };
  Export* Find(std::string_view id);
  void Remove();

  std::string root_;
  absl::Duration ttl_;
  const Clock* clock_;
  uint64_t made_ = 0;
  std::optional<Export> current_;
};

}  // namespace switchyard
