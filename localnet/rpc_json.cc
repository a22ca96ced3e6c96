#include "localnet/rpc_json.h"

#include <cstring>
#include <iterator>

#include "fmt/format.h"
#include "localnet/json_writer.h"
#include "localnet/wire.h"
#include "solana/base64.h"

namespace switchyard::localnet {

simdjson::dom::parser& ThreadParser() {
  thread_local simdjson::dom::parser parser;
  return parser;
}

simdjson::error_code ParsePadded(std::string_view text, simdjson::dom::element* doc) {
  thread_local std::string buffer;
  if (buffer.size() < text.size() + simdjson::SIMDJSON_PADDING) {
    buffer.resize(text.size() + simdjson::SIMDJSON_PADDING);
  }
  std::memcpy(buffer.data(), text.data(), text.size());
  return ThreadParser().parse(buffer.data(), text.size(), false).get(*doc);
}

simdjson::dom::array EmptyArray() {
  thread_local simdjson::dom::parser parser;
  thread_local simdjson::dom::array empty = [] {
    simdjson::dom::array a;
    static const simdjson::padded_string kEmpty(std::string_view("[]"));
    if (parser.parse(kEmpty).get_array().get(a) != simdjson::SUCCESS) return a;
    return a;
  }();
  return empty;
}

void AppendErrorResponse(std::string* out, std::string_view id, int code, std::string_view message,
                         std::string_view data) {
  fmt::format_to(std::back_inserter(*out),
                 "{{\"jsonrpc\":\"2.0\",\"error\":{{\"code\":{},\"message\":", code);
  AppendJsonString(out, message);
  if (!data.empty()) {
    out->append(",\"data\":");
    out->append(data);
  }
  out->append("},\"id\":");
  out->append(id);
  out->push_back('}');
}

ConfigView::ConfigView(simdjson::dom::array params, size_t index) {
  simdjson::dom::element element;
  if (params.at(index).get(element) != simdjson::SUCCESS) return;
  present_ = element.get_object().get(object_) == simdjson::SUCCESS;
}

std::optional<simdjson::dom::element> ConfigView::Get(std::string_view key) const {
  if (!present_) return std::nullopt;
  simdjson::dom::element element;
  if (object_.at_key(key).get(element) != simdjson::SUCCESS) return std::nullopt;
  if (element.is_null()) return std::nullopt;
  return element;
}

std::optional<std::string_view> ConfigView::String(std::string_view key) const {
  auto element = Get(key);
  if (!element.has_value()) return std::nullopt;
  return StringOf(*element);
}

std::optional<uint64_t> ConfigView::U64(std::string_view key) const {
  auto element = Get(key);
  if (!element.has_value()) return std::nullopt;
  uint64_t value = 0;
  if (element->get_uint64().get(value) != simdjson::SUCCESS) return std::nullopt;
  return value;
}

std::optional<bool> ConfigView::Bool(std::string_view key) const {
  auto element = Get(key);
  if (!element.has_value()) return std::nullopt;
  bool value = false;
  if (element->get_bool().get(value) != simdjson::SUCCESS) return std::nullopt;
  return value;
}

std::optional<simdjson::dom::element> ParamAt(simdjson::dom::array params, size_t index) {
  simdjson::dom::element element;
  if (params.at(index).get(element) != simdjson::SUCCESS) return std::nullopt;
  return element;
}

std::optional<std::string_view> StringOf(simdjson::dom::element element) {
  std::string_view text;
  if (element.get_string().get(text) != simdjson::SUCCESS) return std::nullopt;
  return text;
}

std::optional<Pubkey> PubkeyParam(simdjson::dom::array params, size_t index) {
  auto element = ParamAt(params, index);
  if (!element.has_value()) return std::nullopt;
  auto text = StringOf(*element);
  if (!text.has_value()) return std::nullopt;
  auto key = Pubkey::FromBase58(*text);
  if (!key.ok()) return std::nullopt;
  return *key;
}

using simdjson::dom::array;
using simdjson::dom::element;

// Reads "encoding" and "dataSlice" of an account config.
absl::StatusOr<AccountConfig> ReadAccountConfig(const ConfigView& config) {
  AccountConfig out;
  if (auto enc = config.String("encoding")) {
    auto parsed = ParseDataEncoding(*enc);
    if (!parsed.ok()) return parsed.status();
    out.encoding = *parsed;
  }
  if (auto slice = config.Get("dataSlice")) {
    uint64_t offset = 0;
    uint64_t length = 0;
    if ((*slice)["offset"].get_uint64().get(offset) != simdjson::SUCCESS ||
        (*slice)["length"].get_uint64().get(length) != simdjson::SUCCESS) {
      return absl::InvalidArgumentError("Invalid params: invalid dataSlice");
    }
    out.slice = DataSlice{offset, length};
  }
  return out;
}

// Applies getProgramAccounts filters: {"dataSize":N} and {"memcmp":{offset, bytes, encoding}}.
bool ProgramFilter::Matches(const Account& account) const {
  if (data_size.has_value() && account.data.size() != *data_size) return false;
  for (const auto& [offset, bytes] : memcmp) {
    if (offset > account.data.size() || account.data.size() - offset < bytes.size()) {
      return false;
    }
    if (account.data.compare(offset, bytes.size(), bytes) != 0) return false;
  }
  return true;
}

absl::StatusOr<ProgramFilter> ReadFilters(const ConfigView& config) {
  ProgramFilter filter;
  auto filters = config.Get("filters");
  if (!filters.has_value()) return filter;
  array list;
  if (filters->get_array().get(list) != simdjson::SUCCESS) {
    return absl::InvalidArgumentError("Invalid params: filters must be an array");
  }
  if (list.size() > 4) return absl::InvalidArgumentError("Too many filters provided; max 4");
  for (element f : list) {
    uint64_t size = 0;
    element memcmp;
    if (f["dataSize"].get_uint64().get(size) == simdjson::SUCCESS) {
      filter.data_size = size;
    } else if (f["memcmp"].get(memcmp) == simdjson::SUCCESS) {
      uint64_t offset = 0;
      std::string_view bytes;
      if (memcmp["offset"].get_uint64().get(offset) != simdjson::SUCCESS ||
          memcmp["bytes"].get_string().get(bytes) != simdjson::SUCCESS) {
        return absl::InvalidArgumentError("Invalid params: invalid memcmp filter");
      }
      std::string_view encoding = "base58";
      if (memcmp["encoding"].get_string().get(encoding) != simdjson::SUCCESS) {
        encoding = "base58";
      }
      std::string raw;
      if (encoding == "base64") {
        auto decoded = Base64Decode(bytes);
        if (!decoded.ok())
          return absl::InvalidArgumentError("Invalid params: invalid memcmp bytes");
        raw = *std::move(decoded);
      } else if (encoding == "base58") {
        if (bytes.size() > 175) {
          return absl::InvalidArgumentError("Invalid params: memcmp bytes too long");
        }
        auto decoded = Base58DecodeAny(bytes);
        if (!decoded.ok())
          return absl::InvalidArgumentError("Invalid params: invalid memcmp bytes");
        raw = *std::move(decoded);
      } else {
        return absl::InvalidArgumentError(
            fmt::format("Invalid params: unsupported memcmp encoding: {}", encoding));
      }
      filter.memcmp.emplace_back(offset, std::move(raw));
    } else {
      return absl::InvalidArgumentError("Invalid params: unsupported filter");
    }
  }
  return filter;
}

}  // namespace switchyard::localnet
