#include "tests/support/fault_proxy.h"

#include <simdjson.h>

#include <algorithm>
#include <atomic>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/websocket/rfc6455.hpp>
#include <charconv>
#include <optional>
#include <string_view>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/url.h"
#include "fmt/format.h"

namespace switchyard::testing {
namespace {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;
using boost::system::error_code;
using Executor = net::any_io_executor;

constexpr auto kIdleTimeout = std::chrono::seconds(120);
constexpr auto kUpstreamTimeout = std::chrono::seconds(30);
constexpr uint64_t kBodyLimit = 64 << 20;
constexpr std::string_view kControlPath = "/_fault";
constexpr int kThreads = 2;

struct ModeName {
  FaultMode mode;
  std::string_view name;
};
constexpr ModeName kModeNames[] = {
    {FaultMode::kPass, "pass"},        {FaultMode::kBlackHole, "black_hole"},
    {FaultMode::kReset, "reset"},      {FaultMode::kStatus, "status"},
    {FaultMode::kTooMany, "too_many"}, {FaultMode::kDelay, "delay"},
    {FaultMode::kLag, "lag"},
};

std::string_view NameOf(FaultMode mode) {
  for (const ModeName& m : kModeNames) {
    if (m.mode == mode) return m.name;
  }
  return "pass";
}

// Subtracts `lag` (saturating at 0) from the decimal number at [begin, end) of `text`.
// Returns the length of the replacement.
size_t LagNumberAt(std::string* text, size_t begin, size_t end, uint64_t lag) {
  uint64_t value = 0;
  std::from_chars(text->data() + begin, text->data() + end, value);
  const std::string lagged = std::to_string(value > lag ? value - lag : 0);
  text->replace(begin, end - begin, lagged);
  return lagged.size();
}

size_t DigitsEnd(const std::string& text, size_t pos) {
  while (pos < text.size() && absl::ascii_isdigit(static_cast<unsigned char>(text[pos]))) ++pos;
  return pos;
}

size_t SkipSpaces(const std::string& text, size_t pos) {
  while (pos < text.size() && absl::ascii_isspace(static_cast<unsigned char>(text[pos]))) ++pos;
  return pos;
}

// Rewrites every `"slot":N` of `body` to N - lag. Account data is base64/base58 text and
// cannot hold a quoted key, so a plain scan is exact for RPC answers.
void LagContextSlots(std::string* body, uint64_t lag) {
  constexpr std::string_view kKey = "\"slot\"";
  for (size_t pos = body->find(kKey); pos != std::string::npos; pos = body->find(kKey, pos)) {
    pos += kKey.size();
    size_t colon = SkipSpaces(*body, pos);
    if (colon >= body->size() || (*body)[colon] != ':') continue;
    const size_t begin = SkipSpaces(*body, colon + 1);
    const size_t end = DigitsEnd(*body, begin);
    if (end == begin) continue;
    pos = begin + LagNumberAt(body, begin, end, lag);
  }
}

// Rewrites the numeric top-level `"result":N` of a single answer to N - lag.
void LagResult(std::string* body, uint64_t lag) {
  constexpr std::string_view kKey = "\"result\"";
  const size_t pos = body->find(kKey);
  if (pos == std::string::npos) return;
  const size_t colon = SkipSpaces(*body, pos + kKey.size());
  if (colon >= body->size() || (*body)[colon] != ':') return;
  const size_t begin = SkipSpaces(*body, colon + 1);
  const size_t end = DigitsEnd(*body, begin);
  if (end > begin) LagNumberAt(body, begin, end, lag);
}

// What kLag needs to know of a single JSON-RPC request.
struct RpcRequestView {
  bool single = false;  // an object, not a batch
  std::string method;
  std::string id = "null";  // as JSON text
  std::optional<uint64_t> min_context_slot;
};

RpcRequestView ViewRequest(simdjson::dom::parser& parser, const std::string& body) {
  RpcRequestView view;
  simdjson::dom::element doc;
  if (parser.parse(body).get(doc) != simdjson::SUCCESS) return view;
  simdjson::dom::object object;
  if (doc.get_object().get(object) != simdjson::SUCCESS) return view;
  view.single = true;
  std::string_view method;
  if (object["method"].get_string().get(method) == simdjson::SUCCESS) view.method = method;
  simdjson::dom::element id;
  if (object["id"].get(id) == simdjson::SUCCESS) view.id = simdjson::minify(id);
  simdjson::dom::array params;
  if (object["params"].get_array().get(params) != simdjson::SUCCESS) return view;
  for (simdjson::dom::element param : params) {
    uint64_t min = 0;
    if (param["minContextSlot"].get_uint64().get(min) == simdjson::SUCCESS) {
      view.min_context_slot = min;
    }
  }
  return view;
}

bool IsControl(const http::request<http::string_body>& req) {
  const std::string_view target(req.target().data(), req.target().size());
  return target.substr(0, target.find('?')) == kControlPath;
}

bool IsWebSocketUpgrade(const http::request<http::string_body>& req) {
  return beast::websocket::is_upgrade(req);
}

class FaultProxyImpl;

// One client connection and its upstream connection. Lives on its own strand; the proxy
// reaches it only by posting to that strand.
class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(FaultProxyImpl* proxy, tcp::socket socket, uint64_t id)
      : proxy_(proxy),
        executor_(socket.get_executor()),
        client_(std::move(socket)),
        upstream_(executor_),
        wake_(executor_),
        delay_timer_(executor_),
        id_(id) {
    // Waits on `wake_` end only when it is cancelled: at a switch of the fault.
    wake_.expires_at(net::steady_timer::time_point::max());
  }

  uint64_t id() const { return id_; }
  const Executor& executor() const { return executor_; }

  net::awaitable<void> Run();

  // On the strand: a switch of the fault.
  void OnFaultChanged(FaultMode mode) {
    if (closed_) return;
    if (mode == FaultMode::kReset) {
      if (!control_) Reset();
      return;
    }
    if (mode != FaultMode::kBlackHole) {
      // Wakes held pumps, and ends a sink so that its connection is dropped.
      wake_.cancel();
      if (sinking_) client_.cancel();
    }
  }

 private:
  void Reset() {
    closed_ = true;
    error_code ec;
    client_.socket().set_option(net::socket_base::linger(true, 0), ec);
    client_.close();
    upstream_.close();
    wake_.cancel();
    delay_timer_.cancel();
  }

  void Close() {
    closed_ = true;
    error_code ec;
    client_.socket().shutdown(tcp::socket::shutdown_send, ec);
    client_.close();
    upstream_.close();
    wake_.cancel();
    delay_timer_.cancel();
  }

  // Reads (and drops) requests until the client closes or the fault leaves kBlackHole; then
  // the connection is closed, its held requests unanswered.
  net::awaitable<void> Sink();
  // Answers `req` under `fault`; false when the connection is done.
  net::awaitable<bool> Handle(http::request<http::string_body>& req, const Fault& fault);
  net::awaitable<bool> Control(http::request<http::string_body>& req);
  // One request upstream and its answer; reconnects once when a reused connection had gone.
  net::awaitable<error_code> Exchange(http::request<http::string_body>& req,
                                      http::response<http::string_body>* res);
  net::awaitable<error_code> ExchangeOnce(http::request<http::string_body>& req,
                                          http::response<http::string_body>* res);
  net::awaitable<std::optional<uint64_t>> UpstreamSlot(const http::request<http::string_body>& req);
  net::awaitable<bool> Write(http::response<http::string_body>& res);
  net::awaitable<bool> Answer(const http::request<http::string_body>& req, http::status status,
                              std::string body, std::string_view content_type = "text/plain");
  net::awaitable<void> WebSocket(http::request<http::string_body>& req);
  net::awaitable<void> Pump(beast::tcp_stream& from, beast::flat_buffer& from_leftover,
                            beast::tcp_stream& to);
  // Waits while the fault is kBlackHole; false when the connection closed meanwhile.
  net::awaitable<bool> WaitWhileBlackHole();

  FaultProxyImpl* const proxy_;
  Executor executor_;
  beast::tcp_stream client_;
  beast::tcp_stream upstream_;
  net::steady_timer wake_;
  net::steady_timer delay_timer_;
  beast::flat_buffer client_buffer_;
  beast::flat_buffer upstream_buffer_;
  simdjson::dom::parser parser_;
  const uint64_t id_;
  bool upstream_open_ = false;
  bool closed_ = false;
  bool sinking_ = false;
  bool control_ = false;  // has served the control endpoint: a switch does not reset it
};

class FaultProxyImpl final : public FaultProxy {
 public:
  FaultProxyImpl() : acceptor_(ioc_) {}
  ~FaultProxyImpl() override {
    ioc_.stop();
    for (std::thread& thread : threads_) thread.join();
  }

  absl::Status Listen(const std::string& upstream_url, uint16_t port) {
    absl::StatusOr<Url> url = ParseUrl(upstream_url);
    if (!url.ok()) return url.status();
    if (url->tls) return absl::InvalidArgumentError("fault proxy upstream must be plain http");
    error_code ec;
    tcp::resolver resolver(ioc_);
    auto results = resolver.resolve(url->host, url->port, ec);
    if (ec || results.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("cannot resolve ", upstream_url, ": ", ec ? ec.message() : "no address"));
    }
    upstream_endpoint_ = results.begin()->endpoint();
    upstream_host_ = url->HostHeader();
    const tcp::endpoint local(net::ip::make_address_v4("127.0.0.1"), port);
    acceptor_.open(local.protocol(), ec);
    if (!ec) acceptor_.set_option(net::socket_base::reuse_address(true), ec);
    if (!ec) acceptor_.bind(local, ec);
    if (!ec) acceptor_.listen(net::socket_base::max_listen_connections, ec);
    if (ec) {
      return absl::UnavailableError(
          absl::StrCat("fault proxy cannot listen on port ", port, ": ", ec.message()));
    }
    port_ = acceptor_.local_endpoint().port();
    net::co_spawn(ioc_, Accept(), [](std::exception_ptr) {});
    for (int i = 0; i < kThreads; ++i) threads_.emplace_back([this] { ioc_.run(); });
    return absl::OkStatus();
  }

  void Set(const Fault& fault) override { SetExcept(fault, 0); }

  // Switches the fault and tells every open session but `except` (the control session that
  // asked for the switch, 0: none).
  void SetExcept(const Fault& fault, uint64_t except) {
    std::vector<std::shared_ptr<Session>> sessions;
    {
      absl::MutexLock lock(&mu_);
      fault_ = fault;
      for (auto& [id, weak] : sessions_) {
        if (id == except) continue;
        if (std::shared_ptr<Session> session = weak.lock()) sessions.push_back(std::move(session));
      }
    }
    for (std::shared_ptr<Session>& session : sessions) {
      net::post(session->executor(),
                [session, mode = fault.mode] { session->OnFaultChanged(mode); });
    }
  }

  Fault fault() const override {
    absl::MutexLock lock(&mu_);
    return fault_;
  }
  uint16_t port() const override { return port_; }
  uint64_t requests() const override { return requests_.load(); }
  uint64_t connections() const override { return connections_.load(); }

  const tcp::endpoint& upstream_endpoint() const { return upstream_endpoint_; }
  const std::string& upstream_host() const { return upstream_host_; }
  void CountRequest() { ++requests_; }
  void Forget(uint64_t id) {
    absl::MutexLock lock(&mu_);
    sessions_.erase(id);
  }

 private:
  net::awaitable<void> Accept() {
    for (;;) {
      error_code ec;
      tcp::socket socket = co_await acceptor_.async_accept(
          net::make_strand(ioc_), net::redirect_error(net::use_awaitable, ec));
      if (ec) {
        if (ec == net::error::operation_aborted) co_return;
        continue;
      }
      ++connections_;
      const uint64_t id = ++next_id_;
      auto session = std::make_shared<Session>(this, std::move(socket), id);
      {
        absl::MutexLock lock(&mu_);
        sessions_[id] = session;
      }
      net::co_spawn(session->executor(), session->Run(),
                    [this, id, session](std::exception_ptr) { Forget(id); });
    }
  }

  net::io_context ioc_;
  tcp::acceptor acceptor_;
  std::vector<std::thread> threads_;
  tcp::endpoint upstream_endpoint_;
  std::string upstream_host_;
  uint16_t port_ = 0;
  uint64_t next_id_ = 0;  // the accept loop's only
  std::atomic<uint64_t> requests_{0};
  std::atomic<uint64_t> connections_{0};
  mutable absl::Mutex mu_;
  Fault fault_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<uint64_t, std::weak_ptr<Session>> sessions_ ABSL_GUARDED_BY(mu_);
};

absl::StatusOr<Fault> ParseFaultJson(std::string_view json) {
  simdjson::dom::parser parser;
  simdjson::dom::object object;
  if (parser.parse(json.data(), json.size()).get_object().get(object) != simdjson::SUCCESS) {
    return absl::InvalidArgumentError("the fault must be a JSON object");
  }
  Fault fault;
  std::string_view mode;
  if (object["mode"].get_string().get(mode) != simdjson::SUCCESS) {
    return absl::InvalidArgumentError("the fault needs a string \"mode\"");
  }
  bool known = false;
  for (const ModeName& m : kModeNames) {
    if (m.name == mode) {
      fault.mode = m.mode;
      known = true;
    }
  }
  if (!known) return absl::InvalidArgumentError(fmt::format("unknown mode \"{}\"", mode));
  uint64_t value = 0;
  if (object["status"].get_uint64().get(value) == simdjson::SUCCESS) {
    if (value < 100 || value > 599) return absl::InvalidArgumentError("status must be 100..599");
    fault.status = static_cast<unsigned>(value);
  }
  if (object["retry_after_seconds"].get_uint64().get(value) == simdjson::SUCCESS) {
    fault.retry_after_seconds = static_cast<uint32_t>(value);
  }
  if (object["delay_ms"].get_uint64().get(value) == simdjson::SUCCESS) {
    fault.delay = absl::Milliseconds(value);
  }
  if (object["lag_slots"].get_uint64().get(value) == simdjson::SUCCESS) fault.lag_slots = value;
  return fault;
}

net::awaitable<void> Session::Run() {
  auto self = shared_from_this();
  while (!closed_) {
    if (proxy_->fault().mode == FaultMode::kBlackHole) {
      co_await Sink();
      co_return;
    }
    http::request_parser<http::string_body> parser;
    parser.body_limit(kBodyLimit);
    error_code ec;
    client_.expires_after(kIdleTimeout);
    co_await http::async_read(client_, client_buffer_, parser,
                              net::redirect_error(net::use_awaitable, ec));
    if (closed_) co_return;
    if (ec) {
      Close();
      co_return;
    }
    http::request<http::string_body> req = parser.release();
    if (IsControl(req)) {
      if (!co_await Control(req)) co_return;
      continue;
    }
    proxy_->CountRequest();
    if (!co_await Handle(req, proxy_->fault())) co_return;
  }
}

net::awaitable<void> Session::Sink() {
  sinking_ = true;
  client_.expires_never();
  while (!closed_ && proxy_->fault().mode == FaultMode::kBlackHole) {
    http::request_parser<http::string_body> parser;
    parser.body_limit(kBodyLimit);
    error_code ec;
    co_await http::async_read(client_, client_buffer_, parser,
                              net::redirect_error(net::use_awaitable, ec));
    if (ec) break;
    if (IsControl(parser.get())) {
      // The control path is served even here, so that the black hole can be ended.
      http::request<http::string_body> req = parser.release();
      sinking_ = false;
      if (!co_await Control(req)) co_return;
      if (proxy_->fault().mode != FaultMode::kBlackHole) {
        co_await Run();
        co_return;
      }
      sinking_ = true;
      continue;
    }
    proxy_->CountRequest();
  }
  sinking_ = false;
  if (!closed_) Close();
}

net::awaitable<bool> Session::Control(http::request<http::string_body>& req) {
  control_ = true;
  if (req.method() == http::verb::post) {
    absl::StatusOr<Fault> fault = ParseFaultJson(req.body());
    if (!fault.ok()) {
      co_return co_await Answer(req, http::status::bad_request,
                                absl::StrCat(fault.status().message(), "\n"));
    }
    proxy_->SetExcept(*fault, id_);
  } else if (req.method() != http::verb::get) {
    co_return co_await Answer(req, http::status::method_not_allowed, "GET or POST\n");
  }
  const Fault fault = proxy_->fault();
  co_return co_await Answer(
      req, http::status::ok,
      fmt::format("{{\"mode\":\"{}\",\"status\":{},\"retry_after_seconds\":{},\"delay_ms\":{},"
                  "\"lag_slots\":{},\"requests\":{},\"connections\":{}}}",
                  NameOf(fault.mode), fault.status, fault.retry_after_seconds,
                  absl::ToInt64Milliseconds(fault.delay), fault.lag_slots, proxy_->requests(),
                  proxy_->connections()),
      "application/json");
}

net::awaitable<bool> Session::Handle(http::request<http::string_body>& req, const Fault& fault) {
  switch (fault.mode) {
    case FaultMode::kReset:
      Reset();
      co_return false;
    case FaultMode::kBlackHole:
      co_await Sink();
      co_return false;
    case FaultMode::kStatus:
      co_return co_await Answer(req, static_cast<http::status>(fault.status),
                                absl::StrCat("fault proxy: status ", fault.status, "\n"));
    case FaultMode::kTooMany: {
      http::response<http::string_body> res(http::status::too_many_requests, req.version());
      res.set(http::field::content_type, "text/plain");
      res.set(http::field::retry_after, std::to_string(fault.retry_after_seconds));
      res.body() = "fault proxy: too many requests\n";
      res.keep_alive(req.keep_alive());
      res.prepare_payload();
      co_return co_await Write(res);
    }
    case FaultMode::kPass:
    case FaultMode::kDelay:
    case FaultMode::kLag:
      break;
  }
  if (IsWebSocketUpgrade(req)) {
    co_await WebSocket(req);
    co_return false;
  }
  const bool lag = fault.mode == FaultMode::kLag && fault.lag_slots > 0;
  RpcRequestView view;
  if (lag) {
    view = ViewRequest(parser_, req.body());
    if (view.single && view.min_context_slot.has_value()) {
      std::optional<uint64_t> current = co_await UpstreamSlot(req);
      if (closed_) co_return false;
      if (current.has_value()) {
        const uint64_t lagged = *current > fault.lag_slots ? *current - fault.lag_slots : 0;
        if (*view.min_context_slot > lagged) {
          co_return co_await Answer(
              req, http::status::ok,
              absl::StrCat("{\"jsonrpc\":\"2.0\",\"error\":{\"code\":-32016,\"message\":"
                           "\"Minimum context slot has not been reached\",\"data\":{"
                           "\"contextSlot\":",
                           lagged, "}},\"id\":", view.id, "}"),
              "application/json");
        }
      }
    }
  }
  const bool keep_alive = req.keep_alive();
  http::response<http::string_body> res;
  error_code ec = co_await Exchange(req, &res);
  if (closed_) co_return false;
  if (ec) {
    co_return co_await Answer(req, http::status::bad_gateway,
                              absl::StrCat("fault proxy: upstream: ", ec.message(), "\n"));
  }
  if (fault.mode == FaultMode::kDelay && fault.delay > absl::ZeroDuration()) {
    delay_timer_.expires_after(absl::ToChronoNanoseconds(fault.delay));
    co_await delay_timer_.async_wait(net::redirect_error(net::use_awaitable, ec));
    if (closed_) co_return false;
  }
  if (lag) {
    if (view.single && (view.method == "getSlot" || view.method == "getBlockHeight")) {
      LagResult(&res.body(), fault.lag_slots);
    }
    LagContextSlots(&res.body(), fault.lag_slots);
  }
  // The fault may have changed while the request was upstream or delayed.
  const FaultMode now = proxy_->fault().mode;
  if (now == FaultMode::kBlackHole) {
    co_await Sink();
    co_return false;
  }
  if (now == FaultMode::kReset) {
    Reset();
    co_return false;
  }
  res.keep_alive(keep_alive);
  res.prepare_payload();
  co_return co_await Write(res);
}

net::awaitable<error_code> Session::Exchange(http::request<http::string_body>& req,
                                             http::response<http::string_body>* res) {
  const bool reused = upstream_open_;
  error_code ec = co_await ExchangeOnce(req, res);
  if (reused && !closed_ &&
      (ec == http::error::end_of_stream || ec == net::error::eof || ec == net::error::broken_pipe ||
       ec == net::error::connection_reset)) {
    ec = co_await ExchangeOnce(req, res);
  }
  co_return ec;
}

net::awaitable<error_code> Session::ExchangeOnce(http::request<http::string_body>& req,
                                                 http::response<http::string_body>* res) {
  error_code ec;
  if (!upstream_open_) {
    upstream_.expires_after(kUpstreamTimeout);
    co_await upstream_.async_connect(proxy_->upstream_endpoint(),
                                     net::redirect_error(net::use_awaitable, ec));
    if (ec) co_return ec;
    upstream_.socket().set_option(tcp::no_delay(true), ec);
    upstream_open_ = true;
    upstream_buffer_.clear();
  }
  const bool keep_alive = req.keep_alive();
  req.keep_alive(true);
  req.prepare_payload();
  upstream_.expires_after(kUpstreamTimeout);
  co_await http::async_write(upstream_, req, net::redirect_error(net::use_awaitable, ec));
  req.keep_alive(keep_alive);
  if (!ec) {
    http::response_parser<http::string_body> parser;
    parser.body_limit(kBodyLimit);
    co_await http::async_read(upstream_, upstream_buffer_, parser,
                              net::redirect_error(net::use_awaitable, ec));
    if (!ec) {
      *res = parser.release();
      if (!res->keep_alive()) {
        upstream_.close();
        upstream_open_ = false;
      }
    }
  }
  if (ec) {
    upstream_.close();
    upstream_open_ = false;
  }
  co_return ec;
}

net::awaitable<std::optional<uint64_t>> Session::UpstreamSlot(
    const http::request<http::string_body>& original) {
  http::request<http::string_body> req(http::verb::post, original.target(), 11);
  req.set(http::field::host, proxy_->upstream_host());
  req.set(http::field::content_type, "application/json");
  req.body() = R"({"jsonrpc":"2.0","id":0,"method":"getSlot"})";
  http::response<http::string_body> res;
  if (co_await Exchange(req, &res)) co_return std::nullopt;
  simdjson::dom::element doc;
  uint64_t slot = 0;
  if (parser_.parse(res.body()).get(doc) != simdjson::SUCCESS ||
      doc["result"].get_uint64().get(slot) != simdjson::SUCCESS) {
    co_return std::nullopt;
  }
  co_return slot;
}

net::awaitable<bool> Session::Write(http::response<http::string_body>& res) {
  error_code ec;
  client_.expires_after(kUpstreamTimeout);
  co_await http::async_write(client_, res, net::redirect_error(net::use_awaitable, ec));
  if (closed_) co_return false;
  if (ec || !res.keep_alive()) {
    Close();
    co_return false;
  }
  co_return true;
}

net::awaitable<bool> Session::Answer(const http::request<http::string_body>& req,
                                     http::status status, std::string body,
                                     std::string_view content_type) {
  http::response<http::string_body> res(status, req.version());
  res.set(http::field::content_type, beast::string_view(content_type.data(), content_type.size()));
  res.body() = std::move(body);
  res.keep_alive(req.keep_alive());
  res.prepare_payload();
  co_return co_await Write(res);
}

net::awaitable<void> Session::WebSocket(http::request<http::string_body>& req) {
  // The handshake goes to a connection of its own: the upstream then speaks WebSocket on it.
  if (upstream_open_) {
    upstream_.close();
    upstream_open_ = false;
  }
  error_code ec;
  upstream_.expires_after(kUpstreamTimeout);
  co_await upstream_.async_connect(proxy_->upstream_endpoint(),
                                   net::redirect_error(net::use_awaitable, ec));
  if (closed_) co_return;
  if (ec) {
    co_await Answer(req, http::status::bad_gateway,
                    absl::StrCat("fault proxy: upstream: ", ec.message(), "\n"));
    co_return;
  }
  upstream_.socket().set_option(tcp::no_delay(true), ec);
  upstream_buffer_.clear();
  co_await http::async_write(upstream_, req, net::redirect_error(net::use_awaitable, ec));
  http::response_parser<http::string_body> parser;
  if (!ec) {
    co_await http::async_read_header(upstream_, upstream_buffer_, parser,
                                     net::redirect_error(net::use_awaitable, ec));
  }
  if (closed_) co_return;
  if (ec) {
    co_await Answer(req, http::status::bad_gateway,
                    absl::StrCat("fault proxy: upstream handshake: ", ec.message(), "\n"));
    co_return;
  }
  http::response<http::string_body> res = parser.release();
  if (res.result() != http::status::switching_protocols) {
    // A refused upgrade: relay the header and whatever body came with it, then close.
    res.keep_alive(false);
    res.body().clear();
    res.prepare_payload();
    co_await Write(res);
    if (!closed_) Close();
    co_return;
  }
  http::response_serializer<http::string_body> serializer(res);
  client_.expires_after(kUpstreamTimeout);
  co_await http::async_write_header(client_, serializer,
                                    net::redirect_error(net::use_awaitable, ec));
  if (closed_) co_return;
  if (ec) {
    Close();
    co_return;
  }
  client_.expires_never();
  upstream_.expires_never();
  auto self = shared_from_this();
  net::co_spawn(executor_, Pump(upstream_, upstream_buffer_, client_),
                [self](std::exception_ptr) {});
  co_await Pump(client_, client_buffer_, upstream_);
}

net::awaitable<bool> Session::WaitWhileBlackHole() {
  while (!closed_ && proxy_->fault().mode == FaultMode::kBlackHole) {
    error_code ec;
    co_await wake_.async_wait(net::redirect_error(net::use_awaitable, ec));
  }
  co_return !closed_;
}

net::awaitable<void> Session::Pump(beast::tcp_stream& from, beast::flat_buffer& from_leftover,
                                   beast::tcp_stream& to) {
  auto self = shared_from_this();
  error_code ec;
  if (from_leftover.size() > 0) {
    if (!co_await WaitWhileBlackHole()) co_return;
    co_await net::async_write(to, from_leftover.data(),
                              net::redirect_error(net::use_awaitable, ec));
    from_leftover.consume(from_leftover.size());
  }
  std::vector<char> buffer(64 * 1024);
  while (!ec && !closed_) {
    const size_t n = co_await from.async_read_some(net::buffer(buffer),
                                                   net::redirect_error(net::use_awaitable, ec));
    if (ec || closed_) break;
    if (!co_await WaitWhileBlackHole()) co_return;
    co_await net::async_write(to, net::buffer(buffer.data(), n),
                              net::redirect_error(net::use_awaitable, ec));
  }
  if (!closed_) Close();
}

}  // namespace

absl::StatusOr<std::unique_ptr<FaultProxy>> FaultProxy::Start(const std::string& upstream_url,
                                                              uint16_t port) {
  auto proxy = std::make_unique<FaultProxyImpl>();
  absl::Status status = proxy->Listen(upstream_url, port);
  if (!status.ok()) return status;
  return proxy;
}

}  // namespace switchyard::testing
