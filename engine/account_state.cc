#include "engine/account_state.h"

#include "common/endian.h"

namespace switchyard {

ApplyResult ApplyAccountEvent(const AccountState* current, const Event& event) {
  const Slot slot = SlotOf(event);
  if (current != nullptr && slot < current->last_event_slot) {
    return {ApplyOutcome::kIgnoredStale, *current};
  }
  AccountState next;
  if (const auto* d = std::get_if<DelegatedEvent>(&event)) {
    next.validator = d->validator;
    next.owner_program = d->owner_program;
    next.delegation_slot = d->slot;
    next.lamports = d->lamports;
    next.commit_frequency_ms = d->commit_frequency_ms;
    next.delegated = true;
  }
  next.last_event_slot = slot;
  return {ApplyOutcome::kApplied, next};
}

void EncodeAccountState(const AccountState& s, std::string* out) {
  out->append(reinterpret_cast<const char*>(s.validator.data()), 32);
  out->append(reinterpret_cast<const char*>(s.owner_program.data()), 32);
  AppendU64LE(out, s.delegation_slot);
  AppendU64LE(out, s.lamports);
  AppendU64LE(out, s.commit_frequency_ms);
  AppendU64LE(out, s.last_event_slot);
  out->push_back(s.delegated ? 1 : 0);
}

std::optional<AccountState> DecodeAccountState(std::string_view bytes) {
  if (bytes.size() != kAccountStateSize) return std::nullopt;
  const uint8_t* p = AsBytes(bytes.data());
  if (p[kAccountStateSize - 1] > 1) return std::nullopt;
  AccountState s;
  s.validator = Pubkey::FromBytes(p);
  s.owner_program = Pubkey::FromBytes(p + 32);
  s.delegation_slot = LoadU64LE(p + 64);
  s.lamports = LoadU64LE(p + 72);
  s.commit_frequency_ms = LoadU64LE(p + 80);
  s.last_event_slot = LoadU64LE(p + 88);
  s.delegated = p[96] == 1;
  return s;
}

}  // namespace switchyard
