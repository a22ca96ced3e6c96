#include "localnet/rpc_service.h"

#include <sodium.h>

#include <algorithm>
#include <iterator>
#include <optional>
#include <utility>

#include "common/endian.h"
#include "fmt/format.h"
#include "localnet/json_writer.h"
#include "localnet/rpc_json.h"
#include "localnet/wire.h"
#include "simdjson.h"
#include "solana/base64.h"
#include "solana/delegation.h"

namespace switchyard::localnet {
namespace {

using simdjson::dom::array;
using simdjson::dom::element;

constexpr std::string_view kVersionJson = "{\"feature-set\":3294202862,\"solana-core\":\"2.1.21\"}";
constexpr int kInvalidParams = -32602;
constexpr std::string_view kBlockhashNotFound = "\"BlockhashNotFound\"";

// One request being answered: its id (raw JSON) and the output buffer.
struct Call {
  std::string id = "null";
  std::string* out = nullptr;

  void Result(std::string_view result) const {
    out->append("{\"jsonrpc\":\"2.0\",\"result\":");
    out->append(result);
    out->append(",\"id\":");
    out->append(id);
    out->push_back('}');
  }
  void Error(int code, std::string_view message, std::string_view data = {}) const {
    AppendErrorResponse(out, id, code, message, data);
  }
  void InvalidParams(std::string_view message) const { Error(kInvalidParams, message); }
};

void AppendContextPrefix(std::string* out, Slot slot) {
  fmt::format_to(std::back_inserter(*out),
                 "{{\"context\":{{\"apiVersion\":\"2.1.21\",\"slot\":{}}},\"value\":", slot);
}

std::string ContextPrefix(Slot slot) {
  return fmt::format("{{\"context\":{{\"apiVersion\":\"2.1.21\",\"slot\":{}}},\"value\":", slot);
}

Pubkey DeriveKey(std::string_view label, std::string_view extra) {
  Pubkey out;
  crypto_hash_sha256_state state;
  crypto_hash_sha256_init(&state);
  crypto_hash_sha256_update(&state, AsBytes(label.data()), label.size());
  crypto_hash_sha256_update(&state, AsBytes(extra.data()), extra.size());
  crypto_hash_sha256_final(&state, out.data());
  return out;
}

// Fails the call with -32016 when the client's minContextSlot is ahead of `slot`.
bool MinContextSlotMet(const Call& call, const ConfigView& config, Slot slot) {
  auto min = config.U64("minContextSlot");
  if (min.has_value() && *min > slot) {
    call.Error(-32016, "Minimum context slot has not been reached",
               fmt::format("{{\"contextSlot\":{}}}", slot));
    return false;
  }
  return true;
}

bool ParseSignature(std::string_view text, Signature* out) {
  auto sig = Signature::FromBase58(text);
  if (!sig.ok()) return false;
  *out = *sig;
  return true;
}

bool VerifySignatures(const TxMessage& tx) {
  if (tx.signatures.size() > tx.static_keys.size()) return false;
  for (size_t i = 0; i < tx.signatures.size(); ++i) {
    if (crypto_sign_verify_detached(tx.signatures[i].data(), AsBytes(tx.message_bytes.data()),
                                    tx.message_bytes.size(), tx.static_keys[i].data()) != 0) {
      return false;
    }
  }
  return true;
}

// The value of simulateTransaction, and the data of a failed preflight. `replacement` is the
// replacementBlockhash JSON (null unless the blockhash was replaced).
std::string SimulationValue(const SimulationResult& sim, std::string_view replacement = "null") {
  std::string out;
  fmt::format_to(std::back_inserter(out),
                 "{{\"accounts\":null,\"err\":{},\"innerInstructions\":null,\"logs\":[",
                 sim.err_json);
  for (size_t i = 0; i < sim.logs.size(); ++i) {
    if (i > 0) out.push_back(',');
    AppendJsonString(&out, sim.logs[i]);
  }
  fmt::format_to(std::back_inserter(out),
                 "],\"replacementBlockhash\":{},\"returnData\":null,\"unitsConsumed\":{}}}",
                 replacement, sim.units_consumed);
  return out;
}

void AppendStatus(std::string* out, const SignatureStatus& status) {
  fmt::format_to(std::back_inserter(*out),
                 "{{\"confirmationStatus\":\"finalized\",\"confirmations\":null,\"err\":{},"
                 "\"slot\":{},\"status\":",
                 status.err_json, status.slot);
  if (status.err_json == "null") {
    out->append("{\"Ok\":null}}");
  } else {
    fmt::format_to(std::back_inserter(*out), "{{\"Err\":{}}}}}", status.err_json);
  }
}

}  // namespace

Pubkey FaucetPubkey() { return DeriveKey("switchyard-localnet-faucet", ""); }

RpcService::RpcService(const LocalnetOptions& options, Bank* bank, AccountSource* source,
                       const Clock* clock, const RuntimeFaults* faults)
    : options_(options), bank_(bank), source_(source), clock_(clock), faults_(faults) {
  identity_ = options.er_mode ? options.identity
                              : DeriveKey("switchyard-localnet-identity", options.bind_address);
  faucet_ = FaucetPubkey();
}

namespace {

// The methods; each answers one call.
class Methods {
 public:
  Methods(const LocalnetOptions& options, Bank* bank, const Pubkey& identity, const Pubkey& faucet,
          std::atomic<uint64_t>* airdrop_counter, const RuntimeFaults* faults)
      : options_(options),
        slot_lag_(faults->slot_lag()),
        lie_lamports_(faults->lie_lamports()),
        bank_(bank),
        identity_(identity),
        faucet_(faucet),
        airdrop_counter_(airdrop_counter) {}

  // The slot (or block height) as the answers report it: behind by the slot-lag fault.
  Slot Lagged(Slot slot) const { return slot > slot_lag_ ? slot - slot_lag_ : 0; }

  // The account as the answers report it: with the lamports lie added, in `scratch`.
  const Account& Told(const Account& account, Account* scratch) const {
    if (lie_lamports_ == 0) return account;
    *scratch = account;
    scratch->lamports += lie_lamports_;
    return *scratch;
  }

  void Dispatch(const Call& call, std::string_view method, array params) {
    if (method == "getAccountInfo") return GetAccountInfo(call, params);
    if (method == "getBalance") return GetBalance(call, params);
    if (method == "getMultipleAccounts") return GetMultipleAccounts(call, params);
    if (method == "getSlot") return call.Result(std::to_string(Lagged(bank_->slot())));
    if (method == "getBlockHeight") {
      return call.Result(std::to_string(Lagged(bank_->block_height())));
    }
    if (method == "isBlockhashValid") return IsBlockhashValid(call, params);
    if (method == "getLatestBlockhash") return GetLatestBlockhash(call, params);
    if (method == "getHealth") return call.Result("\"ok\"");
    if (method == "getVersion") return call.Result(kVersionJson);
    if (method == "getIdentity") {
      return call.Result(fmt::format("{{\"identity\":\"{}\"}}", identity_.ToBase58()));
    }
    if (method == "getGenesisHash") {
      return call.Result(fmt::format("\"{}\"", bank_->genesis_hash().ToBase58()));
    }
    if (method == "getTokenAccountBalance") return GetTokenAccountBalance(call, params);
    if (method == "getProgramAccounts") return GetProgramAccounts(call, params);
    if (method == "requestAirdrop") return RequestAirdrop(call, params);
    if (method == "sendTransaction") return SendTransaction(call, params);
    if (method == "simulateTransaction") return SimulateTransaction(call, params);
    if (method == "getSignatureStatuses") return GetSignatureStatuses(call, params);
    if (method == "getTransaction") return GetTransaction(call, params);
    if (method == "getBlock") return GetBlock(call, params);
    if (method == "getSignaturesForAddress") return GetSignaturesForAddress(call, params);
    if (method == "getMinimumBalanceForRentExemption") {
      uint64_t size = 0;
      auto p = ParamAt(params, 0);
      if (!p.has_value() || p->get_uint64().get(size) != simdjson::SUCCESS) {
        return call.InvalidParams("Invalid params: expected a data length");
      }
      return call.Result(std::to_string((128 + size) * 6960));
    }
    if (method == "getEpochInfo") {
      const Slot slot = Lagged(bank_->slot());
      return call.Result(
          fmt::format("{{\"absoluteSlot\":{},\"blockHeight\":{},\"epoch\":{},\"slotIndex\":{},"
                      "\"slotsInEpoch\":432000,\"transactionCount\":null}}",
                      slot, Lagged(bank_->block_height()), slot / 432000, slot % 432000));
    }
    call.Error(-32601, "Method not found");
  }

 private:
  void GetAccountInfo(const Call& call, array params) {
    auto key = PubkeyParam(params, 0);
    if (!key.has_value()) return call.InvalidParams("Invalid param: Invalid");
    ConfigView config(params, 1);
    auto cfg = ReadAccountConfig(config);
    if (!cfg.ok()) return call.InvalidParams(std::string(cfg.status().message()));
    Slot slot = 0;
    AccountRef account = bank_->GetAccounts({&*key, 1}, &slot)[0];
    slot = Lagged(slot);
    if (!MinContextSlotMet(call, config, slot)) return;
    // The hot path of the benchmarks: written in place, without intermediate strings.
    const size_t start = call.out->size();
    call.out->append("{\"jsonrpc\":\"2.0\",\"result\":");
    AppendContextPrefix(call.out, slot);
    if (account == nullptr) {
      call.out->append("null");
    } else {
      Account scratch;
      absl::Status st =
          AppendAccountJson(call.out, Told(*account, &scratch), cfg->encoding, cfg->slice);
      if (!st.ok()) {
        call.out->resize(start);
        return call.InvalidParams(std::string(st.message()));
      }
    }
    call.out->append("},\"id\":");
    call.out->append(call.id);
    call.out->push_back('}');
  }

  void GetBalance(const Call& call, array params) {
    auto key = PubkeyParam(params, 0);
    if (!key.has_value()) return call.InvalidParams("Invalid param: Invalid");
    ConfigView config(params, 1);
    Slot slot = 0;
    AccountRef account = bank_->GetAccounts({&*key, 1}, &slot)[0];
    slot = Lagged(slot);
    if (!MinContextSlotMet(call, config, slot)) return;
    call.Result(fmt::format("{}{}}}", ContextPrefix(slot),
                            account ? account->lamports + lie_lamports_ : 0));
  }

  void GetMultipleAccounts(const Call& call, array params) {
    auto first = ParamAt(params, 0);
    array list;
    if (!first.has_value() || first->get_array().get(list) != simdjson::SUCCESS) {
      return call.InvalidParams("Invalid params: expected an array of pubkeys");
    }
    if (list.size() > 100) return call.InvalidParams("Too many inputs provided; max 100");
    std::vector<Pubkey> keys;
    for (element e : list) {
      auto text = StringOf(e);
      auto key =
          text ? Pubkey::FromBase58(*text) : absl::StatusOr<Pubkey>(absl::InvalidArgumentError(""));
      if (!key.ok()) return call.InvalidParams("Invalid param: Invalid");
      keys.push_back(*key);
    }
    ConfigView config(params, 1);
    auto cfg = ReadAccountConfig(config);
    if (!cfg.ok()) return call.InvalidParams(std::string(cfg.status().message()));
    Slot slot = 0;
    std::vector<AccountRef> accounts = bank_->GetAccounts(keys, &slot);
    slot = Lagged(slot);
    if (!MinContextSlotMet(call, config, slot)) return;
    std::string value = ContextPrefix(slot);
    value.push_back('[');
    for (size_t i = 0; i < accounts.size(); ++i) {
      if (i > 0) value.push_back(',');
      if (accounts[i] == nullptr) {
        value.append("null");
      } else {
        Account scratch;
        absl::Status st =
            AppendAccountJson(&value, Told(*accounts[i], &scratch), cfg->encoding, cfg->slice);
        if (!st.ok()) return call.InvalidParams(std::string(st.message()));
      }
    }
    value.append("]}");
    call.Result(value);
  }

  void GetLatestBlockhash(const Call& call, array params) {
    ConfigView config(params, 0);
    BlockhashInfo info = bank_->LatestBlockhash();
    info.slot = Lagged(info.slot);
    if (!MinContextSlotMet(call, config, info.slot)) return;
    call.Result(fmt::format("{}{{\"blockhash\":\"{}\",\"lastValidBlockHeight\":{}}}}}",
                            ContextPrefix(info.slot), info.blockhash.ToBase58(),
                            info.last_valid_block_height));
  }

  void IsBlockhashValid(const Call& call, array params) {
    auto text_el = ParamAt(params, 0);
    auto text = text_el ? StringOf(*text_el) : std::nullopt;
    auto blockhash =
        text ? Hash::FromBase58(*text) : absl::StatusOr<Hash>(absl::InvalidArgumentError(""));
    if (!blockhash.ok()) return call.InvalidParams("Invalid param: Invalid");
    ConfigView config(params, 1);
    const Slot slot = Lagged(bank_->slot());
    if (!MinContextSlotMet(call, config, slot)) return;
    call.Result(fmt::format("{}{}}}", ContextPrefix(slot),
                            bank_->IsBlockhashValid(*blockhash) ? "true" : "false"));
  }

  void GetTokenAccountBalance(const Call& call, array params) {
    auto key = PubkeyParam(params, 0);
    if (!key.has_value()) return call.InvalidParams("Invalid param: Invalid");
    Slot slot = 0;
    AccountRef account = bank_->GetAccounts({&*key, 1}, &slot)[0];
    slot = Lagged(slot);
    if (account == nullptr ||
        (account->owner != TokenProgramId() && account->owner != Token2022ProgramId()) ||
        account->data.size() < 165) {
      return call.InvalidParams("Invalid param: not a Token account");
    }
    const Pubkey mint = Pubkey::FromBytes(AsBytes(account->data.data()));
    const uint64_t amount = LoadU64LE(AsBytes(account->data.data() + 64));
    uint8_t decimals = 0;
    if (AccountRef mint_account = bank_->GetAccount(mint);
        mint_account != nullptr && mint_account->data.size() >= 82) {
      decimals = static_cast<uint8_t>(mint_account->data[44]);
    } else {
      return call.InvalidParams("Invalid param: could not find mint");
    }
    std::string digits = std::to_string(amount);
    if (digits.size() <= decimals) {
      digits = std::string(decimals + 1 - digits.size(), '0') + digits;
    }
    std::string ui = digits.substr(0, digits.size() - decimals);
    std::string fraction = digits.substr(digits.size() - decimals);
    while (!fraction.empty() && fraction.back() == '0') fraction.pop_back();
    if (!fraction.empty()) ui = fmt::format("{}.{}", ui, fraction);
    double ui_amount = static_cast<double>(amount);
    for (int i = 0; i < decimals; ++i) ui_amount /= 10;
    call.Result(fmt::format(
        "{}{{\"amount\":\"{}\",\"decimals\":{},\"uiAmount\":{},\"uiAmountString\":\"{}\"}}}}",
        ContextPrefix(slot), amount, decimals, ui_amount, ui));
  }

  void GetProgramAccounts(const Call& call, array params) {
    auto program = PubkeyParam(params, 0);
    if (!program.has_value()) return call.InvalidParams("Invalid param: Invalid");
    ConfigView config(params, 1);
    auto cfg = ReadAccountConfig(config);
    if (!cfg.ok()) return call.InvalidParams(std::string(cfg.status().message()));
    auto filter = ReadFilters(config);
    if (!filter.ok()) return call.InvalidParams(std::string(filter.status().message()));
    Slot slot = 0;
    auto accounts = bank_->ProgramAccounts(
        *program, [&](const Account& a) { return filter->Matches(a); }, &slot);
    slot = Lagged(slot);
    if (!MinContextSlotMet(call, config, slot)) return;
    const bool with_context = config.Bool("withContext").value_or(false);
    std::string value = with_context ? ContextPrefix(slot) : std::string();
    value.push_back('[');
    for (size_t i = 0; i < accounts.size(); ++i) {
      if (i > 0) value.push_back(',');
      value.append("{\"account\":");
      Account scratch;
      absl::Status st =
          AppendAccountJson(&value, Told(*accounts[i].second, &scratch), cfg->encoding, cfg->slice);
      if (!st.ok()) return call.InvalidParams(std::string(st.message()));
      fmt::format_to(std::back_inserter(value), ",\"pubkey\":\"{}\"}}",
                     accounts[i].first.ToBase58());
    }
    value.push_back(']');
    if (with_context) value.push_back('}');
    call.Result(value);
  }

  void RequestAirdrop(const Call& call, array params) {
    auto key = PubkeyParam(params, 0);
    uint64_t lamports = 0;
    auto amount = ParamAt(params, 1);
    if (!key.has_value() || !amount.has_value() ||
        amount->get_uint64().get(lamports) != simdjson::SUCCESS) {
      return call.InvalidParams("Invalid params: expected [pubkey, lamports]");
    }
    TxMessage tx;
    tx.internal = true;
    const uint64_t n = airdrop_counter_->fetch_add(1);
    std::string seed = fmt::format("airdrop-{}-{}-{}", n, key->ToBase58(), lamports);
    Signature sig;
    crypto_hash_sha512(sig.data(), AsBytes(seed.data()), seed.size());
    tx.signatures = {sig};
    tx.num_required_signatures = 1;
    tx.num_readonly_unsigned = 1;
    tx.static_keys = {faucet_, *key, SystemProgramId()};
    tx.signer = {true, false, false};
    tx.writable = {true, true, false};
    tx.recent_blockhash = bank_->LatestBlockhash().blockhash;
    TxInstruction ix;
    ix.program_index = 2;
    ix.accounts = {0, 1};
    AppendU32LE(&ix.data, 2);
    AppendU64LE(&ix.data, lamports);
    tx.instructions.push_back(std::move(ix));
    SerializeLegacy(&tx);
    absl::Status st = bank_->Submit(std::move(tx));
    if (!st.ok()) return call.Error(-32603, std::string(st.message()));
    call.Result(fmt::format("\"{}\"", sig.ToBase58()));
  }

  // Decodes params[0] with the config's encoding (default base58).
  std::optional<TxMessage> DecodeTxParam(const Call& call, array params, const ConfigView& config) {
    auto text_el = ParamAt(params, 0);
    auto text = text_el ? StringOf(*text_el) : std::nullopt;
    if (!text.has_value()) {
      call.InvalidParams("Invalid params: expected an encoded transaction");
      return std::nullopt;
    }
    const std::string_view encoding = config.String("encoding").value_or("base58");
    if (encoding != "base58" && encoding != "base64") {
      call.InvalidParams(fmt::format(
          "Invalid params: unsupported encoding: {}. Supported encodings: base58, base64",
          encoding));
      return std::nullopt;
    }
    auto tx = DecodeTransactionPayload(*text, encoding == "base64",
                                       [this](const Pubkey& table) { return LookupTable(table); });
    if (!tx.ok()) {
      call.InvalidParams(
          fmt::format("invalid transaction: {}", std::string(tx.status().message())));
      return std::nullopt;
    }
    return *std::move(tx);
  }

  std::optional<std::vector<Pubkey>> LookupTable(const Pubkey& table) const {
    AccountRef account = bank_->GetAccount(table);
    constexpr size_t kMetaSize = 56;
    if (account == nullptr || account->data.size() < kMetaSize) return std::nullopt;
    std::vector<Pubkey> out;
    for (size_t off = kMetaSize; off + 32 <= account->data.size(); off += 32) {
      out.push_back(Pubkey::FromBytes(AsBytes(account->data.data() + off)));
    }
    return out;
  }

  void SendTransaction(const Call& call, array params) {
    ConfigView config(params, 1);
    auto tx = DecodeTxParam(call, params, config);
    if (!tx.has_value()) return;
    if (!MinContextSlotMet(call, config, Lagged(bank_->slot()))) return;
    if (options_.verify_signatures && !VerifySignatures(*tx)) {
      return call.Error(-32003, "Transaction signature verification failure");
    }
    const Signature id = tx->signatures[0];
    if (bank_->GetSignatureStatus(id).has_value()) {
      return call.Error(
          -32002, "Transaction simulation failed: This transaction has already been processed",
          "{\"accounts\":null,\"err\":\"AlreadyProcessed\",\"logs\":[],"
          "\"returnData\":null,\"unitsConsumed\":0}");
    }
    // With preflight, any failure is refused. Without, account-loading failures are still
    // refused (a simplification: the validator would accept and drop them), but a transaction
    // whose blockhash is unknown or expired is accepted and then dropped by the bank, never
    // confirmed, as on a validator.
    const bool skip_preflight = config.Bool("skipPreflight").value_or(false);
    SimulationResult sim = bank_->Simulate(*tx);
    const bool load_error = sim.err_json.find("InstructionError") == std::string::npos &&
                            sim.err_json != kBlockhashNotFound;
    if (sim.err_json != "null" && (!skip_preflight || load_error)) {
      std::string data = SimulationValue(sim);
      return call.Error(-32002, fmt::format("Transaction simulation failed: {}", sim.err_display),
                        data);
    }
    absl::Status st = bank_->Submit(*std::move(tx));
    if (!st.ok()) {
      if (st.code() == absl::StatusCode::kAlreadyExists) {
        return call.Result(fmt::format("\"{}\"", id.ToBase58()));
      }
      return call.Error(-32005, std::string(st.message()));
    }
    call.Result(fmt::format("\"{}\"", id.ToBase58()));
  }

  void SimulateTransaction(const Call& call, array params) {
    ConfigView config(params, 1);
    auto tx = DecodeTxParam(call, params, config);
    if (!tx.has_value()) return;
    const bool sig_verify = config.Bool("sigVerify").value_or(false);
    const bool replace = config.Bool("replaceRecentBlockhash").value_or(false);
    if (sig_verify && replace) {
      return call.InvalidParams("sigVerify may not be used with replaceRecentBlockhash");
    }
    if (sig_verify && !VerifySignatures(*tx)) {
      return call.Error(-32003, "Transaction signature verification failure");
    }
    std::string replacement = "null";
    if (replace) {
      const BlockhashInfo latest = bank_->LatestBlockhash();
      tx->recent_blockhash = latest.blockhash;
      replacement = fmt::format("{{\"blockhash\":\"{}\",\"lastValidBlockHeight\":{}}}",
                                latest.blockhash.ToBase58(), latest.last_valid_block_height);
    }
    SimulationResult sim = bank_->Simulate(*tx);
    call.Result(fmt::format("{}{}}}", ContextPrefix(Lagged(bank_->slot())),
                            SimulationValue(sim, replacement)));
  }

  void GetSignatureStatuses(const Call& call, array params) {
    auto first = ParamAt(params, 0);
    array list;
    if (!first.has_value() || first->get_array().get(list) != simdjson::SUCCESS) {
      return call.InvalidParams("Invalid params: expected an array of signatures");
    }
    if (list.size() > 256) return call.InvalidParams("Too many inputs provided; max 256");
    std::string value = ContextPrefix(Lagged(bank_->slot()));
    value.push_back('[');
    bool first_item = true;
    for (element e : list) {
      if (!first_item) value.push_back(',');
      first_item = false;
      auto text = StringOf(e);
      Signature sig;
      if (!text.has_value() || !ParseSignature(*text, &sig)) {
        return call.InvalidParams("Invalid param: Invalid");
      }
      auto status = bank_->GetSignatureStatus(sig);
      if (status.has_value()) {
        AppendStatus(&value, *status);
      } else {
        value.append("null");
      }
    }
    value.append("]}");
    call.Result(value);
  }

  // The transaction encoding of getTransaction and getBlock: json (the default) or base64,
  // from the config or, in the deprecated form, the second parameter as a bare string. Answers
  // the call with an error and returns nullopt for any other.
  static std::optional<std::string_view> TransactionEncodingOf(const Call& call, array params,
                                                               ConfigView& config) {
    std::string_view encoding = "json";
    if (auto second = ParamAt(params, 1); second.has_value() && StringOf(*second)) {
      encoding = *StringOf(*second);
    } else if (auto enc = config.String("encoding")) {
      encoding = *enc;
    }
    if (encoding != "json" && encoding != "base64") {
      call.InvalidParams(fmt::format(
          "Invalid params: unsupported encoding: {}. Supported encodings: json, base64", encoding));
      return std::nullopt;
    }
    return encoding;
  }

  void GetTransaction(const Call& call, array params) {
    auto text_el = ParamAt(params, 0);
    auto text = text_el ? StringOf(*text_el) : std::nullopt;
    Signature sig;
    if (!text.has_value() || !ParseSignature(*text, &sig)) {
      return call.InvalidParams("Invalid param: Invalid");
    }
    ConfigView config(params, 1);
    std::optional<std::string_view> encoding = TransactionEncodingOf(call, params, config);
    if (!encoding) return;
    auto max_version = config.U64("maxSupportedTransactionVersion");
    TxRecordRef record = bank_->GetTransaction(sig);
    if (record == nullptr) return call.Result("null");
    if (record->message.version >= 0 && !max_version.has_value()) {
      return call.Error(-32015,
                        "Transaction version (0) is not supported by the requesting client. "
                        "Please try the request again with the following configuration "
                        "parameter: \"maxSupportedTransactionVersion\": 0");
    }
    if (*encoding == "base64" && record->message.wire.empty()) {
      return call.InvalidParams("Invalid params: this transaction has no wire form");
    }
    std::string value;
    AppendTransactionJson(&value, *record, max_version.has_value(), *encoding == "base64");
    call.Result(value);
  }

  void GetBlock(const Call& call, array params) {
    uint64_t slot = 0;
    auto slot_el = ParamAt(params, 0);
    if (!slot_el.has_value() || slot_el->get_uint64().get(slot) != simdjson::SUCCESS) {
      return call.InvalidParams("Invalid params: expected a slot");
    }
    ConfigView config(params, 1);
    std::optional<std::string_view> encoding = TransactionEncodingOf(call, params, config);
    if (!encoding) return;
    BlockView view;
    view.base64 = *encoding == "base64";
    view.rewards = config.Bool("rewards").value_or(true);
    const std::string_view details = config.String("transactionDetails").value_or("full");
    if (details == "signatures") {
      view.details = BlockDetails::kSignatures;
    } else if (details == "none") {
      view.details = BlockDetails::kNone;
    } else if (details != "full") {
      return call.InvalidParams(fmt::format(
          "Invalid params: unsupported transactionDetails: {}. Supported: full, signatures, none",
          details));
    }
    auto max_version = config.U64("maxSupportedTransactionVersion");
    view.with_version = max_version.has_value();
    auto block = bank_->GetBlock(slot);
    if (block == nullptr) {
      if (slot <= bank_->slot()) {
        return call.Error(-32001, fmt::format("Block cleaned up, does not exist on node. First "
                                              "available block: {}",
                                              bank_->first_available_block()));
      }
      return call.Error(-32004, fmt::format("Block not available for slot {}", slot));
    }
    if (view.details == BlockDetails::kFull && !max_version.has_value()) {
      for (const TxRecordRef& tx : block->transactions) {
        if (tx->message.version < 0) continue;
        return call.Error(-32015,
                          "Transaction version (0) is not supported by the requesting client. "
                          "Please try the request again with the following configuration "
                          "parameter: \"maxSupportedTransactionVersion\": 0");
      }
    }
    if (view.base64 && view.details == BlockDetails::kFull) {
      for (const TxRecordRef& tx : block->transactions) {
        if (tx->message.wire.empty()) {
          return call.InvalidParams("Invalid params: a transaction of this block has no wire form");
        }
      }
    }
    std::string value;
    AppendBlockJson(&value, *block, view);
    call.Result(value);
  }

  void GetSignaturesForAddress(const Call& call, array params) {
    auto key = PubkeyParam(params, 0);
    if (!key.has_value()) return call.InvalidParams("Invalid param: Invalid");
    ConfigView config(params, 1);
    uint64_t limit = config.U64("limit").value_or(1000);
    if (limit == 0 || limit > 1000) return call.InvalidParams("Invalid limit; max 1000");
    std::optional<Signature> before;
    std::optional<Signature> until;
    Signature sig;
    if (auto b = config.String("before")) {
      if (!ParseSignature(*b, &sig)) return call.InvalidParams("Invalid param: Invalid");
      before = sig;
    }
    if (auto u = config.String("until")) {
      if (!ParseSignature(*u, &sig)) return call.InvalidParams("Invalid param: Invalid");
      until = sig;
    }
    auto records = bank_->SignaturesForAddress(*key, limit, before, until);
    std::string value = "[";
    for (size_t i = 0; i < records.size(); ++i) {
      if (i > 0) value.push_back(',');
      fmt::format_to(std::back_inserter(value),
                     "{{\"blockTime\":{},\"confirmationStatus\":\"finalized\",\"err\":{},"
                     "\"memo\":null,\"signature\":\"{}\",\"slot\":{}}}",
                     records[i]->block_time, records[i]->err_json, records[i]->id.ToBase58(),
                     records[i]->slot);
    }
    value.push_back(']');
    call.Result(value);
  }

  const LocalnetOptions& options_;
  // The faults in force when this body arrived.
  const uint64_t slot_lag_;
  const uint64_t lie_lamports_;
  Bank* const bank_;
  const Pubkey& identity_;
  const Pubkey& faucet_;
  std::atomic<uint64_t>* airdrop_counter_;
};

// Calls `fn(method, params)` for each request of a parsed body.
void HandleRequest(element request, Methods* methods, std::string* out) {
  Call call;
  call.out = out;
  simdjson::dom::object object;
  if (request.get_object().get(object) != simdjson::SUCCESS) {
    return call.Error(-32600, "Invalid request");
  }
  element id;
  if (object.at_key("id").get(id) == simdjson::SUCCESS) call.id = simdjson::minify(id);
  std::string_view method;
  if (object.at_key("method").get_string().get(method) != simdjson::SUCCESS) {
    return call.Error(-32600, "Invalid request");
  }
  array params;
  element params_el;
  if (object.at_key("params").get(params_el) == simdjson::SUCCESS && !params_el.is_null()) {
    if (params_el.get_array().get(params) != simdjson::SUCCESS) {
      return call.InvalidParams("Invalid params: params must be an array");
    }
  } else {
    params = EmptyArray();
  }
  methods->Dispatch(call, method, params);
}

}  // namespace

std::string RpcService::HandleNow(std::string_view body) {
  std::string out;
  out.reserve(512);
  element doc;
  if (ParsePadded(body, &doc) != simdjson::SUCCESS) {
    AppendErrorResponse(&out, "null", -32700, "Parse error");
    return out;
  }
  Methods methods(options_, bank_, identity_, faucet_, &airdrop_counter_, faults_);
  array batch;
  if (doc.get_array().get(batch) == simdjson::SUCCESS) {
    if (batch.size() == 0) {
      AppendErrorResponse(&out, "null", -32600, "Invalid request");
      return out;
    }
    out.push_back('[');
    bool first = true;
    for (element request : batch) {
      if (!first) out.push_back(',');
      first = false;
      HandleRequest(request, &methods, &out);
    }
    out.push_back(']');
    return out;
  }
  HandleRequest(doc, &methods, &out);
  return out;
}

std::vector<Pubkey> RpcService::KeysToClone(std::string_view body) const {
  std::vector<Pubkey> keys;
  element doc;
  if (ThreadParser().parse(body.data(), body.size()).get(doc) != simdjson::SUCCESS) return keys;
  auto collect = [&](element request) {
    std::string_view method;
    array params;
    if (request["method"].get_string().get(method) != simdjson::SUCCESS ||
        request["params"].get_array().get(params) != simdjson::SUCCESS) {
      return;
    }
    if (method == "getAccountInfo" || method == "getBalance" ||
        method == "getTokenAccountBalance") {
      if (auto key = PubkeyParam(params, 0)) keys.push_back(*key);
    } else if (method == "getMultipleAccounts") {
      array list;
      auto first = ParamAt(params, 0);
      if (!first || first->get_array().get(list) != simdjson::SUCCESS) return;
      for (element e : list) {
        auto text = StringOf(e);
        if (!text) continue;
        if (auto key = Pubkey::FromBase58(*text); key.ok()) keys.push_back(*key);
      }
    } else if (method == "sendTransaction" || method == "simulateTransaction") {
      ConfigView config(params, 1);
      auto text_el = ParamAt(params, 0);
      auto text = text_el ? StringOf(*text_el) : std::nullopt;
      if (!text) return;
      const bool base64 = config.String("encoding").value_or("base58") == "base64";
      auto tx = DecodeTransactionPayload(
          *text, base64, [](const Pubkey&) { return std::optional<std::vector<Pubkey>>(); });
      if (!tx.ok()) return;
      for (size_t i = 0; i < tx->key_count(); ++i) keys.push_back(tx->key(i));
    }
  };
  array batch;
  if (doc.get_array().get(batch) == simdjson::SUCCESS) {
    for (element request : batch) collect(request);
  } else {
    collect(doc);
  }
  std::vector<Pubkey> missing;
  for (const Pubkey& key : keys) {
    // Builtin programs have no account on the base to clone.
    if (key == SystemProgramId() || key == ComputeBudgetProgramId() || key == MemoProgramId() ||
        key == DelegationProgramId()) {
      continue;
    }
    if (!bank_->HasAccount(key) && !bank_->IsDelegated(key)) missing.push_back(key);
  }
  std::sort(missing.begin(), missing.end());
  missing.erase(std::unique(missing.begin(), missing.end()), missing.end());
  return missing;
}

void RpcService::Handle(std::string_view body, Reply reply) {
  if (source_ == nullptr) {
    reply(HandleNow(body));
    return;
  }
  std::vector<Pubkey> missing = KeysToClone(body);
  if (missing.empty()) {
    reply(HandleNow(body));
    return;
  }
  source_->Ensure(std::move(missing), [this, text = std::string(body), reply = std::move(reply)]() {
    reply(HandleNow(text));
  });
}

}  // namespace switchyard::localnet
