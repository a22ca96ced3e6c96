#include "api/jsonrpc/jsonrpc.h"

#include <simdjson.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <cstdint>
#include <system_error>

#include "api/jsonrpc/raw_json.h"
#include "fmt/format.h"

namespace switchyard {
namespace {

namespace od = simdjson::ondemand;
using api_internal::ThreadParser;
using api_internal::TrimRight;

std::string_view TokenOf(od::value& value) { return value.raw_json_token(); }
std::string_view TokenOf(od::document& doc) {
  std::string_view token;
  if (doc.raw_json_token().get(token)) return {};
  return token;
}

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

// JSON number grammar (RFC 8259 §6), which simdjson's getters check only up to 64-bit range.
bool IsJsonNumber(std::string_view s) {
  size_t i = 0;
  if (i < s.size() && s[i] == '-') ++i;
  if (i >= s.size()) return false;
  if (s[i] == '0') {
    ++i;
  } else if (IsDigit(s[i])) {
    while (i < s.size() && IsDigit(s[i])) ++i;
  } else {
    return false;
  }
  if (i < s.size() && s[i] == '.') {
    ++i;
    if (i >= s.size() || !IsDigit(s[i])) return false;
    while (i < s.size() && IsDigit(s[i])) ++i;
  }
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    ++i;
    if (i < s.size() && (s[i] == '+' || s[i] == '-')) ++i;
    if (i >= s.size() || !IsDigit(s[i])) return false;
    while (i < s.size() && IsDigit(s[i])) ++i;
  }
  return i == s.size();
}

// Walks a value completely, so that every byte of it is checked against the JSON grammar
// (On-Demand only checks what is read).
template <typename V>
bool Validate(V& value, size_t depth, size_t max_depth) {
  if (depth > max_depth) return false;
  od::json_type type;
  if (value.type().get(type) != simdjson::SUCCESS) return false;
  switch (type) {
    case od::json_type::object: {
      od::object object;
      if (value.get_object().get(object) != simdjson::SUCCESS) return false;
      for (auto field : object) {
        std::string_view key;
        if (field.unescaped_key().get(key) != simdjson::SUCCESS) return false;
        od::value child;
        if (field.value().get(child) != simdjson::SUCCESS) return false;
        if (!Validate(child, depth + 1, max_depth)) return false;
      }
      return true;
    }
    case od::json_type::array: {
      od::array array;
      if (value.get_array().get(array) != simdjson::SUCCESS) return false;
      for (auto element : array) {
        od::value child;
        if (element.get(child) != simdjson::SUCCESS) return false;
        if (!Validate(child, depth + 1, max_depth)) return false;
      }
      return true;
    }
    case od::json_type::number: {
      return IsJsonNumber(TrimRight(TokenOf(value)));
    }
    case od::json_type::string: {
      std::string_view text;
      return value.get_string().get(text) == simdjson::SUCCESS;
    }
    case od::json_type::boolean: {
      bool b;
      return value.get_bool().get(b) == simdjson::SUCCESS;
    }
    case od::json_type::null: {
      bool is_null = false;
      return value.is_null().get(is_null) == simdjson::SUCCESS && is_null;
    }
  }
  return false;
}

absl::Status InvalidRequest(std::string_view why) {
  return MakeRpcStatus(RpcErrorKind::kInvalidRequest, fmt::format("Invalid request: {}", why));
}

absl::Status ParseError(std::string_view why) {
  return MakeRpcStatus(RpcErrorKind::kParseError, fmt::format("Parse error: {}", why));
}

// The text of a value that `walk` reads completely: from its first byte to the token after it,
// where the walk leaves the iterator. False when the walk fails.
template <typename Walk>
bool WalkRaw(od::value& value, std::string_view* raw, Walk walk) {
  const char* start = value.raw_json_token().data();
  if (!walk()) return false;
  const char* end = nullptr;
  if (value.current_location().get(end) != simdjson::SUCCESS || end < start) return false;
  *raw = TrimRight(std::string_view(start, static_cast<size_t>(end - start)));
  return true;
}

// minContextSlot as simdjson's get_uint64 reads it from a number token the grammar check
// accepted: digits only, within 64 bits.
std::optional<uint64_t> SlotOfToken(std::string_view token) {
  uint64_t slot = 0;
  const auto [end, ec] = std::from_chars(token.data(), token.data() + token.size(), slot);
  if (ec != std::errc() || end != token.data() + token.size()) return std::nullopt;
  return slot;
}

// Validates one object of params (the params object itself, or an element of the params
// array) completely, as Validate does, and reads its first minContextSlot field (the key as
// written, unescaped keys not matched) into `slot` when that is an unsigned 64-bit number.
bool ValidateConfig(od::object& object, size_t depth, size_t max_depth,
                    std::optional<uint64_t>& slot) {
  bool seen = false;
  for (auto result : object) {
    od::field field;
    if (std::move(result).get(field)) return false;
    // The raw key is read before the unescaped one, which consumes it.
    const bool named = !seen && field.key().unsafe_is_equal("minContextSlot");
    std::string_view key;
    if (field.unescaped_key().get(key)) return false;
    od::value& child = field.value();
    od::json_type type;
    if (named && child.type().get(type)) return false;
    // A number's token, taken before the walk (which reads nothing more of it).
    const std::string_view token =
        named && type == od::json_type::number ? TrimRight(TokenOf(child)) : std::string_view();
    if (!Validate(child, depth + 1, max_depth)) return false;
    if (named) {
      seen = true;
      if (!token.empty()) slot = SlotOfToken(token);
    }
  }
  return true;
}

// Validates params (an object or an array) completely, as Validate does, and reads
// minContextSlot from its config objects: the params object's own field, or the first element
// object of the params array whose field is an unsigned 64-bit number.
bool ValidateParams(od::value& value, od::json_type type, size_t depth, size_t max_depth,
                    std::optional<uint64_t>& min_context_slot) {
  if (depth > max_depth) return false;
  if (type == od::json_type::object) {
    od::object object;
    return value.get_object().get(object) == simdjson::SUCCESS &&
           ValidateConfig(object, depth, max_depth, min_context_slot);
  }
  od::array array;
  if (value.get_array().get(array) != simdjson::SUCCESS) return false;
  for (auto element : array) {
    od::value child;
    od::json_type child_type;
    if (element.get(child) || child.type().get(child_type)) return false;
    if (child_type != od::json_type::object || min_context_slot) {
      if (!Validate(child, depth + 1, max_depth)) return false;
      continue;
    }
    od::object object;
    if (depth + 1 > max_depth || child.get_object().get(object) ||
        !ValidateConfig(object, depth + 1, max_depth, min_context_slot)) {
      return false;
    }
  }
  return true;
}

// The fields of one request object at `depth`, each value checked against the JSON grammar
// as it is read. False when the object is not valid JSON; otherwise `call` has the id, method
// and params found, and `call.error` says what makes it an invalid request, if anything.
bool ReadRequest(od::object& object, size_t depth, size_t max_depth, RpcCall& call) {
  bool has_jsonrpc = false, has_method = false;
  std::string problem;
  for (auto field : object) {
    std::string_view key;
    od::value child;
    if (field.unescaped_key().get(key) || field.value().get(child)) return false;
    od::json_type type;
    if (child.type().get(type)) return false;
    std::string_view raw;
    std::string_view text;  // a string's value, unescaped
    if (type == od::json_type::string) {
      raw = TrimRight(child.raw_json_token());
      if (child.get_string().get(text)) return false;
    } else if (type != od::json_type::object && type != od::json_type::array) {
      raw = TrimRight(child.raw_json_token());  // a scalar is one token
      if (!Validate(child, depth + 1, max_depth)) return false;
    } else if (key == "params") {
      // The params' minContextSlot is read in the same walk; a later params field (a
      // duplicate key, whose value is the one kept) reads its own.
      std::optional<uint64_t> slot;
      if (!WalkRaw(child, &raw,
                   [&] { return ValidateParams(child, type, depth + 1, max_depth, slot); })) {
        return false;
      }
      call.min_context_slot = slot;
    } else if (!WalkRaw(child, &raw, [&] { return Validate(child, depth + 1, max_depth); })) {
      return false;
    }
    if (key == "jsonrpc") {
      if (type != od::json_type::string || text != "2.0") {
        problem = "jsonrpc must be \"2.0\"";
      } else {
        has_jsonrpc = true;
      }
    } else if (key == "id") {
      call.id.emplace(raw);
    } else if (key == "method") {
      if (type != od::json_type::string) {
        problem = "method must be a string";
      } else {
        has_method = true;
        call.method.assign(text);
      }
    } else if (key == "params") {
      if (type != od::json_type::array && type != od::json_type::object) {
        problem = "params must be an array or an object";
      } else {
        call.params.assign(raw);
      }
    }
  }
  if (problem.empty() && !has_jsonrpc) problem = "missing jsonrpc";
  if (problem.empty() && !has_method) problem = "missing method";
  if (!problem.empty()) {
    call.error = InvalidRequest(problem);
    call.min_context_slot.reset();
  }
  return true;
}

// A body that is one request object, in one pass: every value is checked against the JSON
// grammar while the fields are read. Invalid JSON anywhere is a parse error even when a field
// before it was already found wrong.
//
// ParseSingle and ParseBatch are flattened: everything they call is inlined into them, so that
// the On-Demand iterators' state stays in registers across the walk instead of going through
// memory at each call. Measured in bench/ANALYSIS.md ("The parser flattened"): about a quarter
// of the time of BM_ParseGetAccountInfo, for about 100 KiB more code.
[[gnu::flatten]] absl::StatusOr<RpcBody> ParseSingle(std::string_view body,
                                                     simdjson::padded_string_view padded,
                                                     const RpcCodecOptions& options) {
  od::document doc;
  od::object object;
  if (ThreadParser().iterate(padded).get(doc) || doc.get_object().get(object)) {
    return ParseError("invalid JSON");
  }
  if (options.max_depth < 1) return ParseError("invalid JSON");
  // The call is read where it is kept.
  RpcBody result;
  result.calls.reserve(1);
  RpcCall& call = result.calls.emplace_back();
  if (!ReadRequest(object, 0, options.max_depth, call)) return ParseError("invalid JSON");
  const char* trailing = nullptr;
  if (doc.current_location().get(trailing) != simdjson::OUT_OF_BOUNDS) {
    return ParseError("invalid JSON");
  }
  call.raw.assign(TrimRight(body.substr(body.find('{'))));
  return result;
}

// A batch, in one pass over the array: each element is checked against the JSON grammar and,
// when it is an object, read as a request at the same time. Invalid JSON anywhere is a parse
// error, whatever the elements before it were; then an empty batch or one over the limit is an
// invalid request.
[[gnu::flatten]] absl::StatusOr<RpcBody> ParseBatch(simdjson::padded_string_view padded,
                                                    const RpcCodecOptions& options) {
  od::document doc;
  od::array array;
  if (ThreadParser().iterate(padded).get(doc) || doc.get_array().get(array)) {
    return ParseError("invalid JSON");
  }
  RpcBody result;
  result.batch = true;
  // Room for the usual batch up front: growing one call at a time would move every call read
  // so far at each doubling.
  constexpr size_t kUsualBatch = 16;
  result.calls.reserve(std::min(options.max_batch_size, kUsualBatch));
  RpcCall past_limit;  // an element past the limit is still checked, in here, but not kept
  size_t count = 0;
  for (auto element : array) {
    od::value value;
    od::json_type type;
    if (element.get(value) || value.type().get(type) || options.max_depth < 1) {
      return ParseError("invalid JSON");
    }
    // Each call is read where it is kept.
    const bool kept = ++count <= options.max_batch_size;
    RpcCall& call = kept ? result.calls.emplace_back() : (past_limit = RpcCall());
    std::string_view text;
    const bool read = WalkRaw(value, &text, [&] {
      if (type != od::json_type::object) {
        call.error = InvalidRequest("not an object");
        return Validate(value, 1, options.max_depth);
      }
      od::object object;
      return value.get_object().get(object) == simdjson::SUCCESS &&
             ReadRequest(object, 1, options.max_depth, call);
    });
    if (!read) return ParseError("invalid JSON");
    if (kept) call.raw.assign(text);
  }
  const char* trailing = nullptr;
  if (doc.current_location().get(trailing) != simdjson::OUT_OF_BOUNDS) {
    return ParseError("invalid JSON");
  }
  if (count == 0) return InvalidRequest("empty batch");
  if (count > options.max_batch_size) {
    return InvalidRequest(
        fmt::format("batch of {} requests exceeds the limit of {}", count, options.max_batch_size));
  }
  return result;
}

}  // namespace

absl::StatusOr<RpcBody> ParseRpcBody(std::string_view body, const RpcCodecOptions& options,
                                     size_t capacity) {
  std::optional<api_internal::PaddedCopy> copy;
  simdjson::padded_string_view padded;
  if (capacity >= body.size() + simdjson::SIMDJSON_PADDING) {
    padded = simdjson::padded_string_view(body, capacity);
  } else {
    padded = copy.emplace(body).view();
  }
  const std::string_view start = api_internal::Trim(body);
  if (!start.empty() && start.front() == '{') return ParseSingle(body, padded, options);
  if (!start.empty() && start.front() == '[') return ParseBatch(padded, options);

  // Neither an object nor an array: a parse error, or a scalar that is valid JSON.
  od::document doc;
  if (auto e = ThreadParser().iterate(padded).get(doc)) {
    return ParseError(simdjson::error_message(e));
  }
  od::json_type root_type;
  if (auto e = doc.type().get(root_type)) return ParseError(simdjson::error_message(e));
  if (root_type == od::json_type::object || root_type == od::json_type::array ||
      !Validate(doc, 0, options.max_depth)) {
    return ParseError("invalid JSON");
  }
  // A scalar: valid only when it is the whole body.
  std::string_view whole = TrimRight(body);
  while (!whole.empty() && (whole.front() == ' ' || whole.front() == '\t' ||
                            whole.front() == '\n' || whole.front() == '\r')) {
    whole.remove_prefix(1);
  }
  if (TrimRight(TokenOf(doc)).size() != whole.size()) return ParseError("invalid JSON");
  return InvalidRequest("not an object or an array");
}

namespace {

// The length of the well-formed UTF-8 sequence at the start of `text` (RFC 3629: no overlong
// forms, no surrogates, nothing above U+10FFFF), or 0 when it is not one.
size_t Utf8SequenceLength(std::string_view text) {
  const auto byte = [&](size_t i) { return static_cast<unsigned char>(text[i]); };
  const unsigned char lead = byte(0);
  if (lead < 0x80) return 1;
  size_t length = 0;
  unsigned char low = 0x80;  // the range of the second byte
  unsigned char high = 0xBF;
  if (lead >= 0xC2 && lead <= 0xDF) {
    length = 2;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3;
    if (lead == 0xE0) low = 0xA0;   // overlong
    if (lead == 0xED) high = 0x9F;  // surrogates
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    length = 4;
    if (lead == 0xF0) low = 0x90;   // overlong
    if (lead == 0xF4) high = 0x8F;  // above U+10FFFF
  } else {
    return 0;
  }
  if (text.size() < length || byte(1) < low || byte(1) > high) return 0;
  for (size_t i = 2; i < length; ++i) {
    if (byte(i) < 0x80 || byte(i) > 0xBF) return 0;
  }
  return length;
}

}  // namespace

namespace {

// Whether any byte of `text` is escaped or checked by JsonQuote: a quote, a backslash, a
// control character or a byte of a multi-byte sequence. One table load per byte.
constexpr std::array<uint8_t, 256> kQuotedBytes = [] {
  std::array<uint8_t, 256> table{};
  for (size_t c = 0; c < 256; ++c) table[c] = c < 0x20 || c >= 0x80 || c == '"' || c == '\\';
  return table;
}();

bool NeedsQuoting(std::string_view text) {
  uint8_t special = 0;
  for (const char c : text) special |= kQuotedBytes[static_cast<unsigned char>(c)];
  return special != 0;
}

}  // namespace

void AppendJsonQuoted(std::string& out, std::string_view text) {
  if (NeedsQuoting(text)) {
    out += JsonQuote(text);
    return;
  }
  out.push_back('"');
  out += text;
  out.push_back('"');
}

std::string JsonQuote(std::string_view text) {
  std::string out;
  out.reserve(text.size() + 2);
  out.push_back('"');
  if (!NeedsQuoting(text)) {
    out += text;
    out.push_back('"');
    return out;
  }
  size_t i = 0;
  while (i < text.size()) {
    const char c = text[i];
    if (static_cast<unsigned char>(c) >= 0x80) {
      // Text from outside (a header, a URL) may be any bytes: each byte that does not start a
      // well-formed sequence becomes U+FFFD, so the answer stays valid JSON.
      const size_t length = Utf8SequenceLength(text.substr(i));
      if (length == 0) {
        out += "\\ufffd";
        ++i;
      } else {
        out.append(text.substr(i, length));
        i += length;
      }
      continue;
    }
    ++i;
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          out += fmt::format("\\u{:04x}", static_cast<unsigned char>(c));
        } else {
          out.push_back(c);
        }
    }
  }
  out.push_back('"');
  return out;
}

std::string RpcResultResponse(std::string_view id_json, std::string_view result_json) {
  // Every answer passes here: one sized allocation, no format string to interpret.
  constexpr std::string_view kHead = R"({"jsonrpc":"2.0","result":)";
  constexpr std::string_view kId = R"(,"id":)";
  std::string out;
  out.reserve(kHead.size() + result_json.size() + kId.size() + id_json.size() + 1);
  out += kHead;
  out += result_json;
  out += kId;
  out += id_json;
  out += '}';
  return out;
}

std::string RpcErrorResponse(std::string_view id_json, const RpcError& error) {
  std::string data;
  if (error.data_json) data = fmt::format(",\"data\":{}", *error.data_json);
  return fmt::format(R"({{"jsonrpc":"2.0","error":{{"code":{},"message":{}{}}},"id":{}}})",
                     error.code, JsonQuote(error.message), data, id_json);
}

std::string RpcErrorResponse(std::string_view id_json, const absl::Status& status) {
  return RpcErrorResponse(id_json, RpcErrorFromStatus(status));
}

std::string JoinBatch(const std::vector<std::string>& answers) {
  std::string out = "[";
  for (size_t i = 0; i < answers.size(); ++i) {
    if (i > 0) out.push_back(',');
    out += answers[i];
  }
  out.push_back(']');
  return out;
}

}  // namespace switchyard
