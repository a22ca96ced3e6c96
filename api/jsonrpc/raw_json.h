#pragma once

#include <simdjson.h>

#include <cstddef>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>

namespace switchyard::api_internal {

inline bool IsJsonSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

inline std::string_view TrimRight(std::string_view s) {
  while (!s.empty() && IsJsonSpace(s.back())) s.remove_suffix(1);
  return s;
}

inline std::string_view Trim(std::string_view s) {
  s = TrimRight(s);
  while (!s.empty() && IsJsonSpace(s.front())) s.remove_prefix(1);
  return s;
}

// The On-Demand parser of this thread, reused by every parse of the codec so that its buffers
// are allocated once per worker, not per request. One document at a time: a parse must be
// finished before the next one starts on the same thread (no parse inside another's loop).
inline simdjson::ondemand::parser& ThreadParser() {
  thread_local simdjson::ondemand::parser parser;
  return parser;
}

// The parser for a document of `bytes`: this thread's for the usual sizes, a parser of its
// own for a large one (an upstream answer can be tens of MiB), so that no worker keeps the
// buffers of its largest document ever seen.
class DocumentParser {
 public:
  static constexpr size_t kReuseLimit = 1 << 20;
  explicit DocumentParser(size_t bytes) {
    if (bytes > kReuseLimit) own_.emplace();
  }
  simdjson::ondemand::parser& get() { return own_ ? *own_ : ThreadParser(); }

 private:
  std::optional<simdjson::ondemand::parser> own_;
};

// `text` with simdjson's padding after it, for a parse on this thread: copied into this
// thread's buffer for the usual sizes (no allocation per parse), into a buffer of its own above
// DocumentParser::kReuseLimit, so that no thread keeps the largest text it ever saw. The view
// lasts until the next PaddedCopy on this thread: one parse at a time, as with ThreadParser.
class PaddedCopy {
 public:
  explicit PaddedCopy(std::string_view text) {
    if (text.size() > DocumentParser::kReuseLimit) {
      view_ = own_.emplace(text);
      return;
    }
    thread_local std::string buffer;
    const size_t padded = text.size() + simdjson::SIMDJSON_PADDING;
    if (buffer.size() < padded) buffer.resize(padded);
    if (!text.empty()) std::memcpy(buffer.data(), text.data(), text.size());
    view_ = simdjson::padded_string_view(buffer.data(), text.size(), buffer.size());
  }
  simdjson::padded_string_view view() const { return view_; }

 private:
  std::optional<simdjson::padded_string> own_;
  simdjson::padded_string_view view_;
};

// The raw JSON text of an On-Demand value (an object, an array or a scalar), as a view into
// the buffer being parsed; consumes the value.
template <typename V>
simdjson::error_code RawJsonView(V& value, std::string_view* out) {
  namespace od = simdjson::ondemand;
  od::json_type type;
  if (auto e = value.type().get(type)) return e;
  if (type == od::json_type::object) {
    od::object object;
    if (auto e = value.get_object().get(object)) return e;
    return object.raw_json().get(*out);
  }
  if (type == od::json_type::array) {
    od::array array;
    if (auto e = value.get_array().get(array)) return e;
    return array.raw_json().get(*out);
  }
  *out = TrimRight(value.raw_json_token());
  return simdjson::SUCCESS;
}

// Copies the raw JSON text of an On-Demand value into `out`, consuming the value.
template <typename V>
simdjson::error_code RawJson(V& value, std::string* out) {
  std::string_view raw;
  if (auto e = RawJsonView(value, &raw)) return e;
  out->assign(raw);
  return simdjson::SUCCESS;
}

}  // namespace switchyard::api_internal
