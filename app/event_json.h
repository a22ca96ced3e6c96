#pragma once

#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "engine/event.h"
#include "engine/event_text.h"

namespace switchyard {

// Events as JSON objects, one per line in `log append --jsonl`, as EventToJson
// (engine/event_text.h) writes them for `log dump`:
//   {"kind":"delegated","account":B58,"validator":B58,"owner":B58,"slot":N,
//    "lamports":N,"commit_frequency_ms":N,"signature":B58|"unknown","source":NAME}
//   {"kind":"undelegated","account":B58,"slot":N,"signature":B58|"unknown","source":NAME}
//   {"kind":"slot_sealed"|"stream_gap"|"resynced","slot":N}
// `lamports` and `commit_frequency_ms` may be left out (zero), `signature` (unknown) and
// `source` ("unrecorded"; else live, backfill, reconciliation or repair).
absl::StatusOr<Event> ParseEventJson(std::string_view line);

}  // namespace switchyard
