#include "api/jsonrpc/rpc_params.h"

#include <simdjson.h>

#include "api/jsonrpc/jsonrpc.h"
#include "api/jsonrpc/raw_json.h"
#include "api/jsonrpc/rpc_errors.h"
#include "fmt/format.h"

namespace switchyard {
namespace {

namespace od = simdjson::ondemand;
using api_internal::RawJson;
using api_internal::ThreadParser;

absl::Status InvalidParams(std::string_view why) {
  return MakeRpcStatus(RpcErrorKind::kInvalidParams, fmt::format("Invalid params: {}", why));
}

// Starts the one-pass reading of a params array (copied into `padded`) on this thread's parser.
absl::Status OpenParams(const api_internal::PaddedCopy& padded, od::document& doc,
                        od::array& array) {
  if (ThreadParser().iterate(padded.view()).get(doc) || doc.get_array().get(array)) {
    return InvalidParams("expected an array");
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<RpcParams> ParseRpcParams(std::string_view params_json) {
  RpcParams params;
  if (params_json.empty()) return params;
  simdjson::padded_string padded(params_json);
  od::parser& parser = ThreadParser();
  od::document doc;
  od::array array;
  if (parser.iterate(padded).get(doc) || doc.get_array().get(array)) {
    return InvalidParams("expected an array");
  }
  for (auto element : array) {
    od::value value;
    std::string raw;
    if (element.get(value) || RawJson(value, &raw)) return InvalidParams("malformed params");
    params.elements.push_back(std::move(raw));
  }
  return params;
}

absl::StatusOr<std::string> RpcParams::String(size_t i) const {
  if (i >= elements.size()) return InvalidParams(fmt::format("missing parameter {}", i));
  simdjson::padded_string padded(elements[i]);
  od::parser& parser = ThreadParser();
  od::document doc;
  std::string_view text;
  if (parser.iterate(padded).get(doc) || doc.get_string().get(text)) {
    return InvalidParams(fmt::format("parameter {} must be a string", i));
  }
  return std::string(text);
}

absl::StatusOr<std::string> FirstStringParam(std::string_view params_json) {
  if (params_json.empty()) return InvalidParams("missing parameter 0");
  const api_internal::PaddedCopy padded(params_json);
  od::document doc;
  od::array array;
  if (absl::Status opened = OpenParams(padded, doc, array); !opened.ok()) return opened;
  for (auto element : array) {
    od::value value;
    if (element.get(value)) return InvalidParams("malformed params");
    std::string_view text;
    if (value.get_string().get(text)) return InvalidParams("parameter 0 must be a string");
    return std::string(text);
  }
  return InvalidParams("missing parameter 0");
}

std::optional<std::string_view> FirstPlainStringParam(std::string_view params_json) {
  size_t i = 0;
  auto skip_space = [&] {
    while (i < params_json.size() && api_internal::IsJsonSpace(params_json[i])) ++i;
  };
  auto at = [&](char c) { return i < params_json.size() && params_json[i] == c; };
  skip_space();
  if (!at('[')) return std::nullopt;
  ++i;
  skip_space();
  if (!at('"')) return std::nullopt;
  const size_t start = ++i;
  // The string ends at the next quote unless an escape or a control character comes first;
  // the check has no early exit, so that the compiler vectorizes it.
  const size_t end = params_json.find('"', start);
  if (end == std::string_view::npos) return std::nullopt;
  unsigned char escaped = 0;
  for (size_t k = start; k < end; ++k) {
    const auto c = static_cast<unsigned char>(params_json[k]);
    escaped |= static_cast<unsigned char>((c == '\\') | (c < 0x20));
  }
  if (escaped != 0) return std::nullopt;
  i = end + 1;
  skip_space();
  if (!at(',') && !at(']')) return std::nullopt;
  return params_json.substr(start, end - start);
}

absl::StatusOr<std::vector<std::string>> RpcParams::StringList(size_t i, size_t max) const {
  if (i >= elements.size()) return InvalidParams(fmt::format("missing parameter {}", i));
  simdjson::padded_string padded(elements[i]);
  od::parser& parser = ThreadParser();
  od::document doc;
  od::array array;
  if (parser.iterate(padded).get(doc) || doc.get_array().get(array)) {
    return InvalidParams(fmt::format("parameter {} must be an array of strings", i));
  }
  std::vector<std::string> out;
  for (auto element : array) {
    std::string_view text;
    if (element.get_string().get(text)) {
      return InvalidParams(fmt::format("parameter {} must be an array of strings", i));
    }
    if (out.size() == max) {
      return InvalidParams(fmt::format("Too many inputs provided; max {}", max));
    }
    out.emplace_back(text);
  }
  return out;
}

absl::StatusOr<ListParams> ParseListParams(std::string_view params_json, size_t max) {
  if (params_json.empty()) return InvalidParams("missing parameter 0");
  const api_internal::PaddedCopy padded(params_json);
  od::document doc;
  od::array array;
  if (absl::Status opened = OpenParams(padded, doc, array); !opened.ok()) return opened;
  const auto not_a_list = [] { return InvalidParams("parameter 0 must be an array of strings"); };
  ListParams params;
  bool first = true;
  // Element 0's errors wait until the array is known to be well formed, as ParseRpcParams
  // reads it whole before StringList looks at element 0.
  absl::Status list_error;
  for (auto element : array) {
    od::value value;
    if (element.get(value)) return InvalidParams("malformed params");
    if (!first) {
      std::string_view raw;
      if (api_internal::RawJsonView(value, &raw)) return InvalidParams("malformed params");
      params.rest.push_back(',');
      params.rest += raw;
      continue;
    }
    first = false;
    od::json_type type;
    if (value.type().get(type)) return InvalidParams("malformed params");
    od::array list;
    if (type != od::json_type::array || value.get_array().get(list)) {
      list_error = not_a_list();
      continue;  // the iteration skips it
    }
    for (auto item : list) {
      od::value item_value;
      if (item.get(item_value) || item_value.type().get(type)) {
        return InvalidParams("malformed params");
      }
      std::string_view text;
      if (!list_error.ok()) continue;
      if (type != od::json_type::string || item_value.get_string().get(text)) {
        list_error = not_a_list();
        continue;
      }
      if (params.items.size() == max) {
        list_error = InvalidParams(fmt::format("Too many inputs provided; max {}", max));
        continue;
      }
      params.items.emplace_back(text);
    }
  }
  if (first) return InvalidParams("missing parameter 0");
  if (!list_error.ok()) return list_error;
  return params;
}

std::optional<std::string> RpcParams::ConfigString(size_t i, std::string_view key) const {
  if (i >= elements.size()) return std::nullopt;
  simdjson::padded_string padded(elements[i]);
  od::parser& parser = ThreadParser();
  od::document doc;
  od::object object;
  if (parser.iterate(padded).get(doc) || doc.get_object().get(object)) return std::nullopt;
  std::string_view text;
  if (object.find_field_unordered(key).get_string().get(text)) return std::nullopt;
  return std::string(text);
}

std::string JoinParams(const std::vector<std::string>& elements) { return JoinBatch(elements); }

std::string ParamsWithoutMinContextSlot(std::string_view params_json) {
  constexpr std::string_view kKey = "minContextSlot";
  if (params_json.find(kKey) == std::string_view::npos) return std::string(params_json);
  absl::StatusOr<RpcParams> params = ParseRpcParams(params_json);
  if (!params.ok()) return std::string(params_json);
  bool changed = false;
  for (std::string& element : params->elements) {
    if (element.empty() || element.front() != '{' || element.find(kKey) == std::string::npos) {
      continue;
    }
    simdjson::padded_string padded(element);
    od::parser& parser = ThreadParser();
    od::document doc;
    od::object object;
    if (parser.iterate(padded).get(doc) || doc.get_object().get(object)) continue;
    std::string rebuilt = "{";
    bool dropped = false;
    bool ok = true;
    for (auto field : object) {
      std::string_view key;
      od::value value;
      std::string raw;
      if (field.unescaped_key().get(key) || field.value().get(value) || RawJson(value, &raw)) {
        ok = false;
        break;
      }
      if (key == kKey) {
        dropped = true;
        continue;
      }
      if (rebuilt.size() > 1) rebuilt.push_back(',');
      rebuilt += JsonQuote(key);
      rebuilt.push_back(':');
      rebuilt += raw;
    }
    if (!ok || !dropped) continue;
    rebuilt.push_back('}');
    element = std::move(rebuilt);
    changed = true;
  }
  return changed ? JoinParams(params->elements) : std::string(params_json);
}

}  // namespace switchyard
