#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "common/pubkey.h"

namespace switchyard {

// The Magic Domain Program (magicblock-labs/magic-domain-program): the on-chain registry of
// ERs on the base layer (docs/architecture.md §20).
inline constexpr std::string_view kMagicDomainProgramId =
    "DmnRGfyyftzacFb1XadYhWF6vWqXwtQk5tbr6XgR3BA1";
Pubkey MagicDomainProgramId();

// The seed of an ER's record PDA: ["er-record", identity].
inline constexpr std::string_view kErRecordSeed = "er-record";
Pubkey ErRecordPda(const Pubkey& identity);

// An ER's status as its record states it (the program's ErStatus, a Borsh u8).
enum class ErStatus : uint8_t {
  kActive = 0,    // accepting new delegations
  kDraining = 1,  // serving the delegations it has, taking no new ones
  kOffline = 2,   // taken offline (maintenance)
};
std::string_view ErStatusName(ErStatus status);

// The versions of the record the program defines: the account data is the Borsh enum
// ErRecord, whose first byte is the version.
inline constexpr uint8_t kErRecordV0 = 0;
inline constexpr uint8_t kErRecordLatestVersion = kErRecordV0;
// V0: u8 version, identity (32), u8 status, u16 block_time_ms, u16 base_fee, features (32
// bytes, a bitmap), u32 load_average, country code (3 bytes), String addr (u32 length + UTF-8).
inline constexpr size_t kErRecordV0FixedSize = 1 + 32 + 1 + 2 + 2 + 32 + 4 + 3 + 4;

// One ER record, whatever version it was written in. A value type.
struct ErRecord {
  uint8_t version = kErRecordLatestVersion;
  Pubkey identity;
  ErStatus status = ErStatus::kActive;
  uint16_t block_time_ms = 0;
  uint16_t base_fee = 0;
  std::array<uint8_t, 32> features{};  // bit n of byte n / 8: feature n (0 randomness, 1 clock)
  uint32_t load_average = 0;
  std::string country_code;  // 3 bytes as written (IBM numeric codes, e.g. "083")
  std::string addr;          // the ER's address as registered: a URL or a host name

  friend bool operator==(const ErRecord&, const ErRecord&) = default;
};

// Decodes a record account's data. Errors: Unimplemented for a version this build does not
// know (the message names it), InvalidArgument for a record that is truncated, has trailing
// bytes or an unknown status. Pure; never crashes on any input.
absl::StatusOr<ErRecord> DecodeErRecord(std::span<const uint8_t> data);
inline absl::StatusOr<ErRecord> DecodeErRecord(std::string_view data) {
  return DecodeErRecord(std::span(reinterpret_cast<const uint8_t*>(data.data()), data.size()));
}

// The account data the program writes for `record` in its version (only V0 exists).
std::string EncodeErRecord(const ErRecord& record);

}  // namespace switchyard
