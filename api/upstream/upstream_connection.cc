#include "api/upstream/internal/upstream_connection.h"

#include <openssl/ssl.h>

#include <algorithm>
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
#include "api/net/write_in_place.h"
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

namespace {
// The request buffers of one gathered write, viewed without copying them.
struct BufferView {
  using value_type = asio::const_buffer;
  using const_iterator = const asio::const_buffer*;
  const asio::const_buffer* first;
  const asio::const_buffer* last;
  const_iterator begin() const { return first; }
  const_iterator end() const { return last; }
};
const std::string kNoBody;
}  // namespace

UpstreamConnection::UpstreamConnection(asio::io_context& io_context, const Url& url,
                                       const std::string& head, const std::string& gzip_head,
                                       ssl::context* tls, size_t max_response_bytes,
                                       bool verify_tls, size_t max_depth, Counter* reads,
                                       Listener listener)
    : url_(url),
      head_(head),
      gzip_head_(gzip_head),
      resolver_(io_context.get_executor()),
      max_response_bytes_(max_response_bytes),
      verify_tls_(verify_tls),
      listener_(std::move(listener)),
      reads_(reads),
      ring_(std::max<size_t>(1, max_depth)) {
  if (url.tls && tls != nullptr) {
    tls_stream_.emplace(io_context.get_executor(), *tls);
  } else {
    plain_.emplace(io_context.get_executor());
  }
}

Clock::time_point UpstreamConnection::head_since() const {
  return size_ == 0 ? Clock::time_point::max() : At(0).since;
}

bool UpstreamConnection::Usable(Clock::time_point now, Clock::duration check_after) {
  if (!connected_ || closed_ || busy()) return false;
  if (now - idle_since_ < check_after) return true;
  return IdleSocketIsOpen(Lowest().native_handle());
}

uint64_t UpstreamConnection::Exchange(const std::string& body, Clock::time_point deadline,
                                      bool accept_gzip, Callback done, std::shared_ptr<void> keep,
                                      void* tag, bool alone) {
  return Push(accept_gzip ? &gzip_head_ : &head_, &body, /*with_length=*/true, deadline,
              std::move(done), std::move(keep), tag, alone);
}

uint64_t UpstreamConnection::ExchangeRaw(const std::string& request, Clock::time_point deadline,
                                         Callback done) {
  return Push(&request, &kNoBody, /*with_length=*/false, deadline, std::move(done), nullptr,
              nullptr, /*alone=*/false);
}

bool UpstreamConnection::HoldsAlone() const {
  for (size_t i = 0; i < size_; ++i) {
    const Slot& slot = At(i);
    // A cancelled exchange still holds the connection until its answer has been read, unless
    // it was never written (it will not be).
    if (slot.alone && !(slot.cancelled && slot.state == State::kQueued)) return true;
  }
  return false;
}

uint64_t UpstreamConnection::Push(const std::string* head, const std::string* body,
                                  bool with_length, Clock::time_point deadline, Callback done,
                                  std::shared_ptr<void> keep, void* tag, bool alone) {
  Slot& slot = ring_[(first_ + size_) % ring_.size()];
  slot.head = head;
  slot.body = body;
  slot.length_size = 0;
  if (with_length) {
    const auto [end, ec] =
        std::to_chars(slot.length, slot.length + sizeof(slot.length) - 4, body->size());
    std::memcpy(end, "\r\n\r\n", 4);
    slot.length_size = static_cast<uint8_t>(end - slot.length + 4);
  }
  slot.state = State::kQueued;
  slot.cancelled = false;
  slot.reused = answered_ > 0;
  slot.alone = alone;
  slot.since = Clock::now();
  slot.deadline = deadline;
  slot.ticket = next_ticket_++;
  slot.tag = tag;
  slot.done = std::move(done);
  slot.keep = std::move(keep);
  ++size_;
  const uint64_t ticket = slot.ticket;
  if (!connected_) {
    if (!connecting_) Connect();
  } else if (!writing_) {
    Write();
  }
  return ticket;
}

UpstreamConnection::Slot UpstreamConnection::PopFront() {
  Slot& front = At(0);
  Slot slot = std::move(front);
  front.done = nullptr;
  front.keep.reset();
  first_ = (first_ + 1) % ring_.size();
  --size_;
  if (writing_ && slot.state == State::kWriting && slot.keep) write_keep_.push_back(slot.keep);
  return slot;
}

void UpstreamConnection::DropUnsentFront() {
  while (size_ > 0 && At(0).cancelled && At(0).state == State::kQueued) PopFront();
}

void UpstreamConnection::Connect() {
  connecting_ = true;
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
        if (self->closed_) return;
        if (ec) return self->OnConnected(ec);
        asio::async_connect(self->Lowest(), results,
                            [self](error_code ec, const tcp::endpoint&) { self->OnConnected(ec); });
      });
}

void UpstreamConnection::OnConnected(error_code ec) {
  if (closed_) return;
  if (ec) return Fail(ec, false, false);
  Lowest().set_option(tcp::no_delay(true), ec);
  if (!tls_stream_) {
    plain_->non_blocking(true, ec);  // for WriteInPlaceOrAsync
    connecting_ = false;
    connected_ = true;
    return Write();
  }
  if (!SSL_set_tlsext_host_name(tls_stream_->native_handle(), url_.host.c_str())) {
    return Fail(asio::error::invalid_argument, false, false);
  }
  if (verify_tls_) tls_stream_->set_verify_callback(ssl::host_name_verification(url_.host));
  tls_stream_->async_handshake(ssl::stream_base::client,
                               [self = shared_from_this()](error_code ec) {
                                 if (self->closed_) return;
                                 if (ec) return self->Fail(ec, false, false);
                                 self->connecting_ = false;
                                 self->connected_ = true;
                                 self->Write();
                               });
}

void UpstreamConnection::Write() {
  if (writing_ || closed_ || !connected_ || write_error_) return;
  write_buffers_.clear();
  write_lengths_.resize(ring_.size());  // within its capacity: never moves during a write
  size_t lengths = 0;
  for (size_t i = 0; i < size_; ++i) {
    Slot& slot = At(i);
    if (slot.state != State::kQueued || slot.cancelled) continue;
    slot.state = State::kWriting;
    write_buffers_.push_back(asio::buffer(*slot.head));
    if (slot.length_size > 0) {
      char* length = write_lengths_[lengths++].data();
      std::memcpy(length, slot.length, slot.length_size);
      write_buffers_.push_back(asio::buffer(length, slot.length_size));
    }
    if (!slot.body->empty()) write_buffers_.push_back(asio::buffer(*slot.body));
  }
  if (write_buffers_.empty()) return;
  writing_ = true;
  const BufferView view{write_buffers_.data(), write_buffers_.data() + write_buffers_.size()};
  if (plain_) {
    return WriteInPlaceOrAsync(*plain_, view,
                               [self = shared_from_this()](error_code ec) { self->OnWritten(ec); });
  }
  WithStream([&](auto& stream) {
    asio::async_write(stream, view,
                      [self = shared_from_this()](error_code ec, size_t) { self->OnWritten(ec); });
  });
}

void UpstreamConnection::OnWritten(error_code ec) {
  writing_ = false;
  write_keep_.clear();
  if (closed_) return;
  if (ec) {
    // The peer may have closed after answering a request ahead: the read in flight reads that
    // answer and the end, and ends the connection as that tells.
    if (reading_) {
      write_error_ = ec;
      return;
    }
    return Fail(ec, false, false);
  }
  for (size_t i = 0; i < size_; ++i) {
    if (At(i).state == State::kWriting) At(i).state = State::kWritten;
  }
  if (!reading_) ReadSome();
  Write();  // what was queued while this write was in flight
}

// Reads up to the buffer's free capacity. The answer's reader takes every byte it is given,
// so the buffer is empty after each read and would never grow by itself (Beast's read_size
// asks for the free capacity, at least 512 bytes: a 1.5 KiB answer took three recvs, and at 512
// bytes a read 24 KiB take forty-eight). It starts at kFirstReadSize and doubles, up to
// kMaxReadSize, each time a read fills it, so a connection that carries large answers reads them in
// large pieces.
void UpstreamConnection::ReadSome() {
  reading_ = true;
  buffer_.reserve(kFirstReadSize);
  const auto space = buffer_.prepare(beast::read_size(buffer_, kMaxReadSize));
  WithStream([&](auto& stream) {
    stream.async_read_some(
        space, [self = shared_from_this()](error_code ec, size_t n) { self->OnRead(ec, n); });
  });
}

void UpstreamConnection::OnRead(error_code ec, size_t n) {
  reading_ = false;
  if (closed_) return;
  if (ec == asio::error::eof || ec == ssl::error::stream_truncated) {
    // An answer whose end is the end of the connection (no length, no chunks).
    if (got_some_ && reader_ && reader_->got_some()) {
      error_code eof;
      reader_->put_eof(eof);
      if (!eof && reader_->is_done()) return Complete(/*peer_closed=*/true);
    }
    return Fail(ec, false, /*broken=*/written_behind_answer_);
  }
  if (ec) return Fail(ec, false, false);
  buffer_.commit(n);
  reads_->Increment();
  // Below kMaxReadSize a read asks for all the free capacity: a full buffer means it filled.
  if (buffer_.size() == buffer_.capacity() && buffer_.capacity() < kMaxReadSize) {
    buffer_.reserve(std::min(2 * buffer_.capacity(), kMaxReadSize));
  }
  while (!closed_) {
    DropUnsentFront();
    if (size_ == 0 || At(0).state == State::kQueued) {
      // Bytes no request asked for: the connection cannot be trusted with another.
      if (buffer_.size() > 0) return Fail(http::error::unexpected_body, false, false);
      break;
    }
    if (buffer_.size() == 0) break;
    if (!reader_) {
      response_ = UpstreamResponse();
      reader_.emplace(&response_);
      reader_->eager(true);
      reader_->body_limit(max_response_bytes_);
      reader_->header_limit(64 * 1024);
    }
    got_some_ = true;
    error_code parse;
    const size_t used = reader_->put(buffer_.data(), parse);
    buffer_.consume(used);
    if (parse == http::error::need_more) break;
    if (parse) return Fail(parse, false, false);
    if (reader_->is_done()) Complete(/*peer_closed=*/false);
  }
  if (closed_) return;
  DropUnsentFront();
  if (size_ > 0 && At(0).state != State::kQueued && !reading_) return ReadSome();
  if (write_error_) Fail(write_error_, false, false);
}

void UpstreamConnection::Complete(bool peer_closed) {
  response_.status = reader_->status();
  // (The answer may come before the write's completion runs: the write's lengths are its own
  // copies and PopFront keeps the body alive until it ends.)
  const bool keep_alive = !peer_closed && reader_->keep_alive();
  reader_.reset();
  got_some_ = false;
  ++answered_;
  idle_since_ = Clock::now();
  Slot slot = PopFront();
  DropUnsentFront();
  written_behind_answer_ = size_ > 0 && At(0).state != State::kQueued;
  const std::shared_ptr<UpstreamConnection> self = shared_from_this();
  if (keep_alive) {
    listener_(self, /*closed=*/false);
  } else {
    Fail(asio::error::eof, false, /*broken=*/written_behind_answer_);
  }
  if (!slot.cancelled) slot.done(error_code(), std::move(response_), End{});
}

void UpstreamConnection::Cancel(uint64_t ticket, bool move) {
  for (size_t i = 0; i < size_; ++i) {
    Slot& slot = At(i);
    if (slot.ticket != ticket) continue;
    if (slot.cancelled) return;
    if (size_ == 1 && !move) return Close();
    if (move && slot.state != State::kQueued) return;
    slot.cancelled = true;
    Callback done = std::move(slot.done);
    slot.done = nullptr;
    End end;
    end.unsent = slot.state == State::kQueued;
    end.behind = move;
    if (end.unsent) slot.keep.reset();  // never written: nothing reads its body
    const std::shared_ptr<UpstreamConnection> self = shared_from_this();
    DropUnsentFront();
    done(asio::error::operation_aborted, UpstreamResponse(), end);
    return;
  }
}

Clock::time_point UpstreamConnection::NextDeadline() const {
  if (size_ == 0) return Clock::time_point::max();
  Clock::time_point next = At(0).deadline;
  for (size_t i = 1; i < size_; ++i) {
    if (!At(i).cancelled) next = std::min(next, At(i).deadline);
  }
  return next;
}

void UpstreamConnection::Expire(Clock::time_point now) {
  if (size_ == 0) return;
  if (At(0).deadline <= now) return Fail(beast::error::timeout, /*timed_out=*/true, false);
  // A later exchange past its deadline times out alone; its answer is read and dropped.
  std::vector<uint64_t> expired;
  for (size_t i = 1; i < size_; ++i) {
    if (!At(i).cancelled && At(i).deadline <= now) expired.push_back(At(i).ticket);
  }
  const std::shared_ptr<UpstreamConnection> self = shared_from_this();
  for (uint64_t ticket : expired) {
    for (size_t i = 0; i < size_ && !closed_; ++i) {
      Slot& slot = At(i);
      if (slot.ticket != ticket || slot.cancelled) continue;
      slot.cancelled = true;
      Callback done = std::move(slot.done);
      slot.done = nullptr;
      End end;
      end.unsent = slot.state == State::kQueued;
      done(beast::error::timeout, UpstreamResponse(), end);
      break;
    }
  }
}

void UpstreamConnection::FollowersOfSlowHead(Clock::time_point slow_since,
                                             std::vector<void*>* written,
                                             std::vector<void*>* unwritten) const {
  if (size_ < 2 || At(0).since >= slow_since) return;
  for (size_t i = 1; i < size_; ++i) {
    const Slot& slot = At(i);
    if (slot.cancelled || slot.tag == nullptr) continue;
    (slot.state == State::kQueued ? unwritten : written)->push_back(slot.tag);
  }
}

void UpstreamConnection::CloseSocket() {
  error_code ignored;
  resolver_.cancel();
  Lowest().close(ignored);
  connected_ = false;
  connecting_ = false;
}

void UpstreamConnection::Close() { Fail(asio::error::operation_aborted, false, false); }

void UpstreamConnection::Fail(error_code ec, bool timed_out, bool broken) {
  if (closed_) return;
  closed_ = true;
  const bool got_some = got_some_;
  CloseSocket();
  reader_.reset();
  buffer_.clear();
  std::vector<Slot> slots;
  slots.reserve(size_);
  while (size_ > 0) slots.push_back(PopFront());
  const std::shared_ptr<UpstreamConnection> self = shared_from_this();
  listener_(self, /*closed=*/true);
  for (size_t i = 0; i < slots.size(); ++i) {
    Slot& slot = slots[i];
    if (slot.cancelled) continue;
    End end;
    end.unsent = slot.state == State::kQueued;
    end.pipeline_broken = broken;
    error_code error = ec;
    if (i == 0) {
      if (timed_out) error = beast::error::timeout;
      // It was sent on a connection that had answered before (idle since, or pipelined
      // behind an answer): the peer closed it.
      end.stale = (slot.reused || answered_ > 0) && !timed_out && !got_some && !broken &&
                  ec != asio::error::operation_aborted;
    } else {
      end.behind = true;
    }
    slot.done(error, UpstreamResponse(), end);
  }
}

}  // namespace switchyard::upstream_internal
