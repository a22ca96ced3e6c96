#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
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

// An upstream's JSON-RPC error object (raw) under the id `id_json` (raw JSON).
std::string UpstreamErrorResponse(std::string_view id_json, std::string_view error_json);

// The body to forward for `call`: its original bytes, unless its id is of a kind upstreams
// do not echo faithfully (anything but a u64 or a plain string), then the same request with
// id 0.
std::string ForwardBody(const RpcCall& call);
// Removes minContextSlot from the call's params and its raw text (ParamsWithoutMinContextSlot);
// min_context_slot stays as it was parsed.
void DropMinContextSlot(RpcCall& call);

// Whether an upstream's answer to ForwardBody(call) is the answer to the client byte for byte:
// the call has an id (it is no notification) of a kind upstreams echo faithfully, and so goes
// out as the client wrote it.
bool ForwardsVerbatim(const RpcCall& call);

// A request for a sub-part: `{"jsonrpc":"2.0","id":1,"method":<method>,"params":<params>}`.
std::string SubRequest(std::string_view method, std::string_view params_json);

// The params of a sub-request for part of a key or signature list: `[["k1","k2",…]`, then
// `params_after_list` (the request's other params as the client wrote them, each with a
// leading comma), then `]`. The items are base58 text (checked by the routing decision, or
// made by the router), which needs no escaping.
std::string PartParams(const std::vector<std::string>& items, const std::vector<size_t>& indexes,
                       std::string_view params_after_list);

namespace api_internal {
struct ListAnswerReader;
}  // namespace api_internal

// An upstream's answer to a list read (getMultipleAccounts, getSignatureStatuses) taken apart
// without copying: `context` and each of `values` view the raw JSON text of the answer, which
// this object owns, or shares with the other elements of the batch answer it came in.
// Move-only; a move keeps the views valid.
class ListAnswer {
 public:
  // Fails with Internal (-32603) when `body` is not a JSON-RPC answer object. A result that
  // is not `{"context":...,"value":[...]}` parses, with is_list() false.
  static absl::StatusOr<ListAnswer> Parse(std::string_view body);

  ListAnswer(ListAnswer&&) = default;
  ListAnswer& operator=(ListAnswer&&) = default;

  bool is_error() const { return !error_.empty(); }
  std::string_view error() const { return error_; }  // raw error object; empty for a result
  bool is_list() const { return is_list_; }
  std::string_view context() const { return context_; }                    // raw
  const std::vector<std::string_view>& values() const { return values_; }  // raw, in order

 private:
  friend struct api_internal::ListAnswerReader;
  ListAnswer() = default;

  std::shared_ptr<const char[]> text_;  // the text the views point into, padded for simdjson
  std::string_view error_;
  std::string_view context_;
  std::vector<std::string_view> values_;
  bool is_list_ = false;
};

// `{"jsonrpc":"2.0","result":{"context":<context>,"value":[<values>]},"id":<id_json>}`: the
// raw texts spliced in as they are, in one allocation.
std::string ContextListResponse(std::string_view id_json, std::string_view context,
                                const std::vector<std::string_view>& values);

// The body of an upstream JSON-RPC batch of `calls[indexes[k]]` for each k, with id k in place
// of the client's id: `[{"jsonrpc":"2.0","id":0,"method":…,"params":…},…]`, then each of
// `extra` (a method and its raw params) with the ids that follow.
std::string UpstreamBatchBody(
    const std::vector<RpcCall>& calls, const std::vector<size_t>& indexes,
    const std::vector<std::pair<std::string_view, std::string>>& extra = {});
// The same for calls of different requests, each a method and its raw params: element k is
// `calls[k]` with id k.
std::string UpstreamBatchBody(
    const std::vector<std::pair<std::string_view, std::string_view>>& calls);

// An upstream's answer to a batch made by UpstreamBatchBody of `count` calls: element k is the
// answer with id k, or nullopt when there is none (an id that is missing, not one of those
// sent, or not a number; the first of repeated ids counts). Fails with Internal (-32603) when
// the body is not a JSON array: an upstream that does not take batches answers one error
// object, or something that is not JSON-RPC at all.
absl::StatusOr<std::vector<std::optional<UpstreamAnswer>>> ParseUpstreamBatchAnswer(
    std::string_view body, size_t count);

// An element of an upstream batch answer read by the overload below: `answer` holds its id and
// its error, and its result unless the element was read as a list; then `list` holds it.
struct UpstreamBatchElement {
  UpstreamAnswer answer;
  std::optional<ListAnswer> list;
};
// The same, with each element k for which `lists[k]` is true read as a ListAnswer in the same
// pass (its views share one copy of `body`): a list read that rides in a batch is parsed once.
absl::StatusOr<std::vector<std::optional<UpstreamBatchElement>>> ParseUpstreamBatchAnswer(
    std::string_view body, size_t count, const std::vector<bool>& lists);

// `{"context":...,"value":[...]}` results as copies: their context (raw) and value elements
// (raw). For callers that keep the parts; the request pipeline uses ListAnswer.
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
