#include "tests/api/fake_upstream.h"

#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <optional>

#include "api/jsonrpc/jsonrpc.h"
#include "api/jsonrpc/rpc_params.h"
#include "fmt/format.h"

namespace switchyard::api_test {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

class FakeUpstream::Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(tcp::socket socket, FakeUpstream* owner)
      : socket_(std::move(socket)), idle_timer_(socket_.get_executor()), owner_(owner) {}

  void Read() {
    request_ = {};
    if (const absl::Duration idle = owner_->idle_close();
        answered_ > 0 && idle > absl::ZeroDuration()) {
      idle_timer_.expires_after(absl::ToChronoNanoseconds(idle));
      idle_timer_.async_wait([self = shared_from_this()](beast::error_code ec) {
        if (!ec && !self->reading_request_) self->Close();
      });
    }
    reading_request_ = false;
    // The idle time ends with the first byte of a request, not with the whole request.
    socket_.async_wait(tcp::socket::wait_read, [self = shared_from_this()](beast::error_code ec) {
      if (ec) return;
      self->reading_request_ = true;
      self->idle_timer_.cancel();
      // Bodies up to 64 MiB, as a validator's own limit is far above Beast's default 1 MiB.
      self->parser_.emplace();
      self->parser_->body_limit(64 << 20);
      http::async_read(self->socket_, self->buffer_, *self->parser_,
                       [self](beast::error_code ec2, size_t) {
                         if (ec2) return;
                         self->request_ = self->parser_->release();
                         if (self->request_.method() == http::verb::get) {
                           // GET /health, as a validator answers it (not recorded).
                           self->owner_->CountHealthCheck();
                           self->Write(200, "ok", {});
                           return;
                         }
                         if (self->answered_ > 0 && self->owner_->drop_reused()) {
                           self->owner_->Record(self->request_.body());
                           self->Close();
                           return;
                         }
                         self->owner_->Answer(self, self->request_.body());
                       });
    });
  }

  void Write(unsigned status, std::string body,
             const std::vector<std::pair<std::string, std::string>>& headers) {
    auto response =
        std::make_shared<http::response<http::string_body>>(static_cast<http::status>(status), 11);
    response->set(http::field::content_type, "application/json");
    for (const auto& [name, value] : headers) response->set(name, value);
    response->body() = std::move(body);
    response->keep_alive(true);
    response->prepare_payload();
    http::async_write(socket_, *response,
                      [self = shared_from_this(), response](beast::error_code ec, size_t) {
                        if (ec) return;
                        ++self->answered_;
                        self->Read();
                      });
  }

  void Reset() {
    beast::error_code ignored;
    socket_.set_option(asio::socket_base::linger(true, 0), ignored);
    socket_.close(ignored);
  }

  void Close() {
    beast::error_code ignored;
    socket_.close(ignored);
  }

 private:
  tcp::socket socket_;
  boost::asio::steady_timer idle_timer_;
  FakeUpstream* owner_;
  size_t answered_ = 0;
  bool reading_request_ = false;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  http::request<http::string_body> request_;
};

FakeUpstream::FakeUpstream(std::string name)
    : name_(std::move(name)),
      acceptor_(io_context_, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0)) {
  Accept();
  thread_ = std::thread([this] { io_context_.run(); });
}

FakeUpstream::~FakeUpstream() {
  asio::post(io_context_, [this] {
    beast::error_code ignored;
    acceptor_.close(ignored);
    for (auto& weak : all_) {
      if (auto connection = weak.lock()) connection->Close();
    }
    hung_.clear();
    io_context_.stop();
  });
  thread_.join();
  absl::MutexLock lock(&mu_);
  held_answers_.clear();
}

std::string FakeUpstream::url() const {
  return fmt::format("http://127.0.0.1:{}/", acceptor_.local_endpoint().port());
}

void FakeUpstream::Accept() {
  acceptor_.async_accept([this](beast::error_code ec, tcp::socket socket) {
    if (ec) return;
    {
      absl::MutexLock lock(&mu_);
      ++connections_;
    }
    auto connection = std::make_shared<Connection>(std::move(socket), this);
    all_.push_back(connection);
    connection->Read();
    Accept();
  });
}

void FakeUpstream::SetResponder(Responder responder) {
  absl::MutexLock lock(&mu_);
  responder_ = std::move(responder);
}

void FakeUpstream::AddKnownSignature(const std::string& signature) {
  absl::MutexLock lock(&mu_);
  known_signatures_.push_back(signature);
}

void FakeUpstream::Hold() {
  absl::MutexLock lock(&mu_);
  held_ = true;
}

void FakeUpstream::Release() {
  std::vector<std::function<void()>> answers;
  {
    absl::MutexLock lock(&mu_);
    held_ = false;
    answers.swap(held_answers_);
  }
  for (auto& answer : answers) asio::post(io_context_, std::move(answer));
}

void FakeUpstream::SetIdleClose(absl::Duration idle) {
  absl::MutexLock lock(&mu_);
  idle_close_ = idle;
}

void FakeUpstream::SetDropReusedRequests(bool drop) {
  absl::MutexLock lock(&mu_);
  drop_reused_ = drop;
}

absl::Duration FakeUpstream::idle_close() const {
  absl::MutexLock lock(&mu_);
  return idle_close_;
}

bool FakeUpstream::drop_reused() const {
  absl::MutexLock lock(&mu_);
  return drop_reused_;
}

void FakeUpstream::Record(std::string body) {
  absl::MutexLock lock(&mu_);
  ++received_count_;
  if (keep_bodies_) received_.push_back(std::move(body));
}

void FakeUpstream::SetKeepBodies(bool keep) {
  absl::MutexLock lock(&mu_);
  keep_bodies_ = keep;
}

std::vector<std::string> FakeUpstream::received() const {
  absl::MutexLock lock(&mu_);
  return received_;
}

size_t FakeUpstream::received_count() const {
  absl::MutexLock lock(&mu_);
  return received_count_;
}

size_t FakeUpstream::max_outstanding() const {
  absl::MutexLock lock(&mu_);
  return max_outstanding_;
}

void FakeUpstream::CountHealthCheck() {
  absl::MutexLock lock(&mu_);
  ++health_checks_;
}

size_t FakeUpstream::health_checks() const {
  absl::MutexLock lock(&mu_);
  return health_checks_;
}

size_t FakeUpstream::connections_accepted() const {
  absl::MutexLock lock(&mu_);
  return connections_;
}

bool FakeUpstream::WaitForRequests(size_t n, absl::Duration timeout) const {
  absl::MutexLock lock(&mu_);
  auto enough = [this, n]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return received_count_ >= n; };
  return mu_.AwaitWithTimeout(absl::Condition(&enough), timeout);
}

void FakeUpstream::Answer(std::shared_ptr<Connection> connection, std::string body) {
  absl::StatusOr<RpcBody> parsed = ParseRpcBody(body, RpcCodecOptions{});
  const std::string method =
      parsed.ok() && !parsed->calls.empty() ? parsed->calls[0].method : std::string();
  Responder responder;
  {
    absl::MutexLock lock(&mu_);
    ++received_count_;
    if (keep_bodies_) received_.push_back(body);
    responder = responder_;
    ++outstanding_;
    max_outstanding_ = std::max(max_outstanding_, outstanding_);
  }
  FakeReply reply = responder ? responder(method, body) : Canned(method, body);
  auto act = [this, connection, reply] {
    {
      absl::MutexLock lock(&mu_);
      --outstanding_;
    }
    switch (reply.action) {
      case FakeReply::Action::kAnswer:
        connection->Write(reply.status, reply.body, reply.headers);
        break;
      case FakeReply::Action::kReset:
        connection->Reset();
        break;
      case FakeReply::Action::kHang:
        hung_.push_back(connection);  // never answers; closed when the fake stops
        break;
    }
  };
  absl::MutexLock lock(&mu_);
  if (held_) {
    held_answers_.push_back(std::move(act));
  } else {
    asio::post(io_context_, std::move(act));
  }
}

bool FakeUpstream::IsBatch(const std::string& body) {
  const size_t first = body.find_first_not_of(" \t\r\n");
  return first != std::string::npos && body[first] == '[';
}

FakeReply FakeUpstream::Canned(const std::string& method, const std::string& body) const {
  (void)method;
  FakeReply reply;
  std::vector<std::string> answers = CannedAnswers(body);
  if (answers.empty()) {
    reply.body = R"({"jsonrpc":"2.0","error":{"code":-32700,"message":"Parse error"},"id":null})";
  } else {
    reply.body = IsBatch(body) ? JoinBatch(answers) : std::move(answers[0]);
  }
  return reply;
}

std::vector<std::string> FakeUpstream::CannedAnswers(const std::string& body) const {
  absl::StatusOr<RpcBody> parsed = ParseRpcBody(body, RpcCodecOptions{});
  std::vector<std::string> answers;
  if (!parsed.ok()) return answers;
  for (const RpcCall& call : parsed->calls) {
    if (parsed->batch && !call.id) continue;
    const std::string& method = call.method;
    absl::StatusOr<RpcParams> params = ParseRpcParams(call.params);
    std::string result;
    if (method == "getMultipleAccounts" || method == "getSignatureStatuses") {
      absl::StatusOr<std::vector<std::string>> keys = params->StringList(0, 1000);
      std::string values;
      for (size_t i = 0; i < keys->size(); ++i) {
        if (i > 0) values += ",";
        bool known = method == "getMultipleAccounts";
        {
          absl::MutexLock lock(&mu_);
          for (const auto& s : known_signatures_) known |= s == (*keys)[i];
        }
        values += known ? fmt::format(R"({{"key":"{}","from":"{}"}})", (*keys)[i], name_) : "null";
      }
      result = fmt::format(R"({{"context":{{"apiVersion":"2.1.0","slot":{}}},"value":[{}]}})",
                           name_ == "base" ? 500 : 9000, values);
    } else if (method == "getTransaction") {
      bool known = false;
      {
        absl::MutexLock lock(&mu_);
        for (const auto& s : known_signatures_) known |= s == *params->String(0);
      }
      result = known ? fmt::format(R"({{"slot":7,"from":"{}"}})", name_) : "null";
    } else if (method == "getLatestBlockhash") {
      result = fmt::format(
          R"({{"context":{{"slot":1}},"value":{{"blockhash":"hash-of-{}","lastValidBlockHeight":99}}}})",
          name_);
    } else if (method == "sendTransaction") {
      result = fmt::format(R"("sent-to-{}")", name_);
    } else {
      result = fmt::format(R"({{"from":"{}","method":"{}"}})", name_, method);
    }
    answers.push_back(RpcResultResponse(call.id_or_null(), result));
  }
  return answers;
}

}  // namespace switchyard::api_test
