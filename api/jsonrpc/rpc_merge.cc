#include "api/jsonrpc/rpc_merge.h"

#include <simdjson.h>

#include <cstring>
#include <iterator>

#include "absl/strings/numbers.h"
#include "api/jsonrpc/raw_json.h"
#include "api/jsonrpc/rpc_errors.h"
#include "api/jsonrpc/rpc_params.h"
#include "fmt/format.h"

namespace switchyard {
namespace {

namespace od = simdjson::ondemand;
using api_internal::DocumentParser;
using api_internal::RawJson;
using api_internal::RawJsonView;
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

// Reads the members of a JSON-RPC answer object into `answer` (raw JSON of id, result, error).
simdjson::error_code ReadAnswer(od::object& object, UpstreamAnswer* answer) {
  for (auto field : object) {
    std::string_view key;
    od::value value;
    if (auto e = field.unescaped_key().get(key)) return e;
    if (auto e = field.value().get(value)) return e;
    std::string* out = nullptr;
    if (key == "id") {
      out = &answer->id;
    } else if (key == "result") {
      out = &answer->result;
    } else if (key == "error") {
      out = &answer->error;
    } else {
      continue;
    }
    if (auto e = RawJson(value, out)) return e;
  }
  return simdjson::SUCCESS;
}

bool IsAnswer(const UpstreamAnswer& answer) {
  return answer.result.empty() != answer.error.empty();
}

}  // namespace

absl::StatusOr<UpstreamAnswer> ParseUpstreamAnswer(std::string_view body) {
  simdjson::padded_string padded(body);
  DocumentParser document_parser(body.size());
  od::parser& parser = document_parser.get();
  od::document doc;
  od::object object;
  if (parser.iterate(padded).get(doc) || doc.get_object().get(object)) {
    return Malformed("something that is not a JSON-RPC answer");
  }
  UpstreamAnswer answer;
  if (ReadAnswer(object, &answer)) return Malformed("malformed JSON");
  if (!IsAnswer(answer)) return Malformed("neither a result nor an error");
  return answer;
}

absl::StatusOr<std::string> AnswerFromUpstream(std::string_view body, const RpcCall& call,
                                               bool* is_error) {
  absl::StatusOr<UpstreamAnswer> answer = ParseUpstreamAnswer(body);
  if (!answer.ok()) return answer.status();
  if (is_error != nullptr) *is_error = answer->is_error();
  const std::string_view id = call.id_or_null();
  if (answer->id == id) return std::string(Trim(body));
  if (answer->is_error()) return UpstreamErrorResponse(id, answer->error);
  return RpcResultResponse(id, answer->result);
}

std::string UpstreamErrorResponse(std::string_view id_json, std::string_view error_json) {
  return fmt::format(R"({{"jsonrpc":"2.0","error":{},"id":{}}})", error_json, id_json);
}

std::string ForwardBody(const RpcCall& call) {
  if (!call.id || IsPlainId(*call.id)) return call.raw;
  std::string params = call.params.empty() ? "" : fmt::format(",\"params\":{}", call.params);
  return fmt::format(R"({{"jsonrpc":"2.0","id":0,"method":{}{}}})", JsonQuote(call.method), params);
}

void DropMinContextSlot(RpcCall& call) {
  std::string params = ParamsWithoutMinContextSlot(call.params);
  if (params == call.params) return;
  call.params = std::move(params);
  call.raw = call.id ? fmt::format(R"({{"jsonrpc":"2.0","id":{},"method":{},"params":{}}})",
                                   *call.id, JsonQuote(call.method), call.params)
                     : fmt::format(R"({{"jsonrpc":"2.0","method":{},"params":{}}})",
                                   JsonQuote(call.method), call.params);
}

bool ForwardsVerbatim(const RpcCall& call) { return call.id && IsPlainId(*call.id); }

std::string SubRequest(std::string_view method, std::string_view params_json) {
  return fmt::format(R"({{"jsonrpc":"2.0","id":1,"method":{},"params":{}}})", JsonQuote(method),
                     params_json);
}

std::string PartParams(const std::vector<std::string>& items, const std::vector<size_t>& indexes,
                       std::string_view params_after_list) {
  size_t size = 4 + params_after_list.size();
  for (size_t i : indexes) size += items[i].size() + 3;
  std::string out;
  out.reserve(size);
  out += "[[";
  for (size_t k = 0; k < indexes.size(); ++k) {
    if (k > 0) out.push_back(',');
    out.push_back('"');
    out += items[indexes[k]];
    out.push_back('"');
  }
  out.push_back(']');
  out += params_after_list;
  out.push_back(']');
  return out;
}

absl::StatusOr<ListAnswer> ListAnswer::Parse(std::string_view body) {
  // (Bounded for the compiler's sake: the response-size limit is far below it.)
  if (body.size() > (size_t{1} << 40)) return Malformed("an answer larger than 1 TiB");
  ListAnswer answer;
  answer.text_ = std::make_unique<char[]>(body.size() + simdjson::SIMDJSON_PADDING);
  std::memcpy(answer.text_.get(), body.data(), body.size());
  DocumentParser document_parser(body.size());
  od::parser& parser = document_parser.get();
  od::document doc;
  od::object object;
  if (parser.iterate(answer.text_.get(), body.size(), body.size() + simdjson::SIMDJSON_PADDING)
          .get(doc) ||
      doc.get_object().get(object)) {
    return Malformed("something that is not a JSON-RPC answer");
  }
  bool has_result = false;
  for (auto field : object) {
    std::string_view key;
    od::value value;
    if (field.unescaped_key().get(key) || field.value().get(value)) {
      return Malformed("malformed JSON");
    }
    if (key == "error") {
      if (RawJsonView(value, &answer.error_)) return Malformed("malformed JSON");
      continue;
    }
    if (key != "result") continue;
    has_result = true;
    od::json_type type;
    if (value.type().get(type)) return Malformed("malformed JSON");
    if (type != od::json_type::object) continue;  // not a list: skipped
    od::object result;
    if (value.get_object().get(result)) return Malformed("malformed JSON");
    bool has_value = false;
    for (auto member : result) {
      std::string_view name;
      od::value item;
      if (member.unescaped_key().get(name) || member.value().get(item)) {
        return Malformed("malformed JSON");
      }
      if (name == "context") {
        if (RawJsonView(item, &answer.context_)) return Malformed("malformed JSON");
      } else if (name == "value") {
        if (item.type().get(type)) return Malformed("malformed JSON");
        if (type != od::json_type::array) continue;
        od::array array;
        if (item.get_array().get(array)) return Malformed("malformed JSON");
        for (auto element : array) {
          od::value account;
          std::string_view raw;
          if (element.get(account) || RawJsonView(account, &raw)) {
            return Malformed("malformed JSON");
          }
          answer.values_.push_back(raw);
        }
        has_value = true;
      }
    }
    answer.is_list_ = has_value && !answer.context_.empty();
  }
  if (has_result == !answer.error_.empty()) return Malformed("neither a result nor an error");
  return answer;
}

std::string ContextListResponse(std::string_view id_json, std::string_view context,
                                const std::vector<std::string_view>& values) {
  constexpr std::string_view kHead = R"({"jsonrpc":"2.0","result":{"context":)";
  constexpr std::string_view kValue = R"(,"value":[)";
  constexpr std::string_view kTail = R"(]},"id":)";
  size_t size = kHead.size() + context.size() + kValue.size() + kTail.size() + id_json.size() + 1;
  for (std::string_view value : values) size += value.size() + 1;
  std::string out;
  out.reserve(size);
  out += kHead;
  out += context;
  out += kValue;
  for (size_t i = 0; i < values.size(); ++i) {
    if (i > 0) out.push_back(',');
    out += values[i];
  }
  out += kTail;
  out += id_json;
  out.push_back('}');
  return out;
}

namespace {

// Element `id` of an upstream batch body: `{"jsonrpc":"2.0","id":<id>,"method":…,"params":…}`,
// after a comma unless it is the first.
void AppendBatchElement(std::string& out, size_t id, std::string_view method,
                        std::string_view params) {
  if (id > 0) out.push_back(',');
  fmt::format_to(std::back_inserter(out), R"({{"jsonrpc":"2.0","id":{},"method":{})", id,
                 JsonQuote(method));
  if (!params.empty()) {
    out += R"(,"params":)";
    out += params;
  }
  out.push_back('}');
}

}  // namespace

std::string UpstreamBatchBody(const std::vector<RpcCall>& calls, const std::vector<size_t>& indexes,
                              const std::vector<std::pair<std::string_view, std::string>>& extra) {
  std::string out = "[";
  for (size_t k = 0; k < indexes.size(); ++k) {
    AppendBatchElement(out, k, calls[indexes[k]].method, calls[indexes[k]].params);
  }
  for (size_t j = 0; j < extra.size(); ++j) {
    AppendBatchElement(out, indexes.size() + j, extra[j].first, extra[j].second);
  }
  out.push_back(']');
  return out;
}

std::string UpstreamBatchBody(
    const std::vector<std::pair<std::string_view, std::string_view>>& calls) {
  std::string out = "[";
  size_t size = 2;
  for (const auto& [method, params] : calls) size += method.size() + params.size() + 48;
  out.reserve(size);
  for (size_t k = 0; k < calls.size(); ++k) {
    AppendBatchElement(out, k, calls[k].first, calls[k].second);
  }
  out.push_back(']');
  return out;
}

absl::StatusOr<std::vector<std::optional<UpstreamAnswer>>> ParseUpstreamBatchAnswer(
    std::string_view body, size_t count) {
  simdjson::padded_string padded(body);
  DocumentParser document_parser(body.size());
  od::parser& parser = document_parser.get();
  od::document doc;
  od::array array;
  if (parser.iterate(padded).get(doc) || doc.get_array().get(array)) {
    return Malformed("something that is not a JSON-RPC batch answer");
  }
  std::vector<std::optional<UpstreamAnswer>> answers(count);
  for (auto element : array) {
    od::value value;
    od::json_type type;
    if (element.get(value) || value.type().get(type)) return Malformed("malformed JSON");
    if (type != od::json_type::object) continue;
    od::object object;
    UpstreamAnswer answer;
    if (value.get_object().get(object) || ReadAnswer(object, &answer)) {
      return Malformed("malformed JSON");
    }
    uint64_t id = 0;
    if (!IsAnswer(answer) || answer.id.empty() || answer.id.front() < '0' ||
        answer.id.front() > '9' || !absl::SimpleAtoi(answer.id, &id) || id >= count ||
        answers[id]) {
      continue;
    }
    answers[id] = std::move(answer);
  }
  return answers;
}

absl::StatusOr<ContextList> ParseContextList(std::string_view result_json) {
  simdjson::padded_string padded(result_json);
  DocumentParser document_parser(result_json.size());
  od::parser& parser = document_parser.get();
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
