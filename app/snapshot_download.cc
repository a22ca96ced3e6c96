#include "app/snapshot_download.h"

#include <fcntl.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <vector>

#include "common/sha256.h"
#include "common/status.h"
#include "common/url.h"
#include "fmt/format.h"
#include "ingest/base_clients.h"
#include "simdjson.h"

namespace switchyard {
namespace {

namespace fs = std::filesystem;

constexpr std::string_view kExportPath = "/admin/snapshot/export";
// Making an export checkpoints and hashes the whole state.
constexpr absl::Duration kExportTimeout = absl::Minutes(10);
constexpr absl::Duration kChunkTimeout = absl::Seconds(60);

struct ListedFile {
  std::string name;
  uint64_t size = 0;
  std::string sha256;
};

// What POST /admin/snapshot/export answers (api/admin/snapshot_export.h).
struct Listing {
  std::string id;
  std::vector<ListedFile> files;
};

// A name the peer lists stays below the download directory: a relative path of plain
// characters, no `..`.
bool SafeName(std::string_view name) {
  if (name.empty() || name.front() == '/' || name.find("..") != std::string_view::npos) {
    return false;
  }
  for (char c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' && c != '-' &&
        c != '/') {
      return false;
    }
  }
  return true;
}

absl::StatusOr<Listing> ParseListing(const std::string& body) {
  simdjson::dom::parser parser;
  simdjson::dom::element root;
  simdjson::dom::array files;
  std::string_view id;
  if (parser.parse(body).get(root) != simdjson::SUCCESS ||
      root["id"].get_string().get(id) != simdjson::SUCCESS ||
      root["files"].get_array().get(files) != simdjson::SUCCESS || !SafeName(id)) {
    return absl::DataLossError("the export listing is not {\"id\":…,\"files\":[…]}");
  }
  Listing listing{std::string(id), {}};
  for (simdjson::dom::element entry : files) {
    ListedFile file;
    std::string_view name;
    std::string_view sha256;
    if (entry["name"].get_string().get(name) != simdjson::SUCCESS ||
        entry["size"].get_uint64().get(file.size) != simdjson::SUCCESS ||
        entry["sha256"].get_string().get(sha256) != simdjson::SUCCESS || sha256.size() != 64 ||
        !SafeName(name)) {
      return absl::DataLossError("an entry of the export listing is not a file");
    }
    file.name = std::string(name);
    file.sha256 = std::string(sha256);
    listing.files.push_back(std::move(file));
  }
  return listing;
}

absl::StatusOr<std::string> Expect200(absl::StatusOr<HttpReply> reply, std::string_view what) {
  if (!reply.ok()) return reply.status();
  if (reply->status != 200) {
    return absl::UnavailableError(
        fmt::format("{} answered HTTP {}: {}", what, reply->status, reply->body));
  }
  return std::move(reply->body);
}

// A new export of the admin listener at `url`, or the one its path names.
absl::StatusOr<Listing> AskListing(const Url& url, HttpReadClient& client) {
  std::string_view path = url.path;
  while (path.ends_with('/')) path.remove_suffix(1);
  if (path.empty()) {
    Url post = url;
    post.path = std::string(kExportPath);
    HttpReadClient poster(std::move(post), "admin");
    ASSIGN_OR_RETURN(std::string body,
                     Expect200(poster.PostJson("{}", "POST /admin/snapshot/export", kExportTimeout),
                               "POST /admin/snapshot/export"));
    return ParseListing(body);
  }
  if (!path.starts_with(kExportPath) || path.size() <= kExportPath.size() + 1) {
    return absl::InvalidArgumentError(
        "give the admin listener, http://HOST:PORT, or an export, "
        "http://HOST:PORT/admin/snapshot/export/ID");
  }
  const std::string target(path);
  ASSIGN_OR_RETURN(std::string body,
                   Expect200(client.Get(target, kChunkTimeout), fmt::format("GET {}", target)));
  return ParseListing(body);
}

absl::Status WriteAll(int fd, std::string_view bytes, const fs::path& path) {
  while (!bytes.empty()) {
    const ssize_t n = ::write(fd, bytes.data(), bytes.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      return absl::UnavailableError(
          fmt::format("cannot write {}: {}", path.string(), std::strerror(errno)));
    }
    bytes.remove_prefix(static_cast<size_t>(n));
  }
  return absl::OkStatus();
}

// Downloads one listed file to `to` chunk by chunk, hashing as it goes; fsynced.
absl::Status DownloadFile(HttpReadClient& client, const std::string& id, const ListedFile& file,
                          const fs::path& to) {
  std::error_code ec;
  fs::create_directories(to.parent_path(), ec);
  const int fd = ::open(to.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) {
    return absl::UnavailableError(
        fmt::format("cannot create {}: {}", to.string(), std::strerror(errno)));
  }
  Sha256 hash;
  uint64_t received = 0;
  absl::Status status;
  while (status.ok() && received < file.size) {
    const std::string target =
        fmt::format("{}/{}/{}?offset={}", kExportPath, id, file.name, received);
    absl::StatusOr<std::string> chunk =
        Expect200(client.Get(target, kChunkTimeout), fmt::format("GET {}", target));
    if (!chunk.ok()) {
      status = chunk.status();
    } else if (chunk->empty() || received + chunk->size() > file.size) {
      status = absl::DataLossError(
          fmt::format("file {}: the peer sent {} bytes of the {} it listed (truncated)", file.name,
                      received + chunk->size(), file.size));
    } else {
      hash.Update(*chunk);
      received += chunk->size();
      status = WriteAll(fd, *chunk, to);
    }
  }
  if (status.ok() && ::fsync(fd) != 0) {
    status = absl::UnavailableError(fmt::format("cannot fsync {}", to.string()));
  }
  ::close(fd);
  RETURN_IF_ERROR(status);
  ASSIGN_OR_RETURN(std::string sha256, hash.FinishHex());
  if (sha256 != file.sha256) {
    return absl::DataLossError(
        fmt::format("file {}: its SHA-256 is {}, the listing says {} (corrupt)", file.name, sha256,
                    file.sha256));
  }
  return absl::OkStatus();
}

absl::Status Download(const std::string& source, const fs::path& dir) {
  ASSIGN_OR_RETURN(Url url, ParseUrl(source));
  if (url.websocket()) return absl::InvalidArgumentError("not an http(s) URL");
  Url files_url = url;
  files_url.path.clear();  // the targets below are whole paths
  HttpReadClient client(std::move(files_url), "admin");
  ASSIGN_OR_RETURN(Listing listing, AskListing(url, client));
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return absl::UnavailableError(fmt::format("creating {}: {}", dir.string(), ec.message()));
  for (const ListedFile& file : listing.files) {
    RETURN_IF_ERROR(DownloadFile(client, listing.id, file, dir / file.name));
  }
  return absl::OkStatus();
}

}  // namespace

bool IsSnapshotUrl(std::string_view source) {
  return source.starts_with("http://") || source.starts_with("https://");
}

absl::StatusOr<SnapshotManifest> RestoreSnapshotFrom(const std::string& source,
                                                     const std::string& state_dir) {
  if (!IsSnapshotUrl(source)) return RestoreStateSnapshot(source, state_dir);
  auto from = [&](const absl::Status& status) {
    return absl::Status(status.code(),
                        fmt::format("snapshot from {}: {}", source, std::string(status.message())));
  };
  std::error_code ec;
  if (fs::exists(state_dir, ec) && !fs::is_empty(state_dir, ec)) {
    return from(absl::AlreadyExistsError(fmt::format(
        "the state directory to restore into must be a new or empty directory; {} is not",
        state_dir)));
  }
  fs::path target = fs::path(state_dir).lexically_normal();
  if (target.filename().empty()) target = target.parent_path();
  const fs::path download = target.parent_path() / (target.filename().string() + ".download");
  fs::remove_all(download, ec);
  const absl::Status downloaded = Download(source, download);
  absl::StatusOr<SnapshotManifest> manifest =
      downloaded.ok() ? RestoreStateSnapshot(download.string(), state_dir)
                      : absl::StatusOr<SnapshotManifest>(downloaded);
  fs::remove_all(download, ec);
  if (!manifest.ok()) return from(manifest.status());
  return manifest;
}

}  // namespace switchyard
