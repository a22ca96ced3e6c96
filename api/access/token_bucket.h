#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>

namespace switchyard {

// A rate: `per_second` tokens a second, at most `burst` at once. Off when per_second is 0.
struct RateLimit {
  double per_second = 0;
  double burst = 0;  // 0: one second's worth
  bool enabled() const { return per_second > 0; }
  double effective_burst() const { return burst > 0 ? burst : std::max(1.0, per_second); }
};

// A token bucket in its GCRA form: one atomic theoretical arrival time, so any thread may take
// from it with one compare-and-swap and no lock. Full when created. Callers pass a monotonic
// time in nanoseconds.
class TokenBucket {
 public:
  TokenBucket() = default;
  explicit TokenBucket(RateLimit limit) { Configure(limit); }
  TokenBucket(const TokenBucket&) = delete;
  TokenBucket& operator=(const TokenBucket&) = delete;

  // Not thread-safe: before the bucket is shared.
  void Configure(RateLimit limit) {
    interval_ns_ =
        limit.enabled() ? std::max<int64_t>(1, static_cast<int64_t>(1e9 / limit.per_second)) : 0;
    tolerance_ns_ =
        static_cast<int64_t>(limit.effective_burst() * static_cast<double>(interval_ns_));
  }
  bool enabled() const { return interval_ns_ > 0; }

  // Takes `cost` tokens at `now_ns`: 0 when they were there, else the nanoseconds until they
  // will be (and nothing is taken).
  int64_t Take(int64_t now_ns, uint32_t cost) {
    int64_t tat = tat_.load(std::memory_order_relaxed);
    for (;;) {
      const int64_t next = std::max(tat, now_ns) + static_cast<int64_t>(cost) * interval_ns_;
      const int64_t over = next - now_ns - tolerance_ns_;
      if (over > 0) return over;
      if (tat_.compare_exchange_weak(tat, next, std::memory_order_relaxed)) return 0;
    }
  }
  // Gives back `cost` tokens taken by Take (a request another limit then refused).
  void Refund(uint32_t cost) {
    tat_.fetch_sub(static_cast<int64_t>(cost) * interval_ns_, std::memory_order_relaxed);
  }

 private:
  int64_t interval_ns_ = 0;   // one token
  int64_t tolerance_ns_ = 0;  // the burst
  std::atomic<int64_t> tat_{0};
};

// Whole seconds for a Retry-After header: at least 1.
inline int64_t RetryAfterSeconds(int64_t wait_ns) {
  return std::max<int64_t>(1, (wait_ns + 999'999'999) / 1'000'000'000);
}

}  // namespace switchyard
