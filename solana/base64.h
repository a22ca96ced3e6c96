#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace switchyard {

// Standard base64 (RFC 4648 §4, with '=' padding), the encoding Solana's JSON-RPC uses for
// transactions and account data.
std::string Base64Encode(std::span<const uint8_t> bytes);
std::string Base64Encode(std::string_view bytes);

// Decodes padded standard base64. Fails with InvalidArgument on a length that is not a
// multiple of 4, a character outside the alphabet (whitespace included), padding anywhere but
// at the end, and non-zero bits in the unused low bits of the last character (the same
// strictness as the Rust `base64` crate that Solana's RPC uses).
absl::StatusOr<std::string> Base64Decode(std::string_view text);

}  // namespace switchyard
