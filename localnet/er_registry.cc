#include "localnet/er_registry.h"

#include <simdjson.h>

#include "fmt/format.h"
#include "solana/base64.h"

namespace switchyard::localnet {

uint64_t RentExemptLamports(size_t size) {
  // 3480 lamports per byte-year, two years, for the data and the 128-byte account overhead.
  return (static_cast<uint64_t>(size) + 128) * 3480 * 2;
}

void LocalErRegistry::SetAtGenesis(const ErRecord& record) {
  std::string data = EncodeErRecord(record);
  const uint64_t lamports = RentExemptLamports(data.size());
  bank_->SetAccount(ErRecordPda(record.identity),
                    Account{lamports, MagicDomainProgramId(), std::move(data), false});
}

absl::StatusOr<std::string> LocalErRegistry::Apply(std::string_view request) {
  simdjson::dom::parser parser;
  simdjson::dom::element root;
  if (parser.parse(request.data(), request.size()).get(root) != simdjson::SUCCESS ||
      !root.is_object()) {
    return absl::InvalidArgumentError("the body is not a JSON object");
  }
  std::string_view op;
  std::string_view identity_text;
  if (root["op"].get_string().get(op) != simdjson::SUCCESS) {
    return absl::InvalidArgumentError("'op' is missing");
  }
  if (root["identity"].get_string().get(identity_text) != simdjson::SUCCESS) {
    return absl::InvalidArgumentError("'identity' is missing");
  }
  absl::StatusOr<Pubkey> identity = Pubkey::FromBase58(identity_text);
  if (!identity.ok()) return absl::InvalidArgumentError("'identity' is not a public key");
  const Pubkey pda = ErRecordPda(*identity);
  Account account{0, MagicDomainProgramId(), "", false};
  if (op == "unregister") {
    account.owner = Pubkey();  // assigned back to the system program, as the program does
  } else if (op == "raw") {
    std::string_view text;
    if (root["data_base64"].get_string().get(text) != simdjson::SUCCESS) {
      return absl::InvalidArgumentError("'data_base64' is missing");
    }
    absl::StatusOr<std::string> data = Base64Decode(text);
    if (!data.ok()) return absl::InvalidArgumentError("'data_base64' is not base64");
    account.data = *std::move(data);
  } else if (op == "register" || op == "sync") {
    ErRecord record;
    record.identity = *identity;
    std::string_view status;
    if (root["status"].get_string().get(status) != simdjson::SUCCESS) status = "active";
    if (status == "active") {
      record.status = ErStatus::kActive;
    } else if (status == "draining") {
      record.status = ErStatus::kDraining;
    } else if (status == "offline") {
      record.status = ErStatus::kOffline;
    } else {
      return absl::InvalidArgumentError(fmt::format("unknown status '{}'", status));
    }
    std::string_view text;
    if (root["addr"].get_string().get(text) == simdjson::SUCCESS) record.addr = std::string(text);
    if (root["country_code"].get_string().get(text) == simdjson::SUCCESS) {
      record.country_code = std::string(text.substr(0, 3));
    }
    uint64_t value = 0;
    if (root["block_time_ms"].get_uint64().get(value) == simdjson::SUCCESS) {
      record.block_time_ms = static_cast<uint16_t>(value);
    }
    if (root["base_fee"].get_uint64().get(value) == simdjson::SUCCESS) {
      record.base_fee = static_cast<uint16_t>(value);
    }
    if (root["load_average"].get_uint64().get(value) == simdjson::SUCCESS) {
      record.load_average = static_cast<uint32_t>(value);
    }
    simdjson::dom::array features;
    if (root["features"].get_array().get(features) == simdjson::SUCCESS) {
      for (simdjson::dom::element feature : features) {
        uint64_t bit = 0;
        if (feature.get_uint64().get(bit) != simdjson::SUCCESS || bit > 255) {
          return absl::InvalidArgumentError("'features' must list bit numbers 0..255");
        }
        record.features[bit / 8] |= static_cast<uint8_t>(1u << (bit % 8));
      }
    }
    account.data = EncodeErRecord(record);
  } else {
    return absl::InvalidArgumentError(fmt::format("unknown op '{}'", op));
  }
  if (op != "unregister") account.lamports = RentExemptLamports(account.data.size());
  const Slot lands = bank_->slot() + 1;
  bank_->QueueAccountWrite(pda, std::move(account));
  return fmt::format(R"({{"pda":"{}","slot":{}}})", pda.ToBase58(), lands);
}

}  // namespace switchyard::localnet
