#include "api/net/cors.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "fmt/format.h"

namespace switchyard {
namespace {

bool EqualsIgnoringCase(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return absl::ascii_tolower(static_cast<unsigned char>(x)) ==
                  absl::ascii_tolower(static_cast<unsigned char>(y));
         });
}

std::string_view Trimmed(std::string_view text) {
  while (!text.empty() && absl::ascii_isspace(static_cast<unsigned char>(text.front()))) {
    text.remove_prefix(1);
  }
  while (!text.empty() && absl::ascii_isspace(static_cast<unsigned char>(text.back()))) {
    text.remove_suffix(1);
  }
  return text;
}

std::string Joined(const std::vector<std::string>& items) {
  std::string out;
  for (const std::string& item : items) {
    if (!out.empty()) out += ", ";
    out += item;
  }
  return out;
}

}  // namespace

CorsPolicy::CorsPolicy(CorsOptions options, Counter* preflights, Counter* refused)
    : options_(std::move(options)),
      any_origin_(std::ranges::find(options_.allowed_origins, "*") !=
                  options_.allowed_origins.end()),
      methods_line_("Access-Control-Allow-Methods: POST, GET, OPTIONS\r\n"),
      headers_list_(Joined(options_.allowed_headers)),
      preflights_(preflights),
      refused_(refused) {
  if (any_origin_) common_lines_ += "Access-Control-Allow-Origin: *\r\n";
  if (!options_.exposed_headers.empty()) {
    common_lines_ +=
        fmt::format("Access-Control-Expose-Headers: {}\r\n", Joined(options_.exposed_headers));
  }
}

bool CorsPolicy::Matches(std::string_view origin) const {
  // Origins are compared as sent: scheme and host are lower case in what browsers send.
  return any_origin_ ||
         std::ranges::find(options_.allowed_origins, origin) != options_.allowed_origins.end();
}

bool CorsPolicy::AllowsOrigin(std::string_view origin) const {
  if (Matches(origin)) return true;
  if (refused_ != nullptr) refused_->Increment();
  return false;
}

bool CorsPolicy::AllowsWebSocket(std::optional<std::string_view> origin) const {
  return !origin || AllowsOrigin(*origin);
}

bool CorsPolicy::IsPreflight(std::string_view method, std::optional<std::string_view> origin,
                             std::optional<std::string_view> request_method) const {
  return enabled() && method == "OPTIONS" && origin && request_method;
}

std::string CorsPolicy::PreflightHeaders(std::string_view origin,
                                         std::optional<std::string_view> request_headers) const {
  if (preflights_ != nullptr) preflights_->Increment();
  if (!AllowsOrigin(origin)) return std::string();
  std::string lines;
  AppendAnswerHeaders(origin, &lines);
  lines += methods_line_;
  // Echo what the page asks for when every header of it is allowed; otherwise the list, which
  // the browser then finds lacking.
  std::string_view allowed = headers_list_;
  std::string echoed;
  if (request_headers) {
    bool all_allowed = true;
    std::string_view rest = *request_headers;
    while (!rest.empty()) {
      const size_t comma = rest.find(',');
      const std::string_view name = Trimmed(rest.substr(0, comma));
      rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
      if (name.empty()) continue;
      const bool known = std::ranges::any_of(options_.allowed_headers, [&](const std::string& h) {
        return EqualsIgnoringCase(h, name);
      });
      if (!known) {
        all_allowed = false;
        break;
      }
      if (!echoed.empty()) echoed += ", ";
      echoed += name;
    }
    if (all_allowed && !echoed.empty()) allowed = echoed;
  }
  if (!allowed.empty()) lines += fmt::format("Access-Control-Allow-Headers: {}\r\n", allowed);
  lines += fmt::format("Access-Control-Max-Age: {}\r\n", absl::ToInt64Seconds(options_.max_age));
  return lines;
}

void CorsPolicy::AppendAnswerHeaders(std::optional<std::string_view> origin,
                                     std::string* head) const {
  if (!enabled()) return;
  if (!any_origin_) {
    // The answer depends on the Origin: caches must not serve it to another one.
    *head += "Vary: Origin\r\n";
    if (!origin ||
        std::ranges::find(options_.allowed_origins, *origin) == options_.allowed_origins.end()) {
      return;
    }
    *head += "Access-Control-Allow-Origin: ";
    head->append(*origin);
    *head += "\r\n";
  }
  *head += common_lines_;
}

}  // namespace switchyard
