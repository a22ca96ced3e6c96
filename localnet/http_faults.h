#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
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

// The faults of the answers that POST /faults changes while the localnet runs, starting from
// FaultOptions: the reported slot's lag, a lie about lamports, and a delay of every HTTP
// JSON-RPC answer. Owned by Localnet; any thread.
class RuntimeFaults {
 public:
  explicit RuntimeFaults(const FaultOptions& options);

  uint64_t slot_lag() const { return slot_lag_.load(std::memory_order_relaxed); }
  uint64_t lie_lamports() const { return lie_lamports_.load(std::memory_order_relaxed); }
  absl::Duration answer_delay() const {
    return absl::Milliseconds(delay_ms_.load(std::memory_order_relaxed));
  }

  // Applies a JSON object with any of "slot_lag", "lie_lamports" and "delay_ms" (non-negative
  // integers) and answers the faults now in force as the same object. InvalidArgument for
  // anything else, with nothing changed.
  absl::StatusOr<std::string> Apply(std::string_view body);
  std::string Json() const;

 private:
  std::atomic<uint64_t> slot_lag_;
  std::atomic<uint64_t> lie_lamports_;
  std::atomic<int64_t> delay_ms_{0};
};

// Checks the HTTP fault rates of `options`: each within [0, 1], together at most 1, and a
// server error status within 500..599.
absl::Status ValidateHttpFaults(const FaultOptions& options);

}  // namespace switchyard::localnet
