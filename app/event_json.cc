#include "app/event_json.h"

#include <fmt/format.h>
#include <simdjson.h>

#include "common/status.h"

namespace switchyard {
namespace {

using simdjson::ondemand::object;

absl::Status FieldError(std::string_view field, std::string_view problem) {
  return absl::InvalidArgumentError(fmt::format("field '{}': {}", field, problem));
}

absl::StatusOr<uint64_t> ReadU64(object& obj, std::string_view field, bool required) {
  uint64_t value = 0;
  auto result = obj.find_field_unordered(field);
  if (result.error() == simdjson::NO_SUCH_FIELD) {
    if (required) return FieldError(field, "missing");
    return uint64_t{0};
  }
  if (result.get_uint64().get(value) != simdjson::SUCCESS) {
    return FieldError(field, "must be an unsigned 64-bit integer");
  }
  return value;
}

template <typename T>
absl::StatusOr<T> ReadBase58(object& obj, std::string_view field, bool required) {
  std::string_view text;
  auto result = obj.find_field_unordered(field);
  if (result.error() == simdjson::NO_SUCH_FIELD) {
    if (required) return FieldError(field, "missing");
    return T();
  }
  if (result.get_string().get(text) != simdjson::SUCCESS) {
    return FieldError(field, "must be a base58 string");
  }
  absl::StatusOr<T> value = T::FromBase58(text);
  if (!value.ok()) return FieldError(field, std::string(value.status().message()));
  return value;
}

// An optional signature: base58, or "unknown" (also when left out).
absl::StatusOr<std::optional<Signature>> ReadSignature(object& obj) {
  std::string_view text;
  auto result = obj.find_field_unordered("signature");
  if (result.error() == simdjson::NO_SUCH_FIELD) return std::optional<Signature>();
  if (result.get_string().get(text) != simdjson::SUCCESS) {
    return FieldError("signature", "must be a base58 string or \"unknown\"");
  }
  if (text == "unknown") return std::optional<Signature>();
  absl::StatusOr<Signature> value = Signature::FromBase58(text);
  if (!value.ok()) return FieldError("signature", std::string(value.status().message()));
  return std::optional<Signature>(*value);
}

absl::StatusOr<EventSource> ReadSource(object& obj) {
  std::string_view text;
  auto result = obj.find_field_unordered("source");
  if (result.error() == simdjson::NO_SUCH_FIELD) return EventSource::kUnrecorded;
  if (result.get_string().get(text) == simdjson::SUCCESS) {
    for (uint8_t v = 0; v <= kMaxEventSource; ++v) {
      if (SourceName(static_cast<EventSource>(v)) == text) return static_cast<EventSource>(v);
    }
  }
  return FieldError("source", "must be live, backfill, reconciliation, repair or unrecorded");
}

}  // namespace

absl::StatusOr<Event> ParseEventJson(std::string_view line) {
  simdjson::ondemand::parser parser;
  simdjson::padded_string padded(line);
  simdjson::ondemand::document doc;
  if (parser.iterate(padded).get(doc) != simdjson::SUCCESS) {
    return absl::InvalidArgumentError("not JSON");
  }
  object obj;
  if (doc.get_object().get(obj) != simdjson::SUCCESS) {
    return absl::InvalidArgumentError("not a JSON object");
  }
  std::string_view kind;
  if (obj.find_field_unordered("kind").get_string().get(kind) != simdjson::SUCCESS) {
    return FieldError("kind", "missing or not a string");
  }
  if (kind == "delegated") {
    DelegatedEvent e;
    ASSIGN_OR_RETURN(e.account, ReadBase58<Pubkey>(obj, "account", true));
    ASSIGN_OR_RETURN(e.validator, ReadBase58<Pubkey>(obj, "validator", true));
    ASSIGN_OR_RETURN(e.owner_program, ReadBase58<Pubkey>(obj, "owner", true));
    ASSIGN_OR_RETURN(e.slot, ReadU64(obj, "slot", true));
    ASSIGN_OR_RETURN(e.lamports, ReadU64(obj, "lamports", false));
    ASSIGN_OR_RETURN(e.commit_frequency_ms, ReadU64(obj, "commit_frequency_ms", false));
    ASSIGN_OR_RETURN(e.signature, ReadSignature(obj));
    ASSIGN_OR_RETURN(e.source, ReadSource(obj));
    return e;
  }
  if (kind == "undelegated") {
    UndelegatedEvent e;
    ASSIGN_OR_RETURN(e.account, ReadBase58<Pubkey>(obj, "account", true));
    ASSIGN_OR_RETURN(e.slot, ReadU64(obj, "slot", true));
    ASSIGN_OR_RETURN(e.signature, ReadSignature(obj));
    ASSIGN_OR_RETURN(e.source, ReadSource(obj));
    return e;
  }
  ASSIGN_OR_RETURN(Slot slot, ReadU64(obj, "slot", true));
  if (kind == "slot_sealed") return SlotSealedEvent{slot};
  if (kind == "stream_gap") return StreamGapEvent{slot};
  if (kind == "resynced") return ResyncedEvent{slot};
  return FieldError("kind", fmt::format("unknown kind '{}'", kind));
}

}  // namespace switchyard
