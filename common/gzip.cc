#include "common/gzip.h"

#include <zlib.h>

#include <algorithm>
#include <array>
#include <memory>

#include "absl/strings/ascii.h"

namespace switchyard {
namespace {

// windowBits 15 (32 KiB) + 16: a gzip header and trailer instead of zlib's.
constexpr int kGzipWindowBits = 15 + 16;
constexpr int kMemLevel = 8;

class Deflater {
 public:
  explicit Deflater(int level) {
    ok_ = deflateInit2(&stream_, level, Z_DEFLATED, kGzipWindowBits, kMemLevel,
                       Z_DEFAULT_STRATEGY) == Z_OK;
  }
  ~Deflater() {
    if (ok_) deflateEnd(&stream_);
  }
  Deflater(const Deflater&) = delete;
  Deflater& operator=(const Deflater&) = delete;

  void Compress(std::string_view input, std::string* out) {
    deflateReset(&stream_);
    out->resize(deflateBound(&stream_, static_cast<uLong>(input.size())));
    stream_.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(input.data()));
    stream_.avail_in = static_cast<uInt>(input.size());
    stream_.next_out = reinterpret_cast<Bytef*>(out->data());
    stream_.avail_out = static_cast<uInt>(out->size());
    // deflateBound leaves room for the whole member: one call finishes it.
    deflate(&stream_, Z_FINISH);
    out->resize(stream_.total_out);
  }
  bool ok() const { return ok_; }

 private:
  z_stream stream_{};
  bool ok_ = false;
};

class Inflater {
 public:
  Inflater() { ok_ = inflateInit2(&stream_, kGzipWindowBits) == Z_OK; }
  ~Inflater() {
    if (ok_) inflateEnd(&stream_);
  }
  Inflater(const Inflater&) = delete;
  Inflater& operator=(const Inflater&) = delete;

  absl::Status Inflate(std::string_view input, size_t max_bytes, std::string* out, size_t slack) {
    if (!ok_) return absl::InternalError("zlib could not be initialised");
    inflateReset(&stream_);
    stream_.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(input.data()));
    stream_.avail_in = static_cast<uInt>(input.size());
    // One byte past the limit tells "exactly the limit" from "more".
    const size_t cap = max_bytes + 1;
    size_t size = std::min(cap, std::max<size_t>(input.size() * 4, 4096));
    out->clear();
    out->reserve(size + slack);
    out->resize(size);
    size_t produced = 0;
    while (true) {
      stream_.next_out = reinterpret_cast<Bytef*>(out->data() + produced);
      stream_.avail_out = static_cast<uInt>(size - produced);
      const int rc = inflate(&stream_, Z_NO_FLUSH);
      produced = size - stream_.avail_out;
      if (produced > max_bytes) {
        out->clear();
        return absl::ResourceExhaustedError("inflated body larger than the limit");
      }
      if (rc == Z_STREAM_END) break;
      if (rc == Z_BUF_ERROR && stream_.avail_in == 0 && stream_.avail_out > 0) {
        out->clear();
        return absl::InvalidArgumentError("truncated gzip data");
      }
      if (rc != Z_OK && rc != Z_BUF_ERROR) {
        out->clear();
        return absl::InvalidArgumentError("corrupt gzip data");
      }
      if (stream_.avail_out == 0) {  // (size < cap: a full cap is past the limit)
        size = std::min(cap, size * 2);
        out->reserve(size + slack);
        out->resize(size);
      } else if (stream_.avail_in == 0) {
        out->clear();
        return absl::InvalidArgumentError("truncated gzip data");
      }
    }
    if (stream_.avail_in != 0) {
      out->clear();
      return absl::InvalidArgumentError("bytes after the gzip data");
    }
    out->resize(produced);
    if (out->capacity() < produced + slack) out->reserve(produced + slack);
    return absl::OkStatus();
  }

 private:
  z_stream stream_{};
  bool ok_ = false;
};

std::string_view Trim(std::string_view text) {
  while (!text.empty() && absl::ascii_isspace(static_cast<unsigned char>(text.front()))) {
    text.remove_prefix(1);
  }
  while (!text.empty() && absl::ascii_isspace(static_cast<unsigned char>(text.back()))) {
    text.remove_suffix(1);
  }
  return text;
}

bool EqualsIgnoringCase(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return absl::ascii_tolower(static_cast<unsigned char>(x)) ==
                  absl::ascii_tolower(static_cast<unsigned char>(y));
         });
}

// Whether the parameters of a coding say q=0 (q=0, q=0.0, q=0.000).
bool QualityIsZero(std::string_view params) {
  params = Trim(params);
  if (params.size() < 3 || (params[0] != 'q' && params[0] != 'Q') || params[1] != '=') {
    return false;
  }
  const std::string_view q = Trim(params.substr(2));
  if (q.empty() || q[0] != '0') return false;
  for (char c : q.substr(1)) {
    if (c != '.' && c != '0') return false;
  }
  return true;
}

}  // namespace

void GzipCompress(std::string_view input, int level, std::string* out) {
  level = std::clamp(level, 1, 9);
  thread_local std::array<std::unique_ptr<Deflater>, 10> deflaters;
  std::unique_ptr<Deflater>& deflater = deflaters[static_cast<size_t>(level)];
  if (!deflater) deflater = std::make_unique<Deflater>(level);
  deflater->Compress(input, out);
}

absl::Status GzipInflate(std::string_view input, size_t max_bytes, std::string* out, size_t slack) {
  thread_local Inflater inflater;
  return inflater.Inflate(input, max_bytes, out, slack);
}

bool AcceptsGzip(std::string_view value) {
  while (!value.empty()) {
    const size_t comma = value.find(',');
    std::string_view item = value.substr(0, comma);
    value = comma == std::string_view::npos ? std::string_view() : value.substr(comma + 1);
    std::string_view params;
    if (const size_t semi = item.find(';'); semi != std::string_view::npos) {
      params = item.substr(semi + 1);
      item = item.substr(0, semi);
    }
    const std::string_view coding = Trim(item);
    if (!EqualsIgnoringCase(coding, "gzip") && !EqualsIgnoringCase(coding, "x-gzip") &&
        coding != "*") {
      continue;
    }
    return !QualityIsZero(params);
  }
  return false;
}

}  // namespace switchyard
