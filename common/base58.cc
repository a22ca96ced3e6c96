#include "common/base58.h"

#include <array>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"
#include "fmt/format.h"

namespace switchyard {
namespace {

constexpr char kAlphabet[] = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz";

// Digit value of each byte; 0xff outside the alphabet, so that the fixed-size decoder finds
// any invalid character with one test of the OR of all digits.
constexpr std::array<uint8_t, 256> MakeDigitTable() {
  std::array<uint8_t, 256> table{};
  for (auto& entry : table) entry = 0xff;
  for (int i = 0; i < 58; ++i) table[static_cast<uint8_t>(kAlphabet[i])] = static_cast<uint8_t>(i);
  return table;
}
constexpr std::array<uint8_t, 256> kDigits = MakeDigitTable();

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

namespace {

// Decodes `text` into at most `out.size()` bytes at the front of `out` and returns how many:
// the one decoder behind Base58DecodeExact and Base58DecodeBytes. The work is bounded by
// `out.size()`, not by the input.
absl::StatusOr<size_t> DecodeInto(std::string_view text, std::span<uint8_t> out) {
  const size_t max_bytes = out.size();
  if (text.empty()) return absl::InvalidArgumentError("base58: empty string");
  size_t ones = 0;
  while (ones < text.size() && text[ones] == '1') ++ones;
  if (ones > max_bytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("base58: decodes to more than ", max_bytes, " bytes"));
  }
  // Every character after the leading ones adds at least log256(58) > 0.73 bytes, so a text
  // this long cannot fit; rejecting it early bounds the work below.
  if ((text.size() - ones) * 73 > (max_bytes - ones) * 100 + 100) {
    return absl::InvalidArgumentError(absl::StrCat(
        "base58: ", text.size(), " characters decode to more than ", max_bytes, " bytes"));
  }
  // The value as little-endian 32-bit limbs; `used` limbs are non-zero so far.
  absl::InlinedVector<uint32_t, 18> limbs((max_bytes + 3) / 4 + 1, 0);
  size_t used = 0;
  for (size_t pos = ones; pos < text.size();) {
    const size_t group = std::min<size_t>(5, text.size() - pos);
    uint32_t chunk = 0;
    for (size_t i = 0; i < group; ++i, ++pos) {
      const auto c = static_cast<unsigned char>(text[pos]);
      const uint8_t digit = kDigits[c];
      if (digit == 0xff) {
        return absl::InvalidArgumentError(
            fmt::format("base58: invalid character 0x{:02x} at position {}", c, pos));
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
            absl::StrCat("base58: decodes to more than ", max_bytes, " bytes"));
      }
      limbs[used++] = static_cast<uint32_t>(carry);
    }
  }
  size_t significant = used * 4;
  auto byte_at = [&](size_t i) { return static_cast<uint8_t>(limbs[i / 4] >> (8 * (i % 4))); };
  while (significant > 0 && byte_at(significant - 1) == 0) --significant;
  if (ones + significant > max_bytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("base58: decodes to more than ", max_bytes, " bytes"));
  }
  for (size_t i = 0; i < ones; ++i) out[i] = 0;
  for (size_t i = 0; i < significant; ++i) out[ones + i] = byte_at(significant - 1 - i);
  return ones + significant;
}

// The decoder for a text that decodes to exactly kBytes bytes (public keys, signatures), on
// the hot path of every routed request: fixed limbs the compiler unrolls, one validity test
// for all digits, the limbs stored big-endian. It answers only the well-formed case and says
// false for anything else, which DecodeInto then decides with its error message.
template <size_t kBytes>
bool DecodeFixed(std::string_view text, std::span<uint8_t> out) {
  static_assert(kBytes % 4 == 0);
  // The longest encoding of kBytes bytes: ceil(kBytes * log(256) / log(58)).
  constexpr size_t kMaxChars = (kBytes * 1366 + 999) / 1000;
  constexpr size_t kLimbs = kBytes / 4 + 1;  // one more, to see a value that does not fit
  if (text.empty() || text.size() > kMaxChars) return false;
  std::array<uint64_t, kLimbs> limbs{};  // base 2^32, little-endian, each below 2^32
  uint8_t bad = 0;
  size_t pos = 0;
  // The first group takes what is left over by groups of five, so that the rest are whole.
  size_t group = text.size() % 5 == 0 ? 5 : text.size() % 5;
  while (pos < text.size()) {
    uint64_t chunk = 0;
    for (size_t i = 0; i < group; ++i, ++pos) {
      const uint8_t digit = kDigits[static_cast<uint8_t>(text[pos])];
      bad |= digit;
      chunk = chunk * 58 + digit;
    }
    uint64_t carry = chunk & 0xffffffff;  // an invalid digit's garbage is refused below
    for (size_t i = 0; i < kLimbs; ++i) {
      const uint64_t value = limbs[i] * kPow58[group] + carry;
      limbs[i] = value & 0xffffffff;
      carry = value >> 32;
    }
    if (carry != 0) return false;
    group = 5;
  }
  if ((bad & 0x80) != 0 || limbs[kLimbs - 1] != 0) return false;
  for (size_t i = 0; i + 1 < kLimbs; ++i) {
    const auto limb = static_cast<uint32_t>(limbs[kLimbs - 2 - i]);
    out[4 * i] = static_cast<uint8_t>(limb >> 24);
    out[4 * i + 1] = static_cast<uint8_t>(limb >> 16);
    out[4 * i + 2] = static_cast<uint8_t>(limb >> 8);
    out[4 * i + 3] = static_cast<uint8_t>(limb);
  }
  // Exactly kBytes bytes: each leading '1' is one leading zero byte, and the value fills the
  // rest, so the zero bytes in front are as many as the ones.
  size_t ones = 0;
  while (ones < text.size() && text[ones] == '1') ++ones;
  size_t zeros = 0;
  while (zeros < kBytes && out[zeros] == 0) ++zeros;
  return zeros == ones;
}

}  // namespace

absl::Status Base58DecodeExact(std::string_view text, std::span<uint8_t> out) {
  if (out.size() == 32 && DecodeFixed<32>(text, out)) return absl::OkStatus();
  if (out.size() == 64 && DecodeFixed<64>(text, out)) return absl::OkStatus();
  absl::StatusOr<size_t> size = DecodeInto(text, out);
  if (!size.ok()) return size.status();
  if (*size != out.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("base58: decodes to ", *size, " bytes, expected ", out.size()));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> Base58DecodeBytes(std::string_view text, size_t max_bytes) {
  std::string out(max_bytes, '\0');
  absl::StatusOr<size_t> size =
      DecodeInto(text, std::span(reinterpret_cast<uint8_t*>(out.data()), out.size()));
  if (!size.ok()) return size.status();
  out.resize(*size);
  return out;
}

}  // namespace switchyard
