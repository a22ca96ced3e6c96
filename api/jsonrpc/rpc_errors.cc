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
};

// The one table.
constexpr auto kRpcErrors = std::to_array<RpcErrorEntry>({
    {RpcErrorKind::kParseError, -32700, "Parse error", absl::StatusCode::kDataLoss},
    {RpcErrorKind::kInvalidRequest, -32600, "Invalid request", absl::StatusCode::kAborted},
    {RpcErrorKind::kMethodNotFound, -32601, "Method not found", absl::StatusCode::kUnimplemented},
    {RpcErrorKind::kInvalidParams, -32602, "Invalid params", absl::StatusCode::kInvalidArgument},
    {RpcErrorKind::kInternal, -32603, "Internal error", absl::StatusCode::kInternal},
    {RpcErrorKind::kMinContextSlot, -32016, "Minimum context slot has not been reached",
     absl::StatusCode::kOutOfRange},
    {RpcErrorKind::kNoRoute, -32004, "No route for the account",
     absl::StatusCode::kFailedPrecondition},
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

absl::Status MinContextSlotStatus(uint64_t context_slot) {
  return MakeRpcStatus(RpcErrorKind::kMinContextSlot, {},
                       fmt::format("{{\"contextSlot\":{}}}", context_slot));
}

}  // namespace switchyard
