// The router's per-call metrics as /metrics renders them: requests by method, target and
// outcome, latency by method, and requests and errors per upstream group.
#include <gtest/gtest.h>

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

std::string Requests(const std::string& method, const std::string& target,
                     const std::string& outcome) {
  return R"(switchyard_rpc_requests_total{method=")" + method + R"(",target=")" + target +
         R"(",outcome=")" + outcome + R"("})";
}

std::string Upstream(const std::string& name, const std::string& target) {
  return "switchyard_upstream_" + name + R"(_total{target=")" + target + R"("})";
}

class RouterMetricsTest : public RouterFixture {
 protected:
  // The value of the series `series` (its name and labels, exactly as rendered); -1 when the
  // series is not on /metrics.
  int64_t Value(const std::string& series) const {
    const std::string text = registry_.RenderPrometheus();
    const std::string prefix = series + " ";
    size_t at = text.rfind("\n" + prefix);
    if (at == std::string::npos) {
      if (text.rfind(prefix, 0) != 0) return -1;
      at = 0;
    } else {
      at += 1;
    }
    return std::stoll(text.substr(at + prefix.size(), text.find('\n', at) - at - prefix.size()));
  }
};

TEST_F(RouterMetricsTest, EachCallCountsOnceByMethodTargetAndOutcome) {
  Start();
  TestClient client(port());
  EXPECT_EQ(Value(Requests("getSlot", "base", "ok")), 0);  // registered before the first call
  client.Post(Call("1", "getSlot", "[]"));
  EXPECT_EQ(Value(Requests("getSlot", "base", "ok")), 1);
  // A batch counts its elements one by one, each by where it went.
  client.Post("[" + Call("2", "getSlot", "[]") + "," +
              Call("3", "getAccountInfo", "[" + Quoted(Key(2)) + "]") + "," +
              Call("4", "getAssetsByOwner", "[]") + "]");
  EXPECT_EQ(Value(Requests("getSlot", "base", "ok")), 2);
  EXPECT_EQ(Value(Requests("getAccountInfo", "er2", "ok")), 1);
  EXPECT_EQ(Value(Requests("getAccountInfo", "base", "ok")), 0);
  EXPECT_EQ(Value(Requests("other", "indexer", "ok")), 1);
  EXPECT_EQ(Value(R"(switchyard_rpc_latency_seconds_count{method="getSlot"})"), 2);
  EXPECT_EQ(Value(R"(switchyard_rpc_latency_seconds_count{method="getAccountInfo"})"), 1);
  EXPECT_EQ(Value("switchyard_api_rpc_latency_seconds_count"), 2);  // per HTTP request
}

TEST_F(RouterMetricsTest, UnknownMethodsAreCountedAsOtherWithoutNewSeries) {
  Start();
  TestClient client(port());
  for (const std::string method : {"noSuchMethod", R"(evil\"method)", "getSlotX"}) {
    client.Post(Call("1", method, "[]"));
  }
  EXPECT_EQ(Value(Requests("other", "router", "router_error")), 3);
  const std::string text = registry_.RenderPrometheus();
  EXPECT_EQ(text.find("noSuchMethod"), std::string::npos);
  EXPECT_EQ(text.find("getSlotX"), std::string::npos);
  EXPECT_EQ(text.find("evil"), std::string::npos);
  // A body that is not JSON is one call of no known method.
  client.Post("{not json");
  EXPECT_EQ(Value(Requests("other", "router", "router_error")), 4);
}

TEST_F(RouterMetricsTest, RouterErrorsAndRouterAnswersCountAtTheRouter) {
  Start();
  TestClient client(port());
  client.Post(Call("1", "getBalance", R"(["not-a-key"])"));
  client.Post(Call("2", "getIdentity", "[]"));
  Transaction tx = MakeTransaction(Key(1), {Key(2)}, Key(30));  // writes on two ERs
  client.Post(
      Call("3", "sendTransaction", "[\"" + TransactionBase64(tx) + R"(",{"encoding":"base64"}])"));
  EXPECT_EQ(Value(Requests("getBalance", "router", "router_error")), 1);
  EXPECT_EQ(Value(Requests("getIdentity", "router", "ok")), 1);
  EXPECT_EQ(Value(Requests("sendTransaction", "router", "router_error")), 1);
  EXPECT_EQ(metrics_.rpc_errors.value(), 2u);
}

TEST_F(RouterMetricsTest, UpstreamJsonRpcErrorIsAnRpcError) {
  Start();
  base_.SetResponder([](const std::string&, const std::string&) {
    return FakeReply{
        FakeReply::Action::kAnswer, 200,
        R"({"jsonrpc":"2.0","error":{"code":-32009,"message":"slot skipped"},"id":1})"};
  });
  TestClient client(port());
  client.Post(Call("1", "getBlock", "[5]"));
  EXPECT_EQ(Value(Requests("getBlock", "base", "rpc_error")), 1);
  EXPECT_EQ(Value(Requests("getBlock", "base", "ok")), 0);
  EXPECT_EQ(Value(Upstream("errors", "base")), 0);  // a JSON-RPC error is an answer
}

TEST_F(RouterMetricsTest, UpstreamTimeoutIsAnUpstreamFailureOfItsTarget) {
  Start([](RouterOptions& options, HttpServerOptions&) {
    options.upstream.request_timeout = absl::Milliseconds(100);
    options.verify_owner = false;  // no probe: exactly the call goes to er1
  });
  er1_.SetResponder([](const std::string&, const std::string&) {
    return FakeReply{FakeReply::Action::kHang, 200, ""};
  });
  TestClient client(port());
  EXPECT_EQ(Value(Upstream("requests", "er1")), 0);
  client.Post(Call("1", "getBalance", "[" + Quoted(Key(1)) + "]"));
  EXPECT_EQ(Value(Requests("getBalance", "er1", "upstream_failure")), 1);
  EXPECT_EQ(Value(Requests("getBalance", "er1", "ok")), 0);
  // A lone endpoint that timed out is not asked again.
  EXPECT_EQ(Value(Upstream("requests", "er1")), 1);
  EXPECT_EQ(Value(Upstream("errors", "er1")), 1);
  EXPECT_EQ(Value(Upstream("errors", "base")), 0);
}

TEST_F(RouterMetricsTest, UpstreamAnsweringWithoutJsonRpcIsAnUpstreamFailure) {
  Start();
  base_.SetResponder([](const std::string&, const std::string&) {
    return FakeReply{FakeReply::Action::kAnswer, 502, "<html>bad gateway</html>"};
  });
  TestClient client(port());
  client.Post(Call("1", "getSlot", "[]"));
  EXPECT_EQ(Value(Requests("getSlot", "base", "upstream_failure")), 1);
  EXPECT_EQ(Value(Upstream("errors", "base")), 1);  // HTTP 502
  EXPECT_EQ(Value(Upstream("requests", "base")), 1);
}

TEST_F(RouterMetricsTest, GateRejectionIsRejectedForEveryCall) {
  Start([](RouterOptions& options, HttpServerOptions&) {
    options.max_gate_wait = absl::Milliseconds(20);
  });
  TestClient client(port());
  ClientResponse response =
      client.Post("[" + Call("1", "getSlot", "[]") + "," +
                      Call("2", "getBalance", "[" + Quoted(Key(1)) + "]") + "]",
                  {{"X-Min-Slot", "105"}});
  ASSERT_EQ(response.status, 412u);
  EXPECT_EQ(Value(Requests("getSlot", "router", "rejected")), 1);
  EXPECT_EQ(Value(Requests("getBalance", "router", "rejected")), 1);
  EXPECT_EQ(Value(Requests("getSlot", "base", "ok")), 0);
  EXPECT_EQ(Value("switchyard_api_gate_waits_total"), 1);
  EXPECT_EQ(Value("switchyard_api_gate_rejections_total"), 1);
}

TEST_F(RouterMetricsTest, SplitAndFanoutCallsHaveTheirOwnTargets) {
  Start();
  TestClient client(port());
  client.Post(
      Call("1", "getMultipleAccounts", "[[" + Quoted(Key(9)) + "," + Quoted(Key(1)) + "]]"));
  client.Post(
      Call("2", "getMultipleAccounts", "[[" + Quoted(Key(1)) + "," + Quoted(Key(5)) + "]]"));
  std::array<uint8_t, 64> bytes;
  bytes.fill(0x33);
  client.Post(Call("3", "getSignatureStatuses", "[[\"" + Signature(bytes).ToBase58() + "\"]]"));
  EXPECT_EQ(Value(Requests("getMultipleAccounts", "split", "ok")), 1);
  EXPECT_EQ(Value(Requests("getMultipleAccounts", "er1", "ok")), 1);  // one target: forwarded
  EXPECT_EQ(Value(Requests("getSignatureStatuses", "fanout", "ok")), 1);
}

TEST_F(RouterMetricsTest, OwnerReroutesAreCountedByMethod) {
  Start();
  er1_.SetResponder([](const std::string&, const std::string&) {
    return FakeReply{FakeReply::Action::kAnswer, 200,
                     R"({"jsonrpc":"2.0","result":{"context":{"slot":2},"value":null},"id":1})"};
  });
  TestClient client(port());
  client.Post(Call("1", "getAccountInfo", "[" + Quoted(Key(1)) + "]"));
  EXPECT_EQ(Value("switchyard_api_owner_reroutes_total"), 1);
  EXPECT_EQ(
      Value(R"(switchyard_api_owner_reroutes_by_method_total{method="getAccountInfo",to="base"})"),
      1);
  EXPECT_EQ(Value(R"(switchyard_api_owner_reroutes_by_method_total{method="getBalance",to="er"})"),
            0);
  // The answer came from base.
  EXPECT_EQ(Value(Requests("getAccountInfo", "base", "ok")), 1);
}

TEST_F(RouterMetricsTest, UpstreamNamedLikeAMetricsTargetIsRejected) {
  RouterOptions options;
  options.upstreams = {{"base", {{base_.url(), 1}}}, {"split", {{er1_.url(), 1}}}};
  absl::StatusOr<std::unique_ptr<RouterContext>> context =
      RouterContext::Create(std::move(options), &snapshots_, &clock_, &metrics_);
  ASSERT_FALSE(context.ok());
  EXPECT_NE(std::string(context.status().message()).find("upstreams.split"), std::string::npos)
      << context.status();
}

}  // namespace
}  // namespace switchyard::api_test
