#pragma once

#include <chrono>

#include "absl/time/time.h"

namespace switchyard::api_internal {

// An absl::Duration as the steady-clock duration Asio timers and Beast streams take.
inline std::chrono::steady_clock::duration ToChrono(absl::Duration d) {
  return std::chrono::duration_cast<std::chrono::steady_clock::duration>(
      absl::ToChronoNanoseconds(d));
}

}  // namespace switchyard::api_internal
