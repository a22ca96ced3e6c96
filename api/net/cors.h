#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/time/time.h"
#include "common/metrics.h"

namespace switchyard {

// Which browser pages may call a listener (Cross-Origin Resource Sharing, and the Origin
// check of a WebSocket handshake).
struct CorsOptions {
  // "*": any origin (Solana's RPC server answers any). Otherwise exact origins
  // ("https://app.example.com"), a matching request's Origin echoed back with Vary: Origin.
  // Empty: CORS off, no CORS headers and preflights go to the handler like any request; a
  // WebSocket handshake that carries an Origin is then refused.
  std::vector<std::string> allowed_origins;
  // Request headers a page may send (case-insensitive); a preflight that asks only for these
  // gets them echoed, otherwise it gets this list.
  std::vector<std::string> allowed_headers = {"content-type", "solana-client", "x-api-key",
                                              "x-min-slot", "x-switchyard-consensus"};
  // Answer headers a page may read.
  std::vector<std::string> exposed_headers = {"X-Delegation-Slot"};
  absl::Duration max_age = absl::Hours(24);  // how long a browser may keep a preflight's answer
};

// The CORS headers of a listener's answers and its Origin checks, from CorsOptions. Built by
// the HttpServer that owns it, immutable after; any thread may call it. The counters (may be
// null) outlive it.
class CorsPolicy {
 public:
  CorsPolicy(CorsOptions options, Counter* preflights, Counter* refused);

  bool enabled() const { return any_origin_ || !options_.allowed_origins.empty(); }
  // Whether `origin` (an Origin header's value) is allowed; AllowsOrigin counts a refusal.
  bool Matches(std::string_view origin) const;
  bool AllowsOrigin(std::string_view origin) const;
  // Whether a WebSocket handshake with `origin` (nullopt: no Origin header, not a browser) may
  // proceed; counts a refusal.
  bool AllowsWebSocket(std::optional<std::string_view> origin) const;
  // Whether a request is a preflight this policy answers: OPTIONS with Origin and
  // Access-Control-Request-Method, CORS on.
  bool IsPreflight(std::string_view method, std::optional<std::string_view> origin,
                   std::optional<std::string_view> request_method) const;
  // The header lines (each ending in CRLF) of a preflight's 204 answer, counted; empty when
  // the origin is refused (the caller answers 403).
  std::string PreflightHeaders(std::string_view origin,
                               std::optional<std::string_view> request_headers) const;
  // Appends the header lines every answer to a request with `origin` (nullopt: none) carries.
  void AppendAnswerHeaders(std::optional<std::string_view> origin, std::string* head) const;
  // Whether AppendAnswerHeaders needs the request's Origin (an origin list), or is the same
  // for every request.
  bool needs_origin() const { return !any_origin_ && enabled(); }

 private:
  const CorsOptions options_;
  const bool any_origin_;
  std::string methods_line_;  // Access-Control-Allow-Methods, CRLF
  std::string headers_list_;  // the allowed headers, comma-separated
  std::string common_lines_;  // Access-Control-Expose-Headers (and * origin), CRLF each
  Counter* const preflights_;
  Counter* const refused_;
};

}  // namespace switchyard
