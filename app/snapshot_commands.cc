#include "app/snapshot_commands.h"

#include <filesystem>
#include <iostream>

#include "absl/strings/str_cat.h"
#include "api/jsonrpc/jsonrpc.h"
#include "app/snapshot_download.h"
#include "common/status.h"
#include "common/url.h"
#include "fmt/format.h"
#include "ingest/base_clients.h"
#include "storage/rocksdb_state_store.h"
#include "storage/state_snapshot.h"

namespace switchyard {
namespace {

int Fail(const absl::Status& status) {
  std::cerr << "error: " << status.message() << "\n";
  return 1;
}

absl::StatusOr<std::string> CreateThroughAdmin(const std::string& admin_url, const std::string& dir,
                                               absl::Duration timeout) {
  ASSIGN_OR_RETURN(Url url, ParseUrl(admin_url));
  if (url.websocket()) {
    return absl::InvalidArgumentError(
        fmt::format("--admin '{}' is not an http(s) URL of an admin listener", admin_url));
  }
  url.path = "/admin/snapshot";
  HttpReadClient client(std::move(url), fmt::format("admin {}", admin_url));
  ASSIGN_OR_RETURN(HttpReply reply, client.PostJson(fmt::format(R"({{"dir":{}}})", JsonQuote(dir)),
                                                    "POST /admin/snapshot", timeout));
  if (reply.status != 200) {
    return absl::UnavailableError(
        fmt::format("{} answered HTTP {}: {}", admin_url, reply.status, reply.body));
  }
  return std::move(reply.body);
}

}  // namespace

int RunSnapshotCreate(const Config& config, const SnapshotCreateArgs& args) {
  std::error_code ec;
  const std::string dir = std::filesystem::absolute(args.dir, ec).lexically_normal().string();
  if (!args.admin_url.empty()) {
    absl::StatusOr<std::string> manifest =
        CreateThroughAdmin(args.admin_url, dir, absl::Milliseconds(args.timeout_ms));
    if (!manifest.ok()) return Fail(manifest.status());
    std::cout << *manifest << "\n";
    return 0;
  }
  RocksDbStateStoreOptions options;
  options.create_if_missing = false;
  options.block_cache_bytes = config.block_cache_mb << 20;
  auto store = RocksDbStateStore::Open(config.StateDir(), options);
  if (!store.ok()) {
    return Fail(absl::Status(
        store.status().code(),
        absl::StrCat(store.status().message(),
                     " (while serve runs on this state, ask it: --admin http://HOST:PORT)")));
  }
  auto manifest = CreateStateSnapshot(**store, dir);
  if (!manifest.ok()) return Fail(manifest.status());
  std::cout << SnapshotManifestJson(*manifest) << "\n";
  return 0;
}

int RunSnapshotRestore(const Config& config, const SnapshotRestoreArgs& args) {
  const std::string state_dir = args.state_dir.empty() ? config.StateDir() : args.state_dir;
  auto manifest = RestoreSnapshotFrom(args.dir, state_dir);
  if (!manifest.ok()) return Fail(manifest.status());
  std::cout << SnapshotManifestJson(*manifest) << "\n";
  return 0;
}

}  // namespace switchyard
