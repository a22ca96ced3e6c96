#include "api/jsonrpc/rpc_merge.h"

#include <simdjson.h>

#include "api/jsonrpc/raw_json.h"
#include "api/jsonrpc/rpc_errors.h"
#include "api/jsonrpc/rpc_params.h"
#include "fmt/format.h"

namespace switchyard {
namespace {

namespace od = simdjson::ondemand;
using api_internal::RawJson;
using api_internal::ThreadParser;
using api_internal::Trim;

absl::Status Malformed(std::string_view what) {
  return MakeRpcStatus(RpcErrorKind::kInternal, fmt::format("upstream answered {}", what));
}

bool IsPlainId(std::string_view id) {
  if (id.empty()) return false;
  if (id.front() == '"') {
    // A string without escapes comes back the same from any upstream.
    return id.size() >= 2 && id.back() == '"' &&
           id.substr(1, id.size() - 2).find('\\') == std::string_view::npos;
  }
  if (id.size() > 19) return false;  // might not fit a u64
  if (id.size() > 1 && id.front() == '0') return false;
  for (char c : id) {
    if (c < '0' || c > '9') return false;
  }
  return true;
}

}  // namespace

absl::StatusOr<UpstreamAnswer> ParseUpstreamAnswer(std::string_view body) {
  simdjson::padded_string padded(body);
  od::parser& parser = ThreadParser();
  od::document doc;
  od::object object;
  if (parser.iterate(padded).get(doc) || doc.get_object().get(object)) {
    return Malformed("something that is not a JSON-RPC answer");
  }
  UpstreamAnswer answer;
  for (auto field : object) {
    std::string_view key;
    od::value value;
    if (field.unescaped_key().get(key) || field.value().get(value)) {
      return Malformed("malformed JSON");
    }
    std::string* out = nullptr;
    if (key == "id") {
      out = &answer.id;
    } else if (key == "result") {
      out = &answer.result;
    } else if (key == "error") {
      out = &answer.error;
    } else {
      continue;
    }
    if (RawJson(value, out)) return Malformed("malformed JSON");
  }
  if (answer.result.empty() == answer.error.empty()) {
    return Malformed("neither a result nor an error");
  }
  return answer;
}

absl::StatusOr<std::string> AnswerFromUpstream(std::string_view body, const RpcCall& call,
                                               bool* is_error) {
  absl::StatusOr<UpstreamAnswer> answer = ParseUpstreamAnswer(body);
  if (!answer.ok()) return answer.status();
  if (is_error != nullptr) *is_error = answer->is_error();
  const std::string_view id = call.id_or_null();
  if (answer->id == id) return std::string(Trim(body));
  if (answer->is_error()) return UpstreamErrorResponse(id, *answer);
  return RpcResultResponse(id, answer->result);
}

std::string UpstreamErrorResponse(std::string_view id_json, const UpstreamAnswer& answer) {
  return fmt::format(R"({{"jsonrpc":"2.0","error":{},"id":{}}})", answer.error, id_json);
}

std::string ForwardBody(const RpcCall& call) {
  if (!call.id || IsPlainId(*call.id)) return call.raw;
  std::string params = call.params.empty() ? "" : fmt::format(",\"params\":{}", call.params);
  return fmt::format(R"({{"jsonrpc":"2.0","id":0,"method":{}{}}})", JsonQuote(call.method), params);
}

std::string SubRequest(std::string_view method, std::string_view params_json) {
  return fmt::format(R"({{"jsonrpc":"2.0","id":1,"method":{},"params":{}}})", JsonQuote(method),
                     params_json);
}

std::string JsonStringArray(const std::vector<std::string>& items,
                            const std::vector<size_t>& indexes) {
  std::string out = "[";
  for (size_t i = 0; i < indexes.size(); ++i) {
    if (i > 0) out.push_back(',');
    out += JsonQuote(items[indexes[i]]);
  }
  out.push_back(']');
  return out;
}

absl::StatusOr<std::string> ParamsWithList(const RpcCall& call,
                                           const std::vector<std::string>& items,
                                           const std::vector<size_t>& indexes) {
  absl::StatusOr<RpcParams> params = ParseRpcParams(call.params);
  if (!params.ok()) return params.status();
  if (params->elements.empty()) {
    return MakeRpcStatus(RpcErrorKind::kInvalidParams, "Invalid params: missing parameter 0");
  }
  params->elements[0] = JsonStringArray(items, indexes);
  return JoinParams(params->elements);
}

absl::StatusOr<ContextList> ParseContextList(std::string_view result_json) {
  simdjson::padded_string padded(result_json);
  od::parser& parser = ThreadParser();
  od::document doc;
  od::object object;
  if (parser.iterate(padded).get(doc) || doc.get_object().get(object)) {
    return Malformed("a result without context");
  }
  ContextList list;
  bool has_value = false;
  for (auto field : object) {
    std::string_view key;
    od::value value;
    if (field.unescaped_key().get(key) || field.value().get(value)) {
      return Malformed("malformed JSON");
    }
    if (key == "context") {
      if (RawJson(value, &list.context)) return Malformed("malformed JSON");
    } else if (key == "value") {
      od::array array;
      if (value.get_array().get(array)) return Malformed("a value that is not a list");
      for (auto element : array) {
        od::value item;
        std::string raw;
        if (element.get(item) || RawJson(item, &raw)) return Malformed("malformed JSON");
        list.values.push_back(std::move(raw));
      }
      has_value = true;
    }
  }
  if (list.context.empty() || !has_value) return Malformed("a result without context or value");
  return list;
}

bool IsJsonNull(std::string_view raw) { return Trim(raw) == "null"; }

}  // namespace switchyard

namespace switchyard {

absl::StatusOr<std::string> JsonMember(std::string_view object_json, std::string_view key) {
  simdjson::padded_string padded(object_json);
  simdjson::ondemand::parser parser;
  simdjson::ondemand::document doc;
  simdjson::ondemand::object object;
  if (parser.iterate(padded).get(doc) || doc.get_object().get(object)) {
    return Malformed("a result that is not an object");
  }
  simdjson::ondemand::value value;
  if (object.find_field_unordered(key).get(value)) {
    return absl::NotFoundError(fmt::format("no member {}", key));
  }
  std::string raw;
  if (RawJson(value, &raw)) return Malformed("malformed JSON");
  return raw;
}

absl::StatusOr<std::string> FirstString(std::string_view array_json) {
  simdjson::padded_string padded(array_json);
  simdjson::ondemand::parser parser;
  simdjson::ondemand::document doc;
  simdjson::ondemand::array array;
  if (parser.iterate(padded).get(doc) || doc.get_array().get(array)) {
    return Malformed("data that is not a list");
  }
  for (auto element : array) {
    std::string_view text;
    if (element.get_string().get(text)) return Malformed("data that is not text");
    return std::string(text);
  }
  return Malformed("empty data");
}

}  // namespace switchyard
