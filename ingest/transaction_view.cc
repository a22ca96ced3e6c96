#include "ingest/transaction_view.h"

#include <fmt/format.h>
#include <simdjson.h>

#include "solana/base64.h"
#include "solana/transaction.h"

namespace switchyard {
namespace {

absl::Status Malformed(std::string_view what) {
  return absl::InvalidArgumentError(fmt::format("getTransaction response: {}", what));
}

absl::Status ReadKeys(simdjson::ondemand::object& loaded, std::string_view field,
                      std::vector<Pubkey>* out) {
  simdjson::ondemand::array keys;
  auto found = loaded.find_field_unordered(field);
  if (found.error() == simdjson::NO_SUCH_FIELD) return absl::OkStatus();
  if (found.get_array().get(keys) != simdjson::SUCCESS) {
    return Malformed(fmt::format("loadedAddresses.{} is not an array", field));
  }
  for (auto key : keys) {
    std::string_view text;
    if (key.get_string().get(text) != simdjson::SUCCESS) return Malformed("bad loaded address");
    absl::StatusOr<Pubkey> pubkey = Pubkey::FromBase58(text);
    if (!pubkey.ok()) return Malformed("bad loaded address");
    out->push_back(*pubkey);
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<TransactionDelegations> ParseTransactionResponse(std::string_view body) {
  simdjson::ondemand::parser parser;
  simdjson::padded_string padded(body);
  simdjson::ondemand::document doc;
  if (parser.iterate(padded).get(doc) != simdjson::SUCCESS) return Malformed("not JSON");
  simdjson::ondemand::object root;
  if (doc.get_object().get(root) != simdjson::SUCCESS) return Malformed("not an object");
  simdjson::ondemand::value result_value;
  if (root.find_field_unordered("result").get(result_value) != simdjson::SUCCESS) {
    return Malformed("no 'result'");
  }
  if (result_value.is_null()) return absl::NotFoundError("transaction not found (yet)");
  simdjson::ondemand::object result;
  if (result_value.get_object().get(result) != simdjson::SUCCESS) return Malformed("bad result");

  TransactionDelegations out;
  uint64_t slot = 0;
  if (result.find_field_unordered("slot").get_uint64().get(slot) != simdjson::SUCCESS) {
    return Malformed("no slot");
  }
  out.slot = slot;
  simdjson::ondemand::array wire;
  std::string_view encoded;
  if (result.find_field_unordered("transaction").get_array().get(wire) != simdjson::SUCCESS ||
      wire.at(0).get_string().get(encoded) != simdjson::SUCCESS) {
    return Malformed("'transaction' is not [base64, \"base64\"]");
  }
  absl::StatusOr<Transaction> tx = DecodeTransactionText(encoded, TransactionEncoding::kBase64);
  if (!tx.ok())
    return Malformed(fmt::format("transaction: {}", std::string(tx.status().message())));
  out.signature = tx->id();

  std::vector<Pubkey> keys = tx->static_keys;
  simdjson::ondemand::object meta;
  if (result.find_field_unordered("meta").get_object().get(meta) == simdjson::SUCCESS) {
    simdjson::ondemand::value err;
    if (meta.find_field_unordered("err").get(err) == simdjson::SUCCESS) out.failed = !err.is_null();
    simdjson::ondemand::object loaded;
    if (meta.find_field_unordered("loadedAddresses").get_object().get(loaded) ==
        simdjson::SUCCESS) {
      if (absl::Status s = ReadKeys(loaded, "writable", &keys); !s.ok()) return s;
      if (absl::Status s = ReadKeys(loaded, "readonly", &keys); !s.ok()) return s;
    }
    simdjson::ondemand::array balances;
    if (meta.find_field_unordered("postBalances").get_array().get(balances) == simdjson::SUCCESS) {
      for (auto balance : balances) {
        uint64_t lamports = 0;
        if (balance.get_uint64().get(lamports) != simdjson::SUCCESS) {
          return Malformed("meta.postBalances holds something other than lamports");
        }
        out.post_balances.push_back(lamports);
      }
    }
  }
  const Pubkey program = DelegationProgramId();
  for (const CompiledInstruction& ix : tx->instructions) {
    if (ix.program_id_index >= keys.size() || keys[ix.program_id_index] != program) continue;
    absl::StatusOr<DelegationInstruction> decoded = DecodeDelegationInstruction(ix, keys);
    if (!decoded.ok()) return Malformed(std::string(decoded.status().message()));
    if (decoded->kind != DelegationInstructionKind::kOther) {
      out.instructions.push_back(*std::move(decoded));
    }
  }
  out.account_keys = std::move(keys);
  return out;
}

std::optional<uint64_t> TransactionDelegations::PostBalanceOf(const Pubkey& account) const {
  for (size_t i = 0; i < account_keys.size() && i < post_balances.size(); ++i) {
    if (account_keys[i] == account) return post_balances[i];
  }
  return std::nullopt;
}

}  // namespace switchyard
