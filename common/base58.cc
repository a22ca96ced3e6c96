#include "common/base58.h"

#include <array>
#include <vector>

#include "absl/strings/str_cat.h"

namespace switchyard {
namespace {

constexpr char kAlphabet[] = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz";

// Digit value of each ASCII character; -1 outside the alphabet.
constexpr std::array<int8_t, 128> MakeDigitTable() {
  std::array<int8_t, 128> table{};
  for (auto& entry : table) entry = -1;
  for (int i = 0; i < 58; ++i) table[static_cast<uint8_t>(kAlphabet[i])] = static_cast<int8_t>(i);
  return table;
}
constexpr std::array<int8_t, 128> kDigits = MakeDigitTable();

// The number is held as little-endian 32-bit limbs; digits are folded in groups of five
// (58^5 < 2^32) so that each limb sees one multiply-add per group rather than per digit.
constexpr uint32_t kPow58[] = {1, 58, 3364, 195112, 11316496, 656356768};

}  // namespace

std::string Base58Encode(std::span<const uint8_t> bytes) {
  size_t zeros = 0;
  while (zeros < bytes.size() && bytes[zeros] == 0) ++zeros;

  // Big-endian bytes -> little-endian limbs of base 2^32.
  const size_t significant = bytes.size() - zeros;
  std::vector<uint32_t> limbs((significant + 3) / 4, 0);
  for (size_t i = 0; i < significant; ++i) {
    const size_t bit = 8 * (significant - 1 - i);
    limbs[bit / 32] |= static_cast<uint32_t>(bytes[zeros + i]) << (bit % 32);
  }

  // Repeated division by 58^5 yields five base58 digits at a time, least significant first.
  std::string reversed;
  reversed.reserve(significant * 138 / 100 + 5);
  size_t used = limbs.size();
  while (used > 0) {
    uint64_t remainder = 0;
    for (size_t i = used; i-- > 0;) {
      const uint64_t value = (remainder << 32) | limbs[i];
      limbs[i] = static_cast<uint32_t>(value / kPow58[5]);
      remainder = value % kPow58[5];
    }
    while (used > 0 && limbs[used - 1] == 0) --used;
    for (int d = 0; d < 5; ++d) {
      if (used == 0 && remainder == 0) break;
      reversed.push_back(kAlphabet[remainder % 58]);
      remainder /= 58;
    }
  }
  std::string text(zeros, '1');
  text.append(reversed.rbegin(), reversed.rend());
  return text;
}

absl::Status Base58DecodeExact(std::string_view text, std::span<uint8_t> out) {
  // A value of n bytes needs at most ceil(n * log(256)/log(58)) + n characters.
  if (text.empty()) return absl::InvalidArgumentError("base58: empty string");
  if (text.size() > out.size() * 2 + 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        "base58: ", text.size(), " characters is too long for ", out.size(), " bytes"));
  }
  size_t ones = 0;
  while (ones < text.size() && text[ones] == '1') ++ones;

  std::vector<uint32_t> limbs((out.size() + 3) / 4 + 1, 0);
  for (size_t pos = ones; pos < text.size();) {
    const size_t group = std::min<size_t>(5, text.size() - pos);
    uint32_t chunk = 0;
    for (size_t i = 0; i < group; ++i, ++pos) {
      const auto c = static_cast<unsigned char>(text[pos]);
      const int digit = c < 128 ? kDigits[c] : -1;
      if (digit < 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("base58: invalid character at position ", pos));
      }
      chunk = chunk * 58 + static_cast<uint32_t>(digit);
    }
    uint64_t carry = chunk;
    for (auto& limb : limbs) {
      const uint64_t value = static_cast<uint64_t>(limb) * kPow58[group] + carry;
      limb = static_cast<uint32_t>(value);
      carry = value >> 32;
    }
    if (carry != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("base58: value does not fit in ", out.size(), " bytes"));
    }
  }

  // Count the significant bytes of the number.
  size_t significant = limbs.size() * 4;
  auto byte_at = [&](size_t i) { return static_cast<uint8_t>(limbs[i / 4] >> (8 * (i % 4))); };
  while (significant > 0 && byte_at(significant - 1) == 0) --significant;
  if (ones + significant != out.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("base58: decodes to ", ones + significant, " bytes, expected ", out.size()));
  }
  for (size_t i = 0; i < ones; ++i) out[i] = 0;
  for (size_t i = 0; i < significant; ++i) out[ones + i] = byte_at(significant - 1 - i);
  return absl::OkStatus();
}

}  // namespace switchyard
