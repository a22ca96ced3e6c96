#include "ingest/chain_view.h"

#include <fmt/format.h>
#include <simdjson.h>

#include "absl/container/flat_hash_map.h"
#include "common/status.h"
#include "solana/base64.h"
#include "solana/delegation.h"

namespace switchyard {
namespace {

absl::Status Malformed(std::string_view what) {
  return absl::InvalidArgumentError(fmt::format("getProgramAccounts response: {}", what));
}

template <typename T>
absl::StatusOr<T> ReadKey(simdjson::ondemand::object& obj, std::string_view field) {
  std::string_view text;
  if (obj.find_field_unordered(field).get_string().get(text) != simdjson::SUCCESS) {
    return Malformed(fmt::format("'{}' is missing or not a string", field));
  }
  absl::StatusOr<T> key = T::FromBase58(text);
  if (!key.ok()) return Malformed(fmt::format("'{}' is not a public key", field));
  return key;
}

// An account's owner, lamports and base64 data, as getProgramAccounts and programNotification
// show them.
absl::Status ReadAccountInfo(simdjson::ondemand::object& info, ChainAccount* account) {
  auto owner = ReadKey<Pubkey>(info, "owner");
  if (!owner.ok()) return owner.status();
  account->owner = *owner;
  if (info.find_field_unordered("lamports").get_uint64().get(account->lamports) !=
      simdjson::SUCCESS) {
    return Malformed("'lamports' is not an unsigned integer");
  }
  simdjson::ondemand::array data;
  std::string_view encoded;
  if (info.find_field_unordered("data").get_array().get(data) != simdjson::SUCCESS ||
      data.at(0).get_string().get(encoded) != simdjson::SUCCESS) {
    return Malformed("'data' is not [base64, \"base64\"]");
  }
  absl::StatusOr<std::string> decoded = Base64Decode(encoded);
  if (!decoded.ok()) return Malformed("account data is not base64");
  account->data = *std::move(decoded);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::optional<ChainAccount>> ParseProgramNotification(std::string_view message) {
  simdjson::ondemand::parser parser;
  simdjson::padded_string padded(message);
  simdjson::ondemand::document doc;
  simdjson::ondemand::object root;
  if (parser.iterate(padded).get(doc) != simdjson::SUCCESS ||
      doc.get_object().get(root) != simdjson::SUCCESS) {
    return absl::InvalidArgumentError("programNotification: not a JSON object");
  }
  std::string_view method;
  if (root.find_field_unordered("method").get_string().get(method) != simdjson::SUCCESS ||
      method != "programNotification") {
    return std::nullopt;
  }
  simdjson::ondemand::object value;
  if (root.find_field_unordered("params")
          .find_field_unordered("result")
          .find_field_unordered("value")
          .get_object()
          .get(value) != simdjson::SUCCESS) {
    return absl::InvalidArgumentError("programNotification without params.result.value");
  }
  ChainAccount account;
  absl::StatusOr<Pubkey> pubkey = ReadKey<Pubkey>(value, "pubkey");
  if (!pubkey.ok()) return pubkey.status();
  account.pubkey = *pubkey;
  simdjson::ondemand::object info;
  if (value.find_field_unordered("account").get_object().get(info) != simdjson::SUCCESS) {
    return absl::InvalidArgumentError("programNotification without an account");
  }
  RETURN_IF_ERROR(ReadAccountInfo(info, &account));
  return account;
}

absl::StatusOr<ProgramAccountsSnapshot> ParseProgramAccountsResponse(std::string_view body) {
  simdjson::ondemand::parser parser;
  simdjson::padded_string padded(body);
  simdjson::ondemand::document doc;
  if (parser.iterate(padded).get(doc) != simdjson::SUCCESS) return Malformed("not JSON");
  simdjson::ondemand::object root;
  if (doc.get_object().get(root) != simdjson::SUCCESS) return Malformed("not an object");
  simdjson::ondemand::object result;
  if (root.find_field_unordered("result").get_object().get(result) != simdjson::SUCCESS) {
    simdjson::ondemand::object error;
    if (root.find_field_unordered("error").get_object().get(error) == simdjson::SUCCESS) {
      return absl::UnavailableError(
          fmt::format("getProgramAccounts failed: {}", body.substr(0, 300)));
    }
    return Malformed("no 'result' object (was withContext set?)");
  }
  ProgramAccountsSnapshot snapshot;
  uint64_t slot = 0;
  if (result.find_field_unordered("context").find_field_unordered("slot").get_uint64().get(slot) !=
      simdjson::SUCCESS) {
    return Malformed("no context slot");
  }
  snapshot.context_slot = slot;
  simdjson::ondemand::array value;
  if (result.find_field_unordered("value").get_array().get(value) != simdjson::SUCCESS) {
    return Malformed("'value' is not an array");
  }
  for (auto element : value) {
    simdjson::ondemand::object entry;
    if (element.get_object().get(entry) != simdjson::SUCCESS) return Malformed("entry not object");
    ChainAccount account;
    auto pubkey = ReadKey<Pubkey>(entry, "pubkey");
    if (!pubkey.ok()) return pubkey.status();
    account.pubkey = *pubkey;
    simdjson::ondemand::object info;
    if (entry.find_field_unordered("account").get_object().get(info) != simdjson::SUCCESS) {
      return Malformed("entry without 'account'");
    }
    RETURN_IF_ERROR(ReadAccountInfo(info, &account));
    snapshot.accounts.push_back(std::move(account));
  }
  return snapshot;
}

std::vector<DelegatedEvent> DelegationsOf(const ProgramAccountsSnapshot& snapshot,
                                          ChainViewCounters* counters) {
  const Pubkey program = DelegationProgramId();
  absl::flat_hash_map<Pubkey, const ChainAccount*> by_key;
  for (const ChainAccount& a : snapshot.accounts) by_key.emplace(a.pubkey, &a);
  std::vector<DelegatedEvent> out;
  for (const ChainAccount& account : snapshot.accounts) {
    if (account.owner != program) continue;
    auto record_it = by_key.find(DelegationRecordPda(account.pubkey));
    if (record_it == by_key.end()) continue;  // a record, metadata or buffer, not a delegation
    const std::string& bytes = record_it->second->data;
    absl::StatusOr<DelegationRecord> record = DecodeDelegationRecord(
        std::span(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()));
    if (!record.ok()) {
      if (counters != nullptr) ++counters->records_malformed;
      continue;
    }
    out.push_back(DelegatedEventOf(account.pubkey, *record, std::nullopt, EventSource::kBackfill));
  }
  std::sort(out.begin(), out.end(),
            [](const DelegatedEvent& a, const DelegatedEvent& b) { return a.account < b.account; });
  return out;
}

absl::StatusOr<std::vector<AddressSignature>> ParseSignaturesResponse(std::string_view body) {
  auto malformed = [](std::string_view what) {
    return absl::InvalidArgumentError(fmt::format("getSignaturesForAddress response: {}", what));
  };
  simdjson::ondemand::parser parser;
  simdjson::padded_string padded(body);
  simdjson::ondemand::document doc;
  simdjson::ondemand::object root;
  if (parser.iterate(padded).get(doc) != simdjson::SUCCESS ||
      doc.get_object().get(root) != simdjson::SUCCESS) {
    return malformed("not a JSON object");
  }
  simdjson::ondemand::array result;
  if (root.find_field_unordered("result").get_array().get(result) != simdjson::SUCCESS) {
    simdjson::ondemand::object error;
    if (root.find_field_unordered("error").get_object().get(error) == simdjson::SUCCESS) {
      return absl::UnavailableError(
          fmt::format("getSignaturesForAddress failed: {}", body.substr(0, 300)));
    }
    return malformed("no 'result' array");
  }
  std::vector<AddressSignature> out;
  for (auto element : result) {
    simdjson::ondemand::object entry;
    if (element.get_object().get(entry) != simdjson::SUCCESS) return malformed("entry not object");
    AddressSignature signature;
    auto text = ReadKey<Signature>(entry, "signature");
    if (!text.ok()) return text.status();
    signature.signature = *text;
    if (entry.find_field_unordered("slot").get_uint64().get(signature.slot) != simdjson::SUCCESS) {
      return malformed("'slot' is not an unsigned integer");
    }
    simdjson::ondemand::value err;
    if (entry.find_field_unordered("err").get(err) != simdjson::SUCCESS) {
      return malformed("entry without 'err'");
    }
    signature.failed = !err.is_null();
    out.push_back(signature);
  }
  return out;
}

std::vector<Signature> DelegateCandidates(const std::vector<AddressSignature>& signatures,
                                          Slot delegation_slot) {
  std::vector<Signature> out;
  for (const AddressSignature& s : signatures) {
    if (s.slot == delegation_slot && !s.failed) out.push_back(s.signature);
  }
  return out;
}

DelegatedEvent DelegatedEventOf(const Pubkey& account, const DelegationRecord& record,
                                std::optional<Signature> signature, EventSource source) {
  DelegatedEvent event;
  event.account = account;
  event.validator = record.authority;
  event.owner_program = record.owner;
  event.slot = record.delegation_slot;
  event.lamports = record.lamports;
  event.commit_frequency_ms = record.commit_frequency_ms;
  event.signature = signature;
  event.source = source;
  return event;
}

std::vector<Event> Reconcile(const std::map<Pubkey, AccountState>& state,
                             const std::vector<DelegatedEvent>& chain, Slot slot,
                             EventSource source) {
  std::map<Pubkey, const DelegatedEvent*> on_chain;
  for (const DelegatedEvent& d : chain) on_chain.emplace(d.account, &d);
  std::vector<Event> out;
  auto state_it = state.begin();
  auto chain_it = on_chain.begin();
  while (state_it != state.end() || chain_it != on_chain.end()) {
    const bool take_state = chain_it == on_chain.end() ||
                            (state_it != state.end() && state_it->first < chain_it->first);
    const bool take_chain = state_it == state.end() ||
                            (chain_it != on_chain.end() && chain_it->first < state_it->first);
    if (take_state) {
      if (state_it->second.delegated) {
        out.emplace_back(UndelegatedEvent{state_it->first, slot, std::nullopt, source});
      }
      ++state_it;
    } else if (take_chain) {
      DelegatedEvent d = *chain_it->second;
      d.source = source;
      out.emplace_back(d);
      ++chain_it;
    } else {
      const AccountState& known = state_it->second;
      const DelegatedEvent& d = *chain_it->second;
      const bool same = known.delegated && known.validator == d.validator &&
                        known.owner_program == d.owner_program && known.delegation_slot == d.slot &&
                        known.lamports == d.lamports &&
                        known.commit_frequency_ms == d.commit_frequency_ms;
      if (!same) {
        DelegatedEvent corrected = d;
        corrected.source = source;
        out.emplace_back(corrected);
      }
      ++state_it;
      ++chain_it;
    }
  }
  return out;
}

}  // namespace switchyard
