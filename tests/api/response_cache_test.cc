#include "api/cache/response_cache.h"

#include <gtest/gtest.h>

#include <array>
#include <chrono>
#include <string>
#include <vector>

#include "common/metrics.h"

namespace switchyard {
namespace {

using TimePoint = ResponseCache::TimePoint;
using std::chrono::milliseconds;

class ResponseCacheTest : public ::testing::Test {
 protected:
  void Make() { cache_ = std::make_unique<ResponseCache>(options_, targets_, &registry_); }
  CachedAnswer Answer(std::string result, Slot slot = 0, bool slot_bounded = false) {
    CachedAnswer answer;
    answer.result = std::move(result);
    answer.context_slot = slot;
    answer.slot_bounded = slot_bounded;
    answer.target = "base";
    return answer;
  }
  std::shared_ptr<const CachedAnswer> Find(const std::string& key, TimePoint now, Slot min_slot = 0,
                                           Slot target_slot = 0) {
    return cache_->Find(key, now, min_slot, target_slot, nullptr);
  }

  CacheOptions options_;
  std::vector<std::string> targets_ = {"base", "er1"};
  MetricsRegistry registry_;
  std::unique_ptr<ResponseCache> cache_;
  const TimePoint t0_ = std::chrono::steady_clock::now();
};

TEST_F(ResponseCacheTest, KeyIgnoresWhitespaceOutsideStringsOnly) {
  EXPECT_EQ(ResponseCache::KeyOf("base", "getBalance", R"([ "a b" , {"commitment": "final"} ])"),
            ResponseCache::KeyOf("base", "getBalance", R"(["a b",{"commitment":"final"}])"));
  EXPECT_NE(ResponseCache::KeyOf("base", "getBalance", R"(["a b"])"),
            ResponseCache::KeyOf("base", "getBalance", R"(["ab"])"));
  // An escaped quote does not end the string.
  EXPECT_NE(ResponseCache::KeyOf("base", "m", R"(["x\" y"])"),
            ResponseCache::KeyOf("base", "m", R"(["x\"y"])"));
  // Target and method are part of the key.
  EXPECT_NE(ResponseCache::KeyOf("base", "getBalance", "[]"),
            ResponseCache::KeyOf("er1", "getBalance", "[]"));
  EXPECT_NE(ResponseCache::KeyOf("base", "getBalance", "[]"),
            ResponseCache::KeyOf("base", "getSlot", "[]"));
}

TEST_F(ResponseCacheTest, DefaultTableAndRules) {
  options_.rules = {{"getAsset*", CacheClass::kFinal},
                    {"getAssetProof", CacheClass::kNever},
                    {"getProgramAccounts", CacheClass::kNever}};
  Make();
  EXPECT_EQ(cache_->ClassOf("sendTransaction"), CacheClass::kNever);
  EXPECT_EQ(cache_->ClassOf("simulateTransaction"), CacheClass::kNever);
  EXPECT_EQ(cache_->ClassOf("requestAirdrop"), CacheClass::kNever);
  EXPECT_EQ(cache_->ClassOf("getLatestBlockhash"), CacheClass::kNever);
  EXPECT_EQ(cache_->ClassOf("getHealth"), CacheClass::kNever);
  EXPECT_EQ(cache_->ClassOf("getSlot"), CacheClass::kCoalesce);
  EXPECT_EQ(cache_->ClassOf("getTransaction"), CacheClass::kFinal);
  EXPECT_EQ(cache_->ClassOf("getAccountInfo"), CacheClass::kSlotBounded);
  EXPECT_EQ(cache_->ClassOf("someUnknownMethod"), CacheClass::kNever);
  // Rules: a prefix, an exact name beating it, and an override of the table.
  EXPECT_EQ(cache_->ClassOf("getAssetsByOwner"), CacheClass::kFinal);
  EXPECT_EQ(cache_->ClassOf("getAssetProof"), CacheClass::kNever);
  EXPECT_EQ(cache_->ClassOf("getProgramAccounts"), CacheClass::kNever);
}

TEST_F(ResponseCacheTest, TtlByClassTargetAndNotFound) {
  options_.slot_ttl = absl::Milliseconds(400);
  options_.slot_ttl_by_target = {{"er1", absl::Milliseconds(50)}};
  options_.final_ttl = absl::Hours(1);
  options_.negative_ttl = absl::Milliseconds(500);
  Make();
  EXPECT_EQ(cache_->TtlOf(CacheClass::kSlotBounded, "base", false), absl::Milliseconds(400));
  EXPECT_EQ(cache_->TtlOf(CacheClass::kSlotBounded, "er1", false), absl::Milliseconds(50));
  EXPECT_EQ(cache_->TtlOf(CacheClass::kFinal, "base", false), absl::Hours(1));
  EXPECT_EQ(cache_->TtlOf(CacheClass::kFinal, "base", true), absl::Milliseconds(500));
  EXPECT_EQ(cache_->TtlOf(CacheClass::kCoalesce, "base", false), absl::ZeroDuration());
  EXPECT_EQ(cache_->TtlOf(CacheClass::kNever, "base", false), absl::ZeroDuration());
}

TEST_F(ResponseCacheTest, EntryExpiresAtItsTtl) {
  Make();
  cache_->Put("k", Answer("1"), t0_, absl::Milliseconds(100));
  ASSERT_TRUE(Find("k", t0_ + milliseconds(99)));
  EXPECT_EQ(Find("k", t0_ + milliseconds(99))->result, "1");
  EXPECT_FALSE(Find("k", t0_ + milliseconds(100)));
  // The expired entry is gone.
  EXPECT_EQ(cache_->stats().entries, 0u);
}

TEST_F(ResponseCacheTest, SlotBoundedAnswerEndsWhenItsTargetMovesPastIt) {
  Make();
  cache_->Put("k", Answer("1", 100, /*slot_bounded=*/true), t0_, absl::Seconds(10));
  cache_->Put("f", Answer("2", 100, /*slot_bounded=*/false), t0_, absl::Seconds(10));
  EXPECT_TRUE(Find("k", t0_, 0, /*target_slot=*/100));
  EXPECT_FALSE(Find("k", t0_, 0, /*target_slot=*/101));
  // A final answer with a context is not bounded by the slot.
  EXPECT_TRUE(Find("f", t0_, 0, /*target_slot=*/101));
}

TEST_F(ResponseCacheTest, MinContextSlotAboveTheAnswersSlotIsAMissButKeepsTheEntry) {
  Make();
  cache_->Put("k", Answer("1", 100), t0_, absl::Seconds(10));
  EXPECT_FALSE(Find("k", t0_, /*min_slot=*/101));
  EXPECT_TRUE(Find("k", t0_, /*min_slot=*/100));
}

TEST_F(ResponseCacheTest, WriteThroughTheRouterEndsSlotBoundedAnswersOfItsTarget) {
  Make();
  CachedAnswer base = Answer("1", 100, true);
  base.write_epoch = cache_->WriteEpoch("base");
  CachedAnswer er = Answer("2", 100, true);
  er.target = "er1";
  er.write_epoch = cache_->WriteEpoch("er1");
  cache_->Put("b", base, t0_, absl::Seconds(10));
  cache_->Put("e", er, t0_, absl::Seconds(10));
  cache_->NoteWrite("base");
  EXPECT_FALSE(Find("b", t0_));
  EXPECT_TRUE(Find("e", t0_));
}

TEST_F(ResponseCacheTest, LatestSlotIsTheMaximumNoted) {
  Make();
  EXPECT_EQ(cache_->LatestSlot("base"), 0u);
  cache_->NoteSlot("base", 10);
  cache_->NoteSlot("base", 7);
  EXPECT_EQ(cache_->LatestSlot("base"), 10u);
  EXPECT_EQ(cache_->LatestSlot("er1"), 0u);
  cache_->NoteSlot("unknown", 5);  // no such target: ignored
  EXPECT_EQ(cache_->LatestSlot("unknown"), 0u);
}

TEST_F(ResponseCacheTest, RejectedEntryIsDropped) {
  Make();
  cache_->Put("k", Answer("1"), t0_, absl::Seconds(10));
  EXPECT_FALSE(cache_->Find("k", t0_, 0, 0, [](const CachedAnswer&) { return false; }));
  EXPECT_FALSE(Find("k", t0_));
}

// Marks of accounts 1..n, the account's fill byte as its delegation slot.
std::vector<DelegationMark> Marks(std::initializer_list<uint8_t> accounts) {
  std::vector<DelegationMark> marks;
  for (uint8_t fill : accounts) {
    std::array<uint8_t, 32> bytes;
    bytes.fill(fill);
    marks.push_back({Pubkey(bytes), false, Pubkey(), fill});
  }
  return marks;
}

Pubkey Account(uint8_t fill) { return Marks({fill})[0].account; }

TEST_F(ResponseCacheTest, DropChangedDropsTheAnswersNamingAChangedAccountOnly) {
  Make();
  auto put = [&](const std::string& key, std::initializer_list<uint8_t> accounts) {
    CachedAnswer answer = Answer("1");
    answer.marks = Marks(accounts);
    cache_->Put(key, std::move(answer), t0_, absl::Seconds(10));
  };
  put("one", {1});
  put("list", {2, 1, 3, 1});  // names account 1 twice
  put("other", {4});
  put("none", {});
  ASSERT_EQ(cache_->stats().entries, 4u);
  // Account 1 changed; account 4 is listed but its mark still holds.
  const std::vector<Pubkey> changed = {Account(1), Account(4), Account(9)};
  auto holds = [](const DelegationMark& mark) { return mark.account != Account(1); };
  EXPECT_EQ(cache_->DropChanged(&changed, holds), 2u);
  EXPECT_FALSE(Find("one", t0_));
  EXPECT_FALSE(Find("list", t0_));
  EXPECT_TRUE(Find("other", t0_));
  EXPECT_TRUE(Find("none", t0_));
  EXPECT_EQ(cache_->stats().invalidations, 2u);
  // The index forgot the dropped entries: a second pass finds nothing to drop.
  EXPECT_EQ(cache_->DropChanged(&changed, holds), 0u);

  // A list longer than the accounts a shard names is matched the other way round, and an
  // unchanged account keeps its answer there too.
  put("three", {3});
  std::vector<Pubkey> long_list;
  for (int i = 100; i < 200; ++i) long_list.push_back(Account(static_cast<uint8_t>(i)));
  long_list.push_back(Account(3));
  EXPECT_EQ(cache_->DropChanged(&long_list, holds), 0u);
  EXPECT_EQ(cache_->DropChanged(
                &long_list, [](const DelegationMark& mark) { return mark.account != Account(3); }),
            1u);
  EXPECT_FALSE(Find("three", t0_));

  // No list: every answer naming an account is checked.
  EXPECT_EQ(cache_->DropChanged(nullptr, [](const DelegationMark&) { return false; }), 1u);
  EXPECT_FALSE(Find("other", t0_));
  EXPECT_TRUE(Find("none", t0_));
  EXPECT_EQ(cache_->stats().entries, 1u);
  EXPECT_EQ(cache_->stats().invalidations, 4u);
}

TEST_F(ResponseCacheTest, ADroppedOrReplacedEntryLeavesTheAccountIndex) {
  Make();
  CachedAnswer answer = Answer("1");
  answer.marks = Marks({1});
  cache_->Put("k", answer, t0_, absl::Seconds(10));
  cache_->Put("k", answer, t0_, absl::Seconds(10));  // replaced: indexed once
  const std::vector<Pubkey> changed = {Account(1)};
  EXPECT_EQ(cache_->DropChanged(&changed, [](const DelegationMark&) { return false; }), 1u);
  // Expired and dropped by a lookup: the index must not keep a dangling entry.
  cache_->Put("k", answer, t0_, absl::Seconds(1));
  EXPECT_FALSE(Find("k", t0_ + std::chrono::seconds(2)));
  EXPECT_EQ(cache_->DropChanged(&changed, [](const DelegationMark&) { return false; }), 0u);
  EXPECT_EQ(cache_->stats().entries, 0u);
}

TEST_F(ResponseCacheTest, TooBigAnswersAndZeroTtlAreNotKept) {
  options_.max_entry_bytes = 100;
  Make();
  cache_->Put("big", Answer(std::string(101, 'x')), t0_, absl::Seconds(10));
  cache_->Put("zero", Answer("1"), t0_, absl::ZeroDuration());
  EXPECT_FALSE(Find("big", t0_));
  EXPECT_FALSE(Find("zero", t0_));
  EXPECT_EQ(cache_->stats().entries, 0u);
}

TEST_F(ResponseCacheTest, ByteBudgetHoldsAndHotEntriesSurviveAScan) {
  options_.max_bytes = 16 * 64 * 1024;  // 64 KiB per shard
  Make();
  const std::string value(1000, 'v');
  // 64 hot keys, each read twice (promoted to the protected segment).
  std::vector<std::string> hot;
  for (int i = 0; i < 64; ++i) {
    hot.push_back("hot" + std::to_string(i));
    cache_->Put(hot.back(), Answer(value), t0_, absl::Hours(1));
    ASSERT_TRUE(Find(hot.back(), t0_));
    ASSERT_TRUE(Find(hot.back(), t0_));
  }
  // A scan of 20,000 cold keys, each seen once: ten times the budget.
  for (int i = 0; i < 20000; ++i) {
    cache_->Put("cold" + std::to_string(i), Answer(value), t0_, absl::Hours(1));
  }
  const ResponseCache::Stats stats = cache_->stats();
  EXPECT_LE(stats.bytes, options_.max_bytes);
  EXPECT_GT(stats.evictions, 15000u);
  size_t survived = 0;
  for (const std::string& key : hot) survived += (Find(key, t0_) != nullptr ? 1 : 0);
  EXPECT_EQ(survived, hot.size());
  // The metrics agree with the stats.
  EXPECT_NE(registry_.RenderPrometheus().find("switchyard_cache_evictions_total " +
                                              std::to_string(stats.evictions)),
            std::string::npos);
}

TEST_F(ResponseCacheTest, CoalescingHasOneLeaderAndCompletesEveryFollowerOnce) {
  Make();
  std::vector<std::string> got;
  EXPECT_TRUE(cache_->Lead("k", nullptr));
  for (int i = 0; i < 3; ++i) {
    EXPECT_FALSE(cache_->Lead("k", [&](const std::string& answer) { got.push_back(answer); }));
  }
  EXPECT_TRUE(cache_->Lead("other", nullptr));  // another key has its own leader
  cache_->Complete("k", "answer");
  EXPECT_EQ(got, std::vector<std::string>(3, "answer"));
  cache_->Complete("k", "again");  // nobody waits any more
  EXPECT_EQ(got.size(), 3u);
  EXPECT_TRUE(cache_->Lead("k", nullptr));  // the key is free again
  EXPECT_EQ(cache_->stats().coalesced, 3u);
}

TEST_F(ResponseCacheTest, SharedTierEncodingRoundTripsAndRejectsGarbage) {
  CachedAnswer answer = Answer(R"({"context":{"slot":5},"value":"a\nb"})", 5, true);
  DelegationMark mark;
  mark.account = Pubkey::FromBase58("11111111111111111111111111111112").value();
  mark.delegated = true;
  mark.validator = Pubkey::FromBase58("11111111111111111111111111111113").value();
  mark.delegation_slot = 42;
  answer.marks.push_back(mark);
  std::optional<CachedAnswer> back = DecodeCachedAnswer(EncodeCachedAnswer(answer));
  ASSERT_TRUE(back);
  EXPECT_EQ(back->result, answer.result);
  EXPECT_EQ(back->context_slot, 5u);
  EXPECT_TRUE(back->slot_bounded);
  EXPECT_EQ(back->target, "base");
  ASSERT_EQ(back->marks.size(), 1u);
  EXPECT_EQ(back->marks[0], mark);
  EXPECT_FALSE(DecodeCachedAnswer(""));
  EXPECT_FALSE(DecodeCachedAnswer("c2 5 1 0 base\n{}"));
  EXPECT_FALSE(DecodeCachedAnswer("c1 5 1 3 base\n{}"));  // marks missing
  EXPECT_FALSE(DecodeCachedAnswer("c1 x 1 0 base\n{}"));
}

TEST_F(ResponseCacheTest, ContextSlotAndFinalStatuses) {
  EXPECT_EQ(ContextSlotOf(R"({"context":{"apiVersion":"2","slot":77},"value":1})"), 77u);
  EXPECT_EQ(ContextSlotOf(R"({"value":1})"), 0u);
  EXPECT_EQ(ContextSlotOf("null"), 0u);
  EXPECT_TRUE(AllStatusesFinal(
      R"({"context":{"slot":1},"value":[{"slot":1,"confirmationStatus":"finalized"}]})"));
  EXPECT_FALSE(AllStatusesFinal(
      R"({"context":{"slot":1},"value":[{"slot":1,"confirmationStatus":"finalized"},null]})"));
  EXPECT_FALSE(AllStatusesFinal(
      R"({"context":{"slot":1},"value":[{"slot":1,"confirmationStatus":"confirmed"}]})"));
  EXPECT_FALSE(AllStatusesFinal(R"({"context":{"slot":1},"value":[]})"));
}

}  // namespace
}  // namespace switchyard
