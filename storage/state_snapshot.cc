#include "storage/state_snapshot.h"

#include <fcntl.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <system_error>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/status.h"

namespace switchyard {
namespace {

namespace fs = std::filesystem;

constexpr char kManifestName[] = "snapshot.manifest";
constexpr char kStateName[] = "state";
constexpr char kMagic[] = "switchyard-snapshot";

absl::Status FsError(const std::error_code& ec, std::string_view what) {
  return absl::UnavailableError(absl::StrCat(std::string(what), ": ", ec.message()));
}

uint64_t Xxh3Of(std::string_view bytes) { return XXH3_64bits(bytes.data(), bytes.size()); }

// The XXH3-64 of a file's bytes, and its size.
absl::StatusOr<std::pair<uint64_t, uint64_t>> HashFile(const fs::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return absl::NotFoundError(absl::StrCat("cannot open ", path.string(), ": ", strerror(errno)));
  }
  std::unique_ptr<XXH3_state_t, decltype(&XXH3_freeState)> state(XXH3_createState(),
                                                                 &XXH3_freeState);
  XXH3_64bits_reset(state.get());
  std::vector<char> buffer(1 << 20);
  uint64_t size = 0;
  for (;;) {
    const ssize_t n = ::read(fd, buffer.data(), buffer.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      ::close(fd);
      return absl::UnavailableError(
          absl::StrCat("cannot read ", path.string(), ": ", strerror(err)));
    }
    if (n == 0) break;
    XXH3_64bits_update(state.get(), buffer.data(), static_cast<size_t>(n));
    size += static_cast<uint64_t>(n);
  }
  ::close(fd);
  return std::make_pair(XXH3_64bits_digest(state.get()), size);
}

absl::Status SyncPath(const fs::path& path, bool directory) {
  const int fd = ::open(path.c_str(), (directory ? O_RDONLY | O_DIRECTORY : O_RDONLY) | O_CLOEXEC);
  if (fd < 0) return absl::UnavailableError(absl::StrCat("cannot open ", path.string()));
  const int rc = ::fsync(fd);
  ::close(fd);
  if (rc != 0) return absl::UnavailableError(absl::StrCat("cannot fsync ", path.string()));
  return absl::OkStatus();
}

// `dir` does not exist, or is an empty directory.
absl::Status CheckFreshDirectory(const std::string& dir, std::string_view what) {
  std::error_code ec;
  if (!fs::exists(dir, ec)) return absl::OkStatus();
  if (!fs::is_directory(dir, ec) || !fs::is_empty(dir, ec)) {
    return absl::AlreadyExistsError(
        absl::StrCat(std::string(what), " must be a new or empty directory; ", dir, " is not"));
  }
  return absl::OkStatus();
}

// Every regular file under `root`, by name relative to it, sorted.
absl::StatusOr<std::vector<SnapshotFile>> ListFiles(const fs::path& root) {
  std::vector<SnapshotFile> files;
  std::error_code ec;
  for (fs::recursive_directory_iterator it(root, ec), end; !ec && it != end; it.increment(ec)) {
    if (!it->is_regular_file()) continue;
    ASSIGN_OR_RETURN(auto hashed, HashFile(it->path()));
    files.push_back(
        SnapshotFile{fs::relative(it->path(), root).string(), hashed.second, hashed.first});
  }
  if (ec) return FsError(ec, absl::StrCat("listing ", root.string()));
  std::sort(files.begin(), files.end(),
            [](const SnapshotFile& a, const SnapshotFile& b) { return a.name < b.name; });
  return files;
}

absl::StatusOr<std::unique_ptr<RocksDbStateStore>> OpenScratch(const std::string& path) {
  RocksDbStateStoreOptions options;
  options.create_if_missing = false;
  options.sync_commits = false;
  options.block_cache_bytes = 8 << 20;
  return RocksDbStateStore::Open(path, options);
}

absl::Status DataLoss(absl::string_view dir, absl::string_view why) {
  return absl::DataLossError(absl::StrCat("snapshot ", dir, " refused: ", why));
}

}  // namespace

uint64_t SnapshotManifest::total_bytes() const {
  uint64_t total = 0;
  for (const SnapshotFile& f : files) total += f.size;
  return total;
}

std::string EncodeSnapshotManifest(const SnapshotManifest& m) {
  std::string out = absl::StrCat(kMagic, " ", m.format_version, "\n");
  absl::StrAppend(&out, "schema_version ", m.schema_version, "\n");
  absl::StrAppend(&out, "created_unix_ms ", absl::ToUnixMillis(m.created), "\n");
  absl::StrAppend(&out, "applied_slot ", m.applied_slot, "\n");
  absl::StrAppend(&out, "digest ", m.digest.ToHex(), "\n");
  absl::StrAppend(&out, "delegated_accounts ", m.delegated_accounts, "\n");
  absl::StrAppend(&out, "partitions ", m.next_offsets.size(), "\n");
  for (size_t p = 0; p < m.next_offsets.size(); ++p) {
    absl::StrAppend(&out, "next_offset ", p, " ", m.next_offsets[p], "\n");
  }
  absl::StrAppend(&out, "files ", m.files.size(), "\n");
  for (const SnapshotFile& f : m.files) {
    absl::StrAppend(&out, "file ", f.name, " ", f.size, " ", absl::StrFormat("%016x", f.xxh3),
                    "\n");
  }
  absl::StrAppend(&out, "checksum ", absl::StrFormat("%016x", Xxh3Of(out)), "\n");
  return out;
}

absl::StatusOr<SnapshotManifest> ParseSnapshotManifest(std::string_view whole) {
  // Abseil's own string_view: Debian's Abseil does not alias std::string_view.
  const absl::string_view text(whole.data(), whole.size());
  auto corrupt = [](absl::string_view why) {
    return absl::DataLossError(absl::StrCat("the manifest is corrupt: ", why));
  };
  // The last line checks every byte before it.
  if (text.empty() || text.back() != '\n') return corrupt("it does not end with a newline");
  const size_t last = text.rfind('\n', text.size() - 2);
  const absl::string_view body = last == absl::string_view::npos ? "" : text.substr(0, last + 1);
  absl::string_view check_line = text.substr(body.size(), text.size() - body.size() - 1);
  uint64_t stated = 0;
  if (!absl::ConsumePrefix(&check_line, "checksum ") || check_line.size() != 16 ||
      !absl::SimpleHexAtoi(check_line, &stated)) {
    return corrupt("no checksum line at its end (truncated?)");
  }
  if (stated != Xxh3Of(std::string_view(body.data(), body.size())))
    return corrupt("its checksum does not match its contents");

  SnapshotManifest m;
  std::vector<absl::string_view> lines = absl::StrSplit(body, '\n', absl::SkipEmpty());
  size_t i = 0;
  auto next = [&](absl::string_view key,
                  size_t fields) -> absl::StatusOr<std::vector<absl::string_view>> {
    if (i >= lines.size()) return corrupt(absl::StrCat("no ", key, " line"));
    std::vector<absl::string_view> parts = absl::StrSplit(lines[i++], ' ');
    if (parts.size() != fields + 1 || parts[0] != key) {
      return corrupt(absl::StrCat("expected a ", key, " line, found '", lines[i - 1], "'"));
    }
    parts.erase(parts.begin());
    return parts;
  };
  auto number = [&](absl::string_view field, auto* out) -> absl::Status {
    if (!absl::SimpleAtoi(field, out)) return corrupt(absl::StrCat("'", field, "' is no number"));
    return absl::OkStatus();
  };
  ASSIGN_OR_RETURN(auto magic, next(kMagic, 1));
  RETURN_IF_ERROR(number(magic[0], &m.format_version));
  if (m.format_version != SnapshotManifest::kFormatVersion) {
    return absl::FailedPreconditionError(absl::StrCat("the manifest has format version ",
                                                      m.format_version, "; this build reads ",
                                                      SnapshotManifest::kFormatVersion));
  }
  ASSIGN_OR_RETURN(auto schema, next("schema_version", 1));
  RETURN_IF_ERROR(number(schema[0], &m.schema_version));
  ASSIGN_OR_RETURN(auto created, next("created_unix_ms", 1));
  int64_t created_ms = 0;
  RETURN_IF_ERROR(number(created[0], &created_ms));
  m.created = absl::FromUnixMillis(created_ms);
  ASSIGN_OR_RETURN(auto applied, next("applied_slot", 1));
  RETURN_IF_ERROR(number(applied[0], &m.applied_slot));
  ASSIGN_OR_RETURN(auto digest, next("digest", 1));
  std::optional<StateDigest> parsed =
      StateDigest::FromHex(std::string_view(digest[0].data(), digest[0].size()));
  if (!parsed) return corrupt("the digest is not 32 hex digits");
  m.digest = *parsed;
  ASSIGN_OR_RETURN(auto delegated, next("delegated_accounts", 1));
  RETURN_IF_ERROR(number(delegated[0], &m.delegated_accounts));
  ASSIGN_OR_RETURN(auto partitions, next("partitions", 1));
  size_t partition_count = 0;
  RETURN_IF_ERROR(number(partitions[0], &partition_count));
  if (partition_count > lines.size()) return corrupt("more partitions than lines");
  for (size_t p = 0; p < partition_count; ++p) {
    ASSIGN_OR_RETURN(auto offset, next("next_offset", 2));
    size_t partition = 0;
    int64_t value = 0;
    RETURN_IF_ERROR(number(offset[0], &partition));
    RETURN_IF_ERROR(number(offset[1], &value));
    if (partition != p || value < 0) return corrupt("the partitions are out of order");
    m.next_offsets.push_back(value);
  }
  ASSIGN_OR_RETURN(auto files, next("files", 1));
  size_t file_count = 0;
  RETURN_IF_ERROR(number(files[0], &file_count));
  if (file_count > lines.size()) return corrupt("more files than lines");
  for (size_t f = 0; f < file_count; ++f) {
    ASSIGN_OR_RETURN(auto file, next("file", 3));
    SnapshotFile entry;
    entry.name = std::string(file[0]);
    RETURN_IF_ERROR(number(file[1], &entry.size));
    if (file[2].size() != 16 || !absl::SimpleHexAtoi(file[2], &entry.xxh3)) {
      return corrupt(absl::StrCat("the checksum of ", entry.name, " is not 16 hex digits"));
    }
    if (entry.name.empty() || entry.name.find("..") != std::string::npos || entry.name[0] == '/') {
      return corrupt(absl::StrCat("the file name '", entry.name, "' leaves the snapshot"));
    }
    m.files.push_back(std::move(entry));
  }
  if (i != lines.size()) return corrupt(absl::StrCat("unexpected line '", lines[i], "'"));
  return m;
}

absl::Status WriteSnapshotManifest(const std::string& dir, const SnapshotManifest& manifest) {
  const fs::path path = fs::path(dir) / kManifestName;
  const fs::path temp = fs::path(dir) / absl::StrCat(kManifestName, ".tmp");
  {
    std::ofstream out(temp, std::ios::binary | std::ios::trunc);
    out << EncodeSnapshotManifest(manifest);
    out.flush();
    if (!out) return absl::UnavailableError(absl::StrCat("cannot write ", temp.string()));
  }
  RETURN_IF_ERROR(SyncPath(temp, /*directory=*/false));
  std::error_code ec;
  fs::rename(temp, path, ec);
  if (ec) return FsError(ec, absl::StrCat("renaming ", temp.string()));
  return SyncPath(dir, /*directory=*/true);
}

absl::StatusOr<SnapshotManifest> ReadSnapshotManifest(const std::string& dir) {
  const fs::path path = fs::path(dir) / kManifestName;
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::NotFoundError(
        absl::StrCat("snapshot ", dir, " refused: no ", kManifestName,
                     " (not a snapshot, or one whose making did not finish)"));
  }
  std::stringstream text;
  text << in.rdbuf();
  absl::StatusOr<SnapshotManifest> manifest = ParseSnapshotManifest(text.str());
  if (!manifest.ok()) {
    return absl::Status(manifest.status().code(),
                        absl::StrCat("snapshot ", dir, " refused: ", manifest.status().message()));
  }
  return manifest;
}

std::string SnapshotManifestJson(const SnapshotManifest& m) {
  std::string offsets;
  for (size_t p = 0; p < m.next_offsets.size(); ++p) {
    absl::StrAppend(&offsets, p == 0 ? "" : ",", m.next_offsets[p]);
  }
  return absl::StrFormat(
      "{\"format_version\":%d,\"schema_version\":%d,\"created_unix_ms\":%d,\"applied_slot\":%d,"
      "\"digest\":\"%s\",\"delegated_accounts\":%d,\"next_offsets\":[%s],\"files\":%d,"
      "\"bytes\":%d}",
      m.format_version, m.schema_version, absl::ToUnixMillis(m.created), m.applied_slot,
      m.digest.ToHex(), m.delegated_accounts, offsets, m.files.size(), m.total_bytes());
}

absl::StatusOr<SnapshotManifest> CreateStateSnapshot(RocksDbStateStore& store,
                                                     const std::string& dir) {
  RETURN_IF_ERROR(CheckFreshDirectory(dir, "a snapshot"));
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return FsError(ec, absl::StrCat("creating ", dir));
  const fs::path state = fs::path(dir) / kStateName;
  RETURN_IF_ERROR(store.CreateCheckpoint(state.string()));
  SnapshotManifest manifest;
  manifest.created = absl::Now();
  {
    // The position and the rows of the checkpoint, not of the live store, which has moved on.
    ASSIGN_OR_RETURN(std::unique_ptr<RocksDbStateStore> copy, OpenScratch(state.string()));
    ASSIGN_OR_RETURN(FoldPosition position, copy->Position());
    ASSIGN_OR_RETURN(RocksDbStateStore::StateScan scan, copy->ScanState());
    if (scan.digest != position.digest) {
      return absl::InternalError(absl::StrCat("the checkpoint in ", state.string(),
                                              " does not agree with itself: its rows give digest ",
                                              scan.digest.ToHex(), ", its position says ",
                                              position.digest.ToHex()));
    }
    manifest.applied_slot = position.applied_slot;
    manifest.digest = position.digest;
    manifest.delegated_accounts = scan.delegated;
    for (const PartitionCursor& cursor : position.partitions) {
      manifest.next_offsets.push_back(cursor.next_offset);
    }
  }  // closed: what the opening recovered is flushed, and the files are final
  ASSIGN_OR_RETURN(manifest.files, ListFiles(state));
  for (const SnapshotFile& f : manifest.files) {
    RETURN_IF_ERROR(SyncPath(state / f.name, /*directory=*/false));
  }
  RETURN_IF_ERROR(WriteSnapshotManifest(dir, manifest));
  return manifest;
}

absl::StatusOr<SnapshotManifest> VerifyStateSnapshot(const std::string& dir) {
  ASSIGN_OR_RETURN(SnapshotManifest manifest, ReadSnapshotManifest(dir));
  const fs::path state = fs::path(dir) / kStateName;
  for (const SnapshotFile& f : manifest.files) {
    const fs::path path = state / f.name;
    std::error_code ec;
    const uintmax_t size = fs::file_size(path, ec);
    if (ec) return DataLoss(dir, absl::StrCat("file ", f.name, " is missing"));
    if (size != f.size) {
      return DataLoss(dir, absl::StrCat("file ", f.name, " has ", size,
                                        " bytes, the manifest says ", f.size, " (truncated?)"));
    }
    ASSIGN_OR_RETURN(auto hashed, HashFile(path));
    if (hashed.first != f.xxh3) {
      return DataLoss(dir, absl::StrCat("file ", f.name,
                                        " does not match its checksum in the manifest (corrupt)"));
    }
  }
  return manifest;
}

absl::StatusOr<SnapshotManifest> RestoreStateSnapshot(const std::string& dir,
                                                      const std::string& state_dir) {
  RETURN_IF_ERROR(CheckFreshDirectory(state_dir, "the state directory to restore into"));
  ASSIGN_OR_RETURN(SnapshotManifest manifest, VerifyStateSnapshot(dir));
  const fs::path source = fs::path(dir) / kStateName;
  fs::path target = fs::path(state_dir).lexically_normal();
  if (target.filename().empty()) target = target.parent_path();
  const fs::path temp =
      target.parent_path() / absl::StrCat(target.filename().string(), ".restoring");
  std::error_code ec;
  fs::remove_all(temp, ec);
  fs::create_directories(temp, ec);
  if (ec) return FsError(ec, absl::StrCat("creating ", temp.string()));
  auto fail = [&](absl::Status status) {
    std::error_code ignored;
    fs::remove_all(temp, ignored);
    return status;
  };
  for (const SnapshotFile& f : manifest.files) {
    const fs::path to = temp / f.name;
    fs::create_directories(to.parent_path(), ec);
    // Table files are immutable: a hard link shares them. Everything else is copied, since
    // the restored store appends to it.
    bool linked = false;
    if (f.name.ends_with(".sst")) {
      fs::create_hard_link(source / f.name, to, ec);
      linked = !ec;
    }
    if (!linked) {
      fs::copy_file(source / f.name, to, fs::copy_options::overwrite_existing, ec);
      if (ec) return fail(FsError(ec, absl::StrCat("copying ", f.name, " to ", temp.string())));
    }
  }
  {
    absl::StatusOr<std::unique_ptr<RocksDbStateStore>> store = OpenScratch(temp.string());
    if (!store.ok()) return fail(store.status());
    absl::StatusOr<FoldPosition> position = (*store)->Position();
    if (!position.ok()) return fail(position.status());
    absl::StatusOr<RocksDbStateStore::StateScan> scan = (*store)->ScanState();
    if (!scan.ok()) return fail(scan.status());
    std::vector<int64_t> offsets;
    for (const PartitionCursor& cursor : position->partitions)
      offsets.push_back(cursor.next_offset);
    if (position->applied_slot != manifest.applied_slot || offsets != manifest.next_offsets) {
      return fail(DataLoss(
          dir, absl::StrCat("the restored state stands at applied slot ", position->applied_slot,
                            ", not where the manifest says (", manifest.applied_slot, ")")));
    }
    if (scan->digest != manifest.digest || position->digest != manifest.digest) {
      return fail(DataLoss(dir, absl::StrCat("the digest recomputed from the restored state is ",
                                             scan->digest.ToHex(), ", the manifest says ",
                                             manifest.digest.ToHex())));
    }
  }
  fs::rename(temp, target, ec);
  if (ec && fs::exists(target)) {  // an empty directory was there
    std::error_code removed;
    fs::remove(target, removed);
    fs::rename(temp, target, ec);
  }
  if (ec) return fail(FsError(ec, absl::StrCat("renaming ", temp.string(), " to ", state_dir)));
  return manifest;
}

bool StateStoreExists(const std::string& state_dir) {
  std::error_code ec;
  return fs::exists(fs::path(state_dir) / "CURRENT", ec);
}

}  // namespace switchyard
