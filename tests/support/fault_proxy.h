#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace switchyard::testing {

// What a FaultProxy does to the traffic it forwards. Switched at run time; a switch applies to
// the requests read after it (and, for kBlackHole and kReset, to open connections at once).
enum class FaultMode {
  kPass,       // forward as is
  kBlackHole,  // accept and read, never answer, forward nothing (a stopped process)
  kReset,      // cut every connection with a TCP RST, before any byte of an answer
  kStatus,     // answer HTTP `status` (5xx) with a JSON-RPC-free body, forward nothing
  kTooMany,    // answer 429 with `Retry-After: retry_after_seconds`, forward nothing
  kDelay,      // forward, and hold each answer `delay` before writing it
  kLag,        // forward, and report every slot `lag_slots` behind: getSlot's result and
               // each `"slot":N` context in an answer; a request whose minContextSlot is
               // above the lagged slot gets -32016 as a node behind would answer it
};

struct Fault {
  FaultMode mode = FaultMode::kPass;
  unsigned status = 503;                        // kStatus
  uint32_t retry_after_seconds = 1;             // kTooMany
  absl::Duration delay = absl::ZeroDuration();  // kDelay
  uint64_t lag_slots = 0;                       // kLag
};

// An HTTP/1.1 proxy on 127.0.0.1 in front of one upstream (a localnet, a node) for tests and
// benches of clients that must survive a bad endpoint: keep-alive on both sides; a WebSocket
// upgrade is forwarded and its connection then pumps bytes both ways (kBlackHole holds them,
// kReset cuts them, the HTTP-level modes leave it alone). Runs its own threads; every method
// may be called from any thread. An upstream that cannot be reached is answered 502.
//
// The path /_fault is the proxy's own, answered whatever the mode (black hole included), so
// that a process running it (switchyard-fault-proxy) can be switched from outside: `POST
// /_fault` with {"mode":"pass"|"black_hole"|"reset"|"status"|"too_many"|"delay"|"lag",
// "status":503, "retry_after_seconds":1, "delay_ms":200, "lag_slots":100} (fields left out
// take Fault's defaults) sets the fault, and `GET /_fault` (or the POST) answers the current
// fault with `requests` and `connections`. A connection that has used it is not reset at a
// switch, so that its answer arrives.
class FaultProxy {
 public:
  // Listens on 127.0.0.1:`port` (0: a free port) and forwards to `upstream_url`
  // (http://HOST:PORT).
  static absl::StatusOr<std::unique_ptr<FaultProxy>> Start(const std::string& upstream_url,
                                                           uint16_t port = 0);
  virtual ~FaultProxy() = default;

  virtual void Set(const Fault& fault) = 0;
  virtual Fault fault() const = 0;
  virtual uint16_t port() const = 0;
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port()); }
  // HTTP requests read from clients since start (whatever the mode did with them), a WebSocket
  // upgrade included, the control path's not.
  virtual uint64_t requests() const = 0;
  // Connections accepted since start.
  virtual uint64_t connections() const = 0;
};

}  // namespace switchyard::testing
