#include "api/jsonrpc/rpc_merge.h"

#include <simdjson.h>

#include <charconv>
#include <cstring>
#include <iterator>
#include <memory>

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
  constexpr std::string_view kHead = R"({"jsonrpc":"2.0","id":1,"method":)";
  constexpr std::string_view kParams = R"(,"params":)";
  std::string out;
  out.reserve(kHead.size() + method.size() + kParams.size() + params_json.size() + 3);
  out += kHead;
  AppendJsonQuoted(out, method);
  out += kParams;
  out += params_json;
  out.push_back('}');
  return out;
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

namespace api_internal {

// Reads the members of an answer object into `answer`, whose text `object` iterates: views of
// the error, the context and each value. `id`, when given, gets the raw id. Says whether the
// object has a result; a result that is not a context list leaves is_list() false.
struct ListAnswerReader {
  static simdjson::error_code Read(od::object& object, ListAnswer* answer, bool* has_result,
                                   std::string_view* id) {
    *has_result = false;
    for (auto field : object) {
      std::string_view key;
      od::value value;
      if (auto e = field.unescaped_key().get(key)) return e;
      if (auto e = field.value().get(value)) return e;
      if (key == "error") {
        if (auto e = RawJsonView(value, &answer->error_)) return e;
        continue;
      }
      if (key == "id" && id != nullptr) {
        if (auto e = RawJsonView(value, id)) return e;
        continue;
      }
      if (key != "result") continue;
      *has_result = true;
      if (auto e = ReadResult(value, answer)) return e;
    }
    return simdjson::SUCCESS;
  }

  static ListAnswer WithText(std::shared_ptr<const char[]> text) {
    ListAnswer answer;
    answer.text_ = std::move(text);
    return answer;
  }

 private:
  static simdjson::error_code ReadResult(od::value& value, ListAnswer* answer) {
    od::json_type type;
    if (auto e = value.type().get(type)) return e;
    if (type != od::json_type::object) return simdjson::SUCCESS;  // not a list: skipped
    od::object result;
    if (auto e = value.get_object().get(result)) return e;
    bool has_value = false;
    for (auto member : result) {
      std::string_view name;
      od::value item;
      if (auto e = member.unescaped_key().get(name)) return e;
      if (auto e = member.value().get(item)) return e;
      if (name == "context") {
        if (auto e = RawJsonView(item, &answer->context_)) return e;
      } else if (name == "value") {
        if (auto e = item.type().get(type)) return e;
        if (type != od::json_type::array) continue;
        od::array array;
        if (auto e = item.get_array().get(array)) return e;
        for (auto element : array) {
          od::value account;
          std::string_view raw;
          if (auto e = element.get(account)) return e;
          if (auto e = RawJsonView(account, &raw)) return e;
          answer->values_.push_back(raw);
        }
        has_value = true;
      }
    }
    answer->is_list_ = has_value && !answer->context_.empty();
    return simdjson::SUCCESS;
  }
};

}  // namespace api_internal

namespace {

// A copy of `body` with simdjson's padding after it, to be shared by the answers that view it.
std::shared_ptr<const char[]> SharedPaddedCopy(std::string_view body) {
  std::shared_ptr<char[]> text =
      std::make_shared_for_overwrite<char[]>(body.size() + simdjson::SIMDJSON_PADDING);
  std::memcpy(text.get(), body.data(), body.size());
  std::memset(text.get() + body.size(), 0, simdjson::SIMDJSON_PADDING);
  return text;
}

}  // namespace

absl::StatusOr<ListAnswer> ListAnswer::Parse(std::string_view body) {
  using api_internal::ListAnswerReader;
  // (Bounded for the compiler's sake: the response-size limit is far below it.)
  if (body.size() > (size_t{1} << 40)) return Malformed("an answer larger than 1 TiB");
  ListAnswer answer = ListAnswerReader::WithText(SharedPaddedCopy(body));
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
  if (ListAnswerReader::Read(object, &answer, &has_result, nullptr)) {
    return Malformed("malformed JSON");
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
  out += R"({"jsonrpc":"2.0","id":)";
  char digits[24];
  out.append(digits, std::to_chars(digits, digits + sizeof digits, id).ptr);
  out += R"(,"method":)";
  AppendJsonQuoted(out, method);
  if (!params.empty()) {
    out += R"(,"params":)";
    out += params;
  }
  out.push_back('}');
}

}  // namespace

std::string UpstreamBatchBody(const std::vector<RpcCall>& calls, const std::vector<size_t>& indexes,
                              const std::vector<std::pair<std::string_view, std::string>>& extra) {
  size_t size = 2;
  for (size_t i : indexes) size += calls[i].method.size() + calls[i].params.size() + 48;
  for (const auto& [method, params] : extra) size += method.size() + params.size() + 48;
  std::string out;
  out.reserve(size);
  out.push_back('[');
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
  size_t size = 2;
  for (const auto& [method, params] : calls) size += method.size() + params.size() + 48;
  std::string out;
  out.reserve(size);
  out.push_back('[');
  for (size_t k = 0; k < calls.size(); ++k) {
    AppendBatchElement(out, k, calls[k].first, calls[k].second);
  }
  out.push_back(']');
  return out;
}

namespace {

// ParseUpstreamBatchAnswer, reading the element at position p of the array as a list when
// `lists[p]`. nullopt when an element's id is not its position, so that the guess may have
// been wrong: upstreams answer a batch in order, but need not.
absl::StatusOr<std::optional<std::vector<std::optional<UpstreamBatchElement>>>> ReadBatchInOrder(
    std::string_view body, size_t count, const std::vector<bool>& lists) {
  using api_internal::ListAnswerReader;
  if (body.size() > (size_t{1} << 40)) return Malformed("an answer larger than 1 TiB");
  // The text the list elements view; the others copy what they keep.
  std::shared_ptr<const char[]> text = SharedPaddedCopy(body);
  DocumentParser document_parser(body.size());
  od::parser& parser = document_parser.get();
  od::document doc;
  od::array array;
  if (parser.iterate(text.get(), body.size(), body.size() + simdjson::SIMDJSON_PADDING).get(doc) ||
      doc.get_array().get(array)) {
    return Malformed("something that is not a JSON-RPC batch answer");
  }
  std::vector<std::optional<UpstreamBatchElement>> answers(count);
  size_t position = 0;
  for (auto element : array) {
    od::value value;
    od::json_type type;
    if (element.get(value) || value.type().get(type)) return Malformed("malformed JSON");
    const bool as_list = position < lists.size() && lists[position];
    ++position;
    if (type != od::json_type::object) continue;
    od::object object;
    if (value.get_object().get(object)) return Malformed("malformed JSON");
    UpstreamBatchElement read;
    bool answered = false;
    if (as_list) {
      ListAnswer list = ListAnswerReader::WithText(text);
      std::string_view id;
      bool has_result = false;
      if (ListAnswerReader::Read(object, &list, &has_result, &id)) {
        return Malformed("malformed JSON");
      }
      answered = has_result != list.is_error();
      read.answer.id = id;
      read.answer.error = list.error();
      read.list.emplace(std::move(list));
    } else {
      if (ReadAnswer(object, &read.answer)) return Malformed("malformed JSON");
      answered = IsAnswer(read.answer);
    }
    uint64_t id = 0;
    const std::string& id_text = read.answer.id;
    if (!answered || id_text.empty() || id_text.front() < '0' || id_text.front() > '9' ||
        !absl::SimpleAtoi(id_text, &id) || id >= count || answers[id]) {
      continue;
    }
    if (id != position - 1 && !lists.empty()) return std::nullopt;
    answers[id] = std::move(read);
  }
  return answers;
}

}  // namespace

absl::StatusOr<std::vector<std::optional<UpstreamBatchElement>>> ParseUpstreamBatchAnswer(
    std::string_view body, size_t count, const std::vector<bool>& lists) {
  absl::StatusOr<std::optional<std::vector<std::optional<UpstreamBatchElement>>>> in_order =
      ReadBatchInOrder(body, count, lists);
  if (!in_order.ok()) return in_order.status();
  if (*in_order) return **std::move(in_order);
  // Out of order: each element as a plain answer, the list reads parsed again from it.
  absl::StatusOr<std::optional<std::vector<std::optional<UpstreamBatchElement>>>> plain =
      ReadBatchInOrder(body, count, {});
  if (!plain.ok()) return plain.status();
  std::vector<std::optional<UpstreamBatchElement>> answers = **std::move(plain);
  for (size_t k = 0; k < count && k < lists.size(); ++k) {
    if (!lists[k] || !answers[k]) continue;
    const UpstreamAnswer& answer = answers[k]->answer;
    absl::StatusOr<ListAnswer> list =
        ListAnswer::Parse(answer.is_error() ? UpstreamErrorResponse(answer.id, answer.error)
                                            : RpcResultResponse(answer.id, answer.result));
    if (list.ok()) {
      answers[k]->list.emplace(*std::move(list));
    } else {
      answers[k].reset();  // as an element missing from the answer
    }
  }
  return answers;
}

absl::StatusOr<std::vector<std::optional<UpstreamAnswer>>> ParseUpstreamBatchAnswer(
    std::string_view body, size_t count) {
  absl::StatusOr<std::optional<std::vector<std::optional<UpstreamBatchElement>>>> elements =
      ReadBatchInOrder(body, count, {});
  if (!elements.ok()) return elements.status();
  std::vector<std::optional<UpstreamAnswer>> answers(count);
  for (size_t k = 0; k < count; ++k) {
    if ((**elements)[k]) answers[k] = std::move((**elements)[k]->answer);
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
