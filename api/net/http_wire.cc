#include "api/net/internal/http_wire.h"

#include <algorithm>
#include <boost/beast/http/status.hpp>
#include <charconv>
#include <cstdint>

#include "absl/strings/ascii.h"

namespace switchyard {

using http_wire::EqualsIgnoringCase;

std::optional<std::string_view> HttpRequest::Header(std::string_view name) const {
  for (const auto& [key, value] : headers) {
    if (EqualsIgnoringCase(key, name)) {
      return std::string_view(value);
    }
  }
  return std::nullopt;
}

namespace http_wire {
namespace {

// Every head is written into one buffer that this size usually holds, so it grows once.
constexpr size_t kHeadReserve = 256;

void AppendNumber(uint64_t value, std::string& head) {
  char digits[20];
  const auto end = std::to_chars(digits, digits + sizeof digits, value).ptr;
  head.append(digits, end);
}

void WriteStatusLine(unsigned status, unsigned version, std::string& head) {
  head.clear();
  head.reserve(kHeadReserve);
  head += version == 10 ? "HTTP/1.0 " : "HTTP/1.1 ";
  AppendNumber(status, head);
  head += ' ';
  const beast::string_view reason = http::obsolete_reason(static_cast<http::status>(status));
  head.append(reason.data(), reason.size());
  head += "\r\n";
}

void WriteConnectionAndEnd(unsigned version, bool keep_alive, std::string& head) {
  if (version == 10 && keep_alive) head += "Connection: keep-alive\r\n";
  if (version != 10 && !keep_alive) head += "Connection: close\r\n";
  head += "\r\n";
}

}  // namespace

bool ListsToken(std::string_view value, std::string_view token) {
  while (!value.empty()) {
    const size_t comma = value.find(',');
    std::string_view item = value.substr(0, comma);
    while (!item.empty() && absl::ascii_isspace(static_cast<unsigned char>(item.front()))) {
      item.remove_prefix(1);
    }
    while (!item.empty() && absl::ascii_isspace(static_cast<unsigned char>(item.back()))) {
      item.remove_suffix(1);
    }
    if (EqualsIgnoringCase(item, token)) return true;
    if (comma == std::string_view::npos) break;
    value.remove_prefix(comma + 1);
  }
  return false;
}

bool IsWebSocketUpgrade(const HttpRequest& request, unsigned version) {
  if (version < 11 || request.method != "GET") return false;
  const std::optional<std::string_view> connection = request.Header("Connection");
  const std::optional<std::string_view> upgrade = request.Header("Upgrade");
  return connection && upgrade && ListsToken(*connection, "upgrade") &&
         ListsToken(*upgrade, "websocket");
}

void WriteHead(const HttpResponse& answer, unsigned version, bool keep_alive,
               const CorsPolicy& cors, std::optional<std::string_view> origin, bool vary,
               std::string& head) {
  WriteStatusLine(answer.status, version, head);
  head += "Content-Type: ";
  head += answer.content_type;
  head += "\r\n";
  if (answer.gzip) head += "Content-Encoding: gzip\r\n";
  if (vary) head += "Vary: Accept-Encoding\r\n";
  for (const auto& [name, value] : answer.headers) {
    head += name;
    head += ": ";
    head += value;
    head += "\r\n";
  }
  cors.AppendAnswerHeaders(origin, &head);
  if (!IsBodiless(answer.status)) {
    head += "Content-Length: ";
    AppendNumber(answer.body.size(), head);
    head += "\r\n";
  }
  WriteConnectionAndEnd(version, keep_alive, head);
}

void WritePreflightHead(std::string_view cors_lines, unsigned version, bool keep_alive,
                        std::string& head) {
  WriteStatusLine(204, version, head);
  head += cors_lines;
  WriteConnectionAndEnd(version, keep_alive, head);
}

}  // namespace http_wire
}  // namespace switchyard
