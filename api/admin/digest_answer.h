#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "common/slot.h"
#include "engine/state_store.h"

namespace switchyard {

// What GET /status/digest[?slot=S] answers (docs/architecture.md §13): the digest this
// replica sealed at a slot, and its applied slot now. The one place that writes and reads
// that JSON, so the admin endpoint and a replica checking it (`verify --peer`) agree on it.
// A value type.
struct DigestAnswer {
  SealedDigestAt sealed;
  std::optional<Slot> applied_slot;  // nullopt: no state loaded yet

  friend bool operator==(const DigestAnswer&, const DigestAnswer&) = default;
};

// {"slot":S,"digest":"HEX","applied_slot":A}
std::string DigestAnswerJson(const DigestAnswer& answer);

// The request target: "/status/digest" for the latest sealed slot, else with "?slot=S".
std::string DigestTarget(std::optional<Slot> slot);

// The slot a request target asks for: nullopt without a `slot` parameter; InvalidArgument for
// a value that is not a slot number (decimal digits, at most 2^64 - 1).
absl::StatusOr<std::optional<Slot>> ParseDigestSlot(std::string_view target);

// What an admin listener answered to a DigestTarget: the answer for 200, nullopt for 404 (the
// slot is not sealed there); any other status, or a body that is not a DigestAnswer, is an
// error that names it.
absl::StatusOr<std::optional<DigestAnswer>> ParseDigestAnswer(unsigned status,
                                                              std::string_view body);

}  // namespace switchyard
