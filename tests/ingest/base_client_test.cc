// The ingest's base-layer HTTP client against a fake upstream that behaves like the servers
// and balancers in front of real RPC nodes: idle connections closed, a request met by a close,
// 429 with Retry-After, 5xx, and a node that hangs.
#include <gtest/gtest.h>

#include "common/metrics.h"
#include "ingest/base_clients.h"
#include "tests/api/fake_upstream.h"

namespace switchyard {
namespace {

using api_test::FakeReply;
using api_test::FakeUpstream;

class BaseClientTest : public testing::Test {
 protected:
  BaseClientTest() : upstream_("base") {}

  std::unique_ptr<BaseRpcClient> Client() {
    absl::StatusOr<BaseEndpoint> endpoint = ParseBaseUrl(upstream_.url());
    EXPECT_TRUE(endpoint.ok()) << endpoint.status();
    return std::make_unique<BaseRpcClient>(*endpoint, BaseTlsOptions{}, &stale_);
  }

  FakeUpstream upstream_;
  MetricsRegistry registry_;
  Counter& stale_ = registry_.AddCounter("stale", "stale connections");
};

TEST_F(BaseClientTest, AReadMetByACloseOnAKeptConnectionGoesAgainOnANewOne) {
  upstream_.SetDropReusedRequests(true);
  std::unique_ptr<BaseRpcClient> client = Client();
  ASSERT_TRUE(client->Call("getSlot", "[]", absl::Seconds(5)).ok());
  absl::StatusOr<std::string> second = client->Call("getSlot", "[]", absl::Seconds(5));
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_NE(second->find("\"from\":\"base\""), std::string::npos) << *second;
  EXPECT_EQ(upstream_.received_count(), 3u);
  EXPECT_EQ(upstream_.connections_accepted(), 2u);
  EXPECT_EQ(stale_.value(), 1u);
}

TEST_F(BaseClientTest, AConnectionClosedWhileIdleIsNotUsedAgain) {
  upstream_.SetIdleClose(absl::Milliseconds(50));
  std::unique_ptr<BaseRpcClient> client = Client();
  ASSERT_TRUE(client->Call("getSlot", "[]", absl::Seconds(5)).ok());
  absl::SleepFor(absl::Milliseconds(300));  // the server closes the idle connection
  absl::StatusOr<std::string> second = client->Call("getSlot", "[]", absl::Seconds(5));
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(upstream_.received_count(), 2u);  // seen closed before it was written to
  EXPECT_EQ(upstream_.connections_accepted(), 2u);
  EXPECT_EQ(stale_.value(), 0u);
}

TEST_F(BaseClientTest, AKeptConnectionIsUsedForTheNextCall) {
  upstream_.SetIdleClose(absl::Seconds(30));
  std::unique_ptr<BaseRpcClient> client = Client();
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(client->Call("getSlot", "[]", absl::Seconds(5)).ok());
  EXPECT_EQ(upstream_.connections_accepted(), 1u);
}

TEST_F(BaseClientTest, RateLimitIsResourceExhaustedWithTheWaitItAskedFor) {
  upstream_.SetResponder([](const std::string&, const std::string&) {
    return FakeReply{FakeReply::Action::kAnswer, 429, "slow down", {{"Retry-After", "2"}}};
  });
  absl::StatusOr<std::string> answer = Client()->Call("getSlot", "[]", absl::Seconds(5));
  ASSERT_EQ(answer.status().code(), absl::StatusCode::kResourceExhausted) << answer.status();
  EXPECT_EQ(RetryAfterOf(answer.status()), absl::Seconds(2));
  EXPECT_EQ(upstream_.received_count(), 1u);
}

TEST_F(BaseClientTest, ServerErrorIsUnavailableWithoutAWait) {
  upstream_.SetResponder([](const std::string&, const std::string&) {
    return FakeReply{FakeReply::Action::kAnswer, 502, "bad gateway"};
  });
  absl::StatusOr<std::string> answer = Client()->Call("getSlot", "[]", absl::Seconds(5));
  ASSERT_EQ(answer.status().code(), absl::StatusCode::kUnavailable) << answer.status();
  EXPECT_NE(answer.status().message().find("HTTP 502"), std::string_view::npos);
  EXPECT_EQ(RetryAfterOf(answer.status()), std::nullopt);
}

TEST_F(BaseClientTest, ATimeoutOnAKeptConnectionIsNotSentAgain) {
  std::unique_ptr<BaseRpcClient> client = Client();
  ASSERT_TRUE(client->Call("getSlot", "[]", absl::Seconds(5)).ok());
  upstream_.SetResponder(
      [](const std::string&, const std::string&) { return FakeReply{FakeReply::Action::kHang}; });
  absl::StatusOr<std::string> answer = client->Call("getSlot", "[]", absl::Milliseconds(200));
  EXPECT_EQ(answer.status().code(), absl::StatusCode::kDeadlineExceeded) << answer.status();
  EXPECT_EQ(upstream_.received_count(), 2u);
  EXPECT_EQ(stale_.value(), 0u);
}

}  // namespace
}  // namespace switchyard
