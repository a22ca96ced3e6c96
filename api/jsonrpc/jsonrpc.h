#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "api/jsonrpc/rpc_errors.h"

namespace switchyard {

struct RpcCodecOptions {
  size_t max_batch_size = 100;
  size_t max_depth = 64;  // nesting deeper than this is a parse error
};

// One element of a JSON-RPC body. The strings are copies of the original bytes, so a call
// can be forwarded exactly as the client wrote it. A value type.
struct RpcCall {
  std::string raw;                // the whole request object as it appeared in the body
  std::optional<std::string> id;  // the id's raw JSON; nullopt for a notification
  std::string method;             // unescaped
  std::string params;             // raw JSON of params; empty when absent
  // minContextSlot from a config object in params, when there is one.
  std::optional<uint64_t> min_context_slot;
  // Not OK when the element is not a valid request; then only `id` may be set and the
  // answer is this error.
  absl::Status error;

  bool is_notification() const { return !id.has_value() && error.ok(); }
  // The id to answer with: the raw id, or null.
  std::string_view id_or_null() const { return id ? std::string_view(*id) : "null"; }
};

struct RpcBody {
  bool batch = false;
  std::vector<RpcCall> calls;
};

// Parses and validates a request body with simdjson On-Demand. Fails (the error is the
// whole answer, with id null) on a body that is not JSON or not UTF-8 (-32700), a JSON
// value that is neither an object nor an array, an empty batch, or a batch larger than
// `max_batch_size` (-32600). Errors of single elements are returned in RpcCall::error.
// Never throws; thread-safe. `capacity`: the bytes readable from body.data(); when they leave
// simdjson's padding past the end (a std::string's capacity()), the body is parsed in place,
// otherwise from a padded copy.
absl::StatusOr<RpcBody> ParseRpcBody(std::string_view body, const RpcCodecOptions& options,
                                     size_t capacity = 0);

// Answers. `id_json` is raw JSON; `result_json` too.
std::string RpcResultResponse(std::string_view id_json, std::string_view result_json);
std::string RpcErrorResponse(std::string_view id_json, const RpcError& error);
std::string RpcErrorResponse(std::string_view id_json, const absl::Status& status);
// `[a,b,...]` from answers in order.
std::string JoinBatch(const std::vector<std::string>& answers);

// A JSON string literal for `text` (quotes and escapes added). Any bytes may come in: each
// byte that does not start a well-formed UTF-8 sequence comes out as \ufffd, so the literal is
// always valid JSON.
std::string JsonQuote(std::string_view text);
// JsonQuote(text) appended to `out`; text that needs no escape (a method name, base58) is
// copied as it is.
void AppendJsonQuoted(std::string& out, std::string_view text);

}  // namespace switchyard
