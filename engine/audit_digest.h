#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <string>

#include "absl/status/statusor.h"
#include "common/pubkey.h"
#include "common/slot.h"
#include "engine/account_state.h"
#include "engine/state_store.h"

namespace switchyard {

// The audit digest (docs/audit-digest.md): a SHA-256 commitment to the delegated set as of the
// end of a slot, over a canonical byte form that an auditor can rebuild from the event log
// alone. Unlike StateDigest (XXH3, for replicas that compare themselves live) it is
// cryptographic, and it is recomputed from the history, never updated incrementally.
//
//   "switchyard-audit-digest-v1"   26 bytes, ASCII
//   slot                           u64 little-endian
//   count                          u64 little-endian: the delegated accounts that follow
//   count records, in ascending byte order of the account, each 120 bytes:
//     account, validator, owner program   32 bytes each
//     delegation slot, lamports, commit frequency (ms)   u64 little-endian each
inline constexpr char kAuditDigestTag[] = "switchyard-audit-digest-v1";
inline constexpr size_t kAuditDigestTagSize = sizeof(kAuditDigestTag) - 1;
inline constexpr size_t kAuditRecordSize = 3 * 32 + 3 * 8;

// A value type.
struct AuditDigest {
  Slot slot = 0;
  uint64_t accounts = 0;  // delegated accounts committed to
  std::array<uint8_t, 32> sha256{};

  std::string ToHex() const;  // 64 lowercase hex digits
};

// Rebuilds every account's state as of the end of `slot` from history rows fed in (slot, seq)
// order (RocksDbStateStore::ForEachHistoryRow), applying each row the fold applied as the fold
// did (AccountStateAt for one account), then commits to the delegated ones. Owned by one
// thread.
class AuditDigestBuilder {
 public:
  explicit AuditDigestBuilder(Slot slot) : slot_(slot) {}

  // Rows above the slot and rows the fold ignored as stale change nothing.
  void AddHistoryRow(const HistoryEntry& row);

  // The canonical bytes above, whole (for a small state: tests, a worked example).
  std::string Message() const;
  // Their SHA-256, hashed as they are produced. Internal only if OpenSSL fails.
  absl::StatusOr<AuditDigest> Finish() const;

 private:
  // Calls `write` with the message in pieces, in order.
  template <typename Write>
  void Produce(Write write) const;

  Slot slot_;
  std::map<Pubkey, AccountState> accounts_;  // every account seen, tombstones included
};

}  // namespace switchyard
