#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace switchyard::solana_internal {

// Decodes Bitcoin-alphabet base58 of any length up to `max_bytes` decoded bytes (common/
// only decodes fixed sizes). Each leading '1' is one leading zero byte. Fails with
// InvalidArgument on an empty string, a character outside the alphabet, or a value longer
// than `max_bytes`; the work done is bounded by `max_bytes`, not by the input.
absl::StatusOr<std::string> Base58DecodeBytes(std::string_view text, size_t max_bytes);

}  // namespace switchyard::solana_internal
