#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace switchyard {

struct UpstreamResponse {
  unsigned status = 0;
  std::string body;
  uint32_t retry_after_seconds = 0;  // a 429's or 503's Retry-After, when it had one
  // The body is gzip as the upstream sent it (Content-Encoding: gzip). Only ever set for a
  // request sent with SendOptions::accept_gzip; every other answer arrives inflated.
  bool gzip = false;
};

// Whether a failed request may be sent again (docs/architecture.md §11).
enum class RetryPolicy {
  // A read: again to another endpoint after an I/O error, a timeout, HTTP 5xx or 429, or a
  // node that cannot answer now (-32005, -32016), within the budget and the deadline; once
  // more to the same endpoint after an I/O error when it is alone. May be hedged.
  kSafe,
  // A write (sendTransaction): again only to another endpoint, and only when the connection
  // failed before any byte of the request was written.
  kOtherEndpointOnly,
  kNever,
};

// How one request may be sent: its retry policy, and what the choice of endpoint must respect.
struct SendOptions {
  SendOptions(RetryPolicy policy = RetryPolicy::kSafe) : policy(policy) {}  // NOLINT: implicit
  RetryPolicy policy;
  // Endpoints whose last probed slot is below this are skipped while another is known to be
  // at or above it (a minContextSlot, or X-Min-Slot on the base layer). Zero: no bound.
  uint64_t min_slot = 0;
  // A read (kSafe) may be hedged to a second endpoint when the first is slow.
  bool hedge = true;
  // The upstream is asked for gzip (Accept-Encoding: gzip) and a 200 answer may come back
  // compressed (UpstreamResponse::gzip), for a caller that passes the bytes on unread. An
  // answer that inflates to 2 KiB or less, which might be a node error the retry logic must
  // see, and every other status arrive inflated.
  bool accept_gzip = false;
  // Integrity (docs/architecture.md §22). `endpoint`: only that endpoint of the target (its
  // index), once, never retried or hedged: the reads of cross-checks and consensus legs.
  // SIZE_MAX: the choice decides.
  size_t endpoint = SIZE_MAX;
  // A consensus read: asked of consensus_of endpoints of the target at once, answered when
  // consensus_needs of them agree, else failed with the consensus error (-32605). 0: a plain
  // read. Only for reads (kSafe) to a target with endpoint health.
  uint32_t consensus_needs = 0;
  uint32_t consensus_of = 0;
  // The answer may be large (many accounts, a block; a batch holding such a call). On a
  // pipelining endpoint such a request is not queued behind others on a connection and none
  // is queued behind it: an answer that takes long to make and to read holds up no other
  // request (docs/architecture.md §11).
  bool large_answer = false;
};

using UpstreamCallback = std::function<void(absl::StatusOr<UpstreamResponse>)>;

// What the request pipelines need of the upstreams of one worker: POST a JSON-RPC body to a
// named target (base, an ER, another group) and get the HTTP answer back. UpstreamSet is the
// implementation over sockets; tests give the pipelines a fake. Used on one worker's thread;
// callbacks run there, possibly before Send returns.
class UpstreamClient {
 public:
  virtual ~UpstreamClient() = default;
  // Whether `target` names a configured group of endpoints.
  virtual bool Has(std::string_view target) const = 0;
  // Sends `body` to `target` and calls `done` once: with the HTTP answer, with
  // Unavailable/DeadlineExceeded after the attempts `policy` allows failed, or with NotFound
  // when no such target is configured.
  virtual void Send(std::string_view target, std::string body, SendOptions options,
                    UpstreamCallback done) = 0;
  // Closes every connection; later Sends fail.
  virtual void Shutdown() = 0;
};

}  // namespace switchyard
