// libFuzzer target: what a WebSocket client sends, on arbitrary bytes: the message is parsed
// as JSON-RPC like any request, and each call's params are checked by its subscribe or
// unsubscribe method. What is accepted re-parses to the same subscription.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "api/jsonrpc/jsonrpc.h"
#include "api/jsonrpc/pubsub_json.h"
#include "tests/fuzz/fuzz_check.h"

using switchyard::fuzz::Check;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace switchyard;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<RpcBody> body = ParseRpcBody(text, RpcCodecOptions{});
  if (!body.ok()) {
    // The params alone, for every method: a fuzzer reaches the checks sooner this way.
    for (const PubsubMethod& method : PubsubMethods()) (void)ParseSubscribeParams(method, text);
    (void)ParseUnsubscribeParams(text);
    return 0;
  }
  for (const RpcCall& call : body->calls) {
    if (!call.error.ok()) continue;
    if (const PubsubMethod* method = FindSubscribeMethod(call.method); method != nullptr) {
      absl::StatusOr<SubscribeParams> params = ParseSubscribeParams(*method, call.params);
      if (!params.ok()) continue;
      absl::StatusOr<SubscribeParams> again = ParseSubscribeParams(*method, params->params);
      Check(again.ok());
      Check(again->params == params->params);
      Check(again->account == params->account);
      Check(again->signature == params->signature);
      Check(again->account_config == params->account_config);
    } else if (FindUnsubscribeMethod(call.method) != nullptr) {
      absl::StatusOr<uint64_t> id = ParseUnsubscribeParams(call.params);
      if (id.ok()) {
        Check(ParseUnsubscribeParams("[" + std::to_string(*id) + "]").value_or(~*id) == *id);
      }
    }
  }
  return 0;
}
