#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "common/pubkey.h"
#include "common/slot.h"
#include "engine/event.h"

namespace switchyard {

// What the state knows of one account that has ever been delegated. While `delegated` is
// false the entry is a tombstone that keeps `last_event_slot`, so that a stale Delegated
// arriving after the Undelegated that ended it is ignored.
struct AccountState {
  Pubkey validator;      // the ER's validator identity; all zero means "any ER"
  Pubkey owner_program;  // the account's owner before delegation
  Slot delegation_slot = 0;
  uint64_t lamports = 0;
  uint64_t commit_frequency_ms = 0;
  Slot last_event_slot = 0;
  bool delegated = false;

  friend bool operator==(const AccountState&, const AccountState&) = default;
};

// The outcome of folding one account event into an account's state.
enum class ApplyOutcome {
  kApplied,
  kIgnoredStale,  // older than the account's last event slot
};

struct ApplyResult {
  ApplyOutcome outcome = ApplyOutcome::kApplied;
  AccountState next;  // the account's state afterwards (unchanged when ignored)
};

// The fold rule for one account event (Delegated or Undelegated); `current` is null for an
// account the state has never seen. Pure.
ApplyResult ApplyAccountEvent(const AccountState* current, const Event& event);

// The fixed-size persistent form of an AccountState (105 bytes, little-endian).
inline constexpr size_t kAccountStateSize = 32 + 32 + 8 * 4 + 1;
void EncodeAccountState(const AccountState& state, std::string* out);
std::optional<AccountState> DecodeAccountState(std::string_view bytes);

}  // namespace switchyard
