#pragma once

#include <cstdint>
#include <string_view>
#include <variant>

#include "common/pubkey.h"
#include "common/slot.h"

namespace switchyard {

// The kinds of record in the delegation event log (docs/architecture.md §5). The numeric values are
// part of the on-log format.
enum class EventKind : uint8_t {
  kDelegated = 1,
  kUndelegated = 2,
  kSlotSealed = 3,
  kStreamGap = 4,
  kResynced = 5,
};

// `account` was delegated to the ER whose validator identity is `validator`. `slot` is the
// delegation slot; it orders the account's events.
struct DelegatedEvent {
  Pubkey account;
  Pubkey validator;
  Pubkey owner_program;
  Slot slot = 0;
  uint64_t lamports = 0;
  uint64_t commit_frequency_ms = 0;
  Signature signature;

  friend bool operator==(const DelegatedEvent&, const DelegatedEvent&) = default;
};

// `account` returned to the base layer at `slot`.
struct UndelegatedEvent {
  Pubkey account;
  Slot slot = 0;
  Signature signature;

  friend bool operator==(const UndelegatedEvent&, const UndelegatedEvent&) = default;
};

// A watermark: every event at or below `slot` has been written before this record, in
// this partition. Written to every partition.
struct SlotSealedEvent {
  Slot slot = 0;
  friend bool operator==(const SlotSealedEvent&, const SlotSealedEvent&) = default;
};

// The watcher lost its stream after `slot`: state is uncertain until the next Resynced.
struct StreamGapEvent {
  Slot slot = 0;
  friend bool operator==(const StreamGapEvent&, const StreamGapEvent&) = default;
};

// A full reconciliation with the base layer finished at `slot`.
struct ResyncedEvent {
  Slot slot = 0;
  friend bool operator==(const ResyncedEvent&, const ResyncedEvent&) = default;
};

using Event =
    std::variant<DelegatedEvent, UndelegatedEvent, SlotSealedEvent, StreamGapEvent, ResyncedEvent>;

EventKind KindOf(const Event& event);
Slot SlotOf(const Event& event);
// The account an event is about, or null for the stream-wide kinds.
const Pubkey* AccountOf(const Event& event);
// "delegated", "undelegated", "slot_sealed", "stream_gap", "resynced".
std::string_view KindName(EventKind kind);

}  // namespace switchyard
