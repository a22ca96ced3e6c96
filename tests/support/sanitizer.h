#pragma once

#include <cstdint>

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

// A bound on the growth of a process's resident memory, in KiB. Under a sanitizer the RSS also
// holds what the sanitizer keeps (AddressSanitizer: the quarantine of freed blocks, at most
// 256 MiB by default, the redzone around every block and the shadow), so the bound there is
// 4 x `kib` + 256 MiB: it no longer measures the product's footprint, but growth without bound
// still fails it.
inline constexpr int64_t MemoryBoundKib(int64_t kib) {
  return kSanitized ? 4 * kib + 256 * 1024 : kib;
}

}  // namespace switchyard::testing
