#include "engine/history_diff.h"

#include <algorithm>

namespace switchyard {

std::string_view ChangeName(DelegationChange change) {
  switch (change) {
    case DelegationChange::kDelegated:
      return "delegated";
    case DelegationChange::kUndelegated:
      return "undelegated";
    case DelegationChange::kMoved:
      return "moved";
    case DelegationChange::kRedelegated:
      return "redelegated";
  }
  return "delegated";
}

std::optional<AccountDiff> DiffAccount(const Pubkey& account,
                                       const std::vector<HistoryEntry>& history, Slot from,
                                       Slot to) {
  AccountDiff diff;
  diff.account = account;
  diff.before = AccountStateAt(history, from);
  diff.after = AccountStateAt(history, to);
  const bool was = diff.before && diff.before->delegated;
  const bool is = diff.after && diff.after->delegated;
  if (!was && !is) return std::nullopt;
  if (!was) {
    diff.change = DelegationChange::kDelegated;
  } else if (!is) {
    diff.change = DelegationChange::kUndelegated;
  } else if (diff.before->validator != diff.after->validator) {
    diff.change = DelegationChange::kMoved;
  } else if (diff.before->delegation_slot != diff.after->delegation_slot) {
    diff.change = DelegationChange::kRedelegated;
  } else {
    return std::nullopt;
  }
  const Slot low = std::min(from, to);
  const Slot high = std::max(from, to);
  for (const HistoryEntry& entry : history) {
    if (entry.slot > low && entry.slot <= high) diff.events.push_back(entry);
  }
  return diff;
}

}  // namespace switchyard
