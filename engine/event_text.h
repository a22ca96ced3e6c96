#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "common/pubkey.h"
#include "engine/event.h"
#include "engine/state_store.h"

namespace switchyard {

// The text forms of events and of history rows, shared by the command line (`log dump`,
// `audit`, `history export`) and the router's history methods, so that every surface shows
// the same row the same way. Pure functions.

// The base58 of a signature, or "unknown" when none is known.
std::string SignatureText(const std::optional<Signature>& signature);

// One event as a JSON object:
//   {"kind":"delegated","account":B58,"validator":B58,"owner":B58,"slot":N,"lamports":N,
//    "commit_frequency_ms":N,"signature":B58|"unknown","source":"live"}
//   {"kind":"undelegated","account":B58,"slot":N,"signature":B58|"unknown","source":"live"}
//   {"kind":"slot_sealed"|"stream_gap"|"resynced","slot":N}
std::string EventToJson(const Event& event);

// A history row as one JSON object: "seq" and "ignored" (the fold ignored it as stale), then
// the members of EventToJson.
std::string HistoryEntryToJson(const HistoryEntry& entry);

// A history row as one CSV line (no newline) under HistoryCsvHeader(); the cells a kind does
// not have are empty. No value needs quoting.
std::string_view HistoryCsvHeader();
std::string HistoryEntryToCsv(const HistoryEntry& entry);

}  // namespace switchyard
