#include "api/jsonrpc/jsonrpc.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "api/jsonrpc/rpc_errors.h"
#include "api/jsonrpc/rpc_merge.h"
#include "api/jsonrpc/rpc_params.h"

namespace switchyard {
namespace {

RpcCodecOptions Options() { return RpcCodecOptions{}; }

int CodeOf(const absl::Status& status) { return RpcErrorFromStatus(status).code; }

TEST(JsonRpcCodecTest, SingleRequestKeepsItsBytes) {
  const std::string body =
      R"({"jsonrpc":"2.0", "id":7,"method":"getSlot","params":[{"commitment":"finalized"}]})";
  absl::StatusOr<RpcBody> parsed = ParseRpcBody(body, Options());
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_FALSE(parsed->batch);
  ASSERT_EQ(parsed->calls.size(), 1u);
  const RpcCall& call = parsed->calls[0];
  EXPECT_TRUE(call.error.ok());
  EXPECT_EQ(call.raw, body);
  EXPECT_EQ(*call.id, "7");
  EXPECT_EQ(call.method, "getSlot");
  EXPECT_EQ(call.params, R"([{"commitment":"finalized"}])");
}

TEST(JsonRpcCodecTest, IdsOfEveryJsonTypeComeBackByteForByte) {
  for (const std::string& id : std::vector<std::string>{
           R"("abc")", R"("\u0041\n")", "0", "-12", "1.50e3", "18446744073709551616123", "null",
           "true", "false", R"({"a":[1, 2]})", "[1,\"x\"]", R"("")"}) {
    const std::string body = R"({"jsonrpc":"2.0","method":"getSlot","id":)" + id + "}";
    absl::StatusOr<RpcBody> parsed = ParseRpcBody(body, Options());
    ASSERT_TRUE(parsed.ok()) << id << " " << parsed.status();
    ASSERT_TRUE(parsed->calls[0].id.has_value()) << id;
    EXPECT_EQ(*parsed->calls[0].id, id);
    EXPECT_FALSE(parsed->calls[0].is_notification());
  }
}

TEST(JsonRpcCodecTest, MissingIdIsANotification) {
  absl::StatusOr<RpcBody> parsed =
      ParseRpcBody(R"({"jsonrpc":"2.0","method":"getSlot"})", Options());
  ASSERT_TRUE(parsed.ok());
  EXPECT_TRUE(parsed->calls[0].is_notification());
}

TEST(JsonRpcCodecTest, InvalidJsonIsAParseError) {
  for (const std::string& body : std::vector<std::string>{
           "", "   ", "{", R"({"jsonrpc":"2.0","method":"x","params":[1,,2]})", "[1,2",
           R"({"a":1} x)", R"({"a":01})", R"({"a":tru})", "\xff\xfe{}",
           std::string("{\"jsonrpc\":\"2.0\",\"method\":\"getSlot\",\"id\":\"\xc3\x28\"}"),
           R"({"a":"\q"})"}) {
    absl::StatusOr<RpcBody> parsed = ParseRpcBody(body, Options());
    ASSERT_FALSE(parsed.ok()) << body;
    EXPECT_EQ(CodeOf(parsed.status()), -32700) << body;
  }
}

// Strings and keys without an escape are not unescaped to be checked: what makes them invalid
// (a control character, bad UTF-8) must still be found, at any depth, and a bad escape too.
TEST(JsonRpcCodecTest, InvalidStringsAndKeysAnywhereAreAParseError) {
  const std::string head = R"({"jsonrpc":"2.0","id":1,"method":"getAccountInfo","params":)";
  for (const std::string& params : std::vector<std::string>{
           "[\"a\tb\"]", "[\"a\x01\"]", "[\"k\",{\"encoding\":\"base\n64\"}]",
           "[\"k\",{\"enc\x1foding\":\"base64\"}]", "{\"a\x02\":1}", "[[[\"\xc3\x28\"]]]",
           "[{\"\xe0\x80\x80\":1}]", R"(["k",{"encoding":"\x"}])", R"([{"\u12":1}])",
           R"(["\ud800x"])"}) {
    absl::StatusOr<RpcBody> parsed = ParseRpcBody(head + params + "}", Options());
    ASSERT_FALSE(parsed.ok()) << params;
    EXPECT_EQ(CodeOf(parsed.status()), -32700) << params;
  }
  for (const std::string& id : std::vector<std::string>{"\"a\tb\"", R"("\q")"}) {
    absl::StatusOr<RpcBody> parsed =
        ParseRpcBody(R"({"jsonrpc":"2.0","method":"getSlot","id":)" + id + "}", Options());
    ASSERT_FALSE(parsed.ok()) << id;
    EXPECT_EQ(CodeOf(parsed.status()), -32700) << id;
  }
  // The same shapes, valid: escapes and multi-byte characters anywhere.
  absl::StatusOr<RpcBody> parsed = ParseRpcBody(
      head + R"(["k\u0041",{"enc\u006fding":"base64","\u00e9\t":["\ud83d\ude00","é"]}]})",
      Options());
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_TRUE(parsed->calls[0].error.ok());
}

TEST(JsonRpcCodecTest, ValidJsonThatIsNotARequestIsInvalidRequest) {
  for (const std::string& body : std::vector<std::string>{"5", R"("x")", "null", "[]"}) {
    absl::StatusOr<RpcBody> parsed = ParseRpcBody(body, Options());
    ASSERT_FALSE(parsed.ok()) << body;
    EXPECT_EQ(CodeOf(parsed.status()), -32600) << body;
  }
}

TEST(JsonRpcCodecTest, MalformedRequestObjectsAreInvalidRequestPerElement) {
  const std::string body = R"([{"jsonrpc":"1.0","method":"a","id":1},)"
                           R"({"jsonrpc":"2.0","id":2},)"
                           R"({"jsonrpc":"2.0","method":5,"id":3},)"
                           R"({"jsonrpc":"2.0","method":"a","params":5,"id":4},)"
                           R"({"method":"a","id":5}, 7,)"
                           R"({"jsonrpc":"2.0","method":"getSlot","id":6}])";
  absl::StatusOr<RpcBody> parsed = ParseRpcBody(body, Options());
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  ASSERT_EQ(parsed->calls.size(), 7u);
  for (size_t i = 0; i < 6; ++i) {
    EXPECT_EQ(CodeOf(parsed->calls[i].error), -32600) << i;
  }
  EXPECT_EQ(*parsed->calls[0].id, "1");
  EXPECT_FALSE(parsed->calls[5].id.has_value());
  EXPECT_TRUE(parsed->calls[6].error.ok());
  EXPECT_EQ(parsed->calls[6].raw, R"({"jsonrpc":"2.0","method":"getSlot","id":6})");
}

// A single request is read in one pass: a field found wrong does not hide invalid JSON after
// it, and each wrong field is an Invalid Request that keeps the call's id.
TEST(JsonRpcCodecTest, SingleRequestIsCheckedWholeInOnePass) {
  for (const std::string& body :
       std::vector<std::string>{R"({"jsonrpc":"1.0","id":1,"params":[1,,2]})",
                                R"({"method":5,"jsonrpc":"2.0","id":1,"x":{"y":[}})",
                                R"({"jsonrpc":"2.0","method":"a","id":1} {})"}) {
    absl::StatusOr<RpcBody> parsed = ParseRpcBody(body, Options());
    ASSERT_FALSE(parsed.ok()) << body;
    EXPECT_EQ(CodeOf(parsed.status()), -32700) << body;
  }
  for (const std::string& body :
       std::vector<std::string>{R"({"jsonrpc":"1.0","method":"a","id":[1, {"k":2}]})",
                                R"({"jsonrpc":"2.0","method":5,"id":[1, {"k":2}]})",
                                R"({"jsonrpc":"2.0","method":"a","params":"p","id":[1, {"k":2}]})",
                                R"({"jsonrpc":"2.0","params":[],"id":[1, {"k":2}]})"}) {
    absl::StatusOr<RpcBody> parsed = ParseRpcBody(body, Options());
    ASSERT_TRUE(parsed.ok()) << body;
    ASSERT_EQ(parsed->calls.size(), 1u);
    EXPECT_EQ(CodeOf(parsed->calls[0].error), -32600) << body;
    EXPECT_EQ(*parsed->calls[0].id, R"([1, {"k":2}])") << body;
  }
  absl::StatusOr<RpcBody> parsed = ParseRpcBody(
      R"(  {"jsonrpc":"2.0","method":"get\u0041","params":[ "k", {"a":[1, 2.5e3]} ] ,"id":"x"} )",
      Options());
  ASSERT_TRUE(parsed.ok());
  EXPECT_TRUE(parsed->calls[0].error.ok());
  EXPECT_EQ(parsed->calls[0].method, "getA");
  EXPECT_EQ(parsed->calls[0].params, R"([ "k", {"a":[1, 2.5e3]} ])");
  EXPECT_EQ(*parsed->calls[0].id, R"("x")");
}

// A string without a backslash is taken as written (stage 1 has checked its bytes); one with an
// escape is unescaped, and a bad escape or a raw control character anywhere, in a key or a
// value at any depth, is a parse error.
TEST(JsonRpcCodecTest, StringsAreCheckedWhetherOrNotTheyHoldEscapes) {
  for (const std::string& body : std::vector<std::string>{
           R"({"jsonrpc":"2.0","method":"a\x","id":1})",
           R"({"jsonrpc":"2.\q","method":"a","id":1})", R"({"jsonrpc":"2.0","meth\od":"a","id":1})",
           R"({"jsonrpc":"2.0","method":"a","id":"\u12"})",
           R"({"jsonrpc":"2.0","method":"a","params":["k",{"enc\oding":1}],"id":1})",
           R"({"jsonrpc":"2.0","method":"a","params":["k",{"a":["\uZZZZ"]}],"id":1})",
           R"([{"jsonrpc":"2.0","method":"a","params":[{"x":"\/\y"}],"id":1}])",
           "{\"jsonrpc\":\"2.0\",\"method\":\"a\tb\",\"id\":1}",
           "{\"jsonrpc\":\"2.0\",\"method\":\"a\",\"params\":[{\"k\x01\":1}],\"id\":1}",
           "\"a\nb\""}) {
    absl::StatusOr<RpcBody> parsed = ParseRpcBody(body, Options());
    ASSERT_FALSE(parsed.ok()) << body;
    EXPECT_EQ(CodeOf(parsed.status()), -32700) << body;
  }
  absl::StatusOr<RpcBody> escaped = ParseRpcBody(
      R"({"jsonrpc":"2\u002e0","met\u0068od":"get\"A\u00e9","params":[{"\u006b":"\/"}],"id":1})",
      Options());
  ASSERT_TRUE(escaped.ok()) << escaped.status();
  ASSERT_TRUE(escaped->calls[0].error.ok()) << escaped->calls[0].error;
  EXPECT_EQ(escaped->calls[0].method, "get\"A\u00e9");
  EXPECT_EQ(escaped->calls[0].params, R"([{"\u006b":"\/"}])");
}

// A batch is read in one pass as well: invalid JSON anywhere is a parse error, whatever the
// elements before it were and however many there are; each element keeps its own text and its
// minContextSlot.
TEST(JsonRpcCodecTest, BatchIsCheckedWholeInOnePass) {
  RpcCodecOptions small;
  small.max_batch_size = 2;
  for (const std::string& body : std::vector<std::string>{
           R"([{"jsonrpc":"1.0","method":"a","id":1},{"jsonrpc":"2.0","params":[1,,2]}])",
           R"([7,{"jsonrpc":"2.0","method":"a","id":1,"x":{"y":[}}])",
           R"([{"jsonrpc":"2.0","method":"a","id":1}] [])",
           R"([{"jsonrpc":"2.0","method":"a","id":1},)" + std::string(200, '[') +
               std::string(200, ']') + "]",
           // Past the limit, and still checked.
           R"([{"jsonrpc":"2.0","method":"a","id":1},1,2,{"a":tru}])"}) {
    absl::StatusOr<RpcBody> parsed = ParseRpcBody(body, small);
    ASSERT_FALSE(parsed.ok()) << body;
    EXPECT_EQ(CodeOf(parsed.status()), -32700) << body;
  }
  const std::string first = R"({"jsonrpc":"2.0","method":"getBalance","id":1,)"
                            R"("params":["k",{"minContextSlot":77}]})";
  const std::string second = R"({"jsonrpc":"2.0","method":"getSlot","id":"b"})";
  absl::StatusOr<RpcBody> parsed =
      ParseRpcBody(" [ " + first + " ,\n" + second + " , [1] ] ", Options());
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_TRUE(parsed->batch);
  ASSERT_EQ(parsed->calls.size(), 3u);
  EXPECT_EQ(parsed->calls[0].raw, first);
  EXPECT_EQ(parsed->calls[0].min_context_slot, 77u);
  EXPECT_EQ(parsed->calls[0].params, R"(["k",{"minContextSlot":77}])");
  EXPECT_EQ(parsed->calls[1].raw, second);
  EXPECT_FALSE(parsed->calls[1].min_context_slot.has_value());
  EXPECT_EQ(*parsed->calls[1].id, R"("b")");
  EXPECT_EQ(parsed->calls[2].raw, "[1]");
  EXPECT_EQ(CodeOf(parsed->calls[2].error), -32600);
}

TEST(JsonRpcCodecTest, BatchOverTheLimitIsRejectedWithAClearMessage) {
  RpcCodecOptions options;
  options.max_batch_size = 3;
  std::string body = "[";
  for (int i = 0; i < 4; ++i) {
    body += std::string(i ? "," : "") + R"({"jsonrpc":"2.0","method":"getSlot","id":1})";
  }
  body += "]";
  absl::StatusOr<RpcBody> parsed = ParseRpcBody(body, options);
  ASSERT_FALSE(parsed.ok());
  RpcError error = RpcErrorFromStatus(parsed.status());
  EXPECT_EQ(error.code, -32600);
  EXPECT_EQ(error.message, "Invalid request: batch of 4 requests exceeds the limit of 3");
}

TEST(JsonRpcCodecTest, MinContextSlotIsFoundInTheConfigObject) {
  absl::StatusOr<RpcBody> parsed = ParseRpcBody(
      R"({"jsonrpc":"2.0","id":1,"method":"getBalance","params":["k",{"minContextSlot":77}]})",
      Options());
  ASSERT_TRUE(parsed.ok());
  EXPECT_EQ(parsed->calls[0].min_context_slot, 77u);
}

// minContextSlot is read in the walk that checks params: from the params object, or from the
// first element object of the params array whose first minContextSlot field is an unsigned
// 64-bit number; keys are matched as written.
TEST(JsonRpcCodecTest, MinContextSlotIsReadAsTheFirstUnsignedFieldOfAConfigObject) {
  const std::vector<std::pair<std::string, std::optional<uint64_t>>> cases = {
      {R"({"minContextSlot":5})", 5},
      {R"(["k",{"commitment":"processed","minContextSlot":0}])", 0},
      {R"(["k",{"minContextSlot":18446744073709551615}])", 18446744073709551615u},
      {R"(["k",{"minContextSlot":18446744073709551616}])", std::nullopt},
      {R"(["k",{"minContextSlot":-1}])", std::nullopt},
      {R"(["k",{"minContextSlot":1.0}])", std::nullopt},
      {R"(["k",{"minContextSlot":1e3}])", std::nullopt},
      {R"(["k",{"minContextSlot":"7"}])", std::nullopt},
      // The first field of an object decides for that object; a later object may still give it.
      {R"(["k",{"minContextSlot":"7","minContextSlot":8}])", std::nullopt},
      {R"(["k",{"minContextSlot":8,"minContextSlot":9}])", 8},
      {R"([{"minContextSlot":null},{"minContextSlot":3},{"minContextSlot":4}])", 3},
      // Matched as written: an escaped key, or the field deeper than a config object, is not it.
      {R"(["k",{"min\u0043ontextSlot":7}])", std::nullopt},
      {R"([["k",{"minContextSlot":7}]])", std::nullopt},
      {R"(["k",{"filter":{"minContextSlot":7}}])", std::nullopt},
      {R"(["minContextSlot",7])", std::nullopt},
  };
  for (const auto& [params, slot] : cases) {
    const std::string body =
        R"({"jsonrpc":"2.0","id":1,"method":"getBalance","params":)" + params + "}";
    absl::StatusOr<RpcBody> parsed = ParseRpcBody(body, Options());
    ASSERT_TRUE(parsed.ok()) << body;
    ASSERT_TRUE(parsed->calls[0].error.ok()) << body;
    EXPECT_EQ(parsed->calls[0].params, params);
    EXPECT_EQ(parsed->calls[0].min_context_slot, slot) << params;
    // The same in a batch, beside a call without one.
    absl::StatusOr<RpcBody> batch =
        ParseRpcBody("[" + body + R"(,{"jsonrpc":"2.0","id":2,"method":"getSlot"}])", Options());
    ASSERT_TRUE(batch.ok()) << body;
    EXPECT_EQ(batch->calls[0].min_context_slot, slot) << params;
    EXPECT_FALSE(batch->calls[1].min_context_slot.has_value());
  }
  // A later params field is the one kept, with its own minContextSlot (or none).
  absl::StatusOr<RpcBody> twice = ParseRpcBody(
      R"({"jsonrpc":"2.0","id":1,"method":"getBalance","params":[{"minContextSlot":5}],)"
      R"("params":["k"]})",
      Options());
  ASSERT_TRUE(twice.ok());
  EXPECT_EQ(twice->calls[0].params, R"(["k"])");
  EXPECT_FALSE(twice->calls[0].min_context_slot.has_value());
  // A call that is not a valid request carries none.
  absl::StatusOr<RpcBody> invalid =
      ParseRpcBody(R"({"id":1,"method":"getBalance","params":[{"minContextSlot":5}]})", Options());
  ASSERT_TRUE(invalid.ok());
  EXPECT_FALSE(invalid->calls[0].error.ok());
  EXPECT_FALSE(invalid->calls[0].min_context_slot.has_value());
  // Past the depth limit the walk fails as any other value would.
  RpcCodecOptions shallow = Options();
  shallow.max_depth = 2;
  const std::string deep =
      R"({"jsonrpc":"2.0","id":1,"method":"getBalance","params":["k",{"minContextSlot":5}]})";
  EXPECT_FALSE(ParseRpcBody(deep, shallow).ok());
  shallow.max_depth = 3;
  absl::StatusOr<RpcBody> within = ParseRpcBody(deep, shallow);
  ASSERT_TRUE(within.ok());
  EXPECT_EQ(within->calls[0].min_context_slot, 5u);
}

TEST(JsonRpcCodecTest, HugeBodyParsesAndKeepsItsBytes) {
  const std::string big(900 * 1024, 'x');
  const std::string body =
      R"({"jsonrpc":"2.0","id":1,"method":"sendTransaction","params":[")" + big + R"("]})";
  absl::StatusOr<RpcBody> parsed = ParseRpcBody(body, Options());
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->calls[0].raw, body);
  EXPECT_EQ(parsed->calls[0].params.size(), big.size() + 4);
}

// A body without room past its end is parsed from this thread's padded copy: a longer body
// copied there before must leave nothing that the next parse reads.
TEST(JsonRpcCodecTest, ABodyCopiedAfterALongerOneIsReadAsItIs) {
  const std::string longer =
      R"({"jsonrpc":"2.0","id":1,"method":"getBalance","params":["k",{"minContextSlot":9}]})";
  ASSERT_TRUE(ParseRpcBody(longer, Options()).ok());
  // Cut where the longer body had more to come: parsed alone, this is an unterminated object.
  const std::string cut = longer.substr(0, longer.find(",\"params\""));
  absl::StatusOr<RpcBody> truncated = ParseRpcBody(cut, Options());
  ASSERT_FALSE(truncated.ok());
  EXPECT_EQ(CodeOf(truncated.status()), -32700);
  absl::StatusOr<RpcBody> shorter = ParseRpcBody(cut + "}", Options());
  ASSERT_TRUE(shorter.ok()) << shorter.status();
  EXPECT_EQ(shorter->calls[0].raw, cut + "}");
  EXPECT_EQ(shorter->calls[0].params, "");
  EXPECT_FALSE(shorter->calls[0].min_context_slot.has_value());
}

TEST(JsonRpcCodecTest, ScalarWithTrailingGarbageIsAParseError) {
  for (const std::string& body : std::vector<std::string>{"5 x", "\"a\" 1", "nul", "1.", "-"}) {
    absl::StatusOr<RpcBody> parsed = ParseRpcBody(body, Options());
    ASSERT_FALSE(parsed.ok()) << body;
    EXPECT_EQ(CodeOf(parsed.status()), -32700) << body;
  }
}

TEST(JsonRpcCodecTest, DeepNestingIsAParseError) {
  std::string body = R"({"jsonrpc":"2.0","id":1,"method":"x","params":)" + std::string(200, '[') +
                     std::string(200, ']') + "}";
  absl::StatusOr<RpcBody> parsed = ParseRpcBody(body, Options());
  ASSERT_FALSE(parsed.ok());
  EXPECT_EQ(CodeOf(parsed.status()), -32700);
}

TEST(JsonQuoteTest, EscapesAndKeepsWellFormedUtf8) {
  EXPECT_EQ(JsonQuote("a\"b\\c\n\x01"), R"("a\"b\\c\n\u0001")");
  EXPECT_EQ(JsonQuote("caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80"),
            "\"caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80\"");
}

// Bytes from a header can be anything; the error answers that quote them must stay JSON.
TEST(JsonQuoteTest, BytesThatAreNotUtf8BecomeReplacementCharacters) {
  EXPECT_EQ(JsonQuote("gzi\x83\x83p"), R"("gzi\ufffd\ufffdp")");
  EXPECT_EQ(JsonQuote("\xC0\xAF"), R"("\ufffd\ufffd")");                      // overlong '/'
  EXPECT_EQ(JsonQuote("\xED\xA0\x80"), R"("\ufffd\ufffd\ufffd")");            // a surrogate
  EXPECT_EQ(JsonQuote("\xF4\x90\x80\x80"), R"("\ufffd\ufffd\ufffd\ufffd")");  // > U+10FFFF
  EXPECT_EQ(JsonQuote("\xE2\x82"), R"("\ufffd\ufffd")");                      // cut short
  EXPECT_EQ(JsonQuote("x\xFF"), R"("x\ufffd")");
  const std::string error = RpcErrorResponse(
      "null",
      RpcError{-32600, std::string("Content-Encoding \xFE\xC3\xA9\x80 is refused"), std::nullopt});
  EXPECT_NE(error.find("\"Content-Encoding \\ufffd\xC3\xA9\\ufffd is refused\""), std::string::npos)
      << error;
}

TEST(RpcErrorTableTest, EveryKindHasItsCode) {
  EXPECT_EQ(CodeOf(MakeRpcStatus(RpcErrorKind::kParseError)), -32700);
  EXPECT_EQ(CodeOf(MakeRpcStatus(RpcErrorKind::kInvalidRequest)), -32600);
  EXPECT_EQ(CodeOf(MakeRpcStatus(RpcErrorKind::kMethodNotFound)), -32601);
  EXPECT_EQ(CodeOf(MakeRpcStatus(RpcErrorKind::kInvalidParams)), -32602);
  EXPECT_EQ(CodeOf(MakeRpcStatus(RpcErrorKind::kInternal)), -32603);
  EXPECT_EQ(CodeOf(MakeRpcStatus(RpcErrorKind::kRouterError)), -32604);
  EXPECT_EQ(CodeOf(absl::InvalidArgumentError("x")), -32602);
  EXPECT_EQ(CodeOf(absl::UnavailableError("x")), -32603);
  RpcError slot = RpcErrorFromStatus(MinContextSlotStatus(42));
  EXPECT_EQ(slot.code, -32016);
  EXPECT_EQ(slot.message, "Minimum context slot has not been reached");
  EXPECT_EQ(slot.data_json, R"({"contextSlot":42})");
}

TEST(RpcErrorTableTest, ErrorResponseIsWellFormed) {
  EXPECT_EQ(RpcErrorResponse(R"("a")", MinContextSlotStatus(9)),
            R"({"jsonrpc":"2.0","error":{"code":-32016,"message":"Minimum context slot has )"
            R"(not been reached","data":{"contextSlot":9}},"id":"a"})");
  EXPECT_EQ(RpcErrorResponse("null", MakeRpcStatus(RpcErrorKind::kInvalidParams, "a\"b")),
            R"({"jsonrpc":"2.0","error":{"code":-32602,"message":"a\"b"},"id":null})");
}

TEST(RpcErrorTableTest, AnUpstreamErrorAboutTheCallKeepsItsCodeAnyOtherIsInternal) {
  for (int code : {-32600, -32601, -32602}) {
    RpcError error = RpcErrorFromStatus(RpcStatusFromUpstreamError(code, "upstream says no"));
    EXPECT_EQ(error.code, code);
    EXPECT_EQ(error.message, "upstream says no");
  }
  for (int code : {-32700, -32603, -32016, -32004, -32000, 7}) {
    RpcError error = RpcErrorFromStatus(RpcStatusFromUpstreamError(code, "upstream says no"));
    EXPECT_EQ(error.code, -32603) << code;
    EXPECT_EQ(error.message, "upstream says no") << code;
  }
  EXPECT_EQ(RpcErrorFromStatus(RpcStatusFromUpstreamError(-32602, "")).message, "Invalid params");
}

// The one-pass read of a single account's key answers as splitting the params and reading
// element 0 does, for every shape of params.
TEST(RpcParamsTest, FirstStringParamAnswersAsSplittingAndReadingElementZero) {
  const std::vector<std::string> cases = {
      R"(["Key1111",{"encoding":"base64"}])",
      R"(["K\u0065y"])",
      R"([])",
      R"([42,"x"])",
      R"([{"a":1}])",
      R"({"a":"b"})",
      "",
      R"([null])",
  };
  for (const std::string& params : cases) {
    absl::StatusOr<std::string> one_pass = FirstStringParam(params);
    absl::StatusOr<RpcParams> split = ParseRpcParams(params);
    absl::StatusOr<std::string> expected =
        split.ok() ? split->String(0) : absl::StatusOr<std::string>(split.status());
    EXPECT_EQ(one_pass.status(), expected.status()) << params;
    if (one_pass.ok() && expected.ok()) {
      EXPECT_EQ(*one_pass, *expected) << params;
    }
  }
  EXPECT_EQ(*FirstStringParam(R"(["K\u0065y"])"), "Key");
  EXPECT_EQ(FirstStringParam("[]").status().message(), "Invalid params: missing parameter 0");
}

TEST(RpcParamsTest, ListParamsAnswerAsSplittingAndReadingTheListThenTheRest) {
  const std::vector<std::string> cases = {
      R"([["K1","K2"],{"encoding":"base64"}])",
      R"([["K1"]])",
      R"([[], {"encoding" : "base64"} , 5])",
      R"([["K1",  "K2"],{"minContextSlot":9}])",
      R"([["K1","K2","K3"]])",          // one over the maximum
      R"([["K1","K2","K3","K4"],{}])",  // two over
      R"([["K1",2]])",
      R"([[2,"K1","K2","K3"]])",
      R"([[null]])",
      R"(["K1"])",
      R"([{"a":1}])",
      R"([])",
      R"({"a":"b"})",
      "",
  };
  constexpr size_t kMax = 2;
  for (const std::string& params : cases) {
    absl::StatusOr<ListParams> one_pass = ParseListParams(params, kMax);
    absl::StatusOr<RpcParams> split = ParseRpcParams(params);
    absl::StatusOr<std::vector<std::string>> expected =
        split.ok() ? split->StringList(0, kMax)
                   : absl::StatusOr<std::vector<std::string>>(split.status());
    EXPECT_EQ(one_pass.status(), expected.status()) << params;
    if (one_pass.ok() && expected.ok()) {
      EXPECT_EQ(one_pass->items, *expected) << params;
      std::string rest;
      for (size_t i = 1; i < split->elements.size(); ++i) {
        rest.push_back(',');
        rest += split->elements[i];
      }
      EXPECT_EQ(one_pass->rest, rest) << params;
    }
  }
  absl::StatusOr<ListParams> read = ParseListParams(R"([["K\u0031","K2"], {"x" : [1, 2]} ])", 5);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->items, (std::vector<std::string>{"K1", "K2"}));
  EXPECT_EQ(read->rest, R"(,{"x" : [1, 2]} )");  // as written, up to the closing bracket
  EXPECT_EQ(ParseListParams(R"([["K1","K2","K3"]])", 2).status().message(),
            "Invalid params: Too many inputs provided; max 2");
}

// A key written plainly is read where it lies, with the same answer as the parse; any other
// text is left to the parse.
TEST(RpcParamsTest, FirstPlainStringParamIsThePlainKeyOrNothing) {
  const std::vector<std::pair<std::string, std::optional<std::string>>> cases = {
      {R"(["Key1111",{"encoding":"base64"}])", "Key1111"},
      {R"(["Key1111"])", "Key1111"},
      {" [ \"Key1111\" ,\t{}] ", "Key1111"},
      {"[\n\"\"]", ""},
      {R"(["not a key!"])", "not a key!"},
      {R"(["K\u0065y"])", std::nullopt},
      {R"(["K\"y"])", std::nullopt},
      {"[\"K\ty\"]", std::nullopt},
      {R"([])", std::nullopt},
      {R"([42,"x"])", std::nullopt},
      {R"([{"a":"b"}])", std::nullopt},
      {R"({"a":"b"})", std::nullopt},
      {"", std::nullopt},
      {R"(["Key1111")", std::nullopt},
      {R"(["Key1111" 1])", std::nullopt},
  };
  for (const auto& [params, plain] : cases) {
    const std::optional<std::string_view> view = FirstPlainStringParam(params);
    EXPECT_EQ(view.has_value(), plain.has_value()) << params;
    if (!view || !plain) continue;
    EXPECT_EQ(*view, *plain) << params;
    // Within the text, and what the parse reads.
    EXPECT_GE(view->data(), params.data());
    EXPECT_LE(view->data() + view->size(), params.data() + params.size());
    absl::StatusOr<std::string> parsed = FirstStringParam(params);
    ASSERT_TRUE(parsed.ok()) << params;
    EXPECT_EQ(*parsed, *view) << params;
  }
}

TEST(MinContextSlotTest, TheMemberLeavesAndEverythingElseStaysAsWritten) {
  EXPECT_EQ(ParamsWithoutMinContextSlot(R"(["k",{"encoding":"base64","minContextSlot":5}])"),
            R"(["k",{"encoding":"base64"}])");
  EXPECT_EQ(ParamsWithoutMinContextSlot(R"(["k", { "minContextSlot" : 5 }])"), R"(["k",{}])");
  EXPECT_EQ(
      ParamsWithoutMinContextSlot(
          R"([{"minContextSlot":7,"commitment":"confirmed","dataSlice":{"offset":0,"length":8}}])"),
      R"([{"commitment":"confirmed","dataSlice":{"offset":0,"length":8}}])");
  // Not a member: a string that names it, and params without a config object.
  const std::string in_a_string = R"(["minContextSlot",{"encoding":"base64"}])";
  EXPECT_EQ(ParamsWithoutMinContextSlot(in_a_string), in_a_string);
  EXPECT_EQ(ParamsWithoutMinContextSlot(R"(["k"])"), R"(["k"])");
  EXPECT_EQ(ParamsWithoutMinContextSlot(""), "");
}

TEST(MinContextSlotTest, DroppingItRewritesTheCallsRawTextAndKeepsTheParsedSlot) {
  absl::StatusOr<RpcBody> body = ParseRpcBody(
      R"({"jsonrpc":"2.0","id":"a","method":"getBalance","params":["k",{"minContextSlot":9}]})",
      Options());
  ASSERT_TRUE(body.ok());
  RpcCall& call = body->calls[0];
  DropMinContextSlot(call);
  EXPECT_EQ(call.params, R"(["k",{}])");
  EXPECT_EQ(call.raw, R"({"jsonrpc":"2.0","id":"a","method":"getBalance","params":["k",{}]})");
  EXPECT_EQ(call.min_context_slot, 9u);
  EXPECT_TRUE(IsMinContextSlotError(MinContextSlotStatus(3)));
  EXPECT_FALSE(IsMinContextSlotError(MakeRpcStatus(RpcErrorKind::kInternal)));
}

}  // namespace
}  // namespace switchyard
