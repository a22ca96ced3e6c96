#include "api/jsonrpc/pubsub_json.h"

#include <gtest/gtest.h>

#include <string>

#include "api/upstream/pubsub_upstream.h"

namespace switchyard {
namespace {

// The message with room for simdjson's padding after it.
absl::StatusOr<UpstreamMessage> Parse(std::string& message) {
  static simdjson::ondemand::parser parser;
  const size_t size = message.size();
  message.reserve(size + simdjson::SIMDJSON_PADDING);
  return ParseUpstreamMessage(parser, message.data(), size, message.capacity());
}

constexpr char kAccountNotification[] =
    R"({"jsonrpc":"2.0","method":"accountNotification","params":{"result":{"context":{"slot":5208},)"
    R"("value":{"lamports":33594,"owner":"11111111111111111111111111111111","data":["","base64"],)"
    R"("executable":false,"rentEpoch":18446744073709551615,"space":0}},"subscription":7}})";

TEST(PubsubJsonTest, TakesAnAccountNotificationApartAndRewritesOnlyItsSubscriptionId) {
  std::string message = kAccountNotification;
  absl::StatusOr<UpstreamMessage> parsed = Parse(message);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->kind, UpstreamMessage::Kind::kNotification);
  EXPECT_EQ(parsed->subscription, 7u);
  EXPECT_EQ(parsed->context_slot, 5208u);
  EXPECT_FALSE(parsed->value_is_string);
  const std::string value = message.substr(parsed->value_offset, parsed->value_size);
  EXPECT_EQ(value.substr(0, 18), R"({"lamports":33594,)");
  EXPECT_EQ(value.back(), '}');

  size_t value_offset = 0;
  const std::string rewritten = RewriteSubscription(message, *parsed, 123456789, &value_offset);
  std::string expected = kAccountNotification;
  expected.replace(expected.rfind("7}}"), 1, "123456789");
  EXPECT_EQ(rewritten, expected);
  EXPECT_EQ(rewritten.substr(value_offset, parsed->value_size), value);
}

TEST(PubsubJsonTest, FindsTheValueWhenTheSubscriptionComesFirst) {
  std::string message =
      R"({"params":{"subscription": 12 ,"result":{"value":{"a":1},"context":{"slot":9}}},)"
      R"("method":"accountNotification","jsonrpc":"2.0"})";
  absl::StatusOr<UpstreamMessage> parsed = Parse(message);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->subscription, 12u);
  EXPECT_EQ(parsed->context_slot, 9u);
  size_t value_offset = 0;
  const std::string rewritten = RewriteSubscription(message, *parsed, 3, &value_offset);
  EXPECT_NE(rewritten.find(R"("subscription": 3 ,)"), std::string::npos) << rewritten;
  EXPECT_EQ(rewritten.substr(value_offset, parsed->value_size), R"({"a":1})");
}

TEST(PubsubJsonTest, ReadsAnswersAndSignatureValues) {
  std::string answer = R"({"jsonrpc":"2.0","result":42,"id":7})";
  absl::StatusOr<UpstreamMessage> parsed = Parse(answer);
  ASSERT_TRUE(parsed.ok());
  EXPECT_EQ(parsed->kind, UpstreamMessage::Kind::kAnswer);
  EXPECT_EQ(parsed->id, 7u);
  EXPECT_EQ(answer.substr(parsed->result_offset, parsed->result_size), "42");

  std::string error =
      R"({"jsonrpc":"2.0","error":{"code":-32602,"message":"Invalid params"},"id":8})";
  parsed = Parse(error);
  ASSERT_TRUE(parsed.ok());
  EXPECT_EQ(parsed->result_size, 0u);
  EXPECT_EQ(error.substr(parsed->error_offset, parsed->error_size),
            R"({"code":-32602,"message":"Invalid params"})");

  std::string received =
      R"({"jsonrpc":"2.0","method":"signatureNotification","params":{"result":{"context":)"
      R"({"slot":1},"value":"receivedSignature"},"subscription":0}})";
  parsed = Parse(received);
  ASSERT_TRUE(parsed.ok());
  EXPECT_TRUE(parsed->value_is_string);
  EXPECT_EQ(parsed->subscription, 0u);
}

TEST(PubsubJsonTest, RejectsWhatIsNeitherANotificationNorAnAnswer) {
  for (std::string text : {std::string("[1,2]"), std::string("{\"jsonrpc\":\"2.0\"}"),
                           std::string(R"({"method":"x","params":{"subscription":"7"}})"),
                           std::string("not json"), std::string(R"({"id":1})")}) {
    EXPECT_FALSE(Parse(text).ok()) << text;
  }
}

TEST(PubsubJsonTest, ComparesJsonValuesAsValues) {
  EXPECT_TRUE(SameJsonValue(R"({"a":1,"b":[1,"x"]})", R"({ "b" : [1, "x"], "a" : 1 })"));
  EXPECT_TRUE(SameJsonValue("5", "5.0"));
  EXPECT_FALSE(SameJsonValue(R"({"lamports":1})", R"({"lamports":2})"));
  EXPECT_FALSE(SameJsonValue(R"({"a":1})", R"({"a":1,"b":2})"));
  EXPECT_FALSE(SameJsonValue(R"([1,2])", R"([2,1])"));
  EXPECT_FALSE(SameJsonValue("{", "{ "));  // malformed matches only itself
  EXPECT_FALSE(SameJsonValue("null", R"({"a":1})"));
}

TEST(PubsubJsonTest, ChecksSubscribeParams) {
  const PubsubMethod* account = FindSubscribeMethod("accountSubscribe");
  ASSERT_NE(account, nullptr);
  EXPECT_EQ(account->unsubscribe, "accountUnsubscribe");
  absl::StatusOr<SubscribeParams> params = ParseSubscribeParams(
      *account, R"([ "11111111111111111111111111111111" , {"encoding": "base64"} ])");
  ASSERT_TRUE(params.ok()) << params.status();
  EXPECT_EQ(params->params, R"(["11111111111111111111111111111111",{"encoding":"base64"}])");
  EXPECT_EQ(params->account_config, R"({"encoding":"base64"})");
  EXPECT_EQ(params->account->ToBase58(), "11111111111111111111111111111111");
  EXPECT_FALSE(ParseSubscribeParams(*account, R"(["not-a-key"])").ok());
  EXPECT_FALSE(ParseSubscribeParams(*account, "[]").ok());
  EXPECT_FALSE(ParseSubscribeParams(*account, R"(["11111111111111111111111111111111",3])").ok());

  const PubsubMethod* slot = FindSubscribeMethod("slotSubscribe");
  ASSERT_NE(slot, nullptr);
  params = ParseSubscribeParams(*slot, "");
  ASSERT_TRUE(params.ok());
  EXPECT_EQ(params->params, "[]");
  EXPECT_EQ(FindSubscribeMethod("voteSubscribe"), nullptr);
  EXPECT_NE(FindUnsubscribeMethod("blockUnsubscribe"), nullptr);

  const PubsubMethod* signature = FindSubscribeMethod("signatureSubscribe");
  EXPECT_FALSE(ParseSubscribeParams(*signature, R"(["abc"])").ok());

  EXPECT_EQ(*ParseUnsubscribeParams("[17]"), 17u);
  EXPECT_FALSE(ParseUnsubscribeParams("[\"17\"]").ok());
  EXPECT_FALSE(ParseUnsubscribeParams("[1,2]").ok());
}

TEST(PubsubJsonTest, DerivesPubsubUrlsAsSolanaClientsDo) {
  EXPECT_EQ(*PubsubUrlFor("http://127.0.0.1:8899"), "ws://127.0.0.1:8900");
  EXPECT_EQ(*PubsubUrlFor("https://rpc.example.com/key"), "wss://rpc.example.com/key");
  EXPECT_EQ(*PubsubUrlFor("https://rpc.example.com:8443/x"), "wss://rpc.example.com:8444/x");
  EXPECT_FALSE(PubsubUrlFor("ftp://x").ok());
  absl::StatusOr<WsEndpoint> endpoint = ParseWsUrl("wss://[::1]:9000/ws");
  ASSERT_TRUE(endpoint.ok());
  EXPECT_TRUE(endpoint->tls);
  EXPECT_EQ(endpoint->host, "::1");
  EXPECT_EQ(endpoint->port, "9000");
  EXPECT_EQ(endpoint->path, "/ws");
  EXPECT_FALSE(ParseWsUrl("ws://host:port").ok());
}

}  // namespace
}  // namespace switchyard
