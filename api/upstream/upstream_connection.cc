#include "api/upstream/internal/upstream_connection.h"

#include <openssl/ssl.h>

#include <array>
#include <boost/asio/connect.hpp>
#include <boost/asio/ssl/host_name_verification.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/error.hpp>
#include <boost/beast/core/read_size.hpp>
#include <boost/beast/core/string.hpp>
#include <boost/beast/http/error.hpp>
#include <charconv>
#include <cstring>

#include "absl/strings/numbers.h"
#include "common/socket_liveness.h"

namespace switchyard::upstream_internal {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace ssl = asio::ssl;
using tcp = asio::ip::tcp;

std::string RequestHeadOf(const Url& url, bool accept_gzip) {
  std::string head = "POST ";
  head += url.path;
  head += " HTTP/1.1\r\nHost: ";
  head += url.HostHeader();
  if (accept_gzip) head += "\r\nAccept-Encoding: gzip";
  head += "\r\nContent-Type: application/json\r\nContent-Length: ";
  return head;
}

void ResponseReader::on_field_impl(http::field field, string_view, string_view value, error_code&) {
  if (field == http::field::content_encoding) {
    response_->gzip = beast::iequals(value, "gzip") || beast::iequals(value, "x-gzip");
    return;
  }
  // Only Retry-After is kept (in seconds; an HTTP date is taken as one second).
  if (field != http::field::retry_after) return;
  uint32_t seconds = 0;
  response_->retry_after_seconds =
      absl::SimpleAtoi(absl::string_view(value.data(), value.size()), &seconds) ? seconds : 1;
}

void ResponseReader::on_body_init_impl(const boost::optional<std::uint64_t>& length, error_code&) {
  response_->body.clear();
  if (length) response_->body.reserve(static_cast<size_t>(*length));
}

size_t ResponseReader::on_body_impl(string_view text, error_code&) {
  response_->body.append(text.data(), text.size());
  return text.size();
}

size_t ResponseReader::on_chunk_body_impl(std::uint64_t, string_view text, error_code&) {
  response_->body.append(text.data(), text.size());
  return text.size();
}

UpstreamConnection::UpstreamConnection(asio::io_context& io_context, const Url& url,
                                       const std::string& head, const std::string& gzip_head,
                                       ssl::context* tls, size_t max_response_bytes,
                                       bool verify_tls)
    : url_(url),
      head_(head),
      gzip_head_(gzip_head),
      resolver_(io_context.get_executor()),
      max_response_bytes_(max_response_bytes),
      verify_tls_(verify_tls) {
  if (url.tls && tls != nullptr) {
    tls_stream_.emplace(io_context.get_executor(), *tls);
  } else {
    plain_.emplace(io_context.get_executor());
  }
}

bool UpstreamConnection::Usable(Clock::time_point now, Clock::duration check_after) {
  if (!connected_) return false;
  if (now - idle_since_ < check_after) return true;
  return IdleSocketIsOpen(Lowest().native_handle());
}

void UpstreamConnection::Exchange(const std::string& body, Clock::time_point deadline,
                                  bool accept_gzip, Callback done) {
  done_ = std::move(done);
  request_head_ = accept_gzip ? &gzip_head_ : &head_;
  body_ = &body;
  deadline_ = deadline;
  reused_ = connected_;
  got_some_ = false;
  timed_out_ = false;
  writing_ = false;
  const auto [end, ec] = std::to_chars(length_, length_ + sizeof(length_) - 4, body.size());
  std::memcpy(end, "\r\n\r\n", 4);
  length_size_ = static_cast<size_t>(end - length_) + 4;
  if (connected_) {
    Write();
  } else {
    Connect();
  }
}

void UpstreamConnection::Connect() {
  error_code literal;
  const asio::ip::address address = asio::ip::make_address(url_.host, literal);
  uint32_t port = 0;
  if (!literal && absl::SimpleAtoi(url_.port, &port) && port <= 65535) {
    // An address needs no lookup (and no trip through the resolver's thread).
    Lowest().async_connect(tcp::endpoint(address, static_cast<uint16_t>(port)),
                           [self = shared_from_this()](error_code ec) { self->OnConnected(ec); });
    return;
  }
  resolver_.async_resolve(
      url_.host, url_.port,
      [self = shared_from_this()](error_code ec, tcp::resolver::results_type results) {
        if (ec) return self->Finish(ec);
        asio::async_connect(self->Lowest(), results,
                            [self](error_code ec, const tcp::endpoint&) { self->OnConnected(ec); });
      });
}

void UpstreamConnection::OnConnected(error_code ec) {
  if (ec) return Finish(ec);
  Lowest().set_option(tcp::no_delay(true), ec);
  if (!tls_stream_) {
    connected_ = true;
    return Write();
  }
  if (!SSL_set_tlsext_host_name(tls_stream_->native_handle(), url_.host.c_str())) {
    return Finish(asio::error::invalid_argument);
  }
  if (verify_tls_) tls_stream_->set_verify_callback(ssl::host_name_verification(url_.host));
  tls_stream_->async_handshake(ssl::stream_base::client,
                               [self = shared_from_this()](error_code ec) {
                                 if (ec) return self->Finish(ec);
                                 self->connected_ = true;
                                 self->Write();
                               });
}

void UpstreamConnection::Write() {
  writing_ = true;
  const std::array<asio::const_buffer, 3> buffers = {
      asio::buffer(*request_head_), asio::buffer(length_, length_size_), asio::buffer(*body_)};
  WithStream([&](auto& stream) {
    asio::async_write(stream, buffers, [self = shared_from_this()](error_code ec, size_t) {
      if (ec) return self->Finish(ec);
      self->response_ = UpstreamResponse();
      self->reader_.emplace(&self->response_);
      self->reader_->eager(true);
      self->reader_->body_limit(self->max_response_bytes_);
      self->reader_->header_limit(64 * 1024);
      self->ReadSome();
    });
  });
}

void UpstreamConnection::ReadSome() {
  const auto space = buffer_.prepare(beast::read_size(buffer_, 64 * 1024));
  WithStream([&](auto& stream) {
    stream.async_read_some(
        space, [self = shared_from_this()](error_code ec, size_t n) { self->OnRead(ec, n); });
  });
}

void UpstreamConnection::OnRead(error_code ec, size_t n) {
  if (ec == asio::error::eof || ec == ssl::error::stream_truncated) {
    // An answer whose end is the end of the connection (no length, no chunks).
    if (got_some_ && reader_->got_some()) {
      error_code eof;
      reader_->put_eof(eof);
      if (!eof && reader_->is_done()) {
        connected_ = false;
        return Complete();
      }
    }
    return Finish(ec);
  }
  if (ec) return Finish(ec);
  buffer_.commit(n);
  got_some_ = got_some_ || n > 0;
  while (buffer_.size() > 0 && !reader_->is_done()) {
    error_code parse;
    const size_t used = reader_->put(buffer_.data(), parse);
    buffer_.consume(used);
    if (parse == http::error::need_more) break;
    if (parse) return Finish(parse);
  }
  if (reader_->is_done()) return Complete();
  ReadSome();
}

void UpstreamConnection::Complete() {
  response_.status = reader_->status();
  const bool keep_alive = connected_ && reader_->keep_alive();
  reader_.reset();
  body_ = nullptr;
  idle_since_ = Clock::now();
  Callback done = std::move(done_);
  done_ = nullptr;
  done(error_code(), std::move(response_), End{keep_alive, false, false});
}

void UpstreamConnection::TimeOut() {
  if (!busy()) return;
  timed_out_ = true;
  Close();  // the operation in flight ends with operation_aborted; Finish reports the timeout
}

void UpstreamConnection::Close() {
  error_code ignored;
  resolver_.cancel();
  Lowest().close(ignored);
  connected_ = false;
}

void UpstreamConnection::Finish(error_code ec) {
  if (!done_) return;
  if (timed_out_) ec = beast::error::timeout;
  const bool stale = reused_ && !timed_out_ && !got_some_;
  Close();
  reader_.reset();
  buffer_.clear();
  body_ = nullptr;
  Callback done = std::move(done_);
  done_ = nullptr;
  done(ec, UpstreamResponse(), End{false, stale, !writing_});
}

}  // namespace switchyard::upstream_internal
