#pragma once

#include <array>
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
#include <vector>

#include "api/upstream/internal/exchange_end.h"
#include "api/upstream/upstream_client.h"
#include "common/metrics.h"
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

// One keep-alive HTTP/1.1 connection to one endpoint, which may carry several exchanges at
// once (HTTP/1.1 pipelining, docs/architecture.md §11): requests leave in order, those ready
// together in one gathered write of each one's prebuilt head, length and body, and answers are
// matched to them in the same order. Lives on one worker's thread. The connection keeps no
// timer of its own: its pool checks deadlines (NextDeadline/Expire). Its owner hears of two
// events through the listener: the connection closed (once), and an exchange ended with the
// connection still open, so it may take another (called before that exchange's callback).
class UpstreamConnection : public std::enable_shared_from_this<UpstreamConnection> {
 public:
  using error_code = boost::system::error_code;
  using End = ExchangeEnd;
  using Callback = std::function<void(error_code, UpstreamResponse, End)>;
  using Listener = std::function<void(const std::shared_ptr<UpstreamConnection>&, bool closed)>;

  // `head` and `gzip_head` are the endpoint's RequestHeadOf without and with accept_gzip and
  // outlive the connection, as does `reads`, counted once per read that returned bytes. At most
  // `max_depth` exchanges are queued at once.
  UpstreamConnection(boost::asio::io_context& io_context, const Url& url, const std::string& head,
                     const std::string& gzip_head, boost::asio::ssl::context* tls,
                     size_t max_response_bytes, bool verify_tls, size_t max_depth, Counter* reads,
                     Listener listener);

  // Open or opening: not closed yet.
  bool open() const { return !closed_; }
  bool connected() const { return connected_; }
  // Exchanges queued or in flight (a cancelled one counts until its answer is read).
  size_t depth() const { return size_; }
  bool busy() const { return size_ > 0; }
  bool full() const { return size_ >= ring_.size(); }
  // An exchange queued with `alone` is on the connection: not answered yet, or cancelled after
  // it was written (its answer is still to be read).
  bool HoldsAlone() const;
  // The pool opened it for exchanges queued `alone` (large answers): it keeps it apart from
  // the connections that pipeline, idle or not.
  bool for_alone() const { return for_alone_; }
  void set_for_alone() { for_alone_ = true; }
  // Requests are being written: an exchange queued now leaves with them or right after.
  bool writing() const { return writing_; }
  Clock::time_point idle_since() const { return idle_since_; }
  // When the oldest exchange in flight began (time_point::max() when none is).
  Clock::time_point head_since() const;
  // An idle connection that may be handed out: connected, and not closed by the peer since.
  // The peer is asked (one non-blocking peek) only when the connection has been idle for
  // `check_after`; one used moments ago is taken as it is (a peer that closed it in between
  // is met as a stale connection and the exchange goes again).
  bool Usable(Clock::time_point now, Clock::duration check_after);

  // Queues `body` (kept alive by `keep` until the exchange leaves the connection) behind the
  // exchanges already on it and calls `done` once. With `accept_gzip` the request carries
  // Accept-Encoding: gzip; the answer's body is as it came (UpstreamResponse::gzip says
  // whether it is compressed). `tag` is the caller's, for FollowersOfSlowHead. Returns a
  // ticket for Cancel. Must not be called when full().
  // With `alone`, no exchange is to be queued behind this one (HoldsAlone) until it ends.
  uint64_t Exchange(const std::string& body, Clock::time_point deadline, bool accept_gzip,
                    Callback done, std::shared_ptr<void> keep = nullptr, void* tag = nullptr,
                    bool alone = false);
  // Queues a request given whole (`request`: the head and any body, outliving the exchange),
  // as Exchange does.
  uint64_t ExchangeRaw(const std::string& request, Clock::time_point deadline, Callback done);
  // Ends exchange `ticket` at once with operation_aborted, if it is still on the connection:
  // alone, the connection is closed; behind or ahead of others, a written request's answer is
  // read and dropped and an unwritten one is not sent. With `move`, an unwritten exchange ends
  // `behind` (unsent): its caller sends it on another connection.
  void Cancel(uint64_t ticket, bool move = false);
  // The earliest deadline of the exchanges still waiting for an answer (max() when none).
  Clock::time_point NextDeadline() const;
  // Ends what is past its deadline at `now`: the oldest exchange in flight times out with the
  // connection (the exchanges behind it end `behind`); a later one times out alone.
  void Expire(Clock::time_point now);
  // The tags of the exchanges behind the oldest one when it has been in flight since before
  // `slow_since`: written ones (`written`) and ones not written yet.
  void FollowersOfSlowHead(Clock::time_point slow_since, std::vector<void*>* written,
                           std::vector<void*>* unwritten) const;
  // Ends every exchange with operation_aborted and closes the socket.
  void Close();

 private:
  enum class State : uint8_t { kQueued, kWriting, kWritten };
  struct Slot {
    const std::string* head = nullptr;
    const std::string* body = nullptr;
    char length[32];  // the Content-Length value and the blank line
    uint8_t length_size = 0;
    State state = State::kQueued;
    bool cancelled = false;  // its callback was called: its answer is dropped, or it is not sent
    bool reused = false;     // it was queued on a connection that had answered before
    bool alone = false;      // nothing is to be queued behind it (Exchange's `alone`)
    Clock::time_point since;
    Clock::time_point deadline;
    uint64_t ticket = 0;
    void* tag = nullptr;
    Callback done;
    std::shared_ptr<void> keep;
  };
  Slot& At(size_t i) { return ring_[(first_ + i) % ring_.size()]; }
  const Slot& At(size_t i) const { return ring_[(first_ + i) % ring_.size()]; }
  uint64_t Push(const std::string* head, const std::string* body, bool with_length,
                Clock::time_point deadline, Callback done, std::shared_ptr<void> keep, void* tag,
                bool alone);
  // Removes the oldest slot, keeping what its write may still use until the write ends.
  Slot PopFront();
  // Drops cancelled slots at the front that will get no answer (never written).
  void DropUnsentFront();
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
  void OnWritten(error_code ec);
  void ReadSome();
  void OnRead(error_code ec, size_t n);
  // The oldest exchange's answer is complete.
  void Complete(bool peer_closed);
  // Ends the connection: the oldest exchange with `ec` (its timeout when `timed_out`), the
  // ones behind it as cut. `broken`: the peer closed after answering a pipelined request.
  void Fail(error_code ec, bool timed_out, bool broken);
  void CloseSocket();

  const Url& url_;
  const std::string& head_;
  const std::string& gzip_head_;
  Resolver resolver_;
  size_t max_response_bytes_;
  bool verify_tls_;
  Listener listener_;
  std::optional<Socket> plain_;
  std::optional<boost::asio::ssl::stream<Socket>> tls_stream_;
  static constexpr size_t kFirstReadSize = 16 * 1024;
  static constexpr size_t kMaxReadSize = 64 * 1024;
  boost::beast::flat_buffer buffer_;
  Counter* reads_;
  bool for_alone_ = false;
  std::vector<Slot> ring_;  // capacity max_depth
  size_t first_ = 0;        // the ring index of the oldest slot
  size_t size_ = 0;
  uint64_t next_ticket_ = 1;
  std::vector<boost::asio::const_buffer> write_buffers_;
  std::vector<std::array<char, 32>> write_lengths_;  // the lengths the write in flight sends
  // What the write in flight still reads from: the kept objects of slots ended meanwhile.
  std::vector<std::shared_ptr<void>> write_keep_;
  UpstreamResponse response_;
  std::optional<ResponseReader> reader_;
  Clock::time_point idle_since_;
  uint64_t answered_ = 0;    // answers read on this connection
  bool connecting_ = false;  // a lookup, connect or handshake is in flight
  bool connected_ = false;
  bool closed_ = false;
  bool writing_ = false;
  bool reading_ = false;
  bool got_some_ = false;   // a byte of the oldest exchange's answer arrived
  error_code write_error_;  // a write failed while a read was in flight
  // When the last answer was read, requests written after it were waiting for theirs.
  bool written_behind_answer_ = false;
};

}  // namespace switchyard::upstream_internal
