#include "api/pubsub/pubsub_registry.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "api/jsonrpc/pubsub_json.h"

namespace switchyard {
namespace {

// A client that the registry only keeps track of; nothing is ever written to it here.
class QuietClient : public PubsubClient {
 public:
  using PubsubClient::PubsubClient;
  void Deliver(const std::shared_ptr<const std::string>&) override {}
  void OnSubscribeAnswer(std::string, std::string, size_t, const PubsubMethod*,
                         std::optional<uint64_t>) override {}
  void OnSubscriptionClosed(uint64_t, std::shared_ptr<const std::string>) override {}
};

SubscribeRequest Request(std::string_view method, std::string key) {
  SubscribeRequest request;
  request.method = FindSubscribeMethod(method);
  request.key = std::move(key);
  request.request_id = "1";
  return request;
}

std::vector<uint64_t> Sorted(std::vector<uint64_t> ids) {
  std::sort(ids.begin(), ids.end());
  return ids;
}

class PubsubRegistryTest : public ::testing::Test {
 protected:
  PubsubRegistry registry_{3};
  std::shared_ptr<PubsubClient> a_ = std::make_shared<QuietClient>(0);
  std::shared_ptr<PubsubClient> b_ = std::make_shared<QuietClient>(2);
  std::shared_ptr<PubsubClient> c_ = std::make_shared<QuietClient>(2);
};

TEST_F(PubsubRegistryTest, FindsASubscriptionByItsIdAndByItsKey) {
  PubsubSubscription& sub = registry_.Add(Request("slotSubscribe", "slotSubscribe[]"), 7);
  EXPECT_EQ(sub.id, 7u);
  EXPECT_EQ(sub.key, "slotSubscribe[]");
  EXPECT_EQ(sub.method->subscribe, "slotSubscribe");
  EXPECT_EQ(sub.by_thread.size(), 3u);
  EXPECT_EQ(registry_.Find(7), &sub);
  EXPECT_EQ(registry_.FindByKey("slotSubscribe[]"), &sub);
  EXPECT_EQ(registry_.Find(8), nullptr);
  EXPECT_EQ(registry_.FindByKey("rootSubscribe[]"), nullptr);
  EXPECT_EQ(registry_.size(), 1u);
}

TEST_F(PubsubRegistryTest, AClientIsInASubscriptionOnceHoweverOftenItAsks) {
  PubsubSubscription& sub = registry_.Add(Request("slotSubscribe", "slot"), 1);
  EXPECT_TRUE(registry_.AddClient(sub, a_));
  EXPECT_FALSE(registry_.AddClient(sub, a_));
  ASSERT_EQ(sub.clients.size(), 1u);
  EXPECT_EQ(sub.clients[0], a_);
  EXPECT_EQ(registry_.SubscriptionsOf(a_.get()), std::vector<uint64_t>{1});
}

TEST_F(PubsubRegistryTest, ClientsAreListedByTheThreadTheyLiveOn) {
  PubsubSubscription& sub = registry_.Add(Request("slotSubscribe", "slot"), 1);
  registry_.AddClient(sub, a_);
  registry_.AddClient(sub, b_);
  registry_.AddClient(sub, c_);
  ASSERT_NE(sub.by_thread[0], nullptr);
  EXPECT_EQ(*sub.by_thread[0], PubsubClientList{a_});
  EXPECT_EQ(sub.by_thread[1], nullptr);
  ASSERT_NE(sub.by_thread[2], nullptr);
  EXPECT_EQ(*sub.by_thread[2], (PubsubClientList{b_, c_}));

  EXPECT_FALSE(registry_.DropClient(sub, b_.get()));
  EXPECT_EQ(*sub.by_thread[2], PubsubClientList{c_});
  EXPECT_FALSE(registry_.DropClient(sub, a_.get()));
  EXPECT_EQ(sub.by_thread[0], nullptr);
}

TEST_F(PubsubRegistryTest, DroppingTheLastClientLeavesTheSubscriptionEmpty) {
  PubsubSubscription& sub = registry_.Add(Request("slotSubscribe", "slot"), 1);
  registry_.AddClient(sub, a_);
  registry_.AddClient(sub, b_);
  EXPECT_FALSE(registry_.DropClient(sub, a_.get()));
  EXPECT_TRUE(registry_.SubscriptionsOf(a_.get()).empty());
  EXPECT_TRUE(registry_.DropClient(sub, b_.get()));
  EXPECT_TRUE(sub.clients.empty());
  EXPECT_TRUE(registry_.SubscriptionsOf(b_.get()).empty());
}

TEST_F(PubsubRegistryTest, TheWaitersAreAnsweredOnceAndADroppedClientIsNotAmongThem) {
  PubsubSubscription& sub = registry_.Add(Request("slotSubscribe", "slot"), 1);
  registry_.AddClient(sub, a_);
  registry_.AddWaiter(sub, a_, "10");
  registry_.AddClient(sub, b_);
  registry_.AddWaiter(sub, b_, "\"x\"");
  registry_.DropClient(sub, a_.get());
  EXPECT_FALSE(sub.answered);

  std::vector<PubsubWaiter> waiting = registry_.TakeWaiting(sub);
  ASSERT_EQ(waiting.size(), 1u);
  EXPECT_EQ(waiting[0].client, b_);
  EXPECT_EQ(waiting[0].request_id, "\"x\"");
  EXPECT_TRUE(sub.answered);
  EXPECT_TRUE(registry_.TakeWaiting(sub).empty());
}

TEST_F(PubsubRegistryTest, RemovingASubscriptionForgetsItsIdKeyAndClients) {
  PubsubSubscription& first = registry_.Add(Request("slotSubscribe", "slot"), 1);
  PubsubSubscription& second = registry_.Add(Request("rootSubscribe", "root"), 2);
  registry_.AddClient(first, a_);
  registry_.AddClient(second, a_);
  EXPECT_EQ(Sorted(registry_.SubscriptionsOf(a_.get())), (std::vector<uint64_t>{1, 2}));

  registry_.Remove(first);
  EXPECT_EQ(registry_.Find(1), nullptr);
  EXPECT_EQ(registry_.FindByKey("slot"), nullptr);
  EXPECT_EQ(registry_.SubscriptionsOf(a_.get()), std::vector<uint64_t>{2});
  EXPECT_EQ(registry_.size(), 1u);

  PubsubSubscription& again = registry_.Add(Request("slotSubscribe", "slot"), 3);
  EXPECT_EQ(registry_.FindByKey("slot"), &again);
}

TEST_F(PubsubRegistryTest, OnlyAccountSubscriptionsAreListedToFollowTheRouting) {
  registry_.Add(Request("accountSubscribe", "account one"), 1);
  registry_.Add(Request("slotSubscribe", "slot"), 2);
  registry_.Add(Request("signatureSubscribe", "signature"), 3);
  PubsubSubscription& other = registry_.Add(Request("accountSubscribe", "account two"), 4);
  EXPECT_EQ(Sorted(registry_.AccountSubscriptions()), (std::vector<uint64_t>{1, 4}));

  registry_.Remove(other);
  EXPECT_EQ(registry_.AccountSubscriptions(), std::vector<uint64_t>{1});
  registry_.Clear();
  EXPECT_TRUE(registry_.AccountSubscriptions().empty());
  EXPECT_EQ(registry_.size(), 0u);
}

}  // namespace
}  // namespace switchyard
