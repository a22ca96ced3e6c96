// Upstream health end to end over real sockets: a base target of two fake endpoints, one of
// them failing in some way, and what the router does about it (retries, ejection, Retry-After,
// hedges, the retry budget, open circuits, minContextSlot).
#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "tests/api/router_fixture.h"

// GCC 12 reports a false -Wrestrict on `"literal" + std::string` (GCC bug 105329).
#pragma GCC diagnostic ignored "-Wrestrict"

namespace switchyard::api_test {
namespace {

std::string Call(const std::string& id, const std::string& method, const std::string& params) {
  return R"({"jsonrpc":"2.0","id":)" + id + R"(,"method":")" + method + R"(","params":)" + params +
         "}";
}

std::string SlotAnswer(int id) {
  return R"({"jsonrpc":"2.0","result":{"from":"base","method":"getSlot"},"id":)" +
         std::to_string(id) + "}";
}

FakeReply Answer(unsigned status, std::string body,
                 std::vector<std::pair<std::string, std::string>> headers = {}) {
  return FakeReply{FakeReply::Action::kAnswer, status, std::move(body), std::move(headers)};
}

class UpstreamResilienceTest : public RouterFixture {
 protected:
  // The router with base = {base_ (weight 1000), base_b_ (weight 1)}: the choice, by latency ×
  // load / weight, always starts with base_ while it is admitted. One worker, so that one pool
  // sees every request.
  void StartBiased(std::function<void(RouterOptions&)> customize = nullptr) {
    Start([&](RouterOptions& options, HttpServerOptions& server) {
      server.threads = 1;
      options.upstreams[0].endpoints = {{base_.url(), 1000}, {base_b_.url(), 1}};
      if (customize) customize(options);
    });
  }

  TargetHealth& base_health() { return *context_->health()->Find("base"); }

  // The value of a series as rendered; -1 when it is not there.
  int64_t Value(const std::string& series) const {
    const std::string text = registry_.RenderPrometheus();
    const std::string prefix = "\n" + series + " ";
    const size_t at = text.find(prefix);
    if (at == std::string::npos) return -1;
    const size_t begin = at + prefix.size();
    return std::stoll(text.substr(begin, text.find('\n', begin) - begin));
  }
  int64_t TargetCounter(const std::string& name) const {
    return Value("switchyard_upstream_" + name + R"(_total{target="base"})");
  }
  // Counter `name` of endpoint `endpoint` of the base target.
  int64_t EndpointCounter(const FakeUpstream& endpoint, const std::string& name) const {
    return Value("switchyard_upstream_endpoint_" + name + R"(_total{target="base",endpoint=")" +
                 endpoint.url() + R"("})");
  }
  int64_t EndpointOutcome(const FakeUpstream& endpoint, const std::string& outcome) const {
    return Value(R"(switchyard_upstream_endpoint_exchanges_total{target="base",endpoint=")" +
                 endpoint.url() + R"(",outcome=")" + outcome + R"("})");
  }
};

TEST_F(UpstreamResilienceTest, ServerErrorsAreAnsweredByTheOtherEndpointUntilTheBadOneIsEjected) {
  StartBiased([](RouterOptions& options) {
    options.health.eject_consecutive_failures = 3;
    options.health.circuit_min_requests = 1000;
    options.health.min_ejection = absl::Seconds(30);
  });
  base_.SetResponder([](const std::string&, const std::string&) {
    return Answer(500, R"({"jsonrpc":"2.0","error":{"code":-32000,"message":"boom"},"id":1})");
  });
  TestClient client(port());
  for (int i = 1; i <= 10; ++i) {
    ClientResponse response = client.Post(Call(std::to_string(i), "getSlot", "[]"));
    EXPECT_EQ(response.body, SlotAnswer(i));
  }
  // Three 500s, then no more traffic: every read went to the other endpoint.
  EXPECT_EQ(base_.received_count(), 3u);
  EXPECT_EQ(base_b_.received_count(), 10u);
  EXPECT_EQ(base_health().endpoint(0).state(), EndpointState::kEjected);
  EXPECT_EQ(base_health().endpoint(1).state(), EndpointState::kHealthy);
  EXPECT_EQ(TargetCounter("retries"), 3);
  // The retries are the failing endpoint's, not the one that answered them.
  EXPECT_EQ(EndpointCounter(base_, "retries"), 3);
  EXPECT_EQ(EndpointCounter(base_b_, "retries"), 0);
  EXPECT_EQ(EndpointOutcome(base_, "http_5xx"), 3);
}

TEST_F(UpstreamResilienceTest, TooManyRequestsWithRetryAfterKeepsTheEndpointAvoided) {
  StartBiased([](RouterOptions& options) {
    options.health.eject_consecutive_failures = 100;
    options.health.circuit_min_requests = 1000;
  });
  base_.SetResponder([](const std::string&, const std::string&) {
    return Answer(429, R"({"jsonrpc":"2.0","error":{"code":429,"message":"slow down"},"id":1})",
                  {{"Retry-After", "2"}});
  });
  TestClient client(port());
  const auto first = std::chrono::steady_clock::now();
  for (int i = 1; i <= 10; ++i) {
    ClientResponse response = client.Post(Call(std::to_string(i), "getSlot", "[]"));
    EXPECT_EQ(response.body, SlotAnswer(i));
  }
  ASSERT_LT(std::chrono::steady_clock::now() - first, std::chrono::milliseconds(1500));
  // One 429; the reads since went to the other endpoint, though the choice prefers this one.
  EXPECT_EQ(base_.received_count(), 1u);
  EXPECT_EQ(base_b_.received_count(), 10u);
  EXPECT_EQ(base_health().endpoint(0).state(), EndpointState::kHealthy);  // avoided, not ejected
  // After Retry-After it takes reads again.
  int id = 100;
  ASSERT_TRUE(WaitFor(
      [&] {
        client.Post(Call(std::to_string(++id), "getSlot", "[]"));
        return base_.received_count() == 2;
      },
      absl::Seconds(4)));
  EXPECT_GE(std::chrono::steady_clock::now() - first, std::chrono::milliseconds(1900));
}

TEST_F(UpstreamResilienceTest, NodeUnhealthyErrorIsRetriedOnTheOtherEndpoint) {
  StartBiased();
  base_.SetResponder([](const std::string&, const std::string&) {
    return Answer(
        200,
        R"({"jsonrpc":"2.0","error":{"code":-32005,"message":"Node is behind by 42 slots"},"id":1})");
  });
  TestClient client(port());
  ClientResponse response = client.Post(Call("1", "getSlot", "[]"));
  EXPECT_EQ(response.body, SlotAnswer(1));
  EXPECT_EQ(base_.received_count(), 1u);
  EXPECT_EQ(base_b_.received_count(), 1u);
  EXPECT_EQ(TargetCounter("retries"), 1);
  EXPECT_EQ(EndpointOutcome(base_, "node_unhealthy"), 1);
}

TEST_F(UpstreamResilienceTest, ReadOfAHangingEndpointIsHedgedAndTheLoserCancelled) {
  StartBiased([](RouterOptions& options) {
    options.health.hedge_delay = absl::Milliseconds(20);
    options.upstream.request_timeout = absl::Seconds(2);
  });
  base_.SetResponder([](const std::string&, const std::string&) {
    return FakeReply{FakeReply::Action::kHang, 200, ""};
  });
  TestClient client(port());
  const auto start = std::chrono::steady_clock::now();
  ClientResponse response = client.Post(Call("1", "getSlot", "[]"));
  const auto elapsed = std::chrono::steady_clock::now() - start;
  EXPECT_EQ(response.body, SlotAnswer(1));
  EXPECT_LT(elapsed, std::chrono::milliseconds(500));  // the hedge, not the 2 s timeout
  EXPECT_EQ(base_.received_count(), 1u);
  EXPECT_EQ(base_b_.received_count(), 1u);
  EXPECT_EQ(TargetCounter("hedges"), 1);
  EXPECT_EQ(TargetCounter("hedge_wins"), 1);
  EXPECT_EQ(TargetCounter("retries"), 0);
  // The hedge is the hanging endpoint's; the win, the endpoint that answered.
  EXPECT_EQ(EndpointCounter(base_, "hedges"), 1);
  EXPECT_EQ(EndpointCounter(base_b_, "hedges"), 0);
  EXPECT_EQ(EndpointCounter(base_, "hedge_wins"), 0);
  EXPECT_EQ(EndpointCounter(base_b_, "hedge_wins"), 1);
  // The hanging exchange was cut off when the hedge answered, not left to time out.
  EXPECT_TRUE(
      WaitFor([&] { return EndpointOutcome(base_, "lost_hedge") == 1; }, absl::Milliseconds(500)));
  EXPECT_EQ(base_health().endpoint(0).in_flight(), 0u);
  EXPECT_EQ(EndpointOutcome(base_, "timeout"), 0);
}

TEST_F(UpstreamResilienceTest, SendTransactionIsNeverHedged) {
  StartBiased([](RouterOptions& options) {
    options.health.hedge_delay = absl::Milliseconds(20);
    options.upstream.request_timeout = absl::Milliseconds(300);
  });
  base_.SetResponder([](const std::string&, const std::string&) {
    return FakeReply{FakeReply::Action::kHang, 200, ""};
  });
  TestClient client(port());
  Transaction tx = MakeTransaction(Key(20), {}, Key(30));
  ClientResponse response = client.Post(
      Call("1", "sendTransaction", "[\"" + TransactionBase64(tx) + R"(",{"encoding":"base64"}])"));
  EXPECT_NE(response.body.find("-32603"), std::string::npos) << response.body;
  EXPECT_NE(response.body.find("timed out"), std::string::npos) << response.body;
  EXPECT_EQ(base_.received_count(), 1u);
  EXPECT_EQ(base_b_.received_count(), 0u);
  EXPECT_EQ(TargetCounter("hedges"), 0);
  EXPECT_EQ(TargetCounter("retries"), 0);
}

TEST_F(UpstreamResilienceTest, WithTheRetryBudgetSpentTheServerErrorPassesThrough) {
  StartBiased([](RouterOptions& options) {
    options.health.retry_budget_min = 0;
    options.health.retry_budget_ratio = 0;
  });
  base_.SetResponder([](const std::string&, const std::string&) {
    return Answer(500, R"({"jsonrpc":"2.0","error":{"code":-32000,"message":"boom"},"id":1})");
  });
  TestClient client(port());
  ClientResponse response = client.Post(Call("1", "getSlot", "[]"));
  EXPECT_EQ(response.body, R"({"jsonrpc":"2.0","error":{"code":-32000,"message":"boom"},"id":1})");
  EXPECT_EQ(base_.received_count(), 1u);
  EXPECT_EQ(base_b_.received_count(), 0u);
  EXPECT_EQ(TargetCounter("retries"), 0);
  EXPECT_EQ(TargetCounter("retry_budget_exhausted"), 1);
  EXPECT_EQ(EndpointCounter(base_, "retry_budget_exhausted"), 1);
  EXPECT_EQ(EndpointCounter(base_b_, "retry_budget_exhausted"), 0);
}

TEST_F(UpstreamResilienceTest, WithEveryCircuitOpenTheAnswerIsImmediateAndClear) {
  StartBiased([](RouterOptions& options) {
    options.health.eject_consecutive_failures = 100;
    options.health.min_requests = 1000;
    options.health.circuit_min_requests = 2;
    options.health.circuit_open = absl::Seconds(30);
  });
  auto fail = [](const std::string&, const std::string&) {
    return Answer(500, R"({"jsonrpc":"2.0","error":{"code":-32000,"message":"boom"},"id":1})");
  };
  base_.SetResponder(fail);
  base_b_.SetResponder(fail);
  TestClient client(port());
  for (int i = 1; i <= 10; ++i) {
    if (base_health().endpoint(0).circuit() == CircuitState::kOpen &&
        base_health().endpoint(1).circuit() == CircuitState::kOpen) {
      break;
    }
    client.Post(Call(std::to_string(i), "getSlot", "[]"));
  }
  ASSERT_EQ(base_health().endpoint(0).circuit(), CircuitState::kOpen);
  ASSERT_EQ(base_health().endpoint(1).circuit(), CircuitState::kOpen);
  const size_t sent = base_.received_count() + base_b_.received_count();
  const auto start = std::chrono::steady_clock::now();
  ClientResponse response = client.Post(Call("99", "getSlot", "[]"));
  const auto elapsed = std::chrono::steady_clock::now() - start;
  EXPECT_LT(elapsed, std::chrono::milliseconds(50));
  EXPECT_EQ(response.body,
            R"({"jsonrpc":"2.0","error":{"code":-32603,"message":"upstream base failed: )"
            R"(upstream base: every endpoint's circuit breaker is open"},"id":99})");
  EXPECT_EQ(base_.received_count() + base_b_.received_count(), sent);
  EXPECT_EQ(TargetCounter("fast_failures"), 1);
}

TEST_F(UpstreamResilienceTest, MinContextSlotSkipsTheEndpointBehindIt) {
  StartBiased();
  snapshots_.Publish(SnapshotBuilder().Build(200));
  const auto now = HealthClock::now();
  base_health().endpoint(0).OnProbe(Slot{100}, true, now);  // base_, which the choice prefers
  base_health().endpoint(1).OnProbe(Slot{200}, true, now);
  TestClient client(port());
  for (int i = 1; i <= 5; ++i) {
    ClientResponse response =
        client.Post(Call(std::to_string(i), "getSlot", R"([{"minContextSlot":150}])"));
    EXPECT_EQ(response.body, SlotAnswer(i));
  }
  EXPECT_EQ(base_.received_count(), 0u);
  EXPECT_EQ(base_b_.received_count(), 5u);
  // Without the bound the choice goes back to the preferred endpoint.
  ClientResponse response = client.Post(Call("6", "getSlot", "[]"));
  EXPECT_EQ(response.body, SlotAnswer(6));
  EXPECT_EQ(base_.received_count(), 1u);
}

}  // namespace
}  // namespace switchyard::api_test
