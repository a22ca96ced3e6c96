// gzip through `switchyard serve` in front of a real localnet base layer that gzips its large
// answers: the compressed bytes of a plain forward pass through uninflated, counted at the
// localnet (GET /gzip-stats) and in the router's metrics.
#include "common/gzip.h"

#include <gtest/gtest.h>

#include <array>
#include <boost/asio/connect.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <map>
#include <regex>
#include <string>
#include <vector>

#include "common/pubkey.h"
#include "fmt/format.h"
#include "simdjson.h"
#include "tests/app/process_test.h"

namespace switchyard {
namespace {

using namespace std::chrono_literals;
using testing::HttpGet;
using testing::JsonInt;
using testing::MetricValue;

constexpr size_t kAccounts = 100;
constexpr uint64_t kLamports = 1'000'000'000;

struct RawAnswer {
  unsigned status = 0;
  std::map<std::string, std::string> headers;
  std::string body;  // as on the wire
};

// One POST with extra headers; the body is returned as it came, not decoded.
RawAnswer Post(uint16_t port, const std::string& body,
               const std::vector<std::pair<std::string, std::string>>& headers) {
  namespace beast = boost::beast;
  namespace http = beast::http;
  boost::asio::io_context ioc;
  beast::tcp_stream stream(ioc);
  stream.expires_after(10s);
  RawAnswer out;
  boost::system::error_code ec;
  stream.socket().connect(
      boost::asio::ip::tcp::endpoint(boost::asio::ip::make_address("127.0.0.1"), port), ec);
  if (ec) return out;
  http::request<http::string_body> request(http::verb::post, "/", 11);
  request.set(http::field::host, "127.0.0.1");
  request.set(http::field::content_type, "application/json");
  for (const auto& [name, value] : headers) request.set(name, value);
  request.body() = body;
  request.prepare_payload();
  http::write(stream, request, ec);
  if (ec) return out;
  beast::flat_buffer buffer;
  http::response_parser<http::string_body> parser;
  parser.body_limit(64 << 20);
  http::read(stream, buffer, parser, ec);
  if (ec) return out;
  out.status = parser.get().result_int();
  for (const auto& field : parser.get()) {
    out.headers[std::string(field.name_string())] = std::string(field.value());
  }
  out.body = parser.get().body();
  return out;
}

Pubkey AccountKey(size_t i) {
  std::array<uint8_t, 32> bytes{};
  bytes[0] = 0x5a;
  bytes[1] = static_cast<uint8_t>(i);
  bytes[2] = static_cast<uint8_t>(i >> 8);
  return Pubkey(std::span<const uint8_t, 32>(bytes));
}

class GzipServeTest : public testing::ProcessTest {
 protected:
  // A localnet with kAccounts funded accounts and serve in front of it; `cache` as [cache]
  // has it (off: every read reaches the localnet).
  void StartAll(bool cache) {
    std::vector<std::string> args = {"--slot-ms", "50"};
    for (size_t i = 0; i < kAccounts; ++i) {
      args.push_back("--fund");
      args.push_back(fmt::format("{}={}", AccountKey(i).ToBase58(), kLamports + i));
    }
    localnet_port_ = StartLocalnet("base", args);
    ASSERT_GT(localnet_port_, 0);
    const std::string config = WriteFile(
        "serve.toml",
        fmt::format("[api]\nlisten = \"127.0.0.1:0\"\nthreads = 1\n"
                    "[admin]\nlisten = \"127.0.0.1:0\"\n"
                    "[cache]\nenabled = {0}\ncoalesce = {0}\n"
                    "[upstreams.base]\nendpoints = [{{url = \"http://127.0.0.1:{1}\"}}]\n",
                    cache ? "true" : "false", localnet_port_));
    const std::string ready = dir_.Sub("serve.ready");
    ASSERT_GT(Start({SWITCHYARD_BINARY, "serve", "--config", config, "--data-dir", dir_.Sub("data"),
                     "--ready-file", ready}),
              0);
    const std::string ports = WaitForReadyFile(ready);
    api_port_ = static_cast<uint16_t>(JsonInt(ports, "api"));
    admin_port_ = static_cast<uint16_t>(JsonInt(ports, "admin"));
    ASSERT_GT(api_port_, 0) << ports;
    ASSERT_GT(admin_port_, 0) << ports;
  }

  static std::string GetMultipleAccounts() {
    std::string keys;
    for (size_t i = 0; i < kAccounts; ++i) {
      keys += fmt::format("{}\"{}\"", i == 0 ? "" : ",", AccountKey(i).ToBase58());
    }
    return fmt::format(
        R"({{"jsonrpc":"2.0","id":1,"method":"getMultipleAccounts","params":[[{}],{{"encoding":"base64"}}]}})",
        keys);
  }

  // (answers, bytes) the localnet sent gzip-compressed so far.
  std::pair<int64_t, int64_t> LocalnetGzip() {
    auto stats = HttpGet(localnet_port_, "/gzip-stats");
    EXPECT_TRUE(stats.has_value());
    if (!stats) return {-1, -1};
    return {JsonInt(stats->body, "answers"), JsonInt(stats->body, "bytes")};
  }

  int64_t Metric(const std::string& series) {
    auto metrics = HttpGet(admin_port_, "/metrics");
    EXPECT_TRUE(metrics.has_value());
    return metrics ? MetricValue(metrics->body, series) : -1;
  }

  // Every account of the answer with its lamports, in key order.
  static void ExpectAllAccounts(const std::string& json) {
    simdjson::dom::parser parser;
    simdjson::dom::element root;
    ASSERT_EQ(parser.parse(json).get(root), simdjson::SUCCESS) << json.substr(0, 200);
    simdjson::dom::array values;
    ASSERT_EQ(root["result"]["value"].get_array().get(values), simdjson::SUCCESS)
        << json.substr(0, 200);
    ASSERT_EQ(values.size(), kAccounts);
    size_t i = 0;
    for (simdjson::dom::element value : values) {
      uint64_t lamports = 0;
      ASSERT_EQ(value["lamports"].get_uint64().get(lamports), simdjson::SUCCESS) << i;
      EXPECT_EQ(lamports, kLamports + i);
      ++i;
    }
  }

  uint16_t localnet_port_ = 0;
  uint16_t api_port_ = 0;
  uint16_t admin_port_ = 0;
};

TEST_F(GzipServeTest, TheLocalnetsGzipAnswerPassesThroughServeUninflated) {
  StartAll(/*cache=*/false);
  const auto [answers_before, bytes_before] = LocalnetGzip();
  ASSERT_GE(answers_before, 0);
  RawAnswer compressed =
      Post(api_port_, GetMultipleAccounts(), {{"Accept-Encoding", "gzip, deflate"}});
  ASSERT_EQ(compressed.status, 200u) << compressed.body;
  EXPECT_EQ(compressed.headers["Content-Encoding"], "gzip");
  EXPECT_EQ(compressed.headers["Vary"], "Accept-Encoding");
  std::string inflated;
  ASSERT_TRUE(GzipInflate(compressed.body, 64 << 20, &inflated).ok());
  ExpectAllAccounts(inflated);
  // The bytes the localnet compressed are the bytes the client got.
  const auto [answers_after, bytes_after] = LocalnetGzip();
  EXPECT_EQ(answers_after, answers_before + 1);
  EXPECT_EQ(bytes_after - bytes_before, static_cast<int64_t>(compressed.body.size()));
  EXPECT_EQ(Metric("switchyard_api_http_gzip_passthrough_total"), 1);
  EXPECT_EQ(Metric("switchyard_api_http_gzip_passthrough_bytes_total"),
            static_cast<int64_t>(compressed.body.size()));
  EXPECT_EQ(Metric("switchyard_api_upstream_gzip_inflated_total"), 0);
  EXPECT_EQ(Metric("switchyard_api_http_gzip_answers_total"), 0);

  // A client that takes no gzip: the localnet is not asked for it, the answer is plain.
  RawAnswer plain = Post(api_port_, GetMultipleAccounts(), {});
  ASSERT_EQ(plain.status, 200u);
  EXPECT_EQ(plain.headers.count("Content-Encoding"), 0u);
  ExpectAllAccounts(plain.body);
  EXPECT_GT(plain.body.size(), 4 * compressed.body.size());
  EXPECT_EQ(LocalnetGzip().first, answers_after);
  EXPECT_EQ(Metric("switchyard_api_upstream_gzip_answers_total"), 1);
}

// With the cache on, the answer is kept, so the router reads it: the localnet is not asked for
// gzip, and serve compresses the answer itself.
TEST_F(GzipServeTest, AnAnswerTheCacheKeepsIsCompressedByServe) {
  StartAll(/*cache=*/true);
  const auto [answers_before, bytes_before] = LocalnetGzip();
  RawAnswer compressed = Post(api_port_, GetMultipleAccounts(), {{"Accept-Encoding", "gzip"}});
  ASSERT_EQ(compressed.status, 200u) << compressed.body;
  EXPECT_EQ(compressed.headers["Content-Encoding"], "gzip");
  std::string inflated;
  ASSERT_TRUE(GzipInflate(compressed.body, 64 << 20, &inflated).ok());
  ExpectAllAccounts(inflated);
  EXPECT_EQ(LocalnetGzip().first, answers_before);
  EXPECT_EQ(Metric("switchyard_api_http_gzip_answers_total"), 1);
  EXPECT_EQ(Metric("switchyard_api_http_gzip_output_bytes_total"),
            static_cast<int64_t>(compressed.body.size()));
  EXPECT_EQ(Metric("switchyard_api_http_gzip_passthrough_total"), 0);
}

}  // namespace
}  // namespace switchyard
