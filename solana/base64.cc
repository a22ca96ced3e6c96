#include "solana/base64.h"

#include <openssl/evp.h>

#include <array>
#include <climits>

#include "absl/status/status.h"
#include "fmt/format.h"

namespace switchyard {
namespace {

constexpr std::string_view kAlphabet =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

constexpr std::array<int8_t, 256> MakeDigitTable() {
  std::array<int8_t, 256> table{};
  for (auto& entry : table) entry = -1;
  for (size_t i = 0; i < kAlphabet.size(); ++i) {
    table[static_cast<uint8_t>(kAlphabet[i])] = static_cast<int8_t>(i);
  }
  return table;
}
constexpr std::array<int8_t, 256> kDigits = MakeDigitTable();

}  // namespace

std::string Base64Encode(std::span<const uint8_t> bytes) {
  std::string out(4 * ((bytes.size() + 2) / 3) + 1, '\0');
  const int written = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()), bytes.data(),
                                      static_cast<int>(bytes.size()));
  out.resize(static_cast<size_t>(written));
  return out;
}

std::string Base64Encode(std::string_view bytes) {
  return Base64Encode(
      std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()));
}

absl::StatusOr<std::string> Base64Decode(std::string_view text) {
  if (text.size() % 4 != 0) {
    return absl::InvalidArgumentError(
        fmt::format("base64: length {} is not a multiple of 4", text.size()));
  }
  if (text.size() > INT_MAX / 2) {
    return absl::InvalidArgumentError(
        fmt::format("base64: {} characters is too long", text.size()));
  }
  size_t padding = 0;
  if (!text.empty() && text.back() == '=') {
    padding = text[text.size() - 2] == '=' ? 2 : 1;
  }
  const size_t data_chars = text.size() - padding;
  for (size_t i = 0; i < data_chars; ++i) {
    if (kDigits[static_cast<uint8_t>(text[i])] < 0) {
      return absl::InvalidArgumentError(fmt::format(
          "base64: invalid character 0x{:02x} at position {}", static_cast<uint8_t>(text[i]), i));
    }
  }
  // The last data character carries 4 (one '=') or 2 (two '=') unused low bits.
  if (padding > 0) {
    const int last = kDigits[static_cast<uint8_t>(text[data_chars - 1])];
    const int unused_mask = padding == 1 ? 0x3 : 0xF;
    if ((last & unused_mask) != 0) {
      return absl::InvalidArgumentError(fmt::format(
          "base64: non-zero unused bits in the character at position {}", data_chars - 1));
    }
  }
  std::string out(3 * (text.size() / 4), '\0');
  if (text.empty()) return out;
  const int decoded = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                      reinterpret_cast<const unsigned char*>(text.data()),
                                      static_cast<int>(text.size()));
  if (decoded < 0 || static_cast<size_t>(decoded) != out.size()) {
    return absl::InvalidArgumentError("base64: malformed input");
  }
  // EVP_DecodeBlock counts the padding as zero bytes.
  out.resize(out.size() - padding);
  return out;
}

}  // namespace switchyard
