#include "api/net/http_server.h"

#include <pthread.h>
#include <sys/socket.h>

#include <array>
#include <boost/asio/basic_waitable_timer.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/detect_ssl.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/read_size.hpp>
#include <boost/beast/http/basic_parser.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/status.hpp>
#include <chrono>
#include <deque>

#include "absl/strings/ascii.h"
#include "api/net/internal/http_server_worker.h"
#include "api/net/internal/http_wire.h"
#include "api/net/write_in_place.h"
#include "common/clock.h"
#include "common/cpu.h"
#include "common/gzip.h"
#include "fmt/format.h"

namespace switchyard {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using boost::system::error_code;
using http_wire::EqualsIgnoringCase;
using http_wire::IsBodiless;
using http_wire::IsWebSocketUpgrade;
using http_wire::RequestReader;
using http_wire::WriteHead;
using http_wire::WritePreflightHead;

namespace {

// The worker the calling thread is, set once when a worker thread starts.
thread_local const HttpServer* tls_server = nullptr;
thread_local size_t tls_worker = 0;

using ReusePort = asio::detail::socket_option::boolean<SOL_SOCKET, SO_REUSEPORT>;

using SteadyClock = std::chrono::steady_clock;
// Bound to the worker's io_context executor type: no type-erased executor is copied per
// operation.
using Socket = asio::basic_stream_socket<tcp, asio::io_context::executor_type>;
using Timer = asio::basic_waitable_timer<SteadyClock, asio::wait_traits<SteadyClock>,
                                         asio::io_context::executor_type>;

// The TCP socket under a session's stream, for what TLS leaves to TCP (cancel, shutdown,
// close).
Socket& RawSocket(Socket& socket) { return socket; }
tcp::socket& RawSocket(TlsStream& stream) { return beast::get_lowest_layer(stream).socket(); }

// The client's address, unspecified when the socket cannot tell.
template <typename S>
asio::ip::address PeerOf(const S& socket) {
  error_code ec;
  const tcp::endpoint remote = socket.remote_endpoint(ec);
  return ec ? asio::ip::address() : remote.address();
}

}  // namespace

ConnectionSlot& ConnectionSlot::operator=(ConnectionSlot&& other) noexcept {
  if (this != &other) {
    if (server_ != nullptr) server_->ReleaseUpgraded();
    server_ = std::exchange(other.server_, nullptr);
  }
  return *this;
}

ConnectionSlot::~ConnectionSlot() {
  if (server_ != nullptr) server_->ReleaseUpgraded();
}

// What the server's stop sees of a session, whatever its stream. Lives on one worker's thread.
class HttpServer::Session {
 public:
  virtual ~Session() = default;
  virtual void ForceClose() = 0;
  // Stops reading; the connection closes once the answers it owes are written.
  virtual void Drain() = 0;
};

// One client connection over `Stream`: Socket (plain TCP) or TlsStream (its handshake done),
// fixed per connection so that the plain path has no indirection per read or write. Lives on
// one worker's thread; every member is touched only there. Requests are read with
// RequestReader from one buffer (several may arrive in one read) and answered in order by one
// gathered write of head and body each. One timer guards every phase: it is moved only when a
// phase needs an earlier deadline than it holds, and when it fires it looks at the deadline of
// the moment.
template <typename Stream>
class HttpServer::StreamSession final : public HttpServer::Session,
                                        public std::enable_shared_from_this<StreamSession<Stream>> {
  static constexpr bool kTls = std::is_same_v<Stream, TlsStream>;

 public:
  // A plain connection.
  StreamSession(tcp::socket socket, asio::io_context& io_context, const HttpServerOptions& options,
                RequestHandler* handler, ApiMetrics* metrics, HttpServer* server) requires(!kTls)
      : stream_(io_context.get_executor()),
        options_(options),
        cors_(server->cors_),
        regions_(server->regions_.get()),
        handler_(handler),
        metrics_(metrics),
        server_(server),
        timer_(io_context.get_executor()) {
    peer_ = PeerOf(socket);
    error_code ec;
    const tcp protocol = socket.local_endpoint(ec).protocol();
    if (!ec) stream_.assign(protocol, socket.release(ec), ec);
    if (ec) closed_ = true;
  }

  // A TLS connection whose handshake is done.
  StreamSession(std::unique_ptr<TlsConnection> connection, asio::io_context& io_context,
                const HttpServerOptions& options, RequestHandler* handler, ApiMetrics* metrics,
                HttpServer* server) requires(kTls)
      : stream_(std::move(connection->stream)),
        tls_context_(std::move(connection->context)),
        options_(options),
        cors_(server->cors_),
        regions_(server->regions_.get()),
        handler_(handler),
        metrics_(metrics),
        server_(server),
        timer_(io_context.get_executor()) {
    peer_ = PeerOf(RawSocket(stream_));
  }

  ~StreamSession() override {
    metrics_->connections_open.Add(-1);
    server_->OnSessionClosed();
  }

  void Start() { ReadNext(); }
  void ForceClose() override { Close(); }

  void Drain() override {
    read_closed_ = true;
    if (reading_ && phase_ == Phase::kWaiting) {
      error_code ignored;
      RawSocket(stream_).cancel(ignored);
    }
    if (queue_.empty() && !writing_) Close();
  }

 private:
  enum class Phase { kWaiting, kHeader, kBody };  // of the request being read
  struct Pending {
    bool ready = false;
    bool keep_alive = true;
    std::string head;
    std::string body;
  };

  // --- deadlines ---
  void UpdateTimer() {
    const SteadyClock::time_point deadline = std::min(read_deadline_, write_deadline_);
    if (deadline == SteadyClock::time_point::max()) return;
    if (timer_armed_ && timer_expiry_ <= deadline) return;  // fires first, then looks again
    timer_armed_ = true;
    timer_expiry_ = deadline;
    timer_.expires_at(deadline);
    timer_.async_wait(
        [self = this->shared_from_this(), generation = ++timer_generation_](error_code ec) {
          if (ec || generation != self->timer_generation_) return;
          self->timer_armed_ = false;
          self->OnTimer();
        });
  }

  void OnTimer() {
    if (closed_) return;
    if (SteadyClock::now() >= std::min(read_deadline_, write_deadline_)) {
      metrics_->http_timeouts.Increment();
      Close();
      return;
    }
    UpdateTimer();
  }

  void SetReadDeadline(absl::Duration timeout) {
    read_deadline_ = SteadyClock::now() + ToChrono(timeout);
    UpdateTimer();
  }

  // --- reading ---
  void ReadNext() {
    if (read_closed_ || closed_ || reading_) return;
    if (queue_.size() >= options_.max_pipelined) return;  // resumed by OnWritten
    if (!reader_) {
      phase_ = Phase::kWaiting;
      request_ = HttpRequest();
      request_.peer = peer_;
      reader_.emplace(&request_, options_.gzip.enabled);
      reader_->eager(true);
      reader_->body_limit(options_.max_body_bytes);
      reader_->header_limit(static_cast<uint32_t>(options_.max_header_bytes));
    }
    if (buffer_.size() > 0) {
      Parse();
      return;
    }
    // An answer is owed and the last read left the socket empty: the client most likely waits
    // for that answer, so a read now would fail (EAGAIN) on the request's path. OnWritten reads.
    if (!queue_.empty() && socket_drained_) return;
    if (phase_ == Phase::kWaiting) {
      // Waiting for the next request: the idle timeout, or none while answers are owed (the
      // upstream deadlines bound those).
      if (queue_.empty()) {
        SetReadDeadline(options_.idle_timeout);
      } else {
        read_deadline_ = SteadyClock::time_point::max();
      }
    }
    ReadMore();
  }

  void OnRead(error_code ec, size_t n) {
    if (closed_) return;
    if (ec) {
      if (phase_ != Phase::kWaiting && ec != asio::error::operation_aborted) {
        metrics_->http_bad_requests.Increment();
        QueueLocal(400, "malformed HTTP request");
        return;
      }
      read_closed_ = true;
      if (queue_.empty() && !writing_) Close();
      return;
    }
    buffer_.commit(n);
    metrics_->http_reads.Increment();
    if (phase_ == Phase::kWaiting) read_deadline_ = SteadyClock::time_point::max();
    Parse();
  }

  // Feeds the buffer to the reader: a whole request is handled, a partial one is read on
  // under the header or body timeout, a bad one is answered and the connection closed.
  void Parse() {
    error_code ec;
    const size_t used = reader_->put(buffer_.data(), ec);
    buffer_.consume(used);
    if (ec && ec != http::error::need_more) {
      OnParseError(ec);
      return;
    }
    if (reader_->is_done()) {
      read_deadline_ = SteadyClock::time_point::max();
      if (OfferUpgrade()) return;
      OnRequest();
      return;
    }
    if (!ec && used > 0 && buffer_.size() > 0) {
      Parse();
      return;
    }
    if (!reader_->is_header_done()) {
      if (phase_ != Phase::kHeader) {
        phase_ = Phase::kHeader;
        SetReadDeadline(options_.header_timeout);
      }
    } else if (phase_ != Phase::kBody) {
      phase_ = Phase::kBody;
      if (OfferUpgrade()) return;
      SetReadDeadline(options_.body_timeout);
      MaybeContinue();
    }
    ReadMore();
  }

  // Reads up to kReadSize bytes, all offered from the first read: a buffer left to grow by itself
  // (Beast's read_size offers its free capacity, at least 512 bytes) stayed at 512 bytes.
  void ReadMore() {
    reading_ = true;
    buffer_.reserve(kReadSize);
    const size_t offered = beast::read_size(buffer_, kReadSize);
    stream_.async_read_some(buffer_.prepare(offered),
                            [self = this->shared_from_this(), offered](error_code ec, size_t n) {
                              self->reading_ = false;
                              self->socket_drained_ = n < offered;
                              self->OnRead(ec, n);
                            });
  }

  void OnParseError(error_code ec) {
    read_deadline_ = SteadyClock::time_point::max();
    if (ec == http::error::body_limit) {
      metrics_->http_body_too_large.Increment();
      QueueLocal(
          413, fmt::format("request body exceeds the limit of {} bytes", options_.max_body_bytes));
    } else if (ec == http::error::header_limit) {
      metrics_->http_bad_requests.Increment();
      QueueLocal(431, "request headers too large");
    } else {
      metrics_->http_bad_requests.Increment();
      QueueLocal(400, "malformed HTTP request");
    }
  }

  // A client that asks may wait for "100 Continue" before it sends the body (curl does for
  // bodies over 1 KiB). Sent only when no answer is being written; otherwise the client sends
  // the body after its own wait.
  void MaybeContinue() {
    if (writing_ || !queue_.empty() || !reader_->expects_continue()) return;
    writing_ = true;
    write_deadline_ = SteadyClock::now() + ToChrono(options_.write_timeout);
    UpdateTimer();
    static constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
    asio::async_write(stream_, asio::buffer(kContinue.data(), kContinue.size()),
                      [self = this->shared_from_this()](error_code ec, size_t) {
                        self->writing_ = false;
                        self->write_deadline_ = SteadyClock::time_point::max();
                        if (ec) return self->Close();
                        self->WriteNext();
                      });
  }

  // Gives the connection to the upgrade handler when the request asks for a WebSocket and
  // nothing else is in flight (bytes read past the request, which a client does not send
  // before the handshake answer, are dropped).
  bool OfferUpgrade() {
    if (!server_->upgrade_handler_ || !queue_.empty() || writing_ ||
        !IsWebSocketUpgrade(request_, reader_->version())) {
      return false;
    }
    if (!cors_.AllowsWebSocket(request_.Header("Origin"))) {
      QueueLocal(403, "origin not allowed");
      return true;
    }
    closed_ = true;
    read_closed_ = true;
    ++timer_generation_;
    error_code ignored;
    timer_.cancel(ignored);
    reader_.reset();
    if constexpr (kTls) {
      server_->Upgrade(tls_worker,
                       std::make_unique<TlsConnection>(std::move(tls_context_), std::move(stream_)),
                       std::optional<HttpRequest>(std::move(request_)));
    } else {
      error_code ec;
      const tcp protocol = stream_.local_endpoint(ec).protocol();
      const auto handle = stream_.release(ec);
      if (ec) return true;
      tcp::socket socket(stream_.get_executor());
      socket.assign(protocol, handle, ec);
      if (ec) return true;
      server_->Upgrade(tls_worker, std::move(socket),
                       std::optional<HttpRequest>(std::move(request_)));
    }
    return true;
  }

  void OnRequest() {
    metrics_->http_requests.Increment();
    const unsigned version = reader_->version();
    const bool keep_alive = reader_->keep_alive();
    if (!reader_->content_encoding().empty() && !DecodeBody()) return;
    reader_.reset();
    const bool accepts_gzip = request_.accepts_gzip;
    Pending* pending = &queue_.emplace_back();
    pending->keep_alive = keep_alive;
    if (!keep_alive) read_closed_ = true;
    if (regions_ != nullptr && request_.method == "GET") {
      if (std::optional<RegionAnswer> region = regions_->Answer(request_.target, peer_)) {
        AnswerRegion(*std::move(region), version, keep_alive, *pending);
        ReadNext();
        return;
      }
    }
    if (cors_.enabled()) {
      const std::optional<std::string_view> origin = request_.Header("Origin");
      if (cors_.IsPreflight(request_.method, origin,
                            request_.Header("Access-Control-Request-Method"))) {
        AnswerPreflight(*origin, version, keep_alive, *pending);
        ReadNext();
        return;
      }
    }
    std::optional<std::string> origin = AllowedOrigin(/*count=*/true);
    handler_->Handle(
        std::move(request_), [self = this->shared_from_this(), pending, keep_alive, version,
                              accepts_gzip, origin = std::move(origin)](HttpResponse answer) {
          const bool vary = self->options_.gzip.enabled && self->Encode(answer, accepts_gzip);
          WriteHead(answer, version, keep_alive, self->cors_, origin, vary, pending->head);
          if (!IsBodiless(answer.status)) pending->body = std::move(answer.body);
          pending->ready = true;
          self->WriteNext();
        });
    ReadNext();
  }

  // A request body sent with Content-Encoding: inflated in place when it is gzip and gzip is
  // on, within max_body_bytes; otherwise answered (415, 413 or 400, and the connection closes)
  // and false.
  bool DecodeBody() {
    std::string_view encoding = reader_->content_encoding();
    while (!encoding.empty() && encoding.back() == ' ') encoding.remove_suffix(1);
    if (EqualsIgnoringCase(encoding, "identity")) return true;
    if (!options_.gzip.enabled ||
        !(EqualsIgnoringCase(encoding, "gzip") || EqualsIgnoringCase(encoding, "x-gzip"))) {
      metrics_->http_unsupported_encodings.Increment();
      QueueLocal(415, fmt::format("request Content-Encoding {} is not accepted{}", encoding,
                                  options_.gzip.enabled ? " (only gzip is)" : ""));
      return false;
    }
    std::string inflated;
    const absl::Status status =
        GzipInflate(request_.body, options_.max_body_bytes, &inflated, HttpRequest::kBodySlack);
    if (absl::IsResourceExhausted(status)) {
      metrics_->http_body_too_large.Increment();
      QueueLocal(413, fmt::format("request body exceeds the limit of {} bytes once inflated",
                                  options_.max_body_bytes));
      return false;
    }
    if (!status.ok()) {
      metrics_->http_bad_gzip_bodies.Increment();
      QueueLocal(400, fmt::format("request body (Content-Encoding: gzip) is not valid gzip: {}",
                                  std::string(status.message())));
      return false;
    }
    metrics_->http_gzip_bodies.Increment();
    request_.body = std::move(inflated);
    return true;
  }

  // With gzip on: compresses the body of `answer` for a client that accepts gzip when it has at
  // least min_bytes and comes out smaller. Returns whether the answer's encoding depends on
  // Accept-Encoding (every answer with a body of at least min_bytes), for Vary.
  bool Encode(HttpResponse& answer, bool accepts_gzip) {
    if (IsBodiless(answer.status)) return false;
    if (answer.gzip) {
      metrics_->http_gzip_passthrough.Increment();
      metrics_->http_gzip_passthrough_bytes.Increment(answer.body.size());
      return true;
    }
    // Below the threshold no client gets it compressed: Accept-Encoding changes nothing.
    if (answer.body.size() < options_.gzip.min_bytes) return false;
    if (!accepts_gzip) return true;
    std::string compressed;
    GzipCompress(answer.body, options_.gzip.level, &compressed);
    if (compressed.size() >= answer.body.size()) return true;
    metrics_->http_gzip_answers.Increment();
    metrics_->http_gzip_input_bytes.Increment(answer.body.size());
    metrics_->http_gzip_output_bytes.Increment(compressed.size());
    answer.body = std::move(compressed);
    answer.gzip = true;
    return true;
  }

  // The request's Origin when the answer's CORS headers depend on it and it is allowed; a
  // refusal is counted when `count`.
  std::optional<std::string> AllowedOrigin(bool count) const {
    if (!cors_.needs_origin()) return std::nullopt;
    const std::optional<std::string_view> origin = request_.Header("Origin");
    if (!origin) return std::nullopt;
    if (!(count ? cors_.AllowsOrigin(*origin) : cors_.Matches(*origin))) return std::nullopt;
    return std::string(*origin);
  }

  // Answers a CORS preflight here, without the handler: 204 with the CORS headers, or 403 for
  // an origin that is not allowed.
  void AnswerPreflight(std::string_view origin, unsigned version, bool keep_alive,
                       Pending& pending) {
    const std::string lines =
        cors_.PreflightHeaders(origin, request_.Header("Access-Control-Request-Headers"));
    if (lines.empty()) {
      HttpResponse answer = handler_->LocalAnswer(403, "origin not allowed");
      answer.status = 403;
      WriteHead(answer, version, keep_alive, cors_, std::nullopt, /*vary=*/false, pending.head);
      pending.body = std::move(answer.body);
    } else {
      WritePreflightHead(lines, version, keep_alive, pending.head);
    }
    pending.ready = true;
    WriteNext();
  }

  // Answers GET /_redirect or /_getlink here, without the handler.
  void AnswerRegion(RegionAnswer region, unsigned version, bool keep_alive, Pending& pending) {
    HttpResponse answer;
    answer.status = region.status;
    answer.body = std::move(region.body);
    if (!region.location.empty())
      answer.headers.emplace_back("Location", std::move(region.location));
    answer.headers.emplace_back("Cache-Control", "no-store");
    WriteHead(answer, version, keep_alive, cors_, AllowedOrigin(/*count=*/true), /*vary=*/false,
              pending.head);
    pending.body = std::move(answer.body);
    pending.ready = true;
    WriteNext();
  }

  // Queues an answer the server makes itself, after which the connection closes.
  void QueueLocal(unsigned status, std::string_view reason) {
    read_closed_ = true;
    reader_.reset();
    HttpResponse answer = handler_->LocalAnswer(status, reason);
    answer.status = status;
    Pending& pending = queue_.emplace_back();
    pending.keep_alive = false;
    WriteHead(answer, 11, false, cors_, AllowedOrigin(/*count=*/false), /*vary=*/false,
              pending.head);
    pending.body = std::move(answer.body);
    pending.ready = true;
    WriteNext();
  }

  // --- writing ---
  void WriteNext() {
    if (writing_ || closed_ || queue_.empty() || !queue_.front().ready) return;
    writing_ = true;
    write_deadline_ = SteadyClock::now() + ToChrono(options_.write_timeout);
    UpdateTimer();
    const Pending& front = queue_.front();
    const std::array<asio::const_buffer, 2> buffers = {asio::buffer(front.head),
                                                       asio::buffer(front.body)};
    if constexpr (!kTls) {
      WriteInPlaceOrAsync(stream_, buffers, [self = this->shared_from_this()](error_code ec) {
        self->OnWritten(ec);
      });
      return;
    }
    asio::async_write(stream_, buffers, [self = this->shared_from_this()](error_code ec, size_t) {
      self->OnWritten(ec);
    });
  }

  void OnWritten(error_code ec) {
    writing_ = false;
    write_deadline_ = SteadyClock::time_point::max();
    if (ec) {
      Close();
      return;
    }
    const bool keep_alive = queue_.front().keep_alive;
    queue_.pop_front();
    if (!keep_alive) {
      error_code ignored;
      RawSocket(stream_).shutdown(tcp::socket::shutdown_send, ignored);
      Close();
      return;
    }
    if (queue_.empty() && read_closed_ && !reading_) {
      Close();
      return;
    }
    WriteNext();
    if (queue_.empty() && reading_ && phase_ == Phase::kWaiting) {
      SetReadDeadline(options_.idle_timeout);  // nothing owed any more: the idle wait counts
    }
    ReadNext();
  }

  void Close() {
    if (closed_) return;
    closed_ = true;
    ++timer_generation_;
    error_code ignored;
    timer_.cancel(ignored);
    RawSocket(stream_).close(ignored);
  }

  Stream stream_;
  std::shared_ptr<asio::ssl::context> tls_context_;  // TLS: what stream_ was made with
  const HttpServerOptions& options_;
  const CorsPolicy& cors_;
  const RegionTable* regions_;  // null: regions off
  RequestHandler* handler_;
  ApiMetrics* metrics_;
  HttpServer* server_;
  Timer timer_;
  SteadyClock::time_point timer_expiry_;
  uint64_t timer_generation_ = 0;
  bool timer_armed_ = false;
  SteadyClock::time_point read_deadline_ = SteadyClock::time_point::max();
  SteadyClock::time_point write_deadline_ = SteadyClock::time_point::max();
  static constexpr size_t kReadSize = 4096;
  beast::flat_buffer buffer_;
  HttpRequest request_;
  boost::asio::ip::address peer_;  // of the connection, copied into each request
  std::optional<RequestReader> reader_;
  Phase phase_ = Phase::kWaiting;
  std::deque<Pending> queue_;  // deque: pointers to elements stay valid across push/pop
  bool reading_ = false;
  bool socket_drained_ = false;  // the last read took less than it was offered
  bool writing_ = false;
  bool read_closed_ = false;
  bool closed_ = false;
};

HttpServer::HttpServer(HttpServerOptions options, RequestHandlerFactory factory,
                       ApiMetrics* metrics)
    : options_(std::move(options)),
      cors_(options_.cors, &metrics->cors_preflights, &metrics->cors_origins_refused),
      factory_(std::move(factory)),
      metrics_(metrics) {
  if (!options_.regions.regions.empty()) {
    regions_ = std::make_unique<RegionTable>(options_.regions, &metrics->registry);
  }
  size_t threads = options_.threads;
  if (threads == 0) threads = UsableCpuCount();
  for (size_t i = 0; i < threads; ++i) workers_.push_back(std::make_unique<Worker>());
  listeners_.push_back(Listener{options_.port, 0, false});
}

HttpServer::~HttpServer() { Stop(); }

void HttpServer::SetUpgradeHandler(UpgradeHandler* handler, size_t max_connections) {
  upgrade_handler_ = handler;
  max_upgraded_ = max_connections;
}

size_t HttpServer::AddUpgradeListener(uint16_t port) {
  listeners_.push_back(Listener{port, 0, true});
  return listeners_.size() - 1;
}

uint16_t HttpServer::port(size_t listener) const {
  return listener < listeners_.size() ? listeners_[listener].port : 0;
}

asio::io_context& HttpServer::worker_context(size_t i) { return workers_[i]->io_context; }

std::optional<size_t> HttpServer::worker_of_this_thread() const {
  if (tls_server != this) return std::nullopt;
  return tls_worker;
}

size_t HttpServer::http_connections() const {
  absl::MutexLock lock(&mu_);
  return live_sessions_;
}

size_t HttpServer::upgraded_connections() const {
  absl::MutexLock lock(&mu_);
  return live_upgraded_;
}

// Every worker gets its own acceptor on the listener's port. With several workers they share
// the port through SO_REUSEPORT; a fixed port is first bound alone, since another process's
// SO_REUSEPORT listener on it would otherwise split the connections with this one instead of
// failing the bind. Port 0: the first acceptor takes a free port and the others join it.
absl::Status HttpServer::Bind(size_t index) {
  Listener& listener = listeners_[index];
  error_code ec;
  const asio::ip::address address = asio::ip::make_address(options_.address, ec);
  if (ec) return absl::InvalidArgumentError(fmt::format("bad listen address {}", options_.address));
  auto failed = [&] {
    return absl::UnavailableError(fmt::format("cannot listen on {}:{}: {}", options_.address,
                                              listener.requested_port, ec.message()));
  };
  const bool shared = workers_.size() > 1;
  uint16_t port = listener.requested_port;
  if (shared && port != 0) {
    tcp::acceptor probe(workers_[0]->io_context);
    probe.open(address.is_v6() ? tcp::v6() : tcp::v4(), ec);
    if (!ec) probe.set_option(asio::socket_base::reuse_address(true), ec);
    if (!ec) probe.bind(tcp::endpoint(address, port), ec);
    if (ec) return failed();
  }
  for (auto& worker : workers_) {
    auto acceptor = std::make_unique<tcp::acceptor>(worker->io_context);
    const tcp::endpoint endpoint(address, port);
    acceptor->open(endpoint.protocol(), ec);
    if (!ec) acceptor->set_option(asio::socket_base::reuse_address(true), ec);
    if (!ec && shared) acceptor->set_option(ReusePort(true), ec);
    if (!ec) acceptor->bind(endpoint, ec);
    if (!ec) acceptor->listen(asio::socket_base::max_listen_connections, ec);
    if (!ec && port == 0) port = acceptor->local_endpoint(ec).port();
    if (ec) return failed();
    worker->acceptors.push_back(std::move(acceptor));
  }
  listener.port = port;
  return absl::OkStatus();
}

absl::Status HttpServer::Start() {
  if (started_) return absl::FailedPreconditionError("HttpServer already started");
  if (options_.tls.enabled() && !tls_) {
    absl::StatusOr<std::unique_ptr<ListenerTls>> tls = ListenerTls::Create(options_.tls);
    if (!tls.ok()) return tls.status();
    tls_ = *std::move(tls);
  }
  for (size_t i = 0; i < listeners_.size(); ++i) {
    if (listeners_[i].upgrade && upgrade_handler_ == nullptr) {
      return absl::FailedPreconditionError("an upgrade listener needs an upgrade handler");
    }
    if (absl::Status s = Bind(i); !s.ok()) return s;
  }
  for (auto& worker : workers_) {
    worker->handler = factory_(worker->io_context);
    worker->guard.emplace(worker->io_context.get_executor());
  }
  started_ = true;
  for (size_t w = 0; w < workers_.size(); ++w) {
    for (size_t l = 0; l < listeners_.size(); ++l) {
      asio::post(workers_[w]->io_context, [this, w, l] { Accept(w, l); });
    }
  }
  for (size_t w = 0; w < workers_.size(); ++w) {
    workers_[w]->thread = std::thread([this, w] {
      tls_server = this;
      tls_worker = w;
      // Named for top -H and for the load harness's CPU accounting.
      pthread_setname_np(pthread_self(),
                         fmt::format("{}-{}", options_.thread_name, w).substr(0, 15).c_str());
      workers_[w]->io_context.run();
    });
  }
  return absl::OkStatus();
}

// The accepted socket is already on the worker's io_context: it is served right here.
void HttpServer::Accept(size_t worker, size_t listener) {
  workers_[worker]->acceptors[listener]->async_accept(
      [this, worker, listener](error_code ec, tcp::socket socket) {
        if (ec == asio::error::operation_aborted || stopping_) return;
        if (!ec) OnAccepted(worker, listener, std::move(socket));
        Accept(worker, listener);
      });
}

void HttpServer::OnAccepted(size_t worker, size_t listener, tcp::socket socket) {
  if (accept_observer_) accept_observer_(worker, socket);
  if (tls_) {
    StartTls(worker, listener, std::move(socket));
    return;
  }
  if (listeners_[listener].upgrade) {
    Upgrade(worker, std::move(socket), std::nullopt);
    return;
  }
  if (!AdmitHttp(socket)) return;
  StartSession(*workers_[worker], std::move(socket));
}

bool HttpServer::AdmitHttp(tcp::socket& socket) {
  bool admitted = false;
  {
    absl::MutexLock lock(&mu_);
    if (live_sessions_ < options_.max_connections) {
      ++live_sessions_;
      admitted = true;
    }
  }
  if (!admitted) {
    metrics_->connections_rejected.Increment();
    error_code ignored;
    socket.close(ignored);
    return false;
  }
  metrics_->connections_accepted.Increment();
  metrics_->connections_open.Add(1);
  return true;
}

void HttpServer::StartSession(Worker& worker, tcp::socket socket) {
  error_code ignored;
  socket.set_option(tcp::no_delay(true), ignored);
  socket.non_blocking(true, ignored);  // for WriteInPlaceOrAsync
  auto session = std::make_shared<StreamSession<Socket>>(
      std::move(socket), worker.io_context, options_, worker.handler.get(), metrics_, this);
  std::erase_if(worker.sessions, [](const auto& weak) { return weak.expired(); });
  worker.sessions.push_back(session);
  if (stopping_) {
    session->Drain();
  } else {
    session->Start();
  }
}

void HttpServer::StartTlsSession(Worker& worker, std::unique_ptr<TlsConnection> connection) {
  auto session = std::make_shared<StreamSession<TlsStream>>(
      std::move(connection), worker.io_context, options_, worker.handler.get(), metrics_, this);
  std::erase_if(worker.sessions, [](const auto& weak) { return weak.expired(); });
  worker.sessions.push_back(session);
  session->Start();
}

template <typename Connection>
void HttpServer::Upgrade(size_t worker, Connection connection, std::optional<HttpRequest> request) {
  bool admitted = false;
  if (!stopping_) {
    absl::MutexLock lock(&mu_);
    if (live_upgraded_ < max_upgraded_) {
      ++live_upgraded_;
      admitted = true;
    }
  }
  if (!admitted) {
    if (!stopping_) upgrade_handler_->OnRefused();  // counted before the client sees the close
    if constexpr (std::is_same_v<Connection, tcp::socket>) {
      error_code ignored;
      connection.close(ignored);
    }
    return;  // a TlsConnection closes as it goes
  }
  std::shared_ptr<UpgradedConnection> upgraded;
  if constexpr (std::is_same_v<Connection, tcp::socket>) {
    upgraded = upgrade_handler_->Adopt(worker, std::move(connection), std::move(request),
                                       ConnectionSlot(this));
  } else {
    upgraded = upgrade_handler_->AdoptTls(worker, std::move(connection), std::move(request),
                                          ConnectionSlot(this));
  }
  if (!upgraded) return;
  Worker& w = *workers_[worker];
  std::erase_if(w.upgraded, [](const auto& weak) { return weak.expired(); });
  w.upgraded.push_back(std::move(upgraded));
}

// The TLS handshake (http_server_tls.cc) hands its connections over with this one.
template void HttpServer::Upgrade(size_t worker, std::unique_ptr<TlsConnection> connection,
                                  std::optional<HttpRequest> request);

void HttpServer::OnSessionClosed() {
  absl::MutexLock lock(&mu_);
  --live_sessions_;
}

void HttpServer::ReleaseUpgraded() {
  absl::MutexLock lock(&mu_);
  --live_upgraded_;
}

void HttpServer::Stop() {
  if (stopped_) return;
  if (!started_) {
    // No worker ran (Start was not called or failed): the upgrade handler stops here.
    if (upgrade_handler_ != nullptr) {
      for (size_t i = 0; i < workers_.size(); ++i) upgrade_handler_->Shutdown(i);
      upgrade_handler_->Stopped();
    }
    stopped_ = true;
    return;
  }
  started_ = false;
  stopped_ = true;
  stopping_ = true;
  for (auto& worker : workers_) {
    asio::post(worker->io_context, [w = worker.get()] {
      error_code ignored;
      for (auto& acceptor : w->acceptors) acceptor->close(ignored);
      CloseHandshakes(*w);
      for (auto& weak : w->sessions) {
        if (auto session = weak.lock()) session->Drain();
      }
      for (auto& weak : w->upgraded) {
        if (auto connection = weak.lock()) connection->Drain();
      }
    });
  }
  {
    absl::MutexLock lock(&mu_);
    auto drained = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return live_sessions_ == 0 && live_upgraded_ == 0;
    };
    mu_.AwaitWithTimeout(absl::Condition(&drained), options_.drain_timeout);
  }
  // Whatever is left is cut off; each worker then runs out of work and its thread returns.
  for (size_t i = 0; i < workers_.size(); ++i) {
    asio::post(workers_[i]->io_context, [this, i, w = workers_[i].get()] {
      for (auto& weak : w->sessions) {
        if (auto session = weak.lock()) session->ForceClose();
      }
      for (auto& weak : w->upgraded) {
        if (auto connection = weak.lock()) connection->Close();
      }
      w->sessions.clear();
      w->handshakes.clear();
      w->upgraded.clear();
      if (w->handler) w->handler->Shutdown();
      if (upgrade_handler_ != nullptr) upgrade_handler_->Shutdown(i);
      w->guard.reset();
    });
  }
  for (auto& worker : workers_) {
    if (worker->thread.joinable()) worker->thread.join();
  }
  for (auto& worker : workers_) worker->acceptors.clear();
  if (upgrade_handler_ != nullptr) upgrade_handler_->Stopped();
}

}  // namespace switchyard
