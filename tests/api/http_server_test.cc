// The HTTP front door: keep-alive, pipelining, limits and timeouts.
#include <gtest/gtest.h>

#include "tests/api/router_fixture.h"

namespace switchyard::api_test {
namespace {

const std::string kGetSlot = R"({"jsonrpc":"2.0","id":1,"method":"getSlot"})";

class HttpServerTest : public RouterFixture {};

TEST_F(HttpServerTest, KeepAliveServesManyRequestsOnOneConnection) {
  Start();
  TestClient client(port());
  for (int i = 0; i < 5; ++i) {
    ClientResponse response =
        client.Post(R"({"jsonrpc":"2.0","id":)" + std::to_string(i) + R"(,"method":"getSlot"})");
    ASSERT_EQ(response.status, 200u);
    EXPECT_TRUE(response.keep_alive);
    EXPECT_EQ(response.body,
              R"({"jsonrpc":"2.0","result":{"from":"base","method":"getSlot"},"id":)" +
                  std::to_string(i) + "}");
    EXPECT_EQ(response.headers["X-Delegation-Slot"], "100");
  }
  EXPECT_EQ(metrics_.connections_accepted.value(), 1u);
  // The router kept its upstream connection alive too.
  EXPECT_EQ(base_.connections_accepted(), 1u);
}

// A 204 has no body and so no Content-Length (RFC 9110 8.6); the connection goes on framed.
TEST_F(HttpServerTest, AnAnswerWithoutBodyCarriesNoLengthAndKeepsTheConnection) {
  Start();
  TestClient client(port());
  ClientResponse empty = client.Post(R"({"jsonrpc":"2.0","method":"getSlot"})");
  EXPECT_EQ(empty.status, 204u);
  EXPECT_EQ(empty.body, "");
  EXPECT_EQ(empty.headers.count("Content-Length"), 0u);
  EXPECT_EQ(empty.headers["X-Delegation-Slot"], "100");
  ClientResponse next = client.Post(kGetSlot);
  EXPECT_EQ(next.status, 200u);
  EXPECT_EQ(next.headers["Content-Length"], std::to_string(next.body.size()));
  EXPECT_EQ(metrics_.connections_accepted.value(), 1u);
}

TEST_F(HttpServerTest, PipelinedRequestsAreAnsweredInOrderWithinTheBound) {
  Start([](RouterOptions& options, HttpServerOptions& server) {
    server.max_pipelined = 2;
    // Each read must reach the upstream: identical getSlot calls would share one otherwise.
    options.cache.enabled = false;
    options.cache.coalesce = false;
  });
  base_.Hold();
  TestClient client(port());
  std::string bytes;
  for (int i = 0; i < 5; ++i) {
    bytes += TestClient::Request(R"({"jsonrpc":"2.0","id":)" + std::to_string(i) +
                                 R"(,"method":"getSlot"})");
  }
  client.WriteRaw(bytes);
  ASSERT_TRUE(base_.WaitForRequests(2));
  ASSERT_TRUE(WaitFor([&] { return metrics_.http_requests.value() >= 2; }));
  // Two requests are read ahead; the other three wait in the socket.
  EXPECT_EQ(metrics_.http_requests.value(), 2u);
  EXPECT_EQ(base_.received_count(), 2u);
  base_.Release();
  for (int i = 0; i < 5; ++i) {
    ClientResponse response = client.Read();
    ASSERT_EQ(response.status, 200u) << i;
    EXPECT_NE(response.body.find("\"id\":" + std::to_string(i) + "}"), std::string::npos)
        << response.body;
  }
  EXPECT_EQ(base_.max_outstanding(), 2u);
}

// A request sent after the one before it was read whole and handed on stays in the socket
// until that one's answer is written: the session does not read ahead on an empty socket while
// an answer is owed (the client is most likely waiting for it, and the read would only fail).
TEST_F(HttpServerTest, ARequestSentWhileAnAnswerIsOwedIsReadOnceThatAnswerIsWritten) {
  Start([](RouterOptions& options, HttpServerOptions& server) {
    server.max_pipelined = 4;
    options.cache.enabled = false;
    options.cache.coalesce = false;
  });
  base_.Hold();
  TestClient client(port());
  client.WriteRaw(TestClient::Request(R"({"jsonrpc":"2.0","id":0,"method":"getSlot"})"));
  ASSERT_TRUE(base_.WaitForRequests(1));
  const uint64_t reads = metrics_.http_reads.value();
  client.WriteRaw(TestClient::Request(R"({"jsonrpc":"2.0","id":1,"method":"getSlot"})"));
  absl::SleepFor(absl::Milliseconds(300));
  EXPECT_EQ(metrics_.http_reads.value(), reads);
  EXPECT_EQ(metrics_.http_requests.value(), 1u);
  EXPECT_EQ(base_.received_count(), 1u);
  base_.Release();
  for (int i = 0; i < 2; ++i) {
    ClientResponse response = client.Read();
    ASSERT_EQ(response.status, 200u) << i;
    EXPECT_NE(response.body.find("\"id\":" + std::to_string(i) + "}"), std::string::npos)
        << response.body;
  }
  EXPECT_EQ(metrics_.http_requests.value(), 2u);
  EXPECT_EQ(base_.max_outstanding(), 1u);
}

TEST_F(HttpServerTest, BodyOverTheLimitGets413) {
  Start([](RouterOptions&, HttpServerOptions& server) { server.max_body_bytes = 1024; });
  TestClient client(port());
  ClientResponse response = client.Post(std::string(2000, ' ') + kGetSlot);
  EXPECT_EQ(response.status, 413u);
  EXPECT_NE(response.body.find("exceeds the limit of 1024 bytes"), std::string::npos);
  // The router writes the server's refusal as a JSON-RPC error from the one error table.
  EXPECT_NE(response.body.find(R"("error":{"code":-32600,)"), std::string::npos) << response.body;
  EXPECT_EQ(response.headers["Content-Type"], "application/json");
  EXPECT_EQ(response.headers["X-Delegation-Slot"], "100");
  EXPECT_EQ(metrics_.http_body_too_large.value(), 1u);
  EXPECT_EQ(base_.received_count(), 0u);
}

TEST_F(HttpServerTest, BodyAtTheLimitIsServed) {
  Start([](RouterOptions&, HttpServerOptions& server) { server.max_body_bytes = 1024; });
  TestClient client(port());
  std::string body = std::string(1024 - kGetSlot.size(), ' ') + kGetSlot;
  EXPECT_EQ(client.Post(body).status, 200u);
}

// A request that arrives whole is read whole: the session reads up to 4 KiB at once (a buffer
// left to grow by itself stayed at 512 bytes, and this request took seven reads).
TEST_F(HttpServerTest, ARequestThatArrivesWholeIsReadInOneOrTwoReads) {
  Start();
  TestClient client(port());
  ASSERT_EQ(client.Post(kGetSlot).status, 200u);  // the session is open and has read once
  const uint64_t before = metrics_.http_reads.value();
  const std::string body = std::string(3000 - kGetSlot.size(), ' ') + kGetSlot;
  ASSERT_EQ(client.Post(body).status, 200u);
  EXPECT_GE(metrics_.http_reads.value() - before, 1u);
  EXPECT_LE(metrics_.http_reads.value() - before, 2u);
}

TEST_F(HttpServerTest, IdleConnectionIsClosedAfterTheIdleTimeout) {
  Start([](RouterOptions&, HttpServerOptions& server) {
    server.idle_timeout = absl::Milliseconds(100);
  });
  TestClient client(port());
  EXPECT_EQ(client.Post(kGetSlot).status, 200u);
  EXPECT_TRUE(client.ReadUntilClosed());
  EXPECT_EQ(metrics_.http_timeouts.value(), 1u);
}

TEST_F(HttpServerTest, IncompleteHeaderIsCutOffAfterTheHeaderTimeout) {
  Start([](RouterOptions&, HttpServerOptions& server) {
    server.header_timeout = absl::Milliseconds(100);
  });
  TestClient client(port());
  client.WriteRaw("POST / HTTP/1.1\r\nHost: x\r\n");
  EXPECT_TRUE(client.ReadUntilClosed());
  EXPECT_EQ(metrics_.http_timeouts.value(), 1u);
}

TEST_F(HttpServerTest, IncompleteBodyIsCutOffAfterTheBodyTimeout) {
  Start([](RouterOptions&, HttpServerOptions& server) {
    server.body_timeout = absl::Milliseconds(100);
  });
  TestClient client(port());
  client.WriteRaw("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{\"json");
  EXPECT_TRUE(client.ReadUntilClosed());
  EXPECT_EQ(metrics_.http_timeouts.value(), 1u);
}

TEST_F(HttpServerTest, ConnectionsOverTheLimitAreClosed) {
  Start([](RouterOptions&, HttpServerOptions& server) { server.max_connections = 1; });
  TestClient first(port());
  EXPECT_EQ(first.Post(kGetSlot).status, 200u);
  TestClient second(port());
  EXPECT_TRUE(second.ReadUntilClosed());
  EXPECT_EQ(metrics_.connections_rejected.value(), 1u);
  EXPECT_EQ(first.Post(kGetSlot).status, 200u);
}

TEST_F(HttpServerTest, MalformedHttpGets400) {
  Start();
  TestClient client(port());
  client.WriteRaw("NOT HTTP AT ALL\r\n\r\n");
  EXPECT_EQ(client.Read().status, 400u);
}

TEST_F(HttpServerTest, ExpectContinueIsAnsweredBeforeTheBody) {
  Start();
  TestClient client(port());
  client.WriteRaw("POST / HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: " +
                  std::to_string(kGetSlot.size()) + "\r\n\r\n");
  EXPECT_EQ(client.Read().status, 100u);
  client.WriteRaw(kGetSlot);
  ClientResponse response = client.Read();
  EXPECT_EQ(response.status, 200u);
  EXPECT_NE(response.body.find("getSlot"), std::string::npos);
}

TEST_F(HttpServerTest, GetIsNotAllowed) {
  Start();
  TestClient client(port());
  client.WriteRaw("GET / HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_EQ(client.Read().status, 405u);
}

TEST_F(HttpServerTest, ConnectionCloseIsHonoured) {
  Start();
  TestClient client(port());
  ClientResponse response = client.Post(kGetSlot, {{"Connection", "close"}});
  EXPECT_EQ(response.status, 200u);
  EXPECT_FALSE(response.keep_alive);
  EXPECT_TRUE(client.ReadUntilClosed());
}

TEST_F(HttpServerTest, StopDrainsAnAnswerInFlight) {
  Start();
  base_.Hold();
  TestClient client(port());
  client.WriteRaw(TestClient::Request(kGetSlot));
  ASSERT_TRUE(base_.WaitForRequests(1));
  std::thread stopper([&] { server_->Stop(); });
  base_.Release();
  EXPECT_EQ(client.Read().status, 200u);
  stopper.join();
}

// --- CORS (issue 15): the HTTP layer answers preflights and marks every answer ---

constexpr char kApp[] = "https://app.example";

std::string Preflight(std::string_view origin, std::string_view request_headers) {
  std::string text = "OPTIONS / HTTP/1.1\r\nHost: x\r\nOrigin: " + std::string(origin) +
                     "\r\nAccess-Control-Request-Method: POST\r\n";
  if (!request_headers.empty()) {
    text += "Access-Control-Request-Headers: " + std::string(request_headers) + "\r\n";
  }
  return text + "\r\n";
}

void AnyOrigin(RouterOptions&, HttpServerOptions& server) { server.cors.allowed_origins = {"*"}; }

TEST_F(HttpServerTest, PreflightIsAnswered204WithMethodsHeadersAndMaxAge) {
  Start(AnyOrigin);
  TestClient client(port());
  client.WriteRaw(Preflight(kApp, "Content-Type, solana-client"));
  ClientResponse response = client.Read();
  EXPECT_EQ(response.status, 204u);
  EXPECT_EQ(response.body, "");
  EXPECT_EQ(response.headers["Access-Control-Allow-Origin"], "*");
  EXPECT_EQ(response.headers["Access-Control-Allow-Methods"], "POST, GET, OPTIONS");
  EXPECT_EQ(response.headers["Access-Control-Allow-Headers"], "Content-Type, solana-client");
  EXPECT_EQ(response.headers["Access-Control-Max-Age"], "86400");
  EXPECT_EQ(response.headers.count("Content-Length"), 0u);
  EXPECT_TRUE(response.keep_alive);
  EXPECT_EQ(metrics_.cors_preflights.value(), 1u);
  // Answered by the HTTP layer: nothing went upstream, and the connection goes on.
  EXPECT_EQ(base_.received_count(), 0u);
  EXPECT_EQ(client.Post(kGetSlot).status, 200u);
}

TEST_F(HttpServerTest, PreflightAskingForAnUnlistedHeaderGetsTheAllowedList) {
  Start(AnyOrigin);
  TestClient client(port());
  client.WriteRaw(Preflight(kApp, "content-type, x-secret"));
  ClientResponse response = client.Read();
  EXPECT_EQ(response.status, 204u);
  EXPECT_EQ(response.headers["Access-Control-Allow-Headers"],
            "content-type, solana-client, x-api-key, x-min-slot, x-switchyard-consensus");
}

TEST_F(HttpServerTest, EveryAnswerCarriesAllowOriginAndTheExposedHeaders) {
  Start([](RouterOptions&, HttpServerOptions& server) {
    server.cors.allowed_origins = {"*"};
    server.max_body_bytes = 1024;
  });
  {
    TestClient client(port());
    ClientResponse ok = client.Post(kGetSlot, {{"Origin", kApp}});
    EXPECT_EQ(ok.status, 200u);
    EXPECT_EQ(ok.headers["Access-Control-Allow-Origin"], "*");
    EXPECT_EQ(ok.headers["Access-Control-Expose-Headers"], "X-Delegation-Slot");
    EXPECT_EQ(ok.headers.count("Vary"), 0u);
    // The router's own error answers (405 here) too.
    client.WriteRaw("GET / HTTP/1.1\r\nHost: x\r\nOrigin: https://app.example\r\n\r\n");
    ClientResponse not_allowed = client.Read();
    EXPECT_EQ(not_allowed.status, 405u);
    EXPECT_EQ(not_allowed.headers["Access-Control-Allow-Origin"], "*");
  }
  {
    // No Origin: with a fixed "*" the lines go on every answer all the same, and no Vary
    // (the Fetch standard, "CORS protocol and HTTP caches"): a cached answer to a request
    // without Origin then serves a page too.
    TestClient client(port());
    ClientResponse plain = client.Post(kGetSlot);
    EXPECT_EQ(plain.status, 200u);
    EXPECT_EQ(plain.headers["Access-Control-Allow-Origin"], "*");
    EXPECT_EQ(plain.headers["Access-Control-Expose-Headers"], "X-Delegation-Slot");
    EXPECT_EQ(plain.headers.count("Vary"), 0u);
  }
  {
    TestClient client(port());
    client.WriteRaw("NOT HTTP AT ALL\r\n\r\n");
    ClientResponse malformed = client.Read();
    EXPECT_EQ(malformed.status, 400u);
    EXPECT_EQ(malformed.headers["Access-Control-Allow-Origin"], "*");
  }
  {
    TestClient client(port());
    ClientResponse too_big = client.Post(std::string(2000, ' ') + kGetSlot, {{"Origin", kApp}});
    EXPECT_EQ(too_big.status, 413u);
    EXPECT_EQ(too_big.headers["Access-Control-Allow-Origin"], "*");
    EXPECT_EQ(too_big.headers["Access-Control-Expose-Headers"], "X-Delegation-Slot");
  }
}

TEST_F(HttpServerTest, AnOriginListEchoesAMatchingOriginWithVary) {
  Start([](RouterOptions&, HttpServerOptions& server) {
    server.cors.allowed_origins = {"https://other.example", kApp};
    server.max_body_bytes = 1024;
  });
  TestClient client(port());
  ClientResponse ok = client.Post(kGetSlot, {{"Origin", kApp}});
  EXPECT_EQ(ok.status, 200u);
  EXPECT_EQ(ok.headers["Access-Control-Allow-Origin"], kApp);
  EXPECT_EQ(ok.headers["Vary"], "Origin");
  EXPECT_EQ(ok.headers["Access-Control-Expose-Headers"], "X-Delegation-Slot");

  client.WriteRaw(Preflight(kApp, "content-type"));
  ClientResponse preflight = client.Read();
  EXPECT_EQ(preflight.status, 204u);
  EXPECT_EQ(preflight.headers["Access-Control-Allow-Origin"], kApp);
  EXPECT_EQ(preflight.headers["Vary"], "Origin");

  // Another origin is answered, without CORS headers (its page cannot read the answer), and
  // counted; its preflight gets 403.
  ClientResponse other = client.Post(kGetSlot, {{"Origin", "https://evil.example"}});
  EXPECT_EQ(other.status, 200u);
  EXPECT_EQ(other.headers.count("Access-Control-Allow-Origin"), 0u);
  EXPECT_EQ(other.headers["Vary"], "Origin");
  client.WriteRaw(Preflight("https://evil.example", "content-type"));
  ClientResponse refused = client.Read();
  EXPECT_EQ(refused.status, 403u);
  EXPECT_EQ(refused.headers.count("Access-Control-Allow-Origin"), 0u);
  EXPECT_EQ(metrics_.cors_origins_refused.value(), 2u);
  EXPECT_EQ(metrics_.cors_preflights.value(), 2u);

  // The server's own 413 echoes the origin too.
  TestClient second(port());
  ClientResponse too_big = second.Post(std::string(2000, ' ') + kGetSlot, {{"Origin", kApp}});
  EXPECT_EQ(too_big.status, 413u);
  EXPECT_EQ(too_big.headers["Access-Control-Allow-Origin"], kApp);
}

TEST_F(HttpServerTest, CorsOffAddsNoHeadersAndLeavesOptionsToTheHandler) {
  Start();
  TestClient client(port());
  ClientResponse ok = client.Post(kGetSlot, {{"Origin", kApp}});
  EXPECT_EQ(ok.status, 200u);
  EXPECT_EQ(ok.headers.count("Access-Control-Allow-Origin"), 0u);
  EXPECT_EQ(ok.headers.count("Access-Control-Expose-Headers"), 0u);
  EXPECT_EQ(ok.headers.count("Vary"), 0u);
  client.WriteRaw(Preflight(kApp, "content-type"));
  ClientResponse preflight = client.Read();
  EXPECT_EQ(preflight.status, 405u);
  EXPECT_EQ(preflight.headers.count("Access-Control-Allow-Origin"), 0u);
  EXPECT_EQ(metrics_.cors_preflights.value(), 0u);
}

}  // namespace
}  // namespace switchyard::api_test
