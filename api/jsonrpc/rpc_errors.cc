#include "api/jsonrpc/rpc_errors.h"

#include <array>
#include <cstdlib>

#include "absl/strings/cord.h"
#include "fmt/format.h"

namespace switchyard {
namespace {

constexpr char kKindPayload[] = "switchyard.rpc_kind";
constexpr char kDataPayload[] = "switchyard.rpc_data";

struct RpcErrorEntry {
  RpcErrorKind kind;
  int code;
  std::string_view message;
  absl::StatusCode status_code;
  // An upstream's error with this code says the call it was given is wrong, which is the
  // client's own call: it reaches the client with this kind (else as kInternal).
  bool passes_from_upstream;
};

// The one table.
constexpr auto kRpcErrors = std::to_array<RpcErrorEntry>({
    {RpcErrorKind::kParseError, -32700, "Parse error", absl::StatusCode::kDataLoss, false},
    {RpcErrorKind::kInvalidRequest, -32600, "Invalid request", absl::StatusCode::kAborted, true},
    {RpcErrorKind::kMethodNotFound, -32601, "Method not found", absl::StatusCode::kUnimplemented,
     true},
    {RpcErrorKind::kInvalidParams, -32602, "Invalid params", absl::StatusCode::kInvalidArgument,
     true},
    {RpcErrorKind::kInternal, -32603, "Internal error", absl::StatusCode::kInternal, false},
    {RpcErrorKind::kMinContextSlot, -32016, "Minimum context slot has not been reached",
     absl::StatusCode::kOutOfRange, false},
    {RpcErrorKind::kRouterError, -32604, "Router error", absl::StatusCode::kFailedPrecondition,
     false},
    {RpcErrorKind::kUnauthorized, -32401, "A valid API key is required",
     absl::StatusCode::kUnauthenticated, false},
    {RpcErrorKind::kMethodDenied, -32403, "Method not allowed for this API key",
     absl::StatusCode::kPermissionDenied, false},
    {RpcErrorKind::kRateLimited, -32429, "Rate limit exceeded",
     absl::StatusCode::kResourceExhausted, false},
    {RpcErrorKind::kConsensusFailed, -32605, "Consensus not reached", absl::StatusCode::kUnknown,
     false},
});

const RpcErrorEntry& EntryFor(RpcErrorKind kind) {
  for (const RpcErrorEntry& entry : kRpcErrors) {
    if (entry.kind == kind) return entry;
  }
  return kRpcErrors[4];
}

const RpcErrorEntry& EntryForCode(absl::StatusCode code) {
  for (const RpcErrorEntry& entry : kRpcErrors) {
    if (entry.status_code == code) return entry;
  }
  return EntryFor(RpcErrorKind::kInternal);
}

}  // namespace

absl::Status MakeRpcStatus(RpcErrorKind kind, std::string_view message) {
  const RpcErrorEntry& entry = EntryFor(kind);
  const std::string text(message.empty() ? entry.message : message);
  absl::Status status(entry.status_code, text);
  status.SetPayload(kKindPayload, absl::Cord(std::to_string(static_cast<int>(kind))));
  return status;
}

absl::Status MakeRpcStatus(RpcErrorKind kind, std::string_view message, std::string data_json) {
  absl::Status status = MakeRpcStatus(kind, message);
  status.SetPayload(kDataPayload, absl::Cord(data_json));
  return status;
}

RpcError RpcErrorFromStatus(const absl::Status& status) {
  const RpcErrorEntry* entry = &EntryForCode(status.code());
  if (auto kind = status.GetPayload(kKindPayload)) {
    entry = &EntryFor(static_cast<RpcErrorKind>(std::atoi(std::string(*kind).c_str())));
  }
  RpcError error;
  error.code = entry->code;
  const std::string message(status.message());
  error.message = message.empty() ? std::string(entry->message) : message;
  if (auto data = status.GetPayload(kDataPayload)) {
    error.data_json = std::string(*data);
  }
  return error;
}

absl::Status RpcStatusFromUpstreamError(int64_t code, std::string_view message) {
  for (const RpcErrorEntry& entry : kRpcErrors) {
    if (entry.code == code && entry.passes_from_upstream) return MakeRpcStatus(entry.kind, message);
  }
  return MakeRpcStatus(RpcErrorKind::kInternal, message);
}

bool IsConsensusError(const absl::Status& status) {
  return !status.ok() && RpcErrorFromStatus(status).code == -32605;
}

bool IsMinContextSlotError(const absl::Status& status) {
  return !status.ok() && RpcErrorFromStatus(status).code == -32016;
}

absl::Status MinContextSlotStatus(uint64_t context_slot) {
  return MakeRpcStatus(RpcErrorKind::kMinContextSlot, {},
                       fmt::format("{{\"contextSlot\":{}}}", context_slot));
}

}  // namespace switchyard
