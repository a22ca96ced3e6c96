// The request pipeline (api/rpc) over a fake UpstreamClient: no sockets, no server. The test
// thread is the worker: it calls Handle and runs the worker's io_context.
#include <gtest/gtest.h>

#include <boost/asio/io_context.hpp>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "api/metrics/api_metrics.h"
#include "api/rpc/internal/router.h"
#include "api/rpc/router.h"
#include "api/upstream/upstream_client.h"
#include "common/clock.h"
#include "common/metrics.h"
#include "engine/snapshot.h"
#include "tests/api/test_support.h"

namespace switchyard::api_test {
namespace {

const Pubkey kEr1 = Key(0xE1);

// Records every Send; the test answers them.
class FakeClient : public UpstreamClient {
 public:
  struct Sent {
    std::string target;
    std::string body;
    RetryPolicy policy;
    UpstreamCallback done;
  };
  bool Has(std::string_view target) const override { return target == "base" || target == "er1"; }
  void Send(std::string_view target, std::string body, RetryPolicy policy,
            UpstreamCallback done) override {
    sent->push_back({std::string(target), std::move(body), policy, std::move(done)});
  }
  void Shutdown() override { *shut_down = true; }

  std::shared_ptr<std::deque<Sent>> sent = std::make_shared<std::deque<Sent>>();
  std::shared_ptr<bool> shut_down = std::make_shared<bool>(false);
};

std::string AccountAnswer(int id, std::string_view owner) {
  return R"({"jsonrpc":"2.0","result":{"context":{"slot":7},"value":{"data":["","base64"],)"
         R"("executable":false,"lamports":5,"owner":")" +
         std::string(owner) + R"(","rentEpoch":0,"space":0}},"id":)" + std::to_string(id) + "}";
}

class PipelineTest : public testing::Test {
 protected:
  PipelineTest() {
    snapshots_.Publish(SnapshotBuilder().Delegate(Key(1), kEr1).Build(100));
    RouterOptions options;
    options.upstreams = {{"base", {{"http://base.invalid:1", 1}}},
                         {"er1", {{"http://er1.invalid:1", 1}}}};
    options.ers = {{kEr1, "er1", "https://er1.example", 0, 50, "DE"}};
    options.routing.default_er = "er1";
    options.max_gate_wait = absl::Milliseconds(30);
    auto context = RouterContext::Create(std::move(options), &snapshots_, &clock_, &metrics_);
    EXPECT_TRUE(context.ok()) << context.status();
    context_ = *std::move(context);
    auto client = std::make_unique<FakeClient>();
    sent_ = client->sent;
    shut_down_ = client->shut_down;
    router_ = std::make_unique<Router>(io_, context_.get(), std::move(client));
  }
  ~PipelineTest() override {
    router_->Shutdown();
    io_.run();
  }

  // Hands `body` to the pipeline; the answer lands in `answer_`.
  void Post(std::string body, std::vector<std::pair<std::string, std::string>> headers = {}) {
    HttpRequest request;
    request.method = "POST";
    request.target = "/";
    request.body = std::move(body);
    request.headers = std::move(headers);
    answer_.reset();
    router_->Handle(std::move(request), [this](HttpResponse response) { answer_ = response; });
    io_.poll();
    io_.restart();
  }
  // Answers the oldest send with `status` and `body`.
  void Answer(unsigned status, std::string body) {
    ASSERT_FALSE(sent_->empty());
    FakeClient::Sent sent = std::move(sent_->front());
    sent_->pop_front();
    sent.done(UpstreamResponse{status, std::move(body)});
    io_.poll();
    io_.restart();
  }

  boost::asio::io_context io_;
  SnapshotHolder snapshots_;
  SystemClock clock_;
  MetricsRegistry registry_;
  ApiMetrics metrics_{registry_};
  std::unique_ptr<RouterContext> context_;
  std::unique_ptr<Router> router_;
  std::shared_ptr<std::deque<FakeClient::Sent>> sent_;
  std::shared_ptr<bool> shut_down_;
  std::optional<HttpResponse> answer_;
};

TEST_F(PipelineTest, AReadGoesToTheTargetOfItsAccountAndItsAnswerPassesThrough) {
  const std::string body = R"({"jsonrpc":"2.0","id":3,"method":"getAccountInfo","params":[")" +
                           Key(1).ToBase58() + R"(",{"encoding":"base64"}]})";
  Post(body);
  ASSERT_EQ(sent_->size(), 1u);
  EXPECT_EQ(sent_->front().target, "er1");
  EXPECT_EQ(sent_->front().body, body);
  EXPECT_EQ(sent_->front().policy, RetryPolicy::kSafe);
  EXPECT_FALSE(answer_.has_value());
  const std::string upstream = AccountAnswer(3, "11111111111111111111111111111111");
  Answer(200, upstream);
  ASSERT_TRUE(answer_.has_value());
  EXPECT_EQ(answer_->status, 200u);
  EXPECT_EQ(answer_->body, upstream);

  Post(R"({"jsonrpc":"2.0","id":4,"method":"getAccountInfo","params":[")" + Key(9).ToBase58() +
       R"("]})");
  ASSERT_EQ(sent_->size(), 1u);
  EXPECT_EQ(sent_->front().target, "base");
}

TEST_F(PipelineTest, AClusterReadGoesToBase) {
  Post(R"({"jsonrpc":"2.0","id":1,"method":"getSlot"})");
  ASSERT_EQ(sent_->size(), 1u);
  EXPECT_EQ(sent_->front().target, "base");
  Answer(200, R"({"jsonrpc":"2.0","result":42,"id":1})");
  EXPECT_EQ(answer_->body, R"({"jsonrpc":"2.0","result":42,"id":1})");
}

TEST_F(PipelineTest, ABatchOfPlainForwardsIsOneUpstreamBatchAnsweredInRequestOrder) {
  Post(R"([{"jsonrpc":"2.0","id":"a","method":"getSlot"},)"
       R"({"jsonrpc":"2.0","id":"b","method":"getBlockHeight"},)"
       R"({"jsonrpc":"2.0","id":"c","method":"getEpochInfo"}])");
  ASSERT_EQ(sent_->size(), 1u);
  EXPECT_EQ(sent_->front().target, "base");
  EXPECT_EQ(sent_->front().body.front(), '[');
  // The upstream answers out of order, under the ids the router gave it.
  Answer(200, R"([{"jsonrpc":"2.0","result":3,"id":2},{"jsonrpc":"2.0","result":1,"id":0},)"
              R"({"jsonrpc":"2.0","result":2,"id":1}])");
  ASSERT_TRUE(answer_.has_value());
  EXPECT_EQ(answer_->body,
            R"([{"jsonrpc":"2.0","result":1,"id":"a"},{"jsonrpc":"2.0","result":2,"id":"b"},)"
            R"({"jsonrpc":"2.0","result":3,"id":"c"}])");
  EXPECT_EQ(metrics_.upstream_batches.value(), 1u);
}

TEST_F(PipelineTest, AnUpstreamFailureIsAJsonRpcErrorOfTheCall) {
  Post(R"({"jsonrpc":"2.0","id":8,"method":"getSlot"})");
  ASSERT_EQ(sent_->size(), 1u);
  FakeClient::Sent sent = std::move(sent_->front());
  sent_->pop_front();
  sent.done(absl::UnavailableError("connection refused"));
  io_.poll();
  ASSERT_TRUE(answer_.has_value());
  EXPECT_NE(answer_->body.find(R"("error":{"code":)"), std::string::npos) << answer_->body;
  EXPECT_NE(answer_->body.find(R"("id":8)"), std::string::npos) << answer_->body;
}

TEST_F(PipelineTest, TheGateHoldsARequestUntilItsSlotAndAnswers412AtItsDeadline) {
  Post(R"({"jsonrpc":"2.0","id":1,"method":"getSlot"})", {{"X-Min-Slot", "150"}});
  EXPECT_TRUE(sent_->empty());
  EXPECT_FALSE(answer_.has_value());
  snapshots_.Publish(SnapshotBuilder().Delegate(Key(1), kEr1).Build(150));
  io_.run_for(std::chrono::milliseconds(5));  // the listener's post reaches the gate
  io_.restart();
  ASSERT_EQ(sent_->size(), 1u) << "released when the applied slot reached 150";
  Answer(200, R"({"jsonrpc":"2.0","result":150,"id":1})");
  EXPECT_EQ(answer_->status, 200u);

  // Nothing reaches 999: the gate's timer answers 412 after max_gate_wait (30 ms).
  Post(R"({"jsonrpc":"2.0","id":2,"method":"getSlot"})", {{"X-Min-Slot", "999"}});
  EXPECT_FALSE(answer_.has_value());
  io_.run_for(std::chrono::milliseconds(200));
  ASSERT_TRUE(answer_.has_value());
  EXPECT_EQ(answer_->status, 412u);
  EXPECT_EQ(metrics_.gate_rejections.value(), 1u);
  EXPECT_TRUE(sent_->empty());
}

TEST_F(PipelineTest, ShutdownReachesTheUpstreams) {
  router_->Shutdown();
  EXPECT_TRUE(*shut_down_);
}

}  // namespace
}  // namespace switchyard::api_test
