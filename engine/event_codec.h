#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "engine/event.h"

namespace switchyard {

// The binary record of one event on the log (docs/architecture.md §5):
//
//   u8 version (= kEventFormatVersion) | u8 kind | fields, little-endian | u32 CRC32C
//
// The CRC32C covers every byte before it. Field layouts per kind, after the two header
// bytes, in version 2: Delegated = account, validator, owner program (32 bytes each), slot,
// lamports, commit frequency (u64 each), signature (64), u8 flags, u8 source; Undelegated =
// account, slot, signature, u8 flags, u8 source; SlotSealed, StreamGap, Resynced = slot.
// Flags: bit 0 set = no signature is known (the signature bytes are then zero); no other
// bit is defined. Source: EventSource.
//
// Version 1 had no flags and no source: a zero signature meant none, and the source was not
// recorded. Version 1 records still decode (signature nullopt when zero, source
// kUnrecorded); every record is written in version 2.
inline constexpr uint8_t kEventFormatVersion = 2;
inline constexpr uint8_t kEventFlagSignatureUnknown = 1;

// Appends the record of `event` to `out`.
void EncodeEvent(const Event& event, std::string* out);
std::string EncodeEvent(const Event& event);

// Decodes one record of version 1 or 2. A record that is too short, fails its checksum, has
// an unknown version, kind, flag or source, or has the wrong length for its kind gets
// DataLoss with the reason.
absl::StatusOr<Event> DecodeEvent(std::string_view record);

// The key an event is written under: the account for account events (so that one
// account's events stay in order in one partition), empty for the stream-wide kinds.
std::string EventKey(const Event& event);

// CRC32C (Castagnoli) of `data`.
uint32_t Crc32c(std::string_view data);

}  // namespace switchyard
