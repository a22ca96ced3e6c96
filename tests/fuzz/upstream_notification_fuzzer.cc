// libFuzzer target: what an upstream's pubsub sends, on arbitrary bytes, as the pubsub links
// read it: the message is parsed, and what parses as a notification has its subscription id
// rewritten (as each is before it reaches a client) into a message that parses again to the
// same slot and value. Results are compared as JSON with their context value.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "api/jsonrpc/pubsub_json.h"
#include "simdjson.h"
#include "tests/fuzz/fuzz_check.h"

using switchyard::fuzz::Check;

namespace {

std::string_view Slice(std::string_view text, size_t offset, size_t size) {
  Check(offset <= text.size() && size <= text.size() - offset);
  return text.substr(offset, size);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace switchyard;
  const simdjson::padded_string input(reinterpret_cast<const char*>(data), size);
  simdjson::ondemand::parser parser;
  absl::StatusOr<UpstreamMessage> parsed = ParseUpstreamMessage(
      parser, input.data(), input.size(), input.size() + simdjson::SIMDJSON_PADDING);
  const std::string_view text(input.data(), input.size());
  if (!parsed.ok()) return 0;
  if (parsed->kind == UpstreamMessage::Kind::kAnswer) {
    if (parsed->result_size > 0) (void)Slice(text, parsed->result_offset, parsed->result_size);
    if (parsed->error_size > 0) (void)Slice(text, parsed->error_offset, parsed->error_size);
    // A result that holds a context and a value, as a baseline read does.
    if (parsed->result_size > 0) {
      (void)ParseContextValue(Slice(text, parsed->result_offset, parsed->result_size));
    }
    return 0;
  }
  (void)Slice(text, parsed->subscription_offset, parsed->subscription_size);
  const std::string_view value = Slice(text, parsed->value_offset, parsed->value_size);
  const std::string rewritten = RewriteSubscription(text, *parsed, 424242);
  const simdjson::padded_string again_input(rewritten);
  simdjson::ondemand::parser again_parser;
  absl::StatusOr<UpstreamMessage> again =
      ParseUpstreamMessage(again_parser, again_input.data(), again_input.size(),
                           again_input.size() + simdjson::SIMDJSON_PADDING);
  Check(again.ok());
  Check(again->kind == UpstreamMessage::Kind::kNotification);
  Check(again->subscription == 424242);
  Check(again->context_slot == parsed->context_slot);
  const std::string_view again_text(again_input.data(), again_input.size());
  const std::string_view again_value = Slice(again_text, again->value_offset, again->value_size);
  Check(again_value == value);
  Check(SameJsonValue(value, again_value));
  return 0;
}
