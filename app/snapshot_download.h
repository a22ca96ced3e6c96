#pragma once

#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "storage/state_snapshot.h"

namespace switchyard {

// Whether the source of `snapshot restore` or `serve --bootstrap-from` is a serve's admin
// listener (http:// or https://) rather than a snapshot directory.
bool IsSnapshotUrl(std::string_view source);

// Restores the snapshot at `source` as the state at `state_dir` (absent or empty). A
// directory is restored as RestoreStateSnapshot does. A URL is a serve's admin listener,
// http(s)://HOST:PORT, which makes a new export (POST /admin/snapshot/export), or one export
// it has made, http(s)://HOST:PORT/admin/snapshot/export/ID: its files are downloaded in
// bounded chunks into STATE_DIR.download, each checked against the listing's size and SHA-256
// as it arrives, then restored from there (every check of RestoreStateSnapshot), and the
// download is removed. On any failure, whose message names the URL, nothing is left at
// `state_dir` or beside it. Blocks the calling thread on the network and the disk.
absl::StatusOr<SnapshotManifest> RestoreSnapshotFrom(const std::string& source,
                                                     const std::string& state_dir);

}  // namespace switchyard
