#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "api/jsonrpc/jsonrpc.h"

namespace switchyard {

// An upstream's JSON-RPC answer taken apart: the raw JSON of its id and of its result or
// error. A value type.
struct UpstreamAnswer {
  std::string id;      // raw; empty when absent
  std::string result;  // raw; empty when the answer is an error
  std::string error;   // raw error object; empty when the answer is a result
  bool is_error() const { return !error.empty(); }
};

// Parses an upstream's JSON-RPC answer body. Fails with Internal (-32603) when the body is
// not a JSON-RPC answer object.
absl::StatusOr<UpstreamAnswer> ParseUpstreamAnswer(std::string_view body);

// The answer to `call` from an upstream's answer: the upstream body byte for byte when its
// id is the call's id byte for byte, else the same result or error under the call's id.
// `is_error`, when given, is set to whether the answer is a JSON-RPC error.
absl::StatusOr<std::string> AnswerFromUpstream(std::string_view body, const RpcCall& call,
                                               bool* is_error = nullptr);

// An upstream's JSON-RPC error object under the id `id_json` (raw JSON).
std::string UpstreamErrorResponse(std::string_view id_json, const UpstreamAnswer& answer);

// The body to forward for `call`: its original bytes, unless its id is of a kind upstreams
// do not echo faithfully (anything but a u64 or a plain string), then the same request with
// id 0.
std::string ForwardBody(const RpcCall& call);

// A request for a sub-part: `{"jsonrpc":"2.0","id":1,"method":<method>,"params":<params>}`.
std::string SubRequest(std::string_view method, std::string_view params_json);

// A JSON array of string literals.
std::string JsonStringArray(const std::vector<std::string>& items,
                            const std::vector<size_t>& indexes);

// The call's params with element 0 replaced by the listed items (a sub-request for part of a
// key or signature list); the other elements, such as the config, as the client wrote them.
absl::StatusOr<std::string> ParamsWithList(const RpcCall& call,
                                           const std::vector<std::string>& items,
                                           const std::vector<size_t>& indexes);

// `{"context":...,"value":[...]}` results: their context (raw) and value elements (raw).
struct ContextList {
  std::string context;
  std::vector<std::string> values;
};
absl::StatusOr<ContextList> ParseContextList(std::string_view result_json);

// Whether a raw JSON value is null.
bool IsJsonNull(std::string_view raw);

}  // namespace switchyard

namespace switchyard {

// The raw JSON of member `key` of a JSON object, or NotFound/Internal.
absl::StatusOr<std::string> JsonMember(std::string_view object_json, std::string_view key);
// The first element of a JSON array of strings (the base64 text of `data: [text, "base64"]`).
absl::StatusOr<std::string> FirstString(std::string_view array_json);

}  // namespace switchyard
