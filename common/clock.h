#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

#include "absl/time/time.h"

namespace switchyard {

// An absl::Duration as the steady-clock duration that Asio timers, Beast streams and
// std::chrono deadlines take.
inline std::chrono::steady_clock::duration ToChrono(absl::Duration d) {
  return std::chrono::duration_cast<std::chrono::steady_clock::duration>(
      absl::ToChronoNanoseconds(d));
}

// The source of time. Components take a Clock so that tests can drive time by hand.
// Implementations are thread-safe.
class Clock {
 public:
  virtual ~Clock() = default;
  // Wall-clock time.
  virtual absl::Time Now() const = 0;
  // A monotonic reading for measuring intervals; only differences are meaningful.
  virtual absl::Duration Monotonic() const = 0;
};

// The real clocks of the machine.
class SystemClock final : public Clock {
 public:
  absl::Time Now() const override;
  absl::Duration Monotonic() const override;
};

// A clock that moves only when told to; for tests.
class ManualClock final : public Clock {
 public:
  explicit ManualClock(absl::Time start = absl::UnixEpoch()) : now_ns_(absl::ToUnixNanos(start)) {}
  absl::Time Now() const override { return absl::FromUnixNanos(now_ns_.load()); }
  absl::Duration Monotonic() const override { return absl::Nanoseconds(now_ns_.load()); }
  void Advance(absl::Duration d) { now_ns_.fetch_add(absl::ToInt64Nanoseconds(d)); }

 private:
  std::atomic<int64_t> now_ns_;
};

}  // namespace switchyard
