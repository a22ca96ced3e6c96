#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace switchyard {

// Bitcoin-alphabet base58, as Solana uses it for public keys, signatures and hashes.
// Each leading zero byte is one leading '1'.
std::string Base58Encode(std::span<const uint8_t> bytes);

// Decodes `text` into exactly `out.size()` bytes. Fails with InvalidArgument on a character
// outside the alphabet, on a value that does not fit, on a decoded length other than
// `out.size()`, and on a non-canonical leading-zero form (the text must re-encode to itself).
absl::Status Base58DecodeExact(std::string_view text, std::span<uint8_t> out);

// Decodes `text` of any length up to `max_bytes` decoded bytes (a wire transaction). Fails
// with InvalidArgument on an empty string, a character outside the alphabet, or a value
// longer than `max_bytes`; the work done is bounded by `max_bytes`, not by the input.
absl::StatusOr<std::string> Base58DecodeBytes(std::string_view text, size_t max_bytes);

}  // namespace switchyard
