#include "localnet/scenario.h"

#include <sodium.h>

#include <algorithm>
#include <cmath>

#include "common/endian.h"
#include "fmt/format.h"
#include "localnet/wire.h"
#include "solana/delegation.h"

namespace switchyard::localnet {
namespace {

Pubkey Derive(uint64_t seed, std::string_view label, uint64_t index) {
  const std::string text = fmt::format("switchyard-scenario/{}/{}/{}", seed, label, index);
  Pubkey out;
  crypto_hash_sha256(out.data(), AsBytes(text.data()), text.size());
  return out;
}

constexpr uint64_t kFunding = 1'000'000'000'000'000;  // 1M SOL

}  // namespace

ScenarioDriver::ScenarioDriver(ScenarioOptions options, Bank* bank)
    : options_(std::move(options)), bank_(bank), rng_(options_.seed) {}

absl::Status ScenarioDriver::Start() {
  payer_ = Derive(options_.seed, "payer", 0);
  owner_program_ = Derive(options_.seed, "owner-program", 0);
  identities_ = options_.identities;
  if (identities_.empty()) {
    for (uint32_t i = 0; i < std::max<uint32_t>(1, options_.identity_count); ++i) {
      identities_.push_back(Derive(options_.seed, "identity", i));
    }
  }
  bank_->SetAccount(payer_, Account{kFunding, SystemProgramId(), "", false});
  for (const Pubkey& id : identities_) {
    bank_->SetAccountIfAbsent(id, Account{kFunding, SystemProgramId(), "", false});
  }
  for (uint32_t i = 0; i < options_.accounts; ++i) {
    const Pubkey key = Derive(options_.seed, "account", i);
    accounts_.push_back(key);
    std::string data(16, '\0');
    std::memcpy(data.data(), key.data(), 16);
    bank_->SetAccount(key, Account{1'000'000, owner_program_, std::move(data), false});
  }
  if (!options_.ground_truth_path.empty()) {
    ground_truth_.open(options_.ground_truth_path, std::ios::out | std::ios::trunc);
    if (!ground_truth_) {
      return absl::InvalidArgumentError(
          fmt::format("cannot write --ground-truth file {}", options_.ground_truth_path));
    }
  }
  return absl::OkStatus();
}

void ScenarioDriver::Stop() {
  if (ground_truth_.is_open()) ground_truth_.close();
}

int ScenarioDriver::Draw(double rate) {
  if (rate <= 0) return 0;
  const double whole = std::floor(rate);
  const double frac = rate - whole;
  int n = static_cast<int>(whole);
  if (frac > 0 && std::uniform_real_distribution<double>(0, 1)(rng_) < frac) ++n;
  return n;
}

Signature ScenarioDriver::NextSignature() {
  const std::string text = fmt::format("switchyard-scenario-sig/{}/{}", options_.seed, counter_++);
  Signature sig;
  crypto_hash_sha512(sig.data(), AsBytes(text.data()), text.size());
  return sig;
}

void ScenarioDriver::BeforeSlot() {
  if (accounts_.empty()) return;
  if (options_.stop_slot != 0 && bank_->slot() >= options_.stop_slot) return;
  if (bank_->slot() < options_.start_slot) return;
  const int delegates = Draw(options_.delegate_rate);
  const int undelegates = Draw(options_.undelegate_rate);
  for (int i = 0; i < delegates; ++i) {
    if (intended_.size() >= accounts_.size()) break;
    // Probe from a random start for an account the driver has not delegated.
    size_t at = std::uniform_int_distribution<size_t>(0, accounts_.size() - 1)(rng_);
    while (intended_.contains(accounts_[at])) at = (at + 1) % accounts_.size();
    const Pubkey& identity =
        identities_[std::uniform_int_distribution<size_t>(0, identities_.size() - 1)(rng_)];
    intended_[accounts_[at]] = identity;
    SubmitDelegate(accounts_[at], identity);
  }
  for (int i = 0; i < undelegates; ++i) {
    // Only accounts whose delegation is on the ledger can be undelegated.
    std::vector<Pubkey> candidates;
    for (const auto& [account, authority] : truth_) {
      auto it = intended_.find(account);
      if (it != intended_.end() && it->second == authority) candidates.push_back(account);
    }
    if (candidates.empty()) break;
    const Pubkey account =
        candidates[std::uniform_int_distribution<size_t>(0, candidates.size() - 1)(rng_)];
    const Pubkey identity = intended_[account];
    intended_.erase(account);
    SubmitUndelegate(account, identity);
  }
}

void ScenarioDriver::SubmitDelegate(const Pubkey& account, const Pubkey& identity) {
  PdaCache& pdas = bank_->pdas();
  TxMessage tx;
  tx.signatures = {NextSignature()};
  submitted_delegates_[tx.signatures[0]] = account;
  tx.num_required_signatures = 1;
  tx.num_readonly_unsigned = 3;
  tx.static_keys = {payer_,
                    account,
                    pdas.Get(PdaKind::kDelegateBuffer, account, owner_program_),
                    pdas.Record(account),
                    pdas.Metadata(account),
                    owner_program_,
                    SystemProgramId(),
                    DelegationProgramId()};
  tx.signer = {true, false, false, false, false, false, false, false};
  tx.writable = {true, true, true, true, true, false, false, false};
  tx.recent_blockhash = bank_->LatestBlockhash().blockhash;
  TxInstruction ix;
  ix.program_index = 7;
  ix.accounts = {0, 1, 5, 2, 3, 4, 6};
  ix.data = EncodeDelegateInstructionData(30000, {}, identity);
  tx.instructions.push_back(std::move(ix));
  SerializeLegacy(&tx);
  (void)bank_->Submit(std::move(tx));
}

void ScenarioDriver::SubmitUndelegate(const Pubkey& account, const Pubkey& identity) {
  PdaCache& pdas = bank_->pdas();
  static const Pubkey fees_vault = FeesVaultPda();
  TxMessage tx;
  tx.signatures = {NextSignature()};
  tx.num_required_signatures = 1;
  tx.num_readonly_unsigned = 3;
  tx.static_keys = {identity,
                    account,
                    pdas.Get(PdaKind::kUndelegateBuffer, account),
                    pdas.Get(PdaKind::kCommitState, account),
                    pdas.Get(PdaKind::kCommitRecord, account),
                    pdas.Record(account),
                    pdas.Metadata(account),
                    payer_,
                    fees_vault,
                    pdas.Get(PdaKind::kValidatorFeesVault, identity),
                    owner_program_,
                    SystemProgramId(),
                    DelegationProgramId()};
  tx.signer.assign(tx.static_keys.size(), false);
  tx.signer[0] = true;
  tx.writable.assign(tx.static_keys.size(), true);
  tx.writable[10] = tx.writable[11] = tx.writable[12] = false;
  tx.recent_blockhash = bank_->LatestBlockhash().blockhash;
  TxInstruction ix;
  ix.program_index = 12;
  ix.accounts = {0, 1, 10, 2, 3, 4, 5, 6, 7, 8, 9, 11};
  ix.data.assign(8, '\0');
  ix.data[0] = static_cast<char>(kUndelegateDiscriminator);
  tx.instructions.push_back(std::move(ix));
  SerializeLegacy(&tx);
  (void)bank_->Submit(std::move(tx));
}

const std::string& ScenarioDriver::Name(const Pubkey& key) {
  auto it = names_.find(key);
  if (it == names_.end()) it = names_.emplace(key, key.ToBase58()).first;
  return it->second;
}

void ScenarioDriver::AfterSlot(const SlotEffects& effects) {
  PdaCache& pdas = bank_->pdas();
  // The Delegate transactions of this slot that succeeded: the signature of each delegation.
  absl::flat_hash_map<Pubkey, Signature> delegated_by;
  for (const TxRecordRef& tx : effects.transactions) {
    auto submitted = submitted_delegates_.find(tx->id);
    if (submitted == submitted_delegates_.end()) continue;
    if (tx->err_json == "null") delegated_by[submitted->second] = tx->id;
    submitted_delegates_.erase(submitted);
  }
  bool changed = false;
  for (const auto& [key, account] : effects.changed) {
    std::optional<Pubkey> authority;
    if (account != nullptr && account->owner == DelegationProgramId()) {
      // Records and metadata are owned by the program too; only accounts with a record at
      // their PDA are delegated accounts.
      if (AccountRef record = bank_->GetAccount(pdas.Record(key))) {
        auto decoded = DecodeDelegationRecord(
            {reinterpret_cast<const uint8_t*>(record->data.data()), record->data.size()});
        if (decoded.ok()) authority = decoded->authority;
      }
    }
    auto it = truth_.find(key);
    if (authority.has_value()) {
      if (auto by = delegated_by.find(key); by != delegated_by.end()) {
        truth_signatures_[key] = by->second;
        changed = true;
      }
      if (it == truth_.end() || it->second != *authority) {
        truth_[key] = *authority;
        changed = true;
      }
    } else if (it != truth_.end()) {
      truth_.erase(it);
      truth_signatures_.erase(key);
      changed = true;
    }
  }
  if (!ground_truth_.is_open() || (!changed && truth_written_)) return;
  truth_written_ = true;
  std::string line = fmt::format("{{\"slot\":{},\"delegated\":{{", effects.slot);
  bool first = true;
  for (const auto& [account, authority] : truth_) {
    if (!first) line.push_back(',');
    line.push_back('"');
    line.append(Name(account));
    line.append("\":\"");
    line.append(Name(authority));
    line.push_back('"');
    first = false;
  }
  line.append("},\"signatures\":{");
  first = true;
  for (const auto& [account, signature] : truth_signatures_) {
    if (!first) line.push_back(',');
    line.push_back('"');
    line.append(Name(account));
    line.append("\":\"");
    line.append(signature.ToBase58());
    line.push_back('"');
    first = false;
  }
  line.append("}}\n");
  ground_truth_ << line;
  ground_truth_.flush();
}

}  // namespace switchyard::localnet
