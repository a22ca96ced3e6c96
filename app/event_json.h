#pragma once

#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "engine/event.h"

namespace switchyard {

// Events as JSON objects, one per line in `log append --jsonl` and `log dump`:
//   {"kind":"delegated","account":B58,"validator":B58,"owner":B58,"slot":N,
//    "lamports":N,"commit_frequency_ms":N,"signature":B58}
//   {"kind":"undelegated","account":B58,"slot":N,"signature":B58}
//   {"kind":"slot_sealed"|"stream_gap"|"resynced","slot":N}
// `signature`, `lamports` and `commit_frequency_ms` may be left out (zero).
absl::StatusOr<Event> ParseEventJson(std::string_view line);
std::string EventToJson(const Event& event);

}  // namespace switchyard
