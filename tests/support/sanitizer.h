#pragma once

#include "absl/time/time.h"

namespace switchyard::testing {

// True when the tests are built under a sanitizer preset (asan, tsan; CMake defines
// SWITCHYARD_SANITIZED for the tests only). The code under test runs several times slower
// there, so a test whose subject is not speed may give a deadline of the product more room;
// a test of a latency bound keeps its bound and is skipped under a sanitizer instead.
#ifdef SWITCHYARD_SANITIZED
inline constexpr bool kSanitized = true;
#else
inline constexpr bool kSanitized = false;
#endif

// `d` in the default build; under a sanitizer, `d` times `factor`.
inline absl::Duration UnlessSanitized(absl::Duration d, int factor = 20) {
  return kSanitized ? d * factor : d;
}

}  // namespace switchyard::testing
