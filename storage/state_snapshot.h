#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/slot.h"
#include "engine/state_digest.h"
#include "storage/rocksdb_state_store.h"

namespace switchyard {

// One file of a snapshot's state, named relative to DIR/state.
struct SnapshotFile {
  std::string name;
  uint64_t size = 0;
  uint64_t xxh3 = 0;  // XXH3-64 of its bytes

  friend bool operator==(const SnapshotFile&, const SnapshotFile&) = default;
};

// What DIR/snapshot.manifest says of a snapshot: where in the log its state stands and how to
// check every byte of it (docs/architecture.md §7, "Snapshots"). A value type.
struct SnapshotManifest {
  static constexpr uint32_t kFormatVersion = 1;

  uint32_t format_version = kFormatVersion;
  uint32_t schema_version = RocksDbStateStore::kSchemaVersion;
  absl::Time created = absl::UnixEpoch();
  Slot applied_slot = 0;
  StateDigest digest;  // of the delegated set at applied_slot
  uint64_t delegated_accounts = 0;
  std::vector<int64_t> next_offsets;  // per partition: the first record not folded into it
  std::vector<SnapshotFile> files;

  uint64_t total_bytes() const;
};

// The manifest's text (its last line the XXH3-64 of every byte before it) and back. Parse
// refuses, with DataLoss and the reason, a manifest that is truncated, corrupt or of a format
// version this build does not read.
std::string EncodeSnapshotManifest(const SnapshotManifest& manifest);
absl::StatusOr<SnapshotManifest> ParseSnapshotManifest(std::string_view text);
// Writes DIR/snapshot.manifest atomically (a temporary file, fsynced, renamed).
absl::Status WriteSnapshotManifest(const std::string& dir, const SnapshotManifest& manifest);
// Reads and parses DIR/snapshot.manifest.
absl::StatusOr<SnapshotManifest> ReadSnapshotManifest(const std::string& dir);

// The manifest as JSON, for the admin endpoint and the command line.
std::string SnapshotManifestJson(const SnapshotManifest& manifest);

// Makes a snapshot of `store` in `dir` (absent or empty): a RocksDB checkpoint in DIR/state,
// opened once to read its position and recompute its digest from its rows (they must agree),
// then DIR/snapshot.manifest, written last: a directory without a manifest is no snapshot.
// Safe while a fold commits to `store` (the checkpoint is one moment of every family). Blocks
// on the disk.
absl::StatusOr<SnapshotManifest> CreateStateSnapshot(RocksDbStateStore& store,
                                                     const std::string& dir);

// Checks every file of the snapshot in `dir` against its manifest (size, then checksum):
// DataLoss naming the first file that is missing, truncated or corrupt.
absl::StatusOr<SnapshotManifest> VerifyStateSnapshot(const std::string& dir);

// Restores the snapshot in `dir` as the state store at `state_dir` (absent or empty): verifies
// the files, copies them (table files hard-linked where the file system allows) to a
// temporary directory beside `state_dir`, opens it, checks that its position is the
// manifest's and that the digest recomputed from its rows is the manifest's, then renames it
// into place. Nothing is left at `state_dir` when a check fails.
absl::StatusOr<SnapshotManifest> RestoreStateSnapshot(const std::string& dir,
                                                      const std::string& state_dir);

// Whether `state_dir` holds a state store (a RocksDB database), for serve --bootstrap-from.
bool StateStoreExists(const std::string& state_dir);

}  // namespace switchyard
