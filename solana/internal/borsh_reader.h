#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/endian.h"
#include "common/pubkey.h"
#include "common/status.h"
#include "fmt/format.h"

namespace switchyard::solana_internal {

// Reads Borsh fields in order, checking the bytes left before each read.
class BorshReader {
 public:
  BorshReader(std::span<const uint8_t> bytes, std::string_view what) : bytes_(bytes), what_(what) {}

  size_t remaining() const { return bytes_.size() - offset_; }
  size_t offset() const { return offset_; }

  absl::StatusOr<uint8_t> U8(std::string_view field) {
    RETURN_IF_ERROR(Need(1, field));
    return bytes_[offset_++];
  }
  absl::StatusOr<uint16_t> U16(std::string_view field) {
    RETURN_IF_ERROR(Need(2, field));
    const uint16_t v = static_cast<uint16_t>(bytes_[offset_] | (bytes_[offset_ + 1] << 8));
    offset_ += 2;
    return v;
  }
  absl::StatusOr<uint32_t> U32(std::string_view field) {
    RETURN_IF_ERROR(Need(4, field));
    const uint32_t v = LoadU32LE(bytes_.data() + offset_);
    offset_ += 4;
    return v;
  }
  absl::StatusOr<uint64_t> U64(std::string_view field) {
    RETURN_IF_ERROR(Need(8, field));
    const uint64_t v = LoadU64LE(bytes_.data() + offset_);
    offset_ += 8;
    return v;
  }
  absl::StatusOr<Pubkey> Key(std::string_view field) {
    RETURN_IF_ERROR(Need(Pubkey::kSize, field));
    const Pubkey v = Pubkey::FromBytes(bytes_.data() + offset_);
    offset_ += Pubkey::kSize;
    return v;
  }
  // `n` bytes as they are (a fixed-size array).
  absl::StatusOr<std::string_view> Bytes(size_t n, std::string_view field) {
    RETURN_IF_ERROR(Need(n, field));
    std::string_view v(reinterpret_cast<const char*>(bytes_.data() + offset_), n);
    offset_ += n;
    return v;
  }
  // Borsh String: a u32 length, then that many bytes (UTF-8 is the writer's promise).
  absl::StatusOr<std::string> String(std::string_view field) {
    ASSIGN_OR_RETURN(const uint32_t size, U32(field));
    ASSIGN_OR_RETURN(std::string_view bytes, Bytes(size, field));
    return std::string(bytes);
  }
  // Borsh Vec<Vec<u8>>: a u32 count, then each a u32 length and its bytes.
  absl::StatusOr<std::vector<std::string>> Seeds() {
    ASSIGN_OR_RETURN(const uint32_t count, U32("seed count"));
    // Each seed takes at least its 4-byte length, which bounds the count before allocating.
    if (count > remaining() / 4) {
      return absl::InvalidArgumentError(
          fmt::format("{}: {} seeds cannot fit in the {} bytes left at byte {}", what_, count,
                      remaining(), offset_));
    }
    std::vector<std::string> seeds;
    seeds.reserve(count);
    for (uint32_t i = 0; i < count; ++i) {
      ASSIGN_OR_RETURN(const uint32_t size, U32("seed length"));
      RETURN_IF_ERROR(Need(size, "seed"));
      seeds.emplace_back(reinterpret_cast<const char*>(bytes_.data() + offset_), size);
      offset_ += size;
    }
    return seeds;
  }
  absl::Status End() const {
    if (remaining() != 0) {
      return absl::InvalidArgumentError(
          fmt::format("{}: {} trailing bytes at byte {}", what_, remaining(), offset_));
    }
    return absl::OkStatus();
  }

 private:
  absl::Status Need(size_t n, std::string_view field) const {
    if (remaining() < n) {
      return absl::InvalidArgumentError(
          fmt::format("{}: truncated {} at byte {}: needs {} bytes, {} left", what_, field, offset_,
                      n, remaining()));
    }
    return absl::OkStatus();
  }

  std::span<const uint8_t> bytes_;
  std::string_view what_;
  size_t offset_ = 0;
};

}  // namespace switchyard::solana_internal
