// libFuzzer target: the HTTP request path end to end. The bytes are written on one TCP
// connection to a real HttpServer on 127.0.0.1 whose handler is the Router, in front of fake
// upstreams (a base, two ERs, an indexer) and a fixed snapshot with accounts delegated to each
// ER; the client then ends its side and reads until the server closes. Whatever the bytes, the
// server must close the connection within the deadline, and everything it sent must be whole
// HTTP/1.1 answers, each with a status the server gives, and a JSON body (object or array)
// wherever it says application/json.
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <boost/asio/buffer.hpp>
#include <boost/beast/core/error.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>

#include "api/metrics/api_metrics.h"
#include "api/net/http_server.h"
#include "api/rpc/router.h"
#include "common/clock.h"
#include "common/metrics.h"
#include "engine/snapshot.h"
#include "simdjson.h"
#include "tests/api/fake_upstream.h"
#include "tests/api/test_support.h"
#include "tests/fuzz/fuzz_check.h"

using switchyard::fuzz::Check;

namespace {

using namespace switchyard;

// How long the server may take to answer everything and close after the client's end. Far
// above what an answer takes (the fake upstreams answer at once), far below libFuzzer's
// -timeout.
constexpr int kCloseDeadlineMs = 5000;

class World {
 public:
  World() : base_("base"), er1_("er1"), er2_("er2"), indexer_("indexer") {
    for (api_test::FakeUpstream* upstream : {&base_, &er1_, &er2_, &indexer_}) {
      upstream->SetKeepBodies(false);
    }
    const Pubkey er1 = api_test::Key(0xE1);
    const Pubkey er2 = api_test::Key(0xE2);
    snapshots_.Publish(api_test::SnapshotBuilder()
                           .Delegate(api_test::Key(1), er1)
                           .Delegate(api_test::Key(2), er2)
                           .Delegate(api_test::Key(3), Pubkey())
                           .Delegate(api_test::Key(4), api_test::Key(0xE9))
                           .Undelegate(api_test::Key(5), 50)
                           .Build(100));
    RouterOptions options;
    options.upstreams = {{"base", {{base_.url(), 1}}},
                         {"er1", {{er1_.url(), 1}}},
                         {"er2", {{er2_.url(), 1}}},
                         {"indexer", {{indexer_.url(), 1}}}};
    options.ers = {{er1, "er1", "https://er1.example", 0, 50, "DE"},
                   {er2, "er2", "https://er2.example", 0, 30, "US"}};
    options.routing.default_er = "er1";
    options.routing.method_rules = {{"getAsset*", "indexer"}};
    options.identity = api_test::Key(0x99);
    options.fqdn = "https://router.example";
    options.upstream.request_timeout = absl::Seconds(2);
    HttpServerOptions server;
    server.threads = 1;
    server.max_body_bytes = 64 * 1024;
    server.header_timeout = absl::Seconds(2);
    server.body_timeout = absl::Seconds(2);
    server.cors.allowed_origins = {"https://app.example"};
    server.gzip.enabled = true;
    absl::StatusOr<std::unique_ptr<RouterContext>> context =
        RouterContext::Create(std::move(options), &snapshots_, &clock_, &metrics_);
    Check(context.ok());
    context_ = *std::move(context);
    server_ = std::make_unique<HttpServer>(server, context_->HandlerFactory(), &metrics_);
    Check(server_->Start().ok());
  }

  uint16_t port() const { return server_->port(); }

 private:
  api_test::FakeUpstream base_;
  api_test::FakeUpstream er1_;
  api_test::FakeUpstream er2_;
  api_test::FakeUpstream indexer_;
  SnapshotHolder snapshots_;
  SystemClock clock_;
  MetricsRegistry registry_;
  ApiMetrics metrics_{registry_};
  std::unique_ptr<RouterContext> context_;
  std::unique_ptr<HttpServer> server_;
};

World& TheWorld() {
  static World* world = new World();  // never destroyed: libFuzzer exits without unwinding
  return *world;
}

struct Received {
  std::string bytes;
  // The server reset the connection (it closed with input of ours unread): the kernel may
  // have dropped the end of what it sent, so the last answer may be cut short.
  bool reset = false;
};

// Writes `bytes`, ends the client's side, and returns everything the server sent until it
// closed. Traps when the server keeps the connection open past the deadline.
Received Exchange(uint16_t port, std::string_view bytes) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  Check(fd >= 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(port);
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  // libFuzzer's timer signal interrupts blocking calls: a connect it interrupts goes on in the
  // background, so wait for it and read its outcome.
  if (::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) {
    int error = errno;
    if (error == EINTR) {
      pollfd entry{fd, POLLOUT, 0};
      while (::poll(&entry, 1, kCloseDeadlineMs) < 0 && errno == EINTR) {
      }
      socklen_t length = sizeof(error);
      ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length);
    }
    if (error != 0) {
      std::fprintf(stderr, "connect: %s\n", std::strerror(error));
      Check(false);
    }
  }
  Received received;
  char buffer[16384];
  size_t written = 0;
  if (bytes.empty()) ::shutdown(fd, SHUT_WR);
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(kCloseDeadlineMs);
  for (;;) {
    // Read while writing: a server that answers (and closes) before the whole input is sent
    // must not deadlock the exchange on a full socket buffer.
    pollfd entry{fd, POLLIN, 0};
    if (written < bytes.size()) entry.events |= POLLOUT;
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    const int ready = ::poll(&entry, 1, std::max<int>(0, static_cast<int>(left.count())));
    if (ready < 0 && errno == EINTR) continue;
    Check(ready > 0);  // the server neither read, answered nor closed within the deadline
    if (entry.revents & (POLLIN | POLLHUP | POLLERR)) {
      const ssize_t n = ::recv(fd, buffer, sizeof(buffer), MSG_DONTWAIT);
      if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
      if (n == 0) break;
      if (n < 0) {
        received.reset = true;
        break;
      }
      received.bytes.append(buffer, static_cast<size_t>(n));
    } else if (entry.revents & POLLOUT) {
      const ssize_t n =
          ::send(fd, bytes.data() + written, bytes.size() - written, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n > 0) written += static_cast<size_t>(n);
      if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
        written = bytes.size();  // the server has gone
      }
      if (written == bytes.size()) ::shutdown(fd, SHUT_WR);
    }
  }
  // Close with a reset: the server closed first, so no TIME_WAIT is left on either side, and
  // hundreds of exchanges a second never run out of local ports.
  const linger reset{1, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_LINGER, &reset, sizeof(reset));
  ::close(fd);
  return received;
}

// Every answer the server sent is a whole HTTP/1.x answer (the last may be cut short by a
// reset), and a JSON body is a JSON object or array.
void CheckAnswers(const Received& received) {
  namespace http = boost::beast::http;
  static simdjson::dom::parser json;
  std::string_view stream = received.bytes;
  while (!stream.empty()) {
    http::response_parser<http::string_body> parser;
    parser.eager(true);
    parser.body_limit(64 << 20);
    boost::beast::error_code ec;
    const size_t used = parser.put(boost::asio::buffer(stream.data(), stream.size()), ec);
    if (received.reset && (ec == http::error::need_more || !parser.is_done())) return;
    Check(!ec);               // a malformed answer
    Check(parser.is_done());  // the server closed in the middle of an answer
    stream.remove_prefix(used);
    const auto& answer = parser.get();
    Check(answer.version() == 11 || answer.version() == 10);
    const unsigned status = answer.result_int();
    Check(status >= 100 && status < 600);
    const auto type = answer.find(http::field::content_type);
    const bool gzip = answer.find(http::field::content_encoding) != answer.end();
    if (type != answer.end() && type->value().starts_with("application/json") && !gzip &&
        !answer.body().empty()) {
      simdjson::dom::element root;
      if (json.parse(answer.body()).get(root) != simdjson::SUCCESS) {
        std::fprintf(stderr, "an answer's JSON body does not parse:\n%s\n", answer.body().c_str());
        Check(false);
      }
      Check(root.is_object() || root.is_array());
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  World& world = TheWorld();
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  CheckAnswers(Exchange(world.port(), bytes));
  return 0;
}
