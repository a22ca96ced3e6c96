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
    ASSIGN_OR_RETURN(e.signature, ReadBase58<Signature>(obj, "signature", false));
    return e;
  }
  if (kind == "undelegated") {
    UndelegatedEvent e;
    ASSIGN_OR_RETURN(e.account, ReadBase58<Pubkey>(obj, "account", true));
    ASSIGN_OR_RETURN(e.slot, ReadU64(obj, "slot", true));
    ASSIGN_OR_RETURN(e.signature, ReadBase58<Signature>(obj, "signature", false));
    return e;
  }
  ASSIGN_OR_RETURN(Slot slot, ReadU64(obj, "slot", true));
  if (kind == "slot_sealed") return SlotSealedEvent{slot};
  if (kind == "stream_gap") return StreamGapEvent{slot};
  if (kind == "resynced") return ResyncedEvent{slot};
  return FieldError("kind", fmt::format("unknown kind '{}'", kind));
}

std::string EventToJson(const Event& event) {
  const std::string_view kind = KindName(KindOf(event));
  if (const auto* d = std::get_if<DelegatedEvent>(&event)) {
    return fmt::format(
        R"({{"kind":"{}","account":"{}","validator":"{}","owner":"{}","slot":{},"lamports":{},)"
        R"("commit_frequency_ms":{},"signature":"{}"}})",
        kind, d->account.ToBase58(), d->validator.ToBase58(), d->owner_program.ToBase58(), d->slot,
        d->lamports, d->commit_frequency_ms, d->signature.ToBase58());
  }
  if (const auto* u = std::get_if<UndelegatedEvent>(&event)) {
    return fmt::format(R"({{"kind":"{}","account":"{}","slot":{},"signature":"{}"}})", kind,
                       u->account.ToBase58(), u->slot, u->signature.ToBase58());
  }
  return fmt::format(R"({{"kind":"{}","slot":{}}})", kind, SlotOf(event));
}

}  // namespace switchyard
