#pragma once

#include <simdjson.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "common/pubkey.h"

namespace switchyard {

// How the router treats a pubsub method (docs/architecture.md §12; see pubsub_router.h).
enum class PubsubRouting {
  kAccount,      // by the account's delegation, following its changes
  kSignature,    // by the router's signature memory, else base and every ER
  kPassThrough,  // to base
};

// One subscription method of the Solana pubsub API. Static table entries.
struct PubsubMethod {
  std::string_view label;  // "account": the metrics label
  std::string_view subscribe;
  std::string_view unsubscribe;
  PubsubRouting routing;
};

// Every method the router serves.
std::span<const PubsubMethod> PubsubMethods();
const PubsubMethod* FindSubscribeMethod(std::string_view method);
const PubsubMethod* FindUnsubscribeMethod(std::string_view method);

// The params of a subscribe call, checked and normalized.
struct SubscribeParams {
  std::string params;  // the params array minified, as sent upstream ("[]" when absent)
  std::optional<Pubkey> account;
  std::string account_config;  // accountSubscribe: the config object minified, or ""
  std::optional<Signature> signature;
};

// Checks the params of `method` (raw JSON, empty when absent). accountSubscribe and
// programSubscribe need a pubkey first, signatureSubscribe a signature; config objects are
// passed on as they are. Fails with InvalidParams (-32602).
absl::StatusOr<SubscribeParams> ParseSubscribeParams(const PubsubMethod& method,
                                                     std::string_view params_json);
// The subscription id of an unsubscribe call: `[id]`. Fails with InvalidParams.
absl::StatusOr<uint64_t> ParseUnsubscribeParams(std::string_view params_json);

// A message from an upstream pubsub connection, taken apart without copying: offsets are into
// the message. Built by ParseUpstreamMessage.
struct UpstreamMessage {
  enum class Kind { kNotification, kAnswer };
  Kind kind = Kind::kNotification;
  // kNotification
  uint64_t subscription = 0;
  size_t subscription_offset = 0;  // where the id's digits are, to rewrite them
  size_t subscription_size = 0;
  std::optional<uint64_t> context_slot;  // params.result.context.slot
  size_t value_offset = 0;               // params.result.value, raw; size 0 when absent
  size_t value_size = 0;
  bool value_is_string = false;  // signatureNotification "receivedSignature"
  // kAnswer
  std::optional<uint64_t> id;
  size_t result_offset = 0;  // raw result; size 0 when the answer is an error
  size_t result_size = 0;
  size_t error_offset = 0;  // raw error object
  size_t error_size = 0;
};

// Parses one upstream message. `data` must stay readable for SIMDJSON_PADDING bytes past
// `size` (see simdjson::padded_string_view). Fails with InvalidArgument on anything that is
// neither a notification with a numeric subscription nor an answer.
absl::StatusOr<UpstreamMessage> ParseUpstreamMessage(simdjson::ondemand::parser& parser,
                                                     const char* data, size_t size,
                                                     size_t capacity);

// `message` with its subscription id replaced by `id`; `value_offset` is moved to where the
// value is in the result.
std::string RewriteSubscription(std::string_view message, const UpstreamMessage& parsed,
                                uint64_t id, size_t* value_offset = nullptr);

// `{"jsonrpc":"2.0","method":<method>,"params":{"result":<result>,"subscription":<id>}}`.
std::string MakeNotification(std::string_view method, std::string_view result_json, uint64_t id);

// The context slot and the raw value of a `{"context":{"slot":N},"value":...}` result (a
// getAccountInfo answer). Fails with Internal when it is not one.
struct ContextValue {
  uint64_t slot = 0;
  std::string value;  // raw JSON
};
absl::StatusOr<ContextValue> ParseContextValue(std::string_view result_json);

// Whether two raw JSON values are equal as JSON: objects compare by member regardless of
// order, numbers by value. Identical text is equal; otherwise malformed input is unequal.
bool SameJsonValue(std::string_view a, std::string_view b);

}  // namespace switchyard
