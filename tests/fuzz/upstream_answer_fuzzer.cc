// libFuzzer target: what an upstream answers, on arbitrary bytes: single and batch answers,
// context lists (the parts of a split getMultipleAccounts are merged from them), the answer a
// client gets from an upstream body, and upstream pubsub messages. Whatever parses must be
// consistent with the bytes it came from.
#include <simdjson.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "api/jsonrpc/jsonrpc.h"
#include "api/jsonrpc/pubsub_json.h"
#include "api/jsonrpc/rpc_merge.h"
#include "tests/fuzz/fuzz_check.h"

using switchyard::fuzz::Check;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace switchyard;
  const std::string_view text(reinterpret_cast<const char*>(data), size);

  if (absl::StatusOr<UpstreamAnswer> answer = ParseUpstreamAnswer(text); answer.ok()) {
    RpcCall call;
    call.id = "7";
    call.method = "getBalance";
    bool is_error = false;
    absl::StatusOr<std::string> client = AnswerFromUpstream(text, call, &is_error);
    Check(client.ok());
    Check(is_error == answer->is_error());
    // The client's answer is a JSON-RPC answer again, under the client's id.
    absl::StatusOr<UpstreamAnswer> again = ParseUpstreamAnswer(*client);
    Check(again.ok() && again->is_error() == answer->is_error());
  }
  for (size_t count : {1, 3, 10}) {
    absl::StatusOr<std::vector<std::optional<UpstreamAnswer>>> batch =
        ParseUpstreamBatchAnswer(text, count);
    if (batch.ok()) Check(batch->size() == count);
  }
  if (absl::StatusOr<ContextList> list = ParseContextList(text); list.ok()) {
    Check(!list->context.empty());
  }
  (void)ParseContextValue(text);
  (void)JsonMember(text, "result");
  (void)FirstString(text);
  (void)IsJsonNull(text);
  Check(SameJsonValue(text, text));

  const simdjson::padded_string padded(text);
  simdjson::ondemand::parser parser;
  absl::StatusOr<UpstreamMessage> message = ParseUpstreamMessage(
      parser, padded.data(), padded.size(), padded.size() + simdjson::SIMDJSON_PADDING);
  if (message.ok()) {
    if (message->kind == UpstreamMessage::Kind::kNotification) {
      Check(message->subscription_offset + message->subscription_size <= size);
      Check(message->value_offset + message->value_size <= size);
      size_t value_offset = 0;
      const std::string rewritten = RewriteSubscription(text, *message, 42, &value_offset);
      Check(value_offset + message->value_size <= rewritten.size());
      Check(rewritten.substr(value_offset, message->value_size) ==
            text.substr(message->value_offset, message->value_size));
    } else {
      Check(message->result_offset + message->result_size <= size);
      Check(message->error_offset + message->error_size <= size);
    }
  }
  return 0;
}
