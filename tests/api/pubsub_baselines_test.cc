// The account baselines of the subscription pipeline (api/pubsub/pubsub_baselines.h) over a
// fake UpstreamClient and a fake shard: no sockets. The test thread runs the shard's
// io_context.
#include "api/pubsub/pubsub_baselines.h"

#include <gtest/gtest.h>
#include <simdjson.h>

#include <algorithm>
#include <boost/asio/io_context.hpp>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "common/metrics.h"
#include "tests/api/fake_upstream_client.h"
#include "tests/api/test_support.h"

namespace switchyard::api_test {
namespace {

// The shard, as the baselines see it: its legs by serial, what it is told.
class FakeShard : public PubsubBaselines::Owner {
 public:
  struct Failure {
    uint64_t serial;
    BaselineKind kind;
    absl::Status why;
  };

  void Fanout(PubsubSubscription&, const std::shared_ptr<const std::string>& message) override {
    sent.push_back(*message);
  }
  void OnBaselineFailed(PubsubLeg& leg, BaselineKind kind, const absl::Status& why) override {
    failures.push_back({leg.serial, kind, why});
  }
  void RetryLater(uint64_t, absl::Duration,
                  std::function<void(PubsubSubscription&)> then) override {
    retries.push_back(std::move(then));
  }
  PubsubLeg* FindLeg(uint64_t serial) const override {
    auto it = legs.find(serial);
    return it == legs.end() ? nullptr : it->second;
  }
  void CompleteSwitch(PubsubSubscription& sub) override {
    legs.erase(sub.active->serial);
    sub.active = std::move(sub.pending);
    ++switches;
  }

  std::map<uint64_t, PubsubLeg*> legs;
  std::vector<std::string> sent;
  std::vector<Failure> failures;
  std::vector<std::function<void(PubsubSubscription&)>> retries;
  int switches = 0;
};

// An accountNotification from an upstream, as the links hand it on: the raw message and its
// parse, which views the message.
struct Notification {
  Notification(uint64_t slot, std::string_view value) {
    text = R"({"jsonrpc":"2.0","method":"accountNotification","params":{"result":{"context":)"
           R"({"slot":)" +
           std::to_string(slot) + R"(},"value":)" + std::string(value) + R"(},"subscription":99}})";
    padded = simdjson::padded_string(text);
    simdjson::ondemand::parser parser;
    absl::StatusOr<UpstreamMessage> message =
        ParseUpstreamMessage(parser, padded.data(), padded.size(), padded.size() + 64);
    EXPECT_TRUE(message.ok()) << message.status();
    parsed = *message;
  }
  std::string text;
  simdjson::padded_string padded;
  UpstreamMessage parsed;
};

std::string Value(int lamports) {
  return R"({"data":["","base64"],"executable":false,"lamports":)" + std::to_string(lamports) +
         R"(,"owner":"11111111111111111111111111111111","rentEpoch":0,"space":0})";
}

std::string ListAnswer(uint64_t slot, const std::vector<std::string>& values) {
  std::string joined;
  for (const std::string& value : values) joined += (joined.empty() ? "" : ",") + value;
  return R"({"jsonrpc":"2.0","result":{"context":{"slot":)" + std::to_string(slot) +
         R"(},"value":[)" + joined + R"(]},"id":1})";
}

class PubsubBaselinesTest : public testing::Test {
 protected:
  PubsubBaselinesTest() : metrics_(registry_, {"base", "er1"}) {
    auto client = std::make_unique<FakeClient>();
    sent_ = client->sent;
    baselines_ =
        std::make_unique<PubsubBaselines>(io_, std::move(client), &metrics_, options_, &shard_);
    baselines_->Start(lifetime_);
  }
  ~PubsubBaselinesTest() override {
    baselines_->Shutdown();
    Run();
  }

  // A subscription to account Key(fill) with its active leg on `target`.
  PubsubSubscription& Subscribe(uint8_t fill, const std::string& target,
                                const std::string& config = "") {
    auto sub = std::make_unique<PubsubSubscription>();
    sub->id = 100 + fill;
    sub->params.account = Key(fill);
    sub->params.account_config = config;
    sub->active = Leg(*sub, target);
    subs_.push_back(std::move(sub));
    return *subs_.back();
  }
  std::unique_ptr<PubsubLeg> Leg(PubsubSubscription& sub, const std::string& target) {
    auto leg = std::make_unique<PubsubLeg>();
    leg->serial = ++serials_;
    leg->sub = &sub;
    leg->target = target;
    leg->live = true;
    shard_.legs[leg->serial] = leg.get();
    return leg;
  }
  // Runs what is ready (a read out at the fake client keeps the loop busy until answered).
  void Run() {
    io_.restart();
    io_.poll();
  }
  // Answers the oldest request still out with `body` (HTTP 200), or fails it with `status`.
  void Answer(const std::string& body) { Reply(UpstreamResponse{.status = 200, .body = body}); }
  void Reply(absl::StatusOr<UpstreamResponse> response) {
    ASSERT_FALSE(sent_->empty());
    FakeClient::Sent sent = std::move(sent_->front());
    sent_->pop_front();
    sent.done(std::move(response));
    Run();
  }

  boost::asio::io_context io_;
  MetricsRegistry registry_;
  PubsubMetrics metrics_;
  PubsubRouterOptions options_;
  FakeShard shard_;
  std::shared_ptr<int> lifetime_ = std::make_shared<int>(0);
  std::shared_ptr<std::deque<FakeClient::Sent>> sent_;
  std::unique_ptr<PubsubBaselines> baselines_;
  std::vector<std::unique_ptr<PubsubSubscription>> subs_;
  uint64_t serials_ = 0;
};

TEST_F(PubsubBaselinesTest, ReadsOfOneTurnGoOutAsOneGetMultipleAccountsPerTargetAndConfig) {
  PubsubSubscription& a = Subscribe(1, "base");
  PubsubSubscription& b = Subscribe(2, "base");
  PubsubSubscription& c = Subscribe(3, "er1");
  PubsubSubscription& d = Subscribe(4, "base", R"({"encoding":"base64"})");
  for (PubsubSubscription* sub : {&a, &b, &c, &d}) {
    baselines_->Read(*sub->active, BaselineKind::kSilent);
  }
  EXPECT_TRUE(sent_->empty());  // nothing leaves before the turn of the loop ends
  Run();
  ASSERT_EQ(sent_->size(), 3u);
  std::map<std::string, std::string> bodies;
  for (const FakeClient::Sent& sent : *sent_) {
    EXPECT_EQ(sent.policy, RetryPolicy::kSafe);
    bodies[sent.target + (sent.body.find("base64") != std::string::npos ? "+config" : "")] =
        sent.body;
  }
  ASSERT_EQ(bodies.size(), 3u);
  const std::string& pair = bodies["base"];
  EXPECT_NE(pair.find(R"("method":"getMultipleAccounts")"), std::string::npos) << pair;
  EXPECT_NE(pair.find(Key(1).ToBase58()), std::string::npos) << pair;
  EXPECT_NE(pair.find(Key(2).ToBase58()), std::string::npos) << pair;
  EXPECT_EQ(pair.find(Key(3).ToBase58()), std::string::npos) << pair;
  EXPECT_NE(bodies["er1"].find(Key(3).ToBase58()), std::string::npos);
  EXPECT_NE(bodies["base+config"].find(Key(4).ToBase58()), std::string::npos);
  EXPECT_NE(bodies["base+config"].find(R"(],{"encoding":"base64"}])"), std::string::npos)
      << bodies["base+config"];

  // Each answer's values go to the legs in the order their keys were asked.
  while (!sent_->empty()) {
    const std::string body = sent_->front().body;
    std::vector<std::string> values;
    for (uint8_t fill = 1; fill <= 4; ++fill) {
      const size_t at = body.find(Key(fill).ToBase58());
      if (at != std::string::npos) values.emplace_back(std::to_string(at) + ":" + Value(fill));
    }
    std::sort(values.begin(), values.end(), [](const std::string& x, const std::string& y) {
      return std::stoul(x) < std::stoul(y);
    });
    for (std::string& value : values) value = value.substr(value.find(':') + 1);
    Answer(ListAnswer(7, values));
  }
  for (uint8_t fill = 1; fill <= 4; ++fill) {
    const PubsubSubscription& sub = *subs_[fill - 1];
    ASSERT_TRUE(sub.have_last) << int(fill);
    EXPECT_EQ(sub.last_value(), Value(fill));
    EXPECT_EQ(sub.active->baseline.kind, BaselineKind::kNone);
  }
  EXPECT_TRUE(shard_.sent.empty());  // a first baseline is remembered, not shown
  EXPECT_EQ(metrics_.baselines_read.value(), 4u);
}

// The switch to another chain: the new leg's notifications wait for its baseline; then the
// baseline is shown, and only the notifications above its slot follow, in order.
TEST_F(PubsubBaselinesTest, ASwitchHoldsTheNewLegsNotificationsAndDeliversThoseAboveItsBaseline) {
  PubsubSubscription& sub = Subscribe(1, "base");
  sub.RememberValue(std::make_shared<const std::string>(Value(1)), 0, Value(1).size());
  sub.answered = true;
  sub.pending = Leg(sub, "er1");
  PubsubLeg& pending = *sub.pending;
  baselines_->Read(pending, BaselineKind::kSwitch);
  Run();
  ASSERT_EQ(sent_->size(), 1u);
  EXPECT_EQ(sent_->front().target, "er1");

  Notification below(6, Value(2));
  Notification above(9, Value(3));
  baselines_->OnNotification(pending, below.text, below.parsed);
  baselines_->OnNotification(pending, above.text, above.parsed);
  EXPECT_TRUE(shard_.sent.empty());
  EXPECT_EQ(pending.baseline.held.size(), 2u);

  const uint64_t dropped = metrics_.duplicates_dropped.value();
  Answer(ListAnswer(7, {Value(2)}));
  EXPECT_EQ(shard_.switches, 1);
  ASSERT_EQ(sub.active.get(), &pending);
  ASSERT_EQ(shard_.sent.size(), 2u);
  EXPECT_NE(shard_.sent[0].find(R"("method":"accountNotification")"), std::string::npos);
  EXPECT_NE(shard_.sent[0].find(R"("context":{"slot":7},"value":)" + Value(2)), std::string::npos)
      << shard_.sent[0];
  EXPECT_NE(shard_.sent[0].find(R"("subscription":101)"), std::string::npos) << shard_.sent[0];
  EXPECT_NE(shard_.sent[1].find(R"("slot":9)"), std::string::npos) << shard_.sent[1];
  EXPECT_NE(shard_.sent[1].find(R"("subscription":101)"), std::string::npos) << shard_.sent[1];
  EXPECT_EQ(metrics_.duplicates_dropped.value(), dropped + 1);  // the one at slot 6
  EXPECT_EQ(sub.last_value(), Value(3));

  // Later notifications at or below the baseline's slot are duplicates; above it they pass.
  Notification again(7, Value(2));
  baselines_->OnNotification(pending, again.text, again.parsed);
  EXPECT_EQ(shard_.sent.size(), 2u);
  Notification next(10, Value(4));
  baselines_->OnNotification(pending, next.text, next.parsed);
  ASSERT_EQ(shard_.sent.size(), 3u);
  EXPECT_NE(shard_.sent[2].find(R"("slot":10)"), std::string::npos);
}

TEST_F(PubsubBaselinesTest, ABaselineEqualToWhatTheClientsSawIsNotShownAgain) {
  PubsubSubscription& sub = Subscribe(1, "base");
  sub.RememberValue(std::make_shared<const std::string>(Value(1)), 0, Value(1).size());
  baselines_->Read(*sub.active, BaselineKind::kResync);
  Run();
  Answer(ListAnswer(7, {Value(1)}));
  EXPECT_TRUE(shard_.sent.empty());
  EXPECT_EQ(sub.active->baseline.floor_slot, 7u);
}

TEST_F(PubsubBaselinesTest, AFailedReadIsTriedAgainThenReportedToTheShard) {
  options_.max_baseline_attempts = 2;
  PubsubSubscription& sub = Subscribe(1, "base");
  sub.pending = Leg(sub, "er1");
  baselines_->Read(*sub.pending, BaselineKind::kSwitch);
  Run();
  Reply(absl::UnavailableError("node down"));
  ASSERT_EQ(shard_.retries.size(), 1u);
  EXPECT_TRUE(shard_.failures.empty());
  EXPECT_TRUE(sent_->empty());
  shard_.retries[0](sub);
  Run();
  ASSERT_EQ(sent_->size(), 1u);
  // An answer that is not a list of as many accounts fails the read too.
  Answer(ListAnswer(7, {Value(1), Value(2)}));
  ASSERT_EQ(shard_.failures.size(), 1u);
  EXPECT_EQ(shard_.failures[0].serial, sub.pending->serial);
  EXPECT_EQ(shard_.failures[0].kind, BaselineKind::kSwitch);
  EXPECT_NE(shard_.failures[0].why.message().find("cannot read the account from er1"),
            std::string::npos)
      << shard_.failures[0].why;
  EXPECT_EQ(shard_.retries.size(), 1u);
  EXPECT_EQ(shard_.switches, 0);
}

TEST_F(PubsubBaselinesTest, AtMostFourReadsAreOutAndTheRestLeaveAsAnswersComeIn) {
  std::vector<PubsubSubscription*> subs;
  for (uint8_t fill = 1; fill <= 5; ++fill) {
    // Five configs: five requests.
    subs.push_back(&Subscribe(fill, "base", R"({"commitment":"c)" + std::to_string(fill) + "\"}"));
    baselines_->Read(*subs.back()->active, BaselineKind::kSilent);
  }
  Run();
  EXPECT_EQ(sent_->size(), 4u);
  Answer(ListAnswer(7, {Value(0)}));
  EXPECT_EQ(sent_->size(), 4u);  // the fifth left when the first came back
  while (!sent_->empty()) Answer(ListAnswer(7, {Value(0)}));
  for (PubsubSubscription* sub : subs) EXPECT_TRUE(sub->have_last);
}

TEST_F(PubsubBaselinesTest, AnAnswerForALegClosedOrReadAgainMeanwhileIsDropped) {
  PubsubSubscription& closed = Subscribe(1, "base");
  PubsubSubscription& again = Subscribe(2, "er1");
  baselines_->Read(*closed.active, BaselineKind::kSilent);
  baselines_->Read(*again.active, BaselineKind::kSilent);
  Run();
  ASSERT_EQ(sent_->size(), 2u);
  shard_.legs.erase(closed.active->serial);                // the leg is closed
  baselines_->Read(*again.active, BaselineKind::kSilent);  // a new read: a new generation
  Answer(ListAnswer(7, {Value(1)}));
  Answer(ListAnswer(7, {Value(2)}));
  EXPECT_FALSE(closed.have_last);
  EXPECT_FALSE(again.have_last);  // the answer was to the read before
  ASSERT_EQ(sent_->size(), 1u);   // the new read
  Answer(ListAnswer(8, {Value(3)}));
  ASSERT_TRUE(again.have_last);
  EXPECT_EQ(again.last_value(), Value(3));
}

TEST_F(PubsubBaselinesTest, AnAnswerAfterTheShardIsGoneIsNotApplied) {
  PubsubSubscription& sub = Subscribe(1, "base");
  baselines_->Read(*sub.active, BaselineKind::kSilent);
  Run();
  ASSERT_EQ(sent_->size(), 1u);
  lifetime_.reset();
  Answer(ListAnswer(7, {Value(1)}));
  EXPECT_FALSE(sub.have_last);
  EXPECT_EQ(metrics_.baselines_read.value(), 0u);
}

}  // namespace
}  // namespace switchyard::api_test
