#pragma once

#include <atomic>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "localnet/options.h"

namespace switchyard::localnet {

enum class HttpFaultKind { kNone, kTooManyRequests, kServerError, kReset, kDelay };

struct HttpFault {
  HttpFaultKind kind = HttpFaultKind::kNone;
  absl::Duration delay;  // kDelay only
};

// Decides which HTTP JSON-RPC requests meet a fault (FaultOptions). The n-th request the
// localnet reads meets the fault of the n-th draw from the fault seed, so a client that sends
// its requests one after another sees the same faults on every run. Owned by Localnet; any
// thread may call Next.
class HttpFaultInjector {
 public:
  explicit HttpFaultInjector(const FaultOptions& options);

  bool enabled() const { return enabled_; }
  HttpFault Next();
  uint32_t retry_after_seconds() const { return options_.retry_after_seconds; }
  unsigned server_error_status() const { return options_.server_error_status; }
  uint64_t requests() const { return counter_.load(std::memory_order_relaxed); }

 private:
  const FaultOptions options_;
  const bool enabled_;
  std::atomic<uint64_t> counter_{0};
};

// Checks the HTTP fault rates of `options`: each within [0, 1], together at most 1, and a
// server error status within 500..599.
absl::Status ValidateHttpFaults(const FaultOptions& options);

}  // namespace switchyard::localnet
