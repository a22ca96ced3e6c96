#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/status.h"

namespace switchyard {

// The JSON-RPC errors the router answers with. Every error object the router writes comes
// from one table (rpc_errors.cc) that pairs each kind with its JSON-RPC code, its default
// message and the absl::StatusCode it travels as between modules.
enum class RpcErrorKind {
  kParseError,      // -32700: the body is not JSON (or not UTF-8)
  kInvalidRequest,  // -32600: not a JSON-RPC 2.0 request, an empty or oversized batch
  kMethodNotFound,  // -32601
  kInvalidParams,   // -32602: params that do not fit the method, mixed-target transactions
  kInternal,        // -32603: an upstream failed or answered something unusable
  kMinContextSlot,  // -32016: the applied slot stayed below the required one
  // -32604, as MagicBlock's router answers its own errors: an account delegated to an ER
  // node the router does not know (or one that is offline), a transaction whose accounts are
  // delegated to different places, and keys, signatures or transactions that do not decode.
  kRouterError,
  kUnauthorized,  // -32401: no valid API key where one is required (HTTP 401)
  kMethodDenied,  // -32403: the API key may not call this method
  kRateLimited,   // -32429: over a request or message limit (HTTP 429)
  // -32605: a consensus read (X-Switchyard-Consensus, integrity.consensus_methods) whose
  // endpoints did not agree enough; `data` says how they answered.
  kConsensusFailed,
};

// A JSON-RPC error object ready to be written.
struct RpcError {
  int code = 0;
  std::string message;
  std::optional<std::string> data_json;  // raw JSON of `data`
};

// A Status that carries `kind`; `message` replaces the table's default message when given.
absl::Status MakeRpcStatus(RpcErrorKind kind, std::string_view message = {});
// The same, with a `data` member (raw JSON).
absl::Status MakeRpcStatus(RpcErrorKind kind, std::string_view message, std::string data_json);

// The one mapping from a Status to a JSON-RPC error. A Status made by MakeRpcStatus maps to
// its kind; any other maps by its code (InvalidArgument → -32602, Unimplemented → -32601,
// OutOfRange → -32016, FailedPrecondition → -32604, Unknown → -32605, everything else →
// -32603).
RpcError RpcErrorFromStatus(const absl::Status& status);

// The Status for a JSON-RPC error an upstream answered a forwarded call with (`code` and
// `message` of its error object). The codes that say the call itself was wrong (-32600,
// -32601, -32602) keep their kind, since the call was the client's; any other code is an
// upstream failure (kInternal). The message is the upstream's.
absl::Status RpcStatusFromUpstreamError(int64_t code, std::string_view message);

// Whether `status` is the consensus error (it reaches the client as it is, not as an upstream
// failure).
bool IsConsensusError(const absl::Status& status);

// The error -32016 with data.contextSlot, as Solana answers an unmet minContextSlot.
absl::Status MinContextSlotStatus(uint64_t context_slot);
// Whether `status` is that error.
bool IsMinContextSlotError(const absl::Status& status);

}  // namespace switchyard
