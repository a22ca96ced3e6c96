#include "api/admin/snapshot_export.h"

#include <boost/asio/post.hpp>
#include <filesystem>
#include <fstream>
#include <utility>

#include "absl/strings/numbers.h"
#include "api/admin/admin_handler.h"
#include "api/jsonrpc/jsonrpc.h"
#include "common/sha256.h"
#include "common/status.h"
#include "common/url.h"
#include "fmt/format.h"
#include "spdlog/spdlog.h"

namespace switchyard {

namespace asio = boost::asio;
namespace fs = std::filesystem;

namespace {

constexpr std::string_view kExportPath = "/admin/snapshot/export";
// The most one GET of an exported file answers: neither side holds more of a file at once.
constexpr size_t kChunkBytes = 4 << 20;
// Chunk reads queued or running at once; more are answered 503.
constexpr size_t kMaxChunkReads = 4;

// Every regular file under `dir`, by name relative to it, with its size and SHA-256.
absl::StatusOr<std::map<std::string, ExportedFile, std::less<>>> ListExport(const fs::path& dir) {
  std::map<std::string, ExportedFile, std::less<>> files;
  std::error_code ec;
  for (fs::recursive_directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    if (!it->is_regular_file()) continue;
    ASSIGN_OR_RETURN(FileSha256 hashed, Sha256OfFile(it->path().string()));
    ExportedFile file{fs::relative(it->path(), dir).string(), hashed.size,
                      std::move(hashed.sha256)};
    files.emplace(file.name, std::move(file));
  }
  if (ec) return absl::UnavailableError(fmt::format("listing {}: {}", dir.string(), ec.message()));
  return files;
}

HttpResponse ErrorResponse(unsigned status, std::string_view message) {
  HttpResponse response;
  response.status = status;
  response.body = fmt::format(R"({{"error":{}}})", JsonQuote(message));
  return response;
}

unsigned HttpStatusOf(const absl::Status& status) {
  switch (status.code()) {
    case absl::StatusCode::kNotFound:
      return 404;
    case absl::StatusCode::kOutOfRange:
    case absl::StatusCode::kInvalidArgument:
      return 400;
    default:
      return 500;
  }
}

}  // namespace

SnapshotExports::SnapshotExports(std::string root, absl::Duration ttl, const Clock* clock)
    : root_(std::move(root)), ttl_(ttl), clock_(clock) {
  std::error_code ec;
  fs::remove_all(root_, ec);
}

SnapshotExports::~SnapshotExports() {
  Remove();
  std::error_code ec;
  fs::remove_all(root_, ec);
}

void SnapshotExports::Remove() {
  if (!current_) return;
  std::error_code ec;
  fs::remove_all(current_->dir, ec);
  if (ec) spdlog::warn("admin: cannot remove export {}: {}", current_->dir, ec.message());
  current_.reset();
}

absl::StatusOr<std::string> SnapshotExports::Make(const Maker& maker) {
  Remove();
  Export made;
  made.id = fmt::format("{}-{}", absl::ToUnixMillis(clock_->Now()), ++made_);
  made.dir = (fs::path(root_) / made.id).string();
  auto fail = [&](absl::Status status) {
    std::error_code ec;
    fs::remove_all(made.dir, ec);
    return status;
  };
  absl::StatusOr<std::string> manifest = maker(made.dir);
  if (!manifest.ok()) return fail(manifest.status());
  absl::StatusOr<std::map<std::string, ExportedFile, std::less<>>> files = ListExport(made.dir);
  if (!files.ok()) return fail(files.status());
  made.files = *std::move(files);
  std::string listed;
  for (const auto& [name, file] : made.files) {
    listed += fmt::format(R"({}{{"name":{},"size":{},"sha256":"{}"}})", listed.empty() ? "" : ",",
                          JsonQuote(name), file.size, file.sha256);
  }
  made.listing =
      fmt::format(R"({{"id":"{}","snapshot":{},"files":[{}]}})", made.id, *manifest, listed);
  made.last_used = clock_->Monotonic();
  current_ = std::move(made);
  return current_->listing;
}

SnapshotExports::Export* SnapshotExports::Find(std::string_view id) {
  if (!current_ || current_->id != id) return nullptr;
  current_->last_used = clock_->Monotonic();
  return &*current_;
}

absl::StatusOr<std::string> SnapshotExports::Listing(std::string_view id) {
  Export* found = Find(id);
  if (found == nullptr) {
    return absl::NotFoundError(fmt::format("no export {} here (replaced or expired)", id));
  }
  return found->listing;
}

absl::StatusOr<std::string> SnapshotExports::ReadChunk(std::string_view id, std::string_view name,
                                                       uint64_t offset, size_t max_bytes) {
  Export* found = Find(id);
  if (found == nullptr) {
    return absl::NotFoundError(fmt::format("no export {} here (replaced or expired)", id));
  }
  auto file = found->files.find(name);
  if (file == found->files.end()) {
    return absl::NotFoundError(fmt::format("export {} has no file {}", id, name));
  }
  if (offset > file->second.size) {
    return absl::OutOfRangeError(
        fmt::format("offset {} is past the end of {} ({} bytes)", offset, name, file->second.size));
  }
  const fs::path path = fs::path(found->dir) / file->second.name;
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::UnavailableError(fmt::format("cannot open {}", path.string()));
  std::string chunk(std::min<uint64_t>(max_bytes, file->second.size - offset), '\0');
  in.seekg(static_cast<std::streamoff>(offset));
  in.read(chunk.data(), static_cast<std::streamsize>(chunk.size()));
  chunk.resize(static_cast<size_t>(std::max<std::streamsize>(in.gcount(), 0)));
  return chunk;
}

void SnapshotExports::ExpireIdle() {
  if (current_ && clock_->Monotonic() - current_->last_used > ttl_) {
    spdlog::info("admin: export {} unused for {}; removed", current_->id,
                 absl::FormatDuration(ttl_));
    Remove();
  }
}

void AdminContext::ExportSnapshot(std::function<void(HttpResponse)> answer) {
  if (!exports_) {
    metrics_->exports_refused.Increment();
    return answer(ErrorResponse(503, "this process exports no snapshots"));
  }
  if (snapshot_running_.exchange(true)) {
    metrics_->exports_refused.Increment();
    return answer(ErrorResponse(409, "a snapshot is being made; try again when it is done"));
  }
  asio::post(*snapshot_pool_, [this, answer = std::move(answer)] {
    const absl::Time start = absl::Now();
    absl::StatusOr<std::string> listing = exports_->Make(snapshot_maker_);
    HttpResponse response;
    if (listing.ok()) {
      metrics_->exports_made.Increment();
      spdlog::info("admin: snapshot exported in {:.0f} ms",
                   absl::ToDoubleMilliseconds(absl::Now() - start));
      response.body = *std::move(listing);
    } else {
      metrics_->exports_failed.Increment();
      const std::string message(listing.status().message());
      spdlog::warn("admin: snapshot export failed: {}", message);
      response = ErrorResponse(500, message);
    }
    snapshot_running_ = false;
    answer(std::move(response));
  });
}

void AdminContext::ReadExport(std::string_view target, std::function<void(HttpResponse)> answer) {
  std::string_view path = target.substr(0, target.find('?'));
  path.remove_prefix(std::min(path.size(), kExportPath.size() + 1));
  const size_t slash = path.find('/');
  const std::string id(path.substr(0, slash));
  const std::string name(slash == std::string_view::npos ? "" : path.substr(slash + 1));
  uint64_t offset = 0;
  if (std::optional<std::string_view> at = QueryParameter(target, "offset");
      at && !absl::SimpleAtoi(absl::string_view(at->data(), at->size()), &offset)) {
    metrics_->export_reads_refused.Increment();
    return answer(ErrorResponse(400, "offset must be a number of bytes"));
  }
  if (!exports_ || id.empty()) {
    metrics_->export_reads_refused.Increment();
    return answer(ErrorResponse(404, "no such export"));
  }
  if (export_reads_.fetch_add(1) >= kMaxChunkReads) {
    export_reads_.fetch_sub(1);
    metrics_->export_reads_refused.Increment();
    return answer(ErrorResponse(503, "too many export reads in flight"));
  }
  asio::post(*snapshot_pool_, [this, id, name, offset, answer = std::move(answer)] {
    absl::StatusOr<std::string> body =
        name.empty() ? exports_->Listing(id) : exports_->ReadChunk(id, name, offset, kChunkBytes);
    HttpResponse response;
    if (body.ok()) {
      if (!name.empty()) {
        response.content_type = "application/octet-stream";
        metrics_->export_bytes.Increment(body->size());
      }
      metrics_->export_reads.Increment();
      response.body = *std::move(body);
    } else {
      metrics_->export_reads_refused.Increment();
      response = ErrorResponse(HttpStatusOf(body.status()), std::string(body.status().message()));
    }
    export_reads_.fetch_sub(1);
    answer(std::move(response));
  });
}

void AdminContext::ExpireExport() {
  // Not behind a snapshot being made: the export it replaces is removed by it anyway.
  if (exports_ && !snapshot_running_) {
    asio::post(*snapshot_pool_, [this] { exports_->ExpireIdle(); });
  }
}

}  // namespace switchyard
