// gzip on the HTTP layer: answers compressed for clients that accept it, request bodies
// inflated within the body limit, and upstream gzip answers passed through or inflated.
#include "common/gzip.h"

#include <gtest/gtest.h>

#include <string>

#include "fmt/format.h"
#include "tests/api/router_fixture.h"

namespace switchyard::api_test {
namespace {

const std::string kGetSlot = R"({"jsonrpc":"2.0","id":1,"method":"getSlot"})";
const std::string kGetProgramAccounts =
    R"({"jsonrpc":"2.0","id":7,"method":"getProgramAccounts","params":["11111111111111111111111111111111"]})";

// A getProgramAccounts answer of about `bytes` bytes, id 7.
std::string LargeAnswer(size_t bytes) {
  std::string accounts;
  for (size_t i = 0; accounts.size() < bytes; ++i) {
    accounts += fmt::format(
        R"({}{{"pubkey":"Acc{}","account":{{"lamports":{},"data":["","base64"],"owner":"11111111111111111111111111111111"}}}})",
        i == 0 ? "" : ",", i, 1000 + i);
  }
  return fmt::format(R"({{"jsonrpc":"2.0","result":[{}],"id":7}})", accounts);
}

std::string Gzip(const std::string& text) {
  std::string out;
  GzipCompress(text, 6, &out);
  return out;
}

std::string Inflate(const std::string& gzip) {
  std::string out;
  EXPECT_TRUE(GzipInflate(gzip, 64 << 20, &out).ok());
  return out;
}

const std::vector<std::pair<std::string, std::string>> kAcceptsGzip = {
    {"Accept-Encoding", "gzip, deflate, br"}};

class GzipTest : public RouterFixture {
 protected:
  // gzip on (as serve has it) and the cache off, so each call reaches the upstream.
  void StartWithGzip(std::function<void(RouterOptions&, HttpServerOptions&)> more = nullptr) {
    Start([more](RouterOptions& options, HttpServerOptions& server) {
      server.gzip.enabled = true;
      options.cache.enabled = false;
      options.cache.coalesce = false;
      if (more) more(options, server);
    });
  }
  // Every getProgramAccounts is answered `answer` by base, as `encoding` says.
  void AnswerWith(const std::string& answer, bool gzip) {
    base_.SetResponder([answer, gzip](const std::string& method, const std::string&) {
      FakeReply reply;
      if (method != "getProgramAccounts") {
        reply.body = R"({"jsonrpc":"2.0","result":1,"id":1})";
        return reply;
      }
      reply.body = gzip ? Gzip(answer) : answer;
      if (gzip) reply.headers.emplace_back("Content-Encoding", "gzip");
      return reply;
    });
  }
};

TEST_F(GzipTest, ALargeAnswerIsGzippedForAClientThatAcceptsIt) {
  StartWithGzip();
  const std::string answer = LargeAnswer(20'000);
  AnswerWith(answer, /*gzip=*/false);
  TestClient client(port());
  ClientResponse response = client.Post(kGetProgramAccounts, kAcceptsGzip);
  ASSERT_EQ(response.status, 200u);
  EXPECT_EQ(response.headers["Content-Encoding"], "gzip");
  EXPECT_EQ(response.headers["Vary"], "Accept-Encoding");
  EXPECT_EQ(response.headers["Content-Length"], std::to_string(response.body.size()));
  EXPECT_LT(response.body.size(), answer.size() / 4);
  EXPECT_EQ(Inflate(response.body), answer);
  EXPECT_EQ(metrics_.http_gzip_answers.value(), 1u);
  EXPECT_EQ(metrics_.http_gzip_input_bytes.value(), answer.size());
  EXPECT_EQ(metrics_.http_gzip_output_bytes.value(), response.body.size());
  EXPECT_EQ(metrics_.http_gzip_passthrough.value(), 0u);
}

TEST_F(GzipTest, AClientThatDoesNotAcceptGzipGetsTheAnswerAsItIs) {
  StartWithGzip();
  const std::string answer = LargeAnswer(20'000);
  AnswerWith(answer, /*gzip=*/false);
  TestClient client(port());
  for (const auto& headers : std::vector<std::vector<std::pair<std::string, std::string>>>{
           {}, {{"Accept-Encoding", "identity"}}, {{"Accept-Encoding", "gzip;q=0, br"}}}) {
    ClientResponse response = client.Post(kGetProgramAccounts, headers);
    ASSERT_EQ(response.status, 200u);
    EXPECT_EQ(response.headers.count("Content-Encoding"), 0u);
    EXPECT_EQ(response.headers["Vary"], "Accept-Encoding");
    EXPECT_EQ(response.body, answer);
  }
  EXPECT_EQ(metrics_.http_gzip_answers.value(), 0u);
}

TEST_F(GzipTest, AnAnswerBelowTheThresholdIsNotCompressed) {
  StartWithGzip([](RouterOptions&, HttpServerOptions& server) { server.gzip.min_bytes = 4096; });
  const std::string answer = LargeAnswer(3000);
  ASSERT_LT(answer.size(), 4096u);
  AnswerWith(answer, /*gzip=*/false);
  TestClient client(port());
  ClientResponse small = client.Post(kGetProgramAccounts, kAcceptsGzip);
  ASSERT_EQ(small.status, 200u);
  EXPECT_EQ(small.headers.count("Content-Encoding"), 0u);
  // No client would get it compressed, so it does not vary with Accept-Encoding.
  EXPECT_EQ(small.headers.count("Vary"), 0u);
  EXPECT_EQ(small.body, answer);
  const std::string large = LargeAnswer(5000);
  AnswerWith(large, /*gzip=*/false);
  ClientResponse compressed = client.Post(kGetProgramAccounts, kAcceptsGzip);
  EXPECT_EQ(compressed.headers["Content-Encoding"], "gzip");
  EXPECT_EQ(compressed.headers["Vary"], "Accept-Encoding");
  EXPECT_EQ(Inflate(compressed.body), large);
  EXPECT_EQ(metrics_.http_gzip_answers.value(), 1u);
}

TEST_F(GzipTest, GzipOffSendsEveryAnswerAsItIsWithoutVary) {
  Start([](RouterOptions& options, HttpServerOptions&) { options.cache.enabled = false; });
  const std::string answer = LargeAnswer(20'000);
  AnswerWith(answer, /*gzip=*/false);
  TestClient client(port());
  ClientResponse response = client.Post(kGetProgramAccounts, kAcceptsGzip);
  ASSERT_EQ(response.status, 200u);
  EXPECT_EQ(response.headers.count("Content-Encoding"), 0u);
  EXPECT_EQ(response.headers.count("Vary"), 0u);
  EXPECT_EQ(response.body, answer);
  EXPECT_EQ(metrics_.http_gzip_answers.value(), 0u);
}

// The upstream's compressed bytes reach the client as they came: nothing is inflated or
// compressed again.
TEST_F(GzipTest, AnUpstreamGzipAnswerToAPlainForwardPassesThroughUninflated) {
  StartWithGzip();
  const std::string answer = LargeAnswer(20'000);
  const std::string compressed = Gzip(answer);
  AnswerWith(answer, /*gzip=*/true);
  TestClient client(port());
  ClientResponse response = client.Post(kGetProgramAccounts, kAcceptsGzip);
  ASSERT_EQ(response.status, 200u);
  EXPECT_EQ(response.headers["Content-Encoding"], "gzip");
  EXPECT_EQ(response.headers["Vary"], "Accept-Encoding");
  EXPECT_EQ(response.body, compressed);
  EXPECT_EQ(metrics_.upstream_gzip_answers.value(), 1u);
  EXPECT_EQ(metrics_.upstream_gzip_inflated.value(), 0u);
  EXPECT_EQ(metrics_.http_gzip_passthrough.value(), 1u);
  EXPECT_EQ(metrics_.http_gzip_passthrough_bytes.value(), compressed.size());
  EXPECT_EQ(metrics_.http_gzip_answers.value(), 0u);
}

// A gzip answer the router must read (a batch is merged; a client that takes no gzip) is
// inflated; the batch's answer is compressed again for the client that accepts it.
TEST_F(GzipTest, AnUpstreamGzipAnswerTheRouterReadsIsInflated) {
  StartWithGzip();
  const std::string answer = LargeAnswer(20'000);
  AnswerWith(answer, /*gzip=*/true);
  TestClient client(port());
  ClientResponse plain = client.Post(kGetProgramAccounts);
  ASSERT_EQ(plain.status, 200u);
  EXPECT_EQ(plain.headers.count("Content-Encoding"), 0u);
  EXPECT_EQ(plain.body, answer);
  EXPECT_EQ(metrics_.upstream_gzip_inflated.value(), 1u);

  ClientResponse batch = client.Post("[" + kGetProgramAccounts + "]", kAcceptsGzip);
  ASSERT_EQ(batch.status, 200u);
  EXPECT_EQ(batch.headers["Content-Encoding"], "gzip");
  EXPECT_EQ(Inflate(batch.body), "[" + answer + "]");
  EXPECT_EQ(metrics_.upstream_gzip_inflated.value(), 2u);
  EXPECT_EQ(metrics_.http_gzip_passthrough.value(), 0u);
  EXPECT_EQ(metrics_.http_gzip_answers.value(), 1u);
}

TEST_F(GzipTest, AnUpstreamAnswerThatDoesNotInflateIsAnUpstreamFailure) {
  StartWithGzip();
  base_.SetResponder([](const std::string&, const std::string&) {
    FakeReply reply;
    reply.body = std::string(2000, 'x');
    reply.headers.emplace_back("Content-Encoding", "gzip");
    return reply;
  });
  TestClient client(port());
  ClientResponse response = client.Post(kGetProgramAccounts);
  ASSERT_EQ(response.status, 200u);
  EXPECT_NE(response.body.find("does not inflate"), std::string::npos) << response.body;
  EXPECT_NE(response.body.find("-32603"), std::string::npos) << response.body;
  EXPECT_GE(metrics_.upstream_gzip_bad.value(), 1u);
}

TEST_F(GzipTest, AGzipRequestBodyIsInflatedBeforeItIsRead) {
  StartWithGzip();
  TestClient client(port());
  ClientResponse response = client.Post(Gzip(kGetSlot), {{"Content-Encoding", "gzip"}});
  ASSERT_EQ(response.status, 200u);
  EXPECT_EQ(response.body,
            R"({"jsonrpc":"2.0","result":{"from":"base","method":"getSlot"},"id":1})");
  ASSERT_EQ(base_.received().size(), 1u);
  EXPECT_EQ(base_.received()[0], kGetSlot);
  EXPECT_EQ(metrics_.http_gzip_bodies.value(), 1u);
  EXPECT_TRUE(response.keep_alive);
}

// 64 MiB of JSON whitespace compress to some 64 KiB, well within the 1 MiB limit on the wire:
// the limit counts inflated bytes, and inflating stops at it.
TEST_F(GzipTest, AZipBombGets413) {
  StartWithGzip();
  std::string bomb = std::string(64 << 20, ' ') + kGetSlot;
  const std::string compressed = Gzip(bomb);
  bomb.clear();
  bomb.shrink_to_fit();
  ASSERT_LT(compressed.size(), size_t{1} << 20);
  TestClient client(port());
  ClientResponse response = client.Post(compressed, {{"Content-Encoding", "gzip"}});
  EXPECT_EQ(response.status, 413u);
  EXPECT_NE(response.body.find("exceeds the limit of 1048576 bytes once inflated"),
            std::string::npos)
      << response.body;
  EXPECT_NE(response.body.find("-32600"), std::string::npos) << response.body;
  EXPECT_EQ(metrics_.http_body_too_large.value(), 1u);
  EXPECT_EQ(base_.received_count(), 0u);
  EXPECT_TRUE(client.ReadUntilClosed());
}

TEST_F(GzipTest, ABadGzipBodyGets400WithACounter) {
  StartWithGzip();
  TestClient client(port());
  ClientResponse response = client.Post(kGetSlot, {{"Content-Encoding", "gzip"}});
  EXPECT_EQ(response.status, 400u);
  EXPECT_NE(response.body.find("is not valid gzip"), std::string::npos) << response.body;
  EXPECT_EQ(metrics_.http_bad_gzip_bodies.value(), 1u);
  TestClient truncated_client(port());
  const std::string gzip = Gzip(kGetSlot);
  ClientResponse truncated =
      truncated_client.Post(gzip.substr(0, gzip.size() - 6), {{"Content-Encoding", "gzip"}});
  EXPECT_EQ(truncated.status, 400u);
  EXPECT_NE(truncated.body.find("truncated"), std::string::npos) << truncated.body;
  EXPECT_EQ(metrics_.http_bad_gzip_bodies.value(), 2u);
  EXPECT_EQ(base_.received_count(), 0u);
}

TEST_F(GzipTest, AnotherRequestEncodingGets415) {
  StartWithGzip();
  TestClient client(port());
  ClientResponse response = client.Post(kGetSlot, {{"Content-Encoding", "br"}});
  EXPECT_EQ(response.status, 415u);
  EXPECT_NE(response.body.find("Content-Encoding br is not accepted (only gzip is)"),
            std::string::npos)
      << response.body;
  EXPECT_EQ(metrics_.http_unsupported_encodings.value(), 1u);
  // A header that is not UTF-8 is quoted back as U+FFFD, so the error stays JSON (found by
  // http_server_fuzzer).
  TestClient garbled(port());
  ClientResponse refused = garbled.Post(kGetSlot, {{"Content-Encoding", "gzi\x83\x83p"}});
  EXPECT_EQ(refused.status, 415u);
  EXPECT_NE(refused.body.find(R"(Content-Encoding gzi\ufffd\ufffdp is not accepted)"),
            std::string::npos)
      << refused.body;
  EXPECT_EQ(metrics_.http_unsupported_encodings.value(), 2u);
  TestClient identity(port());
  EXPECT_EQ(identity.Post(kGetSlot, {{"Content-Encoding", "identity"}}).status, 200u);
}

TEST_F(GzipTest, AGzipBodyWithGzipOffGets415) {
  Start();
  TestClient client(port());
  ClientResponse response = client.Post(Gzip(kGetSlot), {{"Content-Encoding", "gzip"}});
  EXPECT_EQ(response.status, 415u);
  EXPECT_EQ(metrics_.http_unsupported_encodings.value(), 1u);
  EXPECT_EQ(base_.received_count(), 0u);
}

}  // namespace
}  // namespace switchyard::api_test
