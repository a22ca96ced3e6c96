#include "api/admin/digest_answer.h"

#include "absl/strings/numbers.h"
#include "common/url.h"
#include "fmt/format.h"
#include "simdjson.h"

namespace switchyard {

std::string DigestAnswerJson(const DigestAnswer& answer) {
  return fmt::format(R"({{"slot":{},"digest":"{}","applied_slot":{}}})", answer.sealed.slot,
                     answer.sealed.digest.ToHex(),
                     answer.applied_slot ? fmt::format("{}", *answer.applied_slot) : "null");
}

std::string DigestTarget(std::optional<Slot> slot) {
  return slot ? fmt::format("/status/digest?slot={}", *slot) : "/status/digest";
}

absl::StatusOr<std::optional<Slot>> ParseDigestSlot(std::string_view target) {
  const std::optional<std::string_view> text = QueryParameter(target, "slot");
  if (!text) return std::optional<Slot>();
  Slot slot = 0;
  if (text->empty() || text->size() > 20 ||
      text->find_first_not_of("0123456789") != std::string_view::npos ||
      !absl::SimpleAtoi(absl::string_view(text->data(), text->size()), &slot)) {
    return absl::InvalidArgumentError("slot must be a slot number (decimal digits)");
  }
  return std::optional<Slot>(slot);
}

absl::StatusOr<std::optional<DigestAnswer>> ParseDigestAnswer(unsigned status,
                                                              std::string_view body) {
  if (status == 404) return std::optional<DigestAnswer>();
  simdjson::dom::parser parser;
  simdjson::dom::element root;
  const bool parsed = parser.parse(body.data(), body.size()).get(root) == simdjson::SUCCESS;
  if (status != 200) {
    std::string_view error;
    if (parsed && root["error"].get_string().get(error) == simdjson::SUCCESS) {
      return absl::UnavailableError(fmt::format("HTTP {}: {}", status, error));
    }
    return absl::UnavailableError(fmt::format("HTTP {}", status));
  }
  DigestAnswer answer;
  std::string_view hex;
  if (!parsed || root["slot"].get_uint64().get(answer.sealed.slot) != simdjson::SUCCESS ||
      root["digest"].get_string().get(hex) != simdjson::SUCCESS) {
    return absl::DataLossError("the answer is not {\"slot\":S,\"digest\":\"HEX\",...}");
  }
  std::optional<StateDigest> digest = StateDigest::FromHex(hex);
  if (!digest) {
    return absl::DataLossError(fmt::format("the digest \"{}\" is not 32 hex digits", hex));
  }
  answer.sealed.digest = *digest;
  uint64_t applied = 0;
  if (root["applied_slot"].get_uint64().get(applied) == simdjson::SUCCESS) {
    answer.applied_slot = applied;
  }
  return std::optional<DigestAnswer>(answer);
}

}  // namespace switchyard
