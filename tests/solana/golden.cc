#include "tests/solana/golden.h"

#include <simdjson.h>

#include <cstdlib>
#include <iostream>

#include "solana/base64.h"

namespace switchyard::golden {
namespace {

using simdjson::dom::array;
using simdjson::dom::element;
using simdjson::dom::object;

std::string Str(element e) { return std::string(std::string_view(e)); }
int Int(element e) { return static_cast<int>(int64_t(e)); }

std::vector<std::string> Strings(element e) {
  std::vector<std::string> out;
  for (element item : array(e)) out.push_back(Str(item));
  return out;
}
std::vector<int> Ints(element e) {
  std::vector<int> out;
  for (element item : array(e)) out.push_back(Int(item));
  return out;
}
std::string OptionalStr(object o, std::string_view field) {
  element value;
  if (o[field].get(value) != simdjson::SUCCESS || value.is_null()) return "";
  return Str(value);
}

Delegation ParseDelegation(object o) {
  Delegation d;
  d.kind = Str(o["kind"]);
  d.discriminator = Int(o["discriminator"]);
  for (auto [field, target] : std::initializer_list<std::pair<std::string_view, std::string*>>{
           {"payer", &d.payer},
           {"delegated_account", &d.delegated_account},
           {"owner_program", &d.owner_program},
           {"buffer", &d.buffer},
           {"delegation_record", &d.delegation_record},
           {"delegation_metadata", &d.delegation_metadata},
           {"system_program", &d.system_program},
           {"validator", &d.validator},
           {"undelegate_buffer", &d.undelegate_buffer},
           {"commit_state", &d.commit_state},
           {"commit_record", &d.commit_record},
           {"rent_reimbursement", &d.rent_reimbursement},
           {"fees_vault", &d.fees_vault},
           {"validator_fees_vault", &d.validator_fees_vault}}) {
    *target = OptionalStr(o, field);
  }
  element value;
  if (o["commit_frequency_ms"].get(value) == simdjson::SUCCESS) {
    d.commit_frequency_ms = static_cast<uint32_t>(int64_t(value));
  }
  if (o["seeds"].get(value) == simdjson::SUCCESS) d.seeds_base64 = Strings(value);
  return d;
}

TransactionVector ParseTransaction(object o) {
  TransactionVector t;
  t.name = Str(o["name"]);
  t.versioned = bool(o["versioned"]);
  if (!o["version"].is_null()) t.version = Int(o["version"]);
  t.wire_size = static_cast<size_t>(int64_t(o["wire_size"]));
  t.base64 = Str(o["base64"]);
  t.base58 = Str(o["base58"]);
  t.id = Str(o["id"]);
  t.signatures = Strings(o["signatures"]);
  t.message_base64 = Str(o["message_base64"]);
  object header = o["header"];
  t.num_required_signatures = Int(header["num_required_signatures"]);
  t.num_readonly_signed = Int(header["num_readonly_signed"]);
  t.num_readonly_unsigned = Int(header["num_readonly_unsigned"]);
  t.static_keys = Strings(o["static_keys"]);
  t.recent_blockhash = Str(o["recent_blockhash"]);
  for (object ix : array(o["instructions"])) {
    t.instructions.push_back(
        {Int(ix["program_id_index"]), Ints(ix["accounts"]), Str(ix["data_base64"])});
  }
  for (object l : array(o["lookups"])) {
    t.lookups.push_back(
        {Str(l["table"]), Ints(l["writable_indexes"]), Ints(l["readonly_indexes"])});
  }
  for (object k : array(o["resolved_keys"])) {
    t.resolved_keys.push_back({Str(k["key"]), bool(k["signer"]), bool(k["writable"])});
  }
  for (object table : array(o["tables"])) {
    t.tables.push_back({Str(table["key"]), Strings(table["addresses"])});
  }
  for (object d : array(o["delegation"])) t.delegation.push_back(ParseDelegation(d));
  return t;
}

Vectors Parse() {
  simdjson::dom::parser parser;
  element root = parser.load(SWITCHYARD_GOLDEN_VECTORS);
  Vectors v;
  object packages = root["packages"];
  v.web3_version = Str(packages["@solana/web3.js"]);
  v.sdk_version = Str(packages["@magicblock-labs/ephemeral-rollups-sdk"]);
  v.delegation_program_id = Str(root["delegation_program_id"]);
  for (object t : array(root["transactions"])) v.transactions.push_back(ParseTransaction(t));
  for (object p : array(root["delegation_pdas"])) {
    v.delegation_pdas.push_back({Str(p["account"]), Str(p["owner_program"]),
                                 Str(p["delegation_record"]), Str(p["delegation_metadata"]),
                                 Str(p["delegate_buffer"]), Str(p["undelegate_buffer"]),
                                 Str(p["commit_state"]), Str(p["commit_record"])});
  }
  v.fees_vault = Str(root["fees_vault"]);
  v.validator = Str(root["validator_fees_vault"]["validator"]);
  v.validator_fees_vault = Str(root["validator_fees_vault"]["address"]);
  for (object f : array(root["find_program_address"])) {
    v.find_program_address.push_back(
        {Strings(f["seeds"]), Str(f["program"]), Str(f["address"]), Int(f["bump"])});
  }
  for (object c : array(root["create_program_address"])) {
    CreateProgramAddressVector vector{Strings(c["seeds"]), Int(c["bump"]), Str(c["program"]), {}};
    if (!c["address"].is_null()) vector.address = Str(c["address"]);
    v.create_program_address.push_back(std::move(vector));
  }
  for (object c : array(root["on_curve"])) {
    v.on_curve.push_back({Str(c["key"]), bool(c["on_curve"])});
  }
  object record = root["delegation_record"];
  v.record = {Str(record["authority"]),
              Str(record["owner"]),
              std::stoull(Str(record["delegation_slot"])),
              std::stoull(Str(record["lamports"])),
              std::stoull(Str(record["commit_frequency_ms"])),
              Str(record["base64"])};
  object metadata = root["delegation_metadata"];
  v.metadata = {std::stoull(Str(metadata["last_commit_id"])),
                Int(metadata["undelegation_requester"]), Strings(metadata["seeds"]),
                Str(metadata["rent_payer"]), Str(metadata["base64"])};
  return v;
}

[[noreturn]] void Fail(const std::string& why) {
  std::cerr << "golden vectors " << SWITCHYARD_GOLDEN_VECTORS << ": " << why << "\n";
  std::abort();
}

}  // namespace

const Vectors& Load() {
  static const Vectors* const kVectors = [] {
    try {
      return new Vectors(Parse());
    } catch (const std::exception& e) {
      Fail(e.what());
    }
  }();
  return *kVectors;
}

const TransactionVector& TransactionNamed(const std::string& name) {
  for (const TransactionVector& t : Load().transactions) {
    if (t.name == name) return t;
  }
  Fail("no transaction named " + name);
}

Pubkey Key(const std::string& base58) {
  auto key = Pubkey::FromBase58(base58);
  if (!key.ok()) Fail("bad key " + base58);
  return *key;
}

std::string Base64(const std::string& text) {
  auto bytes = Base64Decode(text);
  if (!bytes.ok()) Fail("bad base64 " + text);
  return *bytes;
}

}  // namespace switchyard::golden
