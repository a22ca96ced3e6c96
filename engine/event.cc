#include "engine/event.h"

namespace switchyard {

EventKind KindOf(const Event& event) { return static_cast<EventKind>(event.index() + 1); }

Slot SlotOf(const Event& event) {
  return std::visit([](const auto& e) { return e.slot; }, event);
}

const Pubkey* AccountOf(const Event& event) {
  if (const auto* d = std::get_if<DelegatedEvent>(&event)) return &d->account;
  if (const auto* u = std::get_if<UndelegatedEvent>(&event)) return &u->account;
  return nullptr;
}

std::string_view SourceName(EventSource source) {
  switch (source) {
    case EventSource::kUnrecorded:
      return "unrecorded";
    case EventSource::kLive:
      return "live";
    case EventSource::kBackfill:
      return "backfill";
    case EventSource::kReconciliation:
      return "reconciliation";
    case EventSource::kRepair:
      return "repair";
  }
  return "unrecorded";
}

std::string_view KindName(EventKind kind) {
  switch (kind) {
    case EventKind::kDelegated:
      return "delegated";
    case EventKind::kUndelegated:
      return "undelegated";
    case EventKind::kSlotSealed:
      return "slot_sealed";
    case EventKind::kStreamGap:
      return "stream_gap";
    case EventKind::kResynced:
      return "resynced";
  }
  return "unknown";
}

}  // namespace switchyard
