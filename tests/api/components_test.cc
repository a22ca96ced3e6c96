// The router's small shared parts: signature memory, lookup-table cache, consistency gate,
// answer merging, upstream URLs, per-call metrics.
#include <gtest/gtest.h>

#include <algorithm>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "api/jsonrpc/raw_json.h"
#include "api/jsonrpc/rpc_merge.h"
#include "api/metrics/api_metrics.h"
#include "api/routing/consistency_gate.h"
#include "api/routing/lookup_table_cache.h"
#include "api/routing/signature_memory.h"
#include "api/upstream/upstream.h"
#include "fmt/format.h"
#include "tests/api/test_support.h"

namespace switchyard {
namespace {

using api_test::Key;

Signature Sig(uint8_t fill) {
  std::array<uint8_t, 64> bytes;
  bytes.fill(fill);
  return Signature(bytes);
}

TEST(SignatureMemoryTest, ForgetsTheLeastRecentlyUsedPastItsCapacity) {
  SignatureMemory memory(2);
  memory.Remember(Sig(1), "er1");
  memory.Remember(Sig(2), "base");
  EXPECT_EQ(memory.Find(Sig(1)), "er1");  // 1 is now the most recent
  memory.Remember(Sig(3), "er2");
  EXPECT_EQ(memory.size(), 2u);
  EXPECT_EQ(memory.Find(Sig(2)), std::nullopt);
  EXPECT_EQ(memory.Find(Sig(1)), "er1");
  EXPECT_EQ(memory.Find(Sig(3)), "er2");
  memory.Remember(Sig(3), "base");
  EXPECT_EQ(memory.Find(Sig(3)), "base");
}

TEST(SignatureMemoryTest, EverySignatureOfATransactionIsRememberedAndTheIdIsForgottenLast) {
  SignatureMemory memory(3);
  memory.Remember(std::vector<Signature>{Sig(1), Sig(2), Sig(3)}, "er1");
  EXPECT_EQ(memory.size(), 3u);
  // Sig(1), the id, was remembered last: the next one pushes out the last of the others.
  memory.Remember(Sig(4), "base");
  EXPECT_EQ(memory.Find(Sig(3)), std::nullopt);
  EXPECT_EQ(memory.Find(Sig(1)), "er1");
  EXPECT_EQ(memory.Find(Sig(2)), "er1");
  EXPECT_EQ(memory.Find(Sig(4)), "base");
}

TEST(LookupTableCacheTest, EntriesExpireAfterTheTtl) {
  ManualClock clock;
  LookupTableCache cache(10, absl::Seconds(60), &clock);
  cache.Insert(Key(1), {Key(2), Key(3)});
  ASSERT_NE(cache.Find(Key(1)), nullptr);
  EXPECT_EQ(*cache.Find(Key(1)), (std::vector<Pubkey>{Key(2), Key(3)}));
  clock.Advance(absl::Seconds(61));
  EXPECT_EQ(cache.Find(Key(1)), nullptr);
}

TEST(LookupTableCacheTest, OldestEntryGoesPastTheCapacity) {
  ManualClock clock;
  LookupTableCache cache(2, absl::Seconds(60), &clock);
  cache.Insert(Key(1), {});
  clock.Advance(absl::Seconds(1));
  cache.Insert(Key(2), {});
  clock.Advance(absl::Seconds(1));
  cache.Insert(Key(3), {});
  EXPECT_EQ(cache.Find(Key(1)), nullptr);
  EXPECT_NE(cache.Find(Key(2)), nullptr);
  EXPECT_NE(cache.Find(Key(3)), nullptr);
}

TEST(LookupTableCacheTest, DecodesTableAccounts) {
  std::string data(56, '\0');
  data[0] = 1;
  data += std::string(reinterpret_cast<const char*>(Key(9).data()), 32);
  auto addresses = DecodeLookupTableAccount(
      std::span(reinterpret_cast<const uint8_t*>(data.data()), data.size()));
  ASSERT_TRUE(addresses.ok());
  EXPECT_EQ(*addresses, std::vector<Pubkey>{Key(9)});
  data.push_back('x');
  EXPECT_FALSE(DecodeLookupTableAccount(
                   std::span(reinterpret_cast<const uint8_t*>(data.data()), data.size()))
                   .ok());
}

TEST(ConsistencyGateTest, WakesWaitersInSlotOrderAndTimesOutTheRest) {
  ConsistencyGate gate(10);
  const absl::Duration t0 = absl::Seconds(100);
  std::vector<std::string> events;
  auto note = [&](const char* name) {
    return [&events, name](bool ok) { events.push_back(fmt::format("{}{}", name, ok)); };
  };
  gate.Wait(100, 100, t0, t0 + absl::Seconds(5), note("a"));
  gate.Wait(100, 103, t0, t0 + absl::Seconds(5), note("b"));
  gate.Wait(100, 101, t0, t0 + absl::Seconds(4), note("c"));
  gate.Wait(100, 200, t0, t0 + absl::Milliseconds(1), note("d"));
  EXPECT_EQ(events, std::vector<std::string>{"atrue"});
  EXPECT_EQ(gate.waiting(), 3u);
  ASSERT_TRUE(gate.NextDeadline().has_value());
  EXPECT_EQ(*gate.NextDeadline(), t0 + absl::Milliseconds(1));
  gate.Expire(t0);  // nobody's deadline yet
  EXPECT_EQ(events.size(), 1u);
  gate.OnApplied(103);
  EXPECT_EQ(events, (std::vector<std::string>{"atrue", "ctrue", "btrue"}));
  gate.Expire(t0 + absl::Milliseconds(1));
  EXPECT_EQ(events.back(), "dfalse");
  EXPECT_EQ(gate.waiting(), 0u);
  EXPECT_FALSE(gate.NextDeadline().has_value());
}

TEST(ConsistencyGateTest, ExpiresInDeadlineOrderAndLetsACallbackWaitAgain) {
  ConsistencyGate gate(10);
  const absl::Duration t0 = absl::Seconds(1);
  std::vector<int> expired;
  gate.Wait(1, 50, t0, t0 + absl::Seconds(3), [&](bool ok) { expired.push_back(ok ? -3 : 3); });
  gate.Wait(1, 50, t0, t0 + absl::Seconds(1), [&](bool ok) {
    expired.push_back(ok ? -1 : 1);
    // Waiting again from a callback: the gate is consistent while it calls back.
    gate.Wait(1, 60, t0 + absl::Seconds(1), t0 + absl::Seconds(9),
              [&](bool again) { expired.push_back(again ? 60 : -60); });
  });
  gate.Expire(t0 + absl::Seconds(2));
  EXPECT_EQ(expired, std::vector<int>{1});
  EXPECT_EQ(*gate.NextDeadline(), t0 + absl::Seconds(3));
  gate.Expire(t0 + absl::Seconds(3));
  EXPECT_EQ(expired, (std::vector<int>{1, 3}));
  gate.OnApplied(60);
  EXPECT_EQ(expired, (std::vector<int>{1, 3, 60}));
}

TEST(ConsistencyGateTest, FullGateAndPastDeadlinesRejectAtOnce) {
  ConsistencyGate gate(1);
  const absl::Duration t0 = absl::Seconds(1);
  int rejected = 0;
  gate.Wait(1, 5, t0, t0 + absl::Seconds(5), [&](bool ok) { rejected += !ok; });
  gate.Wait(1, 5, t0, t0 + absl::Seconds(5), [&](bool ok) { rejected += !ok; });
  EXPECT_EQ(rejected, 1);
  gate.Shutdown();
  EXPECT_EQ(rejected, 2);
  gate.Wait(1, 5, t0, t0, [&](bool ok) { rejected += !ok; });
  EXPECT_EQ(rejected, 3);
  EXPECT_EQ(gate.waiting(), 0u);
}

TEST(RpcMergeTest, AnswerKeepsUpstreamBytesWhenIdsMatch) {
  RpcCall call;
  call.id = "7";
  EXPECT_EQ(*AnswerFromUpstream(R"({"jsonrpc":"2.0","result":[1, 2],"id":7})", call),
            R"({"jsonrpc":"2.0","result":[1, 2],"id":7})");
  call.id = R"({"a":1})";
  EXPECT_EQ(*AnswerFromUpstream(R"({"jsonrpc":"2.0","error":{"code":-1},"id":0})", call),
            R"({"jsonrpc":"2.0","error":{"code":-1},"id":{"a":1}})");
  EXPECT_FALSE(AnswerFromUpstream("<html>", call).ok());
}

TEST(RpcMergeTest, ForwardBodyRewritesOnlyIdsUpstreamsDoNotEcho) {
  RpcCall call;
  call.raw = R"({"jsonrpc":"2.0","id":"x","method":"getSlot","params":[]})";
  call.id = R"("x")";
  call.method = "getSlot";
  call.params = "[]";
  EXPECT_EQ(ForwardBody(call), call.raw);
  call.id = "1.5";
  EXPECT_EQ(ForwardBody(call), R"({"jsonrpc":"2.0","id":0,"method":"getSlot","params":[]})");
}

TEST(RpcMergeTest, ParsesContextLists) {
  auto list = ParseContextList(R"({"context":{"slot":5},"value":[null, {"a":1}]})");
  ASSERT_TRUE(list.ok());
  EXPECT_EQ(list->context, R"({"slot":5})");
  EXPECT_EQ(list->values, (std::vector<std::string>{"null", R"({"a":1})"}));
  EXPECT_FALSE(ParseContextList(R"({"value":[]})").ok());
}

TEST(RpcMergeTest, ListAnswerViewsEachValueAsTheUpstreamWroteIt) {
  absl::StatusOr<ListAnswer> list = ListAnswer::Parse(
      R"({"jsonrpc":"2.0","result":{"context":{"slot":5},"value":[null, {"a" : [1, 2]}]},"id":1})");
  ASSERT_TRUE(list.ok()) << list.status();
  ASSERT_TRUE(list->is_list());
  EXPECT_FALSE(list->is_error());
  EXPECT_EQ(list->context(), R"({"slot":5})");
  EXPECT_EQ(list->values(), (std::vector<std::string_view>{"null", R"({"a" : [1, 2]})"}));
  // Moved, it still views its own text.
  ListAnswer moved = *std::move(list);
  EXPECT_EQ(moved.values()[1], R"({"a" : [1, 2]})");
}

TEST(RpcMergeTest, ListAnswerTellsErrorsAndOtherShapesApart) {
  absl::StatusOr<ListAnswer> error =
      ListAnswer::Parse(R"({"jsonrpc":"2.0","error":{"code":-32005},"id":1})");
  ASSERT_TRUE(error.ok());
  EXPECT_TRUE(error->is_error());
  EXPECT_EQ(error->error(), R"({"code":-32005})");
  absl::StatusOr<ListAnswer> other =
      ListAnswer::Parse(R"({"jsonrpc":"2.0","result":{"value":[1]},"id":1})");
  ASSERT_TRUE(other.ok());
  EXPECT_FALSE(other->is_list());
  EXPECT_FALSE(ListAnswer::Parse(R"({"jsonrpc":"2.0","result":[],"id":1})")->is_list());
  EXPECT_FALSE(ListAnswer::Parse("<html>").ok());
  EXPECT_FALSE(ListAnswer::Parse(R"({"jsonrpc":"2.0","id":1})").ok());
}

TEST(RpcMergeTest, ContextListResponseSplicesTheRawValues) {
  EXPECT_EQ(
      ContextListResponse(R"("x")", R"({"slot":5})", {"null", R"({"a" : 1})"}),
      R"({"jsonrpc":"2.0","result":{"context":{"slot":5},"value":[null,{"a" : 1}]},"id":"x"})");
  EXPECT_EQ(ContextListResponse("1", "{}", {}),
            R"({"jsonrpc":"2.0","result":{"context":{},"value":[]},"id":1})");
}

TEST(RpcMergeTest, PartParamsKeepTheParamsAfterTheList) {
  const std::vector<std::string> keys = {"k0", "k1", "k2"};
  EXPECT_EQ(PartParams(keys, {2, 0}, R"(,{"encoding":"base64"})"),
            R"([["k2","k0"],{"encoding":"base64"}])");
  EXPECT_EQ(PartParams(keys, {1}, ""), R"([["k1"]])");
}

TEST(RpcMergeTest, UpstreamBatchBodyNumbersTheCallsFromZero) {
  std::vector<RpcCall> calls(3);
  calls[0].id = R"({"n":1})";
  calls[0].method = "getSlot";
  calls[1].id = "5";
  calls[1].method = "get\"Odd";
  calls[1].params = R"([{"commitment":"confirmed"}])";
  calls[2].id = "5";
  calls[2].method = "getEpochInfo";
  calls[2].params = "[]";
  EXPECT_EQ(
      UpstreamBatchBody(calls, {0, 2, 1}),
      R"([{"jsonrpc":"2.0","id":0,"method":"getSlot"},)"
      R"({"jsonrpc":"2.0","id":1,"method":"getEpochInfo","params":[]},)"
      R"({"jsonrpc":"2.0","id":2,"method":"get\"Odd","params":[{"commitment":"confirmed"}]}])");
}

TEST(RpcMergeTest, BatchAnswerIsMatchedById) {
  auto answers = ParseUpstreamBatchAnswer(
      R"([{"jsonrpc":"2.0","result":"two","id":2},{"jsonrpc":"2.0","error":{"code":-1},"id":0},)"
      R"({"jsonrpc":"2.0","result":"again","id":2},{"jsonrpc":"2.0","result":"far","id":7},)"
      R"({"jsonrpc":"2.0","result":"text","id":"1"},{"jsonrpc":"2.0","result":"null","id":null},)"
      R"({"jsonrpc":"2.0","id":1},5])",
      4);
  ASSERT_TRUE(answers.ok()) << answers.status();
  ASSERT_EQ(answers->size(), 4u);
  ASSERT_TRUE((*answers)[0].has_value());
  EXPECT_EQ((*answers)[0]->error, R"({"code":-1})");
  EXPECT_FALSE((*answers)[1].has_value());  // only as text, or with neither result nor error
  ASSERT_TRUE((*answers)[2].has_value());
  EXPECT_EQ((*answers)[2]->result, R"("two")");  // the first of two
  EXPECT_FALSE((*answers)[3].has_value());
}

TEST(RpcMergeTest, BatchAnswerThatIsNotAnArrayIsAnError) {
  EXPECT_FALSE(
      ParseUpstreamBatchAnswer(
          R"({"jsonrpc":"2.0","error":{"code":-32601,"message":"Method not found"},"id":null})", 2)
          .ok());
  EXPECT_FALSE(ParseUpstreamBatchAnswer("<html>", 2).ok());
  EXPECT_FALSE(ParseUpstreamBatchAnswer(R"([{"jsonrpc":"2.0","result":1,"id":0},)", 2).ok());
}

// A batch whose elements 0 and 2 are list reads: those come back taken apart, viewing the
// batch's text; element 1 as a plain answer with its raw result.
constexpr std::string_view kMixedBatchAnswer =
    R"([{"jsonrpc":"2.0","result":{"context":{"slot":7},"value":[{"a":1}, null]},"id":0},)"
    R"({"jsonrpc":"2.0","result":{"context":{"slot":8},"value":{"lamports":5}},"id":1},)"
    R"({"jsonrpc":"2.0","error":{"code":-32005,"message":"Node is unhealthy"},"id":2}])";

void ExpectMixedBatch(
    const absl::StatusOr<std::vector<std::optional<UpstreamBatchElement>>>& answers) {
  ASSERT_TRUE(answers.ok()) << answers.status();
  ASSERT_EQ(answers->size(), 3u);
  ASSERT_TRUE((*answers)[0] && (*answers)[0]->list);
  const ListAnswer& list = *(*answers)[0]->list;
  EXPECT_TRUE(list.is_list());
  EXPECT_FALSE(list.is_error());
  EXPECT_EQ(list.context(), R"({"slot":7})");
  ASSERT_EQ(list.values().size(), 2u);
  EXPECT_EQ(list.values()[0], R"({"a":1})");
  EXPECT_EQ(list.values()[1], "null");
  ASSERT_TRUE((*answers)[1]);
  EXPECT_FALSE((*answers)[1]->list);
  EXPECT_EQ((*answers)[1]->answer.result, R"({"context":{"slot":8},"value":{"lamports":5}})");
  ASSERT_TRUE((*answers)[2] && (*answers)[2]->list);
  EXPECT_TRUE((*answers)[2]->list->is_error());
  EXPECT_EQ((*answers)[2]->answer.error, R"({"code":-32005,"message":"Node is unhealthy"})");
}

TEST(RpcMergeTest, ListReadsInABatchAnswerAreTakenApartInTheSamePass) {
  const std::vector<bool> lists = {true, false, true};
  absl::StatusOr<std::vector<std::optional<UpstreamBatchElement>>> answers;
  {
    // The views outlive the text they were parsed from: the answers share their own copy.
    std::string body(kMixedBatchAnswer);
    answers = ParseUpstreamBatchAnswer(body, 3, lists);
    std::fill(body.begin(), body.end(), 'x');
  }
  ExpectMixedBatch(answers);
}

TEST(RpcMergeTest, AListReadInABatchAnsweredOutOfOrderIsStillItsOwn) {
  // The same elements, answered last to first: read by position first, then again by id.
  const std::string reversed =
      R"([{"jsonrpc":"2.0","error":{"code":-32005,"message":"Node is unhealthy"},"id":2},)"
      R"({"jsonrpc":"2.0","result":{"context":{"slot":8},"value":{"lamports":5}},"id":1},)"
      R"({"jsonrpc":"2.0","result":{"context":{"slot":7},"value":[{"a":1}, null]},"id":0}])";
  ExpectMixedBatch(ParseUpstreamBatchAnswer(reversed, 3, {true, false, true}));
  // Without list reads, the answers are the plain ones of the overload without lists.
  auto plain = ParseUpstreamBatchAnswer(kMixedBatchAnswer, 3, {});
  ASSERT_TRUE(plain.ok());
  for (size_t k = 0; k < 3; ++k) {
    ASSERT_TRUE((*plain)[k]);
    EXPECT_FALSE((*plain)[k]->list);
  }
  EXPECT_EQ((*plain)[0]->answer.result, R"({"context":{"slot":7},"value":[{"a":1}, null]})");
  EXPECT_FALSE(
      ParseUpstreamBatchAnswer(R"([{"jsonrpc":"2.0","result":{"context":1,)", 1, {true}).ok());
}

TEST(JsonQuoteTest, PlainTextIsCopiedAndEverythingElseEscapedAsBefore) {
  EXPECT_EQ(JsonQuote("getMultipleAccounts"), R"("getMultipleAccounts")");
  EXPECT_EQ(JsonQuote(R"(a"b\c)"), R"("a\"b\\c")");
  EXPECT_EQ(JsonQuote("tab\there"), R"("tab\there")");
  EXPECT_EQ(JsonQuote(std::string("\x01", 1)), R"("\u0001")");
  EXPECT_EQ(JsonQuote("\xff"), R"("\ufffd")");
  EXPECT_EQ(JsonQuote("\xc3\xa9"), "\"\xc3\xa9\"");
  for (std::string_view text : {"getSlot", "", R"(q"uote)", "\n", "\xc3\xa9t\xe9"}) {
    std::string appended = "[";
    AppendJsonQuoted(appended, text);
    std::string expected = "[";
    expected += JsonQuote(text);
    EXPECT_EQ(appended, expected) << text;
  }
}

TEST(UpstreamUrlTest, ParsesHttpAndHttps) {
  auto url = ParseUpstreamUrl("https://rpc.example.com/path?x=1");
  ASSERT_TRUE(url.ok());
  EXPECT_TRUE(url->tls);
  EXPECT_EQ(url->host, "rpc.example.com");
  EXPECT_EQ(url->port, "443");
  EXPECT_EQ(url->path, "/path?x=1");
  url = ParseUpstreamUrl("http://[::1]:8899");
  ASSERT_TRUE(url.ok());
  EXPECT_EQ(url->host, "::1");
  EXPECT_EQ(url->port, "8899");
  EXPECT_EQ(url->path, "/");
  EXPECT_FALSE(ParseUpstreamUrl("ftp://x").ok());
}

TEST(RpcCallMetricsTest, LabelsComeOnlyFromTheListsGivenAtConstruction) {
  MetricsRegistry registry;
  RpcCallMetrics calls(&registry, {"getSlot", "getSlot", "other"}, {"base", "router"});
  EXPECT_EQ(calls.method_count(), 2u);  // getSlot, other
  EXPECT_EQ(calls.MethodName(calls.MethodId("getSlot")), "getSlot");
  EXPECT_EQ(calls.MethodName(calls.MethodId("anything else")), "other");
  EXPECT_EQ(calls.TargetName(calls.TargetId("base")), "base");
  EXPECT_EQ(calls.TargetId("router"), RpcCallMetrics::kRouterTarget);
  EXPECT_EQ(calls.TargetId("unknown"), RpcCallMetrics::kRouterTarget);
}

TEST(RpcCallMetricsTest, SeriesAppearWhenPreregisteredOrAtTheirFirstCall) {
  MetricsRegistry registry;
  RpcCallMetrics calls(&registry, {"getSlot"}, {"base"});
  const int get_slot = calls.MethodId("getSlot");
  const int base = calls.TargetId("base");
  calls.Preregister(get_slot, base, RpcOutcome::kOk);
  std::string text = registry.RenderPrometheus();
  EXPECT_NE(text.find(R"(switchyard_rpc_requests_total{method="getSlot",target="base",)"
                      R"(outcome="ok"} 0)"),
            std::string::npos)
      << text;
  EXPECT_EQ(text.find("upstream_failure"), std::string::npos) << text;
  for (int i = 0; i < 2; ++i) {
    calls.Record(get_slot, CallOutcome{base, RpcOutcome::kUpstreamFailure}, absl::Milliseconds(2));
  }
  calls.Record(calls.MethodId("nope"), CallOutcome{RpcCallMetrics::kFanoutTarget, RpcOutcome::kOk},
               absl::Milliseconds(1));
  text = registry.RenderPrometheus();
  EXPECT_NE(text.find(R"(switchyard_rpc_requests_total{method="getSlot",target="base",)"
                      R"(outcome="upstream_failure"} 2)"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find(R"(switchyard_rpc_requests_total{method="other",target="fanout",)"
                      R"(outcome="ok"} 1)"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find(R"(switchyard_rpc_latency_seconds_bucket{method="getSlot",le="0.0025"} 2)"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find(R"(switchyard_rpc_latency_seconds_count{method="other"} 1)"),
            std::string::npos)
      << text;
}

}  // namespace
}  // namespace switchyard

namespace switchyard {
namespace {

// A large upstream answer gets a parser of its own, so that no worker keeps its buffers.
TEST(DocumentParserTest, ReusesTheThreadsParserOnlyForUsualSizes) {
  api_internal::DocumentParser small(4096);
  EXPECT_EQ(&small.get(), &api_internal::ThreadParser());
  api_internal::DocumentParser large(api_internal::DocumentParser::kReuseLimit + 1);
  EXPECT_NE(&large.get(), &api_internal::ThreadParser());
}

// A padded copy of the usual size lands in this thread's one buffer, whatever a longer copy
// left there before; a large one gets a buffer of its own.
TEST(PaddedCopyTest, UsesTheThreadsBufferOnlyForUsualSizesAndHoldsExactlyTheText) {
  const std::string longer(5000, 'z');
  const char* thread_buffer = nullptr;
  {
    api_internal::PaddedCopy copy(longer);
    thread_buffer = copy.view().data();
    EXPECT_EQ(std::string_view(copy.view()), longer);
    EXPECT_GE(copy.view().capacity(), longer.size() + simdjson::SIMDJSON_PADDING);
  }
  api_internal::PaddedCopy small(R"({"a":[1,2]})");
  EXPECT_EQ(small.view().data(), thread_buffer);
  EXPECT_EQ(std::string_view(small.view()), R"({"a":[1,2]})");
  simdjson::ondemand::document doc;
  uint64_t second = 0;
  ASSERT_EQ(api_internal::ThreadParser().iterate(small.view()).get(doc), simdjson::SUCCESS);
  ASSERT_EQ(doc["a"].at(1).get(second), simdjson::SUCCESS);
  EXPECT_EQ(second, 2u);

  const std::string large(api_internal::DocumentParser::kReuseLimit + 1, ' ');
  api_internal::PaddedCopy own(large);
  EXPECT_NE(own.view().data(), thread_buffer);
  EXPECT_EQ(own.view().size(), large.size());
}

}  // namespace
}  // namespace switchyard
