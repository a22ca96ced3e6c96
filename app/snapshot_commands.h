#pragma once

#include <string>

#include "app/config.h"

namespace switchyard {

// `switchyard snapshot create DIR`: a snapshot of the state (storage/state_snapshot.h). With
// `admin_url`, a running serve makes it (POST /admin/snapshot) without stopping; without,
// the state directory is opened here, which fails while a serve holds it.
struct SnapshotCreateArgs {
  std::string dir;
  std::string admin_url;  // http://HOST:PORT of a serve's admin listener
  int64_t timeout_ms = 600'000;
};
int RunSnapshotCreate(const Config& config, const SnapshotCreateArgs& args);

// `switchyard snapshot restore DIR|URL [--state-dir X]`: verifies the snapshot (a directory,
// or a serve's admin listener whose export is downloaded: app/snapshot_download.h) and
// restores it as the state at X (default: the configured state directory), which must be new
// or empty.
struct SnapshotRestoreArgs {
  std::string dir;  // or http(s)://HOST:PORT[/admin/snapshot/export/ID]
  std::string state_dir;
};
int RunSnapshotRestore(const Config& config, const SnapshotRestoreArgs& args);

}  // namespace switchyard
