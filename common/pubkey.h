#pragma once

#include <array>
#include <compare>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "common/base58.h"

namespace switchyard {

// A fixed-size byte string shown as base58: the shape of Solana's public keys, signatures
// and hashes. A value type; any thread may use its own copies.
template <size_t N>
class FixedBytes {
 public:
  static constexpr size_t kSize = N;

  constexpr FixedBytes() = default;
  explicit FixedBytes(std::span<const uint8_t, N> bytes) {
    std::memcpy(bytes_.data(), bytes.data(), N);
  }

  // Parses the canonical base58 form; see Base58DecodeExact for what is rejected.
  static absl::StatusOr<FixedBytes> FromBase58(std::string_view text) {
    FixedBytes value;
    absl::Status status = Base58DecodeExact(text, value.bytes_);
    if (!status.ok()) return status;
    return value;
  }
  // Copies N bytes from `data`, which must hold at least N bytes.
  static FixedBytes FromBytes(const uint8_t* data) {
    FixedBytes value;
    std::memcpy(value.bytes_.data(), data, N);
    return value;
  }

  std::string ToBase58() const { return Base58Encode(bytes_); }
  const uint8_t* data() const { return bytes_.data(); }
  uint8_t* data() { return bytes_.data(); }
  std::span<const uint8_t, N> span() const { return bytes_; }
  constexpr size_t size() const { return N; }
  bool IsZero() const {
    for (uint8_t b : bytes_) {
      if (b != 0) return false;
    }
    return true;
  }

  friend bool operator==(const FixedBytes& a, const FixedBytes& b) {
    return std::memcmp(a.bytes_.data(), b.bytes_.data(), N) == 0;
  }
  friend std::strong_ordering operator<=>(const FixedBytes& a, const FixedBytes& b) {
    return std::memcmp(a.bytes_.data(), b.bytes_.data(), N) <=> 0;
  }
  template <typename H>
  friend H AbslHashValue(H h, const FixedBytes& v) {
    return H::combine_contiguous(std::move(h), v.bytes_.data(), N);
  }

 private:
  std::array<uint8_t, N> bytes_{};
};

// An ed25519 public key or a program-derived address.
using Pubkey = FixedBytes<32>;
// An ed25519 signature; a transaction's first signature is its id.
using Signature = FixedBytes<64>;
// A SHA-256 hash, such as a blockhash.
using Hash = FixedBytes<32>;

}  // namespace switchyard
