#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "absl/status/status.h"

namespace switchyard {

// gzip (RFC 1952) through zlib, the one implementation of the project: the API's answers and
// request bodies, upstream answers, the localnet's answers. Any thread may call these; each
// thread keeps its own zlib state (one per level for compression), reset between uses, so a
// call allocates only its output.

// `input` as one gzip member at `level` (1: fastest .. 9: smallest), into `out` (replaced).
void GzipCompress(std::string_view input, int level, std::string* out);

// Inflates the gzip `input` into `out` (replaced), at most `max_bytes` of it: inflating stops
// as soon as the output would pass `max_bytes` (ResourceExhausted), so a small input that
// inflates to gigabytes costs no more than `max_bytes` of memory. InvalidArgument: `input` is
// not gzip, is corrupt or truncated, or has bytes after its member. `out`'s capacity leaves
// `slack` bytes past its end (for a parser that reads ahead).
absl::Status GzipInflate(std::string_view input, size_t max_bytes, std::string* out,
                         size_t slack = 0);

// Whether an Accept-Encoding value accepts gzip: it lists `gzip` (or `*`) with a quality
// above zero (RFC 9110 12.5.3).
bool AcceptsGzip(std::string_view accept_encoding);

}  // namespace switchyard
