#include "api/jsonrpc/pubsub_json.h"

#include <array>

#include "api/jsonrpc/raw_json.h"
#include "api/jsonrpc/rpc_errors.h"
#include "fmt/format.h"

namespace switchyard {
namespace {

namespace od = simdjson::ondemand;
namespace dom = simdjson::dom;
using api_internal::TrimRight;

constexpr auto kMethods = std::to_array<PubsubMethod>({
    {"account", "accountSubscribe", "accountUnsubscribe", PubsubRouting::kAccount},
    {"signature", "signatureSubscribe", "signatureUnsubscribe", PubsubRouting::kSignature},
    {"slot", "slotSubscribe", "slotUnsubscribe", PubsubRouting::kPassThrough},
    {"root", "rootSubscribe", "rootUnsubscribe", PubsubRouting::kPassThrough},
    {"program", "programSubscribe", "programUnsubscribe", PubsubRouting::kPassThrough},
    {"logs", "logsSubscribe", "logsUnsubscribe", PubsubRouting::kPassThrough},
    {"block", "blockSubscribe", "blockUnsubscribe", PubsubRouting::kPassThrough},
});

absl::Status BadParams(std::string_view why) {
  return MakeRpcStatus(RpcErrorKind::kInvalidParams, fmt::format("Invalid params: {}", why));
}

dom::parser& ThreadDomParser() {
  thread_local dom::parser parser;
  return parser;
}

// The raw JSON text of an On-Demand value and whether it is a string, consuming it.
simdjson::error_code RawExtent(od::value& value, std::string_view* out, bool* is_string) {
  od::json_type type;
  if (auto e = value.type().get(type)) return e;
  *is_string = type == od::json_type::string;
  return api_internal::RawJsonView(value, out);
}

bool SameElement(dom::element a, dom::element b) {
  if (a.type() != b.type()) {
    // 5 and 5.0, or an unsigned and a signed integer of the same value.
    double x = 0;
    double y = 0;
    return a.is_number() && b.is_number() && a.get_double().get(x) == simdjson::SUCCESS &&
           b.get_double().get(y) == simdjson::SUCCESS && x == y;
  }
  switch (a.type()) {
    case dom::element_type::OBJECT: {
      dom::object x = a.get_object().value_unsafe();
      dom::object y = b.get_object().value_unsafe();
      if (x.size() != y.size()) return false;
      for (dom::key_value_pair field : x) {
        dom::element other;
        if (y.at_key(field.key).get(other) != simdjson::SUCCESS) return false;
        if (!SameElement(field.value, other)) return false;
      }
      return true;
    }
    case dom::element_type::ARRAY: {
      dom::array x = a.get_array().value_unsafe();
      dom::array y = b.get_array().value_unsafe();
      if (x.size() != y.size()) return false;
      auto it = y.begin();
      for (dom::element element : x) {
        if (!SameElement(element, *it)) return false;
        ++it;
      }
      return true;
    }
    case dom::element_type::STRING:
      return a.get_string().value_unsafe() == b.get_string().value_unsafe();
    case dom::element_type::INT64:
      return a.get_int64().value_unsafe() == b.get_int64().value_unsafe();
    case dom::element_type::UINT64:
      return a.get_uint64().value_unsafe() == b.get_uint64().value_unsafe();
    case dom::element_type::DOUBLE:
      return a.get_double().value_unsafe() == b.get_double().value_unsafe();
    case dom::element_type::BOOL:
      return a.get_bool().value_unsafe() == b.get_bool().value_unsafe();
    case dom::element_type::NULL_VALUE:
      return true;
  }
  return false;
}

}  // namespace

std::span<const PubsubMethod> PubsubMethods() { return kMethods; }

const PubsubMethod* FindSubscribeMethod(std::string_view method) {
  for (const PubsubMethod& m : kMethods) {
    if (m.subscribe == method) return &m;
  }
  return nullptr;
}

const PubsubMethod* FindUnsubscribeMethod(std::string_view method) {
  for (const PubsubMethod& m : kMethods) {
    if (m.unsubscribe == method) return &m;
  }
  return nullptr;
}

absl::StatusOr<SubscribeParams> ParseSubscribeParams(const PubsubMethod& method,
                                                     std::string_view params_json) {
  SubscribeParams out;
  params_json = api_internal::Trim(params_json);
  if (params_json.empty()) params_json = "[]";
  dom::element root;
  if (ThreadDomParser().parse(params_json.data(), params_json.size()).get(root) !=
      simdjson::SUCCESS) {
    return BadParams("not JSON");
  }
  dom::array params;
  if (root.get_array().get(params) != simdjson::SUCCESS) {
    return BadParams("params must be an array");
  }
  out.params = simdjson::minify(root);
  const size_t count = params.size();
  auto first_string = [&](std::string_view what) -> absl::StatusOr<std::string_view> {
    std::string_view text;
    if (count == 0 || params.at(0).get_string().get(text) != simdjson::SUCCESS) {
      return BadParams(fmt::format("expected {} as the first parameter", what));
    }
    return text;
  };
  switch (method.routing) {
    case PubsubRouting::kAccount: {
      absl::StatusOr<std::string_view> text = first_string("a base58 pubkey");
      if (!text.ok()) return text.status();
      absl::StatusOr<Pubkey> key = Pubkey::FromBase58(*text);
      if (!key.ok()) return BadParams("Invalid pubkey");
      out.account = *key;
      if (count > 2) return BadParams("accountSubscribe takes a pubkey and a config object");
      if (count == 2) {
        dom::element config = params.at(1).value_unsafe();
        if (config.is_object()) {
          out.account_config = simdjson::minify(config);
        } else if (!config.is_null()) {
          return BadParams("the config must be an object");
        }
      }
      break;
    }
    case PubsubRouting::kSignature: {
      absl::StatusOr<std::string_view> text = first_string("a base58 signature");
      if (!text.ok()) return text.status();
      absl::StatusOr<Signature> signature = Signature::FromBase58(*text);
      if (!signature.ok()) return BadParams("Invalid signature");
      out.signature = *signature;
      break;
    }
    case PubsubRouting::kPassThrough:
      if (method.label == "program") {
        absl::StatusOr<std::string_view> text = first_string("a base58 pubkey");
        if (!text.ok()) return text.status();
        if (!Pubkey::FromBase58(*text).ok()) return BadParams("Invalid pubkey");
      }
      break;
  }
  return out;
}

absl::StatusOr<uint64_t> ParseUnsubscribeParams(std::string_view params_json) {
  params_json = api_internal::Trim(params_json);
  dom::element root;
  if (params_json.empty() ||
      ThreadDomParser().parse(params_json.data(), params_json.size()).get(root) !=
          simdjson::SUCCESS) {
    return BadParams("expected [subscription id]");
  }
  dom::array params;
  uint64_t id = 0;
  if (root.get_array().get(params) != simdjson::SUCCESS || params.size() != 1 ||
      params.at(0).get_uint64().get(id) != simdjson::SUCCESS) {
    return BadParams("expected [subscription id]");
  }
  return id;
}

namespace {

// Where `view` starts in the message at `data`.
size_t OffsetIn(const char* data, std::string_view view) {
  return static_cast<size_t>(view.data() - data);
}

// A notification's params.result: its context.slot and the raw extent of its value. A result
// that is not an object is skipped. False: the message is malformed.
bool ReadNotificationResult(od::value& member, const char* data, UpstreamMessage* out) {
  od::json_type type;
  if (member.type().get(type) != simdjson::SUCCESS) return false;
  if (type != od::json_type::object) return true;
  od::object result;
  if (member.get_object().get(result) != simdjson::SUCCESS) return false;
  for (auto part : result) {
    std::string_view part_name;
    od::value part_value;
    if (part.unescaped_key().get(part_name) != simdjson::SUCCESS ||
        part.value().get(part_value) != simdjson::SUCCESS) {
      return false;
    }
    if (part_name == "context") {
      od::object context;
      uint64_t slot = 0;
      if (part_value.get_object().get(context) == simdjson::SUCCESS &&
          context.find_field_unordered("slot").get_uint64().get(slot) == simdjson::SUCCESS) {
        out->context_slot = slot;
      }
    } else if (part_name == "value") {
      std::string_view raw;
      if (RawExtent(part_value, &raw, &out->value_is_string) != simdjson::SUCCESS) return false;
      out->value_offset = OffsetIn(data, raw);
      out->value_size = raw.size();
    }
  }
  return true;
}

// A notification's params: its subscription id (and where its digits are) and its result.
// False: the message is malformed.
bool ReadNotificationParams(od::value& value, const char* data, UpstreamMessage* out,
                            bool* has_subscription) {
  od::object params;
  if (value.get_object().get(params) != simdjson::SUCCESS) return false;
  for (auto param : params) {
    std::string_view name;
    od::value member;
    if (param.unescaped_key().get(name) != simdjson::SUCCESS ||
        param.value().get(member) != simdjson::SUCCESS) {
      return false;
    }
    if (name == "subscription") {
      const std::string_view token = TrimRight(member.raw_json_token());
      if (member.get_uint64().get(out->subscription) != simdjson::SUCCESS) return false;
      out->subscription_offset = OffsetIn(data, token);
      out->subscription_size = token.size();
      *has_subscription = true;
    } else if (name == "result") {
      if (!ReadNotificationResult(member, data, out)) return false;
    }
  }
  return true;
}

}  // namespace

absl::StatusOr<UpstreamMessage> ParseUpstreamMessage(od::parser& parser, const char* data,
                                                     size_t size, size_t capacity) {
  auto invalid = [] { return absl::InvalidArgumentError("not a pubsub notification or answer"); };
  od::document doc;
  if (parser.iterate(data, size, capacity).get(doc) != simdjson::SUCCESS) return invalid();
  od::object root;
  if (doc.get_object().get(root) != simdjson::SUCCESS) return invalid();
  UpstreamMessage out;
  bool has_subscription = false;
  bool has_method = false;
  for (auto field : root) {
    std::string_view key;
    od::value value;
    if (field.unescaped_key().get(key) != simdjson::SUCCESS ||
        field.value().get(value) != simdjson::SUCCESS) {
      return invalid();
    }
    if (key == "method") {
      has_method = true;
    } else if (key == "params") {
      if (!ReadNotificationParams(value, data, &out, &has_subscription)) return invalid();
    } else if (key == "id") {
      uint64_t id = 0;
      if (value.get_uint64().get(id) == simdjson::SUCCESS) out.id = id;
    } else if (key == "result" || key == "error") {
      std::string_view raw;
      bool is_string = false;
      if (RawExtent(value, &raw, &is_string) != simdjson::SUCCESS) return invalid();
      if (key == "result") {
        out.result_offset = OffsetIn(data, raw);
        out.result_size = raw.size();
      } else {
        out.error_offset = OffsetIn(data, raw);
        out.error_size = raw.size();
      }
    }
  }
  if (has_method && has_subscription) {
    out.kind = UpstreamMessage::Kind::kNotification;
    return out;
  }
  if (out.id.has_value() && (out.result_size > 0 || out.error_size > 0)) {
    out.kind = UpstreamMessage::Kind::kAnswer;
    return out;
  }
  return invalid();
}

std::string RewriteSubscription(std::string_view message, const UpstreamMessage& parsed,
                                uint64_t id, size_t* value_offset) {
  const std::string digits = std::to_string(id);
  std::string out;
  out.reserve(message.size() + digits.size());
  out.append(message.substr(0, parsed.subscription_offset));
  out.append(digits);
  out.append(message.substr(parsed.subscription_offset + parsed.subscription_size));
  if (value_offset != nullptr) {
    *value_offset = parsed.value_offset;
    if (parsed.value_offset > parsed.subscription_offset) {
      *value_offset = parsed.value_offset + digits.size() - parsed.subscription_size;
    }
  }
  return out;
}

std::string MakeNotification(std::string_view method, std::string_view result_json, uint64_t id) {
  return fmt::format(
      R"({{"jsonrpc":"2.0","method":"{}","params":{{"result":{},"subscription":{}}}}})", method,
      result_json, id);
}

absl::StatusOr<ContextValue> ParseContextValue(std::string_view result_json) {
  dom::element root;
  ContextValue out;
  if (ThreadDomParser().parse(result_json.data(), result_json.size()).get(root) !=
          simdjson::SUCCESS ||
      root["context"]["slot"].get_uint64().get(out.slot) != simdjson::SUCCESS) {
    return absl::InternalError("not a {context, value} result");
  }
  dom::element value;
  if (root["value"].get(value) != simdjson::SUCCESS) {
    return absl::InternalError("not a {context, value} result");
  }
  out.value = simdjson::minify(value);
  return out;
}

bool SameJsonValue(std::string_view a, std::string_view b) {
  if (a == b) return true;
  thread_local dom::parser first;
  thread_local dom::parser second;
  dom::element x;
  dom::element y;
  if (first.parse(a.data(), a.size()).get(x) != simdjson::SUCCESS) return false;
  if (second.parse(b.data(), b.size()).get(y) != simdjson::SUCCESS) return false;
  return SameElement(x, y);
}

}  // namespace switchyard
