#pragma once

// HTTP/1.1 on the wire for HttpServer: reading a request into an HttpRequest with Beast's
// parser, and writing the head of an answer. No I/O here; the sessions in http_server.cc own
// the sockets.
#include <algorithm>
#include <boost/beast/http/basic_parser.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "absl/strings/ascii.h"
#include "api/net/cors.h"
#include "api/net/http_server.h"
#include "common/gzip.h"

namespace switchyard::http_wire {

// Header names and tokens compare without case (RFC 9110 5.1).
inline bool EqualsIgnoringCase(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return absl::ascii_tolower(static_cast<unsigned char>(x)) ==
                  absl::ascii_tolower(static_cast<unsigned char>(y));
         });
}

namespace beast = boost::beast;
namespace http = beast::http;
using boost::system::error_code;

// Whether a comma-separated header value lists `token` (case-insensitive).
bool ListsToken(std::string_view value, std::string_view token);

// Reads one request with Beast's parser straight into an HttpRequest: no Beast header
// container is built and the body is appended once.
class RequestReader final : public http::basic_parser<true> {
 public:
  // `gzip`: the server takes gzip, so Accept-Encoding is read into request->accepts_gzip.
  RequestReader(HttpRequest* request, bool gzip) : request_(request), gzip_(gzip) {
    request_->headers.reserve(kHeadersReserved);
  }
  unsigned version() const { return version_; }
  bool expects_continue() const { return expects_continue_; }
  // The request's Content-Encoding, when it had one (empty otherwise).
  const std::string& content_encoding() const { return content_encoding_; }

 private:
  using string_view = beast::string_view;
  void on_request_impl(http::verb, string_view method, string_view target, int version,
                       error_code&) override {
    request_->method.assign(method.data(), method.size());
    request_->target.assign(target.data(), target.size());
    version_ = static_cast<unsigned>(version);
  }
  void on_response_impl(int, string_view, int, error_code&) override {}
  void on_field_impl(http::field name, string_view name_text, string_view value,
                     error_code&) override {
    if (name == http::field::expect &&
        EqualsIgnoringCase(std::string_view(value.data(), value.size()), "100-continue")) {
      expects_continue_ = true;
    } else if (name == http::field::accept_encoding) {
      if (gzip_) request_->accepts_gzip = AcceptsGzip(std::string_view(value.data(), value.size()));
    } else if (name == http::field::content_encoding) {
      content_encoding_.assign(value.data(), value.size());
    }
    request_->headers.emplace_back(std::string(name_text), std::string(value));
  }
  void on_header_impl(error_code&) override {}
  void on_body_init_impl(const boost::optional<std::uint64_t>& length, error_code&) override {
    if (length) request_->body.reserve(static_cast<size_t>(*length) + HttpRequest::kBodySlack);
  }
  size_t on_body_impl(string_view text, error_code&) override {
    request_->body.append(text.data(), text.size());
    return text.size();
  }
  void on_chunk_header_impl(std::uint64_t, string_view, error_code&) override {}
  size_t on_chunk_body_impl(std::uint64_t, string_view text, error_code&) override {
    request_->body.append(text.data(), text.size());
    return text.size();
  }
  void on_finish_impl(error_code&) override {}

  // Room for the header fields of most requests, so the vector grows once.
  static constexpr size_t kHeadersReserved = 8;
  HttpRequest* request_;
  bool gzip_;
  unsigned version_ = 11;
  bool expects_continue_ = false;
  std::string content_encoding_;
};

// A WebSocket handshake request (RFC 6455 4.1).
bool IsWebSocketUpgrade(const HttpRequest& request, unsigned version);

// An answer that has no body by definition, and so no Content-Length (RFC 9110 8.6).
inline bool IsBodiless(unsigned status) { return status < 200 || status == 204 || status == 304; }

// The status line and header fields of an answer, the CORS ones for a request from `origin`,
// Content-Encoding, Vary: Accept-Encoding (`vary`), Content-Length and the connection's fate
// included.
void WriteHead(const HttpResponse& answer, unsigned version, bool keep_alive,
               const CorsPolicy& cors, std::optional<std::string_view> origin, bool vary,
               std::string& head);

// The 204 answer to a CORS preflight: `cors_lines` and no body.
void WritePreflightHead(std::string_view cors_lines, unsigned version, bool keep_alive,
                        std::string& head);

}  // namespace switchyard::http_wire
