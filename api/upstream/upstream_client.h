#pragma once

#include <functional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace switchyard {

struct UpstreamResponse {
  unsigned status = 0;
  std::string body;
};

// Whether a failed request (connection error or timeout) may be sent again.
enum class RetryPolicy {
  kSafe,               // once more, to another endpoint (the same one when it is alone)
  kOtherEndpointOnly,  // once more, only to another endpoint (sendTransaction)
  kNever,
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
  virtual void Send(std::string_view target, std::string body, RetryPolicy policy,
                    UpstreamCallback done) = 0;
  // Closes every connection; later Sends fail.
  virtual void Shutdown() = 0;
};

}  // namespace switchyard
