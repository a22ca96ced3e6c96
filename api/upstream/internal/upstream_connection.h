#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/ssl/stream.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/basic_parser.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "api/upstream/upstream_client.h"
#include "common/url.h"

namespace switchyard::upstream_internal {

using Clock = std::chrono::steady_clock;
// Sockets bound to the worker's io_context executor type: no type-erased executor is copied
// or destroyed per operation.
using Socket =
    boost::asio::basic_stream_socket<boost::asio::ip::tcp, boost::asio::io_context::executor_type>;
using Resolver =
    boost::asio::ip::basic_resolver<boost::asio::ip::tcp, boost::asio::io_context::executor_type>;

// The part of every request to one endpoint that does not change: the request line, Host,
// Content-Type (and Accept-Encoding: gzip with `accept_gzip`) and the name of Content-Length.
// Built once per endpoint.
std::string RequestHeadOf(const Url& url, bool accept_gzip = false);

// Reads one HTTP response with Beast's parser into a status and a body, and nothing else: no
// header fields are stored (Retry-After and Content-Encoding: gzip are noted), so parsing
// allocates only the body. One per response (the
// parser itself allocates nothing).
class ResponseReader final : public boost::beast::http::basic_parser<false> {
 public:
  explicit ResponseReader(UpstreamResponse* response) : response_(response) {}
  unsigned status() const { return status_; }

 private:
  using error_code = boost::system::error_code;
  using string_view = boost::beast::string_view;
  void on_request_impl(boost::beast::http::verb, string_view, string_view, int,
                       error_code&) override {}
  void on_response_impl(int code, string_view, int, error_code&) override {
    status_ = static_cast<unsigned>(code);
  }
  void on_field_impl(boost::beast::http::field field, string_view, string_view value,
                     error_code&) override;
  void on_header_impl(error_code&) override {}
  void on_body_init_impl(const boost::optional<std::uint64_t>& length, error_code&) override;
  size_t on_body_impl(string_view text, error_code&) override;
  void on_chunk_header_impl(std::uint64_t, string_view, error_code&) override {}
  size_t on_chunk_body_impl(std::uint64_t, string_view text, error_code&) override;
  void on_finish_impl(error_code&) override {}

  UpstreamResponse* response_;
  unsigned status_ = 0;
};

// One keep-alive HTTP/1.1 connection to one endpoint. Lives on one worker's thread. A request
// goes out in one gathered write of the endpoint's prebuilt head, the length and the body; the
// answer is read with ResponseReader. The connection keeps no timer of its own: its pool
// checks deadlines (Expired/TimeOut).
class UpstreamConnection : public std::enable_shared_from_this<UpstreamConnection> {
 public:
  using error_code = boost::system::error_code;
  // How an exchange ended besides its error and answer.
  struct End {
    bool keep_alive = false;
    // The exchange failed in transport (not by its timeout) on a connection that had served
    // an earlier one, before a byte of the answer arrived: the peer had closed it idle.
    bool stale = false;
    // No byte of the request was written (connect, lookup or handshake failed).
    bool unsent = false;
  };
  using Callback = std::function<void(error_code, UpstreamResponse, End)>;

  // `head` and `gzip_head` are the endpoint's RequestHeadOf without and with accept_gzip and
  // outlive the connection.
  UpstreamConnection(boost::asio::io_context& io_context, const Url& url, const std::string& head,
                     const std::string& gzip_head, boost::asio::ssl::context* tls,
                     size_t max_response_bytes, bool verify_tls);

  bool connected() const { return connected_; }
  bool busy() const { return static_cast<bool>(done_); }
  Clock::time_point idle_since() const { return idle_since_; }
  // An idle connection that may be handed out: connected, and not closed by the peer since.
  // The peer is asked (one non-blocking peek) only when the connection has been idle for
  // `check_after`; one used moments ago is taken as it is (a peer that closed it in between
  // is met as a stale connection and the exchange goes again).
  bool Usable(Clock::time_point now, Clock::duration check_after);

  // Sends `body` (kept alive by the caller until `done`) and calls `done` once. With
  // `accept_gzip` the request carries Accept-Encoding: gzip; the answer's body is as it came
  // (UpstreamResponse::gzip says whether it is compressed).
  void Exchange(const std::string& body, Clock::time_point deadline, bool accept_gzip,
                Callback done);
  // Whether an exchange is in flight past its deadline.
  bool Expired(Clock::time_point now) const { return busy() && now >= deadline_; }
  // Ends the exchange in flight with beast::error::timeout.
  void TimeOut();
  void Close();

 private:
  Socket& Lowest() { return plain_ ? *plain_ : tls_stream_->next_layer(); }
  template <typename F>
  void WithStream(F&& f) {
    if (plain_) {
      f(*plain_);
    } else {
      f(*tls_stream_);
    }
  }
  void Connect();
  void OnConnected(error_code ec);
  void Write();
  void ReadSome();
  void OnRead(error_code ec, size_t n);
  void Complete();
  void Finish(error_code ec);

  const Url& url_;
  const std::string& head_;
  const std::string& gzip_head_;
  const std::string* request_head_ = nullptr;  // of the exchange in flight
  Resolver resolver_;
  size_t max_response_bytes_;
  bool verify_tls_;
  std::optional<Socket> plain_;
  std::optional<boost::asio::ssl::stream<Socket>> tls_stream_;
  boost::beast::flat_buffer buffer_;
  const std::string* body_ = nullptr;
  char length_[32];  // the Content-Length value and the blank line
  size_t length_size_ = 0;
  UpstreamResponse response_;
  std::optional<ResponseReader> reader_;
  Callback done_;
  Clock::time_point deadline_;
  Clock::time_point idle_since_;
  bool connected_ = false;
  bool reused_ = false;     // the exchange in flight began on an open connection
  bool got_some_ = false;   // a byte of the answer arrived
  bool timed_out_ = false;  // TimeOut ended the exchange
  bool writing_ = false;    // a byte of the request may have left
};

}  // namespace switchyard::upstream_internal
