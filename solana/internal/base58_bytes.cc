#include "solana/internal/base58_bytes.h"

#include <array>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "fmt/format.h"

namespace switchyard::solana_internal {
namespace {

constexpr char kAlphabet[] = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz";

constexpr std::array<int8_t, 256> MakeDigitTable() {
  std::array<int8_t, 256> table{};
  for (auto& entry : table) entry = -1;
  for (int i = 0; i < 58; ++i) table[static_cast<uint8_t>(kAlphabet[i])] = static_cast<int8_t>(i);
  return table;
}
constexpr std::array<int8_t, 256> kDigits = MakeDigitTable();

// 58^k for k = 0..5; five digits are folded per pass because 58^5 < 2^32.
constexpr uint32_t kPow58[] = {1, 58, 3364, 195112, 11316496, 656356768};

}  // namespace

absl::StatusOr<std::string> Base58DecodeBytes(std::string_view text, size_t max_bytes) {
  if (text.empty()) return absl::InvalidArgumentError("base58: empty string");
  size_t ones = 0;
  while (ones < text.size() && text[ones] == '1') ++ones;
  if (ones > max_bytes) {
    return absl::InvalidArgumentError(
        fmt::format("base58: decodes to more than {} bytes", max_bytes));
  }
  // Every character after the leading ones adds at least log256(58) > 0.73 bytes, so a text
  // this long cannot fit; rejecting it early bounds the work below.
  if ((text.size() - ones) * 73 > (max_bytes - ones) * 100 + 100) {
    return absl::InvalidArgumentError(
        fmt::format("base58: {} characters decode to more than {} bytes", text.size(), max_bytes));
  }

  // The value as little-endian 32-bit limbs; `used` limbs are non-zero so far.
  std::vector<uint32_t> limbs((max_bytes + 3) / 4 + 1, 0);
  size_t used = 0;
  for (size_t pos = ones; pos < text.size();) {
    const size_t group = std::min<size_t>(5, text.size() - pos);
    uint32_t chunk = 0;
    for (size_t i = 0; i < group; ++i, ++pos) {
      const int digit = kDigits[static_cast<uint8_t>(text[pos])];
      if (digit < 0) {
        return absl::InvalidArgumentError(
            fmt::format("base58: invalid character 0x{:02x} at position {}",
                        static_cast<uint8_t>(text[pos]), pos));
      }
      chunk = chunk * 58 + static_cast<uint32_t>(digit);
    }
    uint64_t carry = chunk;
    for (size_t i = 0; i < used; ++i) {
      const uint64_t value = static_cast<uint64_t>(limbs[i]) * kPow58[group] + carry;
      limbs[i] = static_cast<uint32_t>(value);
      carry = value >> 32;
    }
    if (carry != 0) {
      if (used == limbs.size()) {
        return absl::InvalidArgumentError(
            fmt::format("base58: decodes to more than {} bytes", max_bytes));
      }
      limbs[used++] = static_cast<uint32_t>(carry);
    }
  }

  size_t significant = used * 4;
  auto byte_at = [&](size_t i) { return static_cast<char>(limbs[i / 4] >> (8 * (i % 4))); };
  while (significant > 0 && byte_at(significant - 1) == 0) --significant;
  if (ones + significant > max_bytes) {
    return absl::InvalidArgumentError(
        fmt::format("base58: decodes to more than {} bytes", max_bytes));
  }
  std::string out(ones + significant, '\0');
  for (size_t i = 0; i < significant; ++i) out[ones + i] = byte_at(significant - 1 - i);
  return out;
}

}  // namespace switchyard::solana_internal
