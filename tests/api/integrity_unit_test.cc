// The pure parts of integrity (docs/architecture.md §22): how answers are compared, and K/N.
#include <gtest/gtest.h>

#include "api/upstream/upstream_integrity.h"

namespace switchyard {
namespace {

TEST(ComparableAnswerTest, TheIdAndTheContextAreLeftOut) {
  const ComparableAnswer a = ComparableOf(
      R"({"jsonrpc":"2.0","result":{"context":{"apiVersion":"2.1.21","slot":7},"value":5},"id":1})");
  const ComparableAnswer b = ComparableOf(
      R"({"jsonrpc":"2.0","id":99,"result":{"context":{"apiVersion":"2.2.0","slot":7},"value": 5}})");
  EXPECT_EQ(a.kind, ComparableAnswer::Kind::kResult);
  EXPECT_EQ(a.context_slot, 7u);
  EXPECT_EQ(a.value, "5");
  EXPECT_EQ(a.value, b.value);
}

TEST(ComparableAnswerTest, DifferentValuesDiffer) {
  const ComparableAnswer a = ComparableOf(
      R"({"jsonrpc":"2.0","result":{"context":{"slot":7},"value":{"lamports":1}},"id":1})");
  const ComparableAnswer b = ComparableOf(
      R"({"jsonrpc":"2.0","result":{"context":{"slot":7},"value":{"lamports":2}},"id":1})");
  EXPECT_NE(a.value, b.value);
}

TEST(ComparableAnswerTest, AResultWithoutContextIsComparedWhole) {
  const ComparableAnswer a = ComparableOf(R"({"jsonrpc":"2.0","result":"GENESIS","id":1})");
  EXPECT_EQ(a.kind, ComparableAnswer::Kind::kResult);
  EXPECT_FALSE(a.context_slot.has_value());
  EXPECT_EQ(a.value, "\"GENESIS\"");
}

TEST(ComparableAnswerTest, ErrorsAndNonAnswersAreNotResults) {
  EXPECT_EQ(ComparableOf(R"({"jsonrpc":"2.0","error":{"code":-32005,"message":"x"},"id":1})").kind,
            ComparableAnswer::Kind::kError);
  EXPECT_EQ(ComparableOf("not json").kind, ComparableAnswer::Kind::kUnreadable);
  EXPECT_EQ(ComparableOf("[]").kind, ComparableAnswer::Kind::kUnreadable);
}

TEST(ConsensusRuleTest, ParsesKOfN) {
  absl::StatusOr<ConsensusRule> rule = ParseConsensusRule("2/3");
  ASSERT_TRUE(rule.ok());
  EXPECT_EQ(*rule, (ConsensusRule{2, 3}));
  EXPECT_FALSE(ParseConsensusRule("3/2").ok());
  EXPECT_FALSE(ParseConsensusRule("0/3").ok());
  EXPECT_FALSE(ParseConsensusRule("2/17").ok());
  EXPECT_FALSE(ParseConsensusRule("two/3").ok());
  EXPECT_FALSE(ParseConsensusRule("2").ok());
}

TEST(IntegrityOptionsTest, TheDefaultRateSamplesOnlyComparableReads) {
  IntegrityOptions options;
  options.sample_rate = 0.1;
  EXPECT_EQ(options.SampleRateFor("getAccountInfo"), 0.1);
  EXPECT_EQ(options.SampleRateFor("getSlot"), 0);
  EXPECT_EQ(options.SampleRateFor("sendTransaction"), 0);
  options.sample_rates["getSlot"] = 0.5;
  EXPECT_EQ(options.SampleRateFor("getSlot"), 0.5);
}

TEST(BoundedTest, LongTextIsCutWithTheCountLeftOut) {
  EXPECT_EQ(Bounded("abcdef", 10), "abcdef");
  EXPECT_EQ(Bounded("abcdef", 2), "ab… (4 more bytes)");
}

}  // namespace
}  // namespace switchyard
