#pragma once

#include <cstdint>
#include <optional>
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

// How the watcher learned of an account event (docs/architecture.md §5). The numeric values
// are part of the on-log format.
enum class EventSource : uint8_t {
  kUnrecorded = 0,      // a record of format version 1, which did not say
  kLive = 1,            // the stream: a program notification or a transaction in the logs
  kBackfill = 2,        // the first reading of the program's accounts of a fresh watcher
  kReconciliation = 3,  // a periodic comparison of the program's accounts with the state
  kRepair = 4,          // the reading of the program's accounts after a lost stream
};
inline constexpr uint8_t kMaxEventSource = 4;

// "unrecorded", "live", "backfill", "reconciliation", "repair".
std::string_view SourceName(EventSource source);

// `account` was delegated to the ER whose validator identity is `validator`. `slot` is the
// delegation slot; it orders the account's events. `signature` is the transaction that
// delegated it; nullopt when none could be found (the base layer's history was pruned, or a
// record of format version 1 carried none).
struct DelegatedEvent {
  Pubkey account;
  Pubkey validator;
  Pubkey owner_program;
  Slot slot = 0;
  uint64_t lamports = 0;
  uint64_t commit_frequency_ms = 0;
  std::optional<Signature> signature;
  EventSource source = EventSource::kLive;

  friend bool operator==(const DelegatedEvent&, const DelegatedEvent&) = default;
};

// `account` returned to the base layer at `slot`, by the transaction `signature` (nullopt:
// found missing by reading the program's accounts, not seen in a transaction).
struct UndelegatedEvent {
  Pubkey account;
  Slot slot = 0;
  std::optional<Signature> signature;
  EventSource source = EventSource::kLive;

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
