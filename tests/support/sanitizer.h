#pragma once

#include "absl/time/time.h"

namespace switchyard::testing {

// True when the tests are built under a sanitizer preset (asan, tsan; CMake defines
// SWITCHYARD_SANITIZED for the tests only, never for the product).
#ifdef SWITCHYARD_SANITIZED
inline constexpr bool kSanitized = true;
#else
inline constexpr bool kSanitized = false;
#endif

// The code under test runs several times slower under a sanitizer (ThreadSanitizer: 5 to 15
// times). A test whose subject is not speed multiplies the time it gives the code under test
// by this; a test of a latency bound keeps its bound and is skipped under a sanitizer instead.
inline constexpr int kTimeScale = kSanitized ? 10 : 1;

inline absl::Duration Scaled(absl::Duration d) { return d * kTimeScale; }

}  // namespace switchyard::testing
