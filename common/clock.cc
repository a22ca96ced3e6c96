#include "common/clock.h"

#include <chrono>

#include "absl/time/clock.h"

namespace switchyard {

absl::Time SystemClock::Now() const { return absl::Now(); }

absl::Duration SystemClock::Monotonic() const {
  return absl::FromChrono(std::chrono::steady_clock::now().time_since_epoch());
}

}  // namespace switchyard
