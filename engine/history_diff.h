#pragma once

#include <optional>
#include <string_view>
#include <vector>

#include "common/pubkey.h"
#include "common/slot.h"
#include "engine/account_state.h"
#include "engine/state_store.h"

namespace switchyard {

// How an account's delegation differs between two slots.
enum class DelegationChange {
  kDelegated,    // not delegated at the first slot, delegated at the second
  kUndelegated,  // delegated at the first, not at the second
  kMoved,        // delegated at both, to different validators
  kRedelegated,  // delegated at both to the same validator, by another delegation
};
// "delegated", "undelegated", "moved", "redelegated".
std::string_view ChangeName(DelegationChange change);

// One account whose delegation differs between the end of slot `from` and the end of slot
// `to` (either may be the larger), with the history rows strictly after the lower slot and at
// or below the higher one: the events that explain the difference.
struct AccountDiff {
  Pubkey account;
  DelegationChange change = DelegationChange::kDelegated;
  std::optional<AccountState> before;  // at `from`
  std::optional<AccountState> after;   // at `to`
  std::vector<HistoryEntry> events;
};

// The difference of one account's delegation between the two slots, from its whole history
// (in (slot, seq) order); nullopt when it is the same delegation at both. Pure.
std::optional<AccountDiff> DiffAccount(const Pubkey& account,
                                       const std::vector<HistoryEntry>& history, Slot from,
                                       Slot to);

}  // namespace switchyard
