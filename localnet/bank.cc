#include "localnet/bank.h"

#include <sodium.h>

#include <algorithm>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "common/endian.h"
#include "fmt/format.h"
#include "localnet/wire.h"
#include "solana/delegation.h"

namespace switchyard::localnet {
namespace {

Pubkey MustPubkey(std::string_view text) {
  auto key = Pubkey::FromBase58(text);
  return key.ok() ? *key : Pubkey();
}

uint64_t RentExempt(size_t data_len) { return (128 + data_len) * 6960; }

constexpr uint64_t kSlotsPerEpoch = 432000;

// The Clock sysvar as a validator keeps it: slot, epoch start time, epoch, leader schedule
// epoch, unix time (40 bytes, little-endian). Clients of the base (the MagicBlock ER among
// them) subscribe to it to follow the base's slot.
AccountRef ClockSysvar(Slot slot, int64_t epoch_start, int64_t now) {
  Account clock;
  clock.lamports = RentExempt(40);
  clock.owner = SysvarProgramId();
  const uint64_t epoch = slot / kSlotsPerEpoch;
  AppendU64LE(&clock.data, slot);
  AppendU64LE(&clock.data, static_cast<uint64_t>(epoch_start));
  AppendU64LE(&clock.data, epoch);
  AppendU64LE(&clock.data, epoch + 1);
  AppendU64LE(&clock.data, static_cast<uint64_t>(now));
  return std::make_shared<const Account>(std::move(clock));
}

Hash Sha256(std::string_view a, std::string_view b) {
  crypto_hash_sha256_state state;
  crypto_hash_sha256_init(&state);
  crypto_hash_sha256_update(&state, AsBytes(a.data()), a.size());
  crypto_hash_sha256_update(&state, AsBytes(b.data()), b.size());
  Hash out;
  crypto_hash_sha256_final(&state, out.data());
  return out;
}

std::string_view AsView(const FixedBytes<32>& v) {
  return {reinterpret_cast<const char*>(v.data()), v.size()};
}

std::string ProgramInvoke(const Pubkey& program) {
  return fmt::format("Program {} invoke [1]", program.ToBase58());
}
std::string ProgramSuccess(const Pubkey& program) {
  return fmt::format("Program {} success", program.ToBase58());
}
std::string ProgramConsumed(const Pubkey& program, uint64_t units) {
  return fmt::format("Program {} consumed {} of 200000 compute units", program.ToBase58(), units);
}

}  // namespace

const Pubkey& ComputeBudgetProgramId() {
  static const Pubkey key = MustPubkey("ComputeBudget111111111111111111111111111111");
  return key;
}
const Pubkey& MemoProgramId() {
  static const Pubkey key = MustPubkey("MemoSq4gqABAXKb96qnH8TysNcWxMyWCqXgDLGmfcHr");
  return key;
}
const Pubkey& TokenProgramId() {
  static const Pubkey key = MustPubkey("TokenkegQfeZyiNwAJbNbGKPFXCWuBvf9Ss623VQ5DA");
  return key;
}
const Pubkey& Token2022ProgramId() {
  static const Pubkey key = MustPubkey("TokenzQdBNbLqP5VEhdkAS6EPFLC1PHnBqCXEpPxuEb");
  return key;
}

const Pubkey& SysvarProgramId() {
  static const Pubkey key = MustPubkey("Sysvar1111111111111111111111111111111111111");
  return key;
}

const Pubkey& ClockSysvarId() {
  static const Pubkey key = MustPubkey("SysvarC1ock11111111111111111111111111111111");
  return key;
}

// Pending changes of one transaction over the committed accounts.
struct Bank::Overlay {
  const absl::flat_hash_map<Pubkey, AccountRef>* base;
  absl::flat_hash_map<Pubkey, Account> changes;

  const Account* Get(const Pubkey& key) const {
    auto it = changes.find(key);
    if (it != changes.end()) return it->second.lamports == 0 ? nullptr : &it->second;
    auto b = base->find(key);
    return b == base->end() ? nullptr : b->second.get();
  }
  Account* Mut(const Pubkey& key) {
    auto it = changes.find(key);
    if (it == changes.end()) {
      auto b = base->find(key);
      it = changes.emplace(key, b == base->end() ? Account{} : *b->second).first;
    }
    return &it->second;
  }
};

struct Bank::ExecOutcome {
  std::string err_json = "null";
  std::string err_display;
  std::vector<std::string> logs;
  uint64_t fee = 0;
  uint64_t units = 0;

  void TxError(std::string_view name, std::string_view display) {
    err_json = fmt::format("\"{}\"", name);
    err_display = std::string(display);
  }
  void IxError(size_t index, std::string_view json_value, std::string_view display) {
    err_json = fmt::format("{{\"InstructionError\":[{},{}]}}", index, json_value);
    err_display = fmt::format("Error processing Instruction {}: {}", index, display);
  }
  void IxCustom(size_t index, uint32_t code) {
    IxError(index, fmt::format("{{\"Custom\":{}}}", code),
            fmt::format("custom program error: {:#x}", code));
  }
};

Bank::Bank(BankOptions options, const Clock* clock) : options_(options), clock_(clock) {
  genesis_hash_ = Sha256("switchyard-localnet-genesis", options_.chain_seed);
  absl::MutexLock lock(&mu_);
  blockhash_ = Sha256(AsView(genesis_hash_), "0");
  recent_blockhashes_.emplace(blockhash_, 0);
  recent_order_.push_back(blockhash_);
  absl::flat_hash_map<Pubkey, AccountRef> genesis_changes;
  EndBlock(SlotEffects{}, 0, genesis_time_, &genesis_changes);
}

bool Bank::BlockhashValidAt(const Hash& blockhash, uint64_t height) const {
  auto it = recent_blockhashes_.find(blockhash);
  return it != recent_blockhashes_.end() && height <= it->second + options_.blockhash_validity;
}

bool Bank::IsBlockhashValid(const Hash& blockhash) const {
  absl::ReaderMutexLock lock(&mu_);
  return BlockhashValidAt(blockhash, block_height() + 1);
}

BlockhashInfo Bank::LatestBlockhash() const {
  absl::ReaderMutexLock lock(&mu_);
  return BlockhashInfo{blockhash_, block_height() + options_.blockhash_validity, slot()};
}

AccountRef Bank::GetAccount(const Pubkey& key) const {
  absl::ReaderMutexLock lock(&mu_);
  auto it = accounts_.find(key);
  return it == accounts_.end() ? nullptr : it->second;
}

std::vector<AccountRef> Bank::GetAccounts(std::span<const Pubkey> keys, Slot* slot) const {
  std::vector<AccountRef> out;
  out.reserve(keys.size());
  absl::ReaderMutexLock lock(&mu_);
  for (const Pubkey& key : keys) {
    auto it = accounts_.find(key);
    out.push_back(it == accounts_.end() ? nullptr : it->second);
  }
  if (slot != nullptr) *slot = this->slot();
  return out;
}

std::vector<std::pair<Pubkey, AccountRef>> Bank::ProgramAccounts(
    const Pubkey& program, const std::function<bool(const Account&)>& filter, Slot* slot) const {
  std::vector<std::pair<Pubkey, AccountRef>> out;
  {
    absl::ReaderMutexLock lock(&mu_);
    for (const auto& [key, account] : accounts_) {
      if (account->owner == program && filter(*account)) out.emplace_back(key, account);
    }
    if (slot != nullptr) *slot = this->slot();
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  return out;
}

bool Bank::HasAccount(const Pubkey& key) const {
  absl::ReaderMutexLock lock(&mu_);
  return accounts_.contains(key);
}

void Bank::SetAccount(const Pubkey& key, Account account) {
  auto ref = std::make_shared<const Account>(std::move(account));
  absl::MutexLock lock(&mu_);
  accounts_[key] = std::move(ref);
}

void Bank::QueueAccountWrite(const Pubkey& key, Account account) {
  absl::MutexLock lock(&pending_mu_);
  pending_writes_.emplace_back(key, std::move(account));
}

bool Bank::SetAccountIfAbsent(const Pubkey& key, Account account) {
  auto ref = std::make_shared<const Account>(std::move(account));
  absl::MutexLock lock(&mu_);
  return accounts_.emplace(key, std::move(ref)).second;
}

void Bank::MarkDelegated(const Pubkey& key) {
  absl::MutexLock lock(&mu_);
  delegated_.insert(key);
}

bool Bank::IsDelegated(const Pubkey& key) const {
  absl::ReaderMutexLock lock(&mu_);
  return delegated_.contains(key);
}

SimulationResult Bank::Simulate(const TxMessage& tx, bool check_blockhash) const {
  absl::ReaderMutexLock lock(&mu_);
  if (check_blockhash && !tx.internal &&
      !BlockhashValidAt(tx.recent_blockhash, block_height() + 1)) {
    return SimulationResult{"\"BlockhashNotFound\"", "Blockhash not found", {}, 0};
  }
  Overlay overlay{&accounts_, {}};
  ExecOutcome outcome = Execute(tx, slot(), &overlay);
  return SimulationResult{std::move(outcome.err_json), std::move(outcome.err_display),
                          std::move(outcome.logs), outcome.units};
}

absl::Status Bank::Submit(TxMessage tx) {
  if (tx.signatures.empty()) return absl::InvalidArgumentError("transaction has no signature");
  const Signature id = tx.signatures[0];
  {
    absl::ReaderMutexLock lock(&mu_);
    if (history_.contains(id)) {
      return absl::AlreadyExistsError("This transaction has already been processed");
    }
  }
  absl::MutexLock lock(&pending_mu_);
  if (pending_.size() >= options_.max_pending_transactions) {
    return absl::ResourceExhaustedError("the pending transaction queue is full");
  }
  if (!pending_ids_.insert(id).second) {
    return absl::AlreadyExistsError("This transaction has already been processed");
  }
  pending_.push_back(std::move(tx));
  return absl::OkStatus();
}

size_t Bank::pending_count() const {
  absl::MutexLock lock(&pending_mu_);
  return pending_.size();
}

Bank::ExecOutcome Bank::Execute(const TxMessage& tx, Slot slot, Overlay* overlay) const {
  ExecOutcome out;
  const size_t n = tx.key_count();
  if (n == 0 || tx.signer.size() != n || tx.writable.size() != n) {
    out.TxError("SanitizeFailure", "Transaction failed to sanitize accounts offsets correctly");
    return out;
  }
  const Pubkey& payer = tx.key(0);
  if (options_.er_mode && !tx.internal) {
    if (!delegated_.contains(payer)) {
      out.TxError("InvalidAccountForFee", "This account may not be used to pay transaction fees");
      return out;
    }
    for (size_t i = 0; i < n; ++i) {
      if (tx.writable[i] && !delegated_.contains(tx.key(i))) {
        out.TxError("InvalidWritableAccount",
                    "Transaction loads a writable account that cannot be written");
        return out;
      }
    }
  }
  if (!tx.internal) {
    out.fee = options_.fee_lamports_per_signature * tx.signatures.size();
    const Account* payer_account = overlay->Get(payer);
    if (payer_account == nullptr) {
      out.TxError("AccountNotFound",
                  "Attempt to debit an account but found no record of a prior credit.");
      return out;
    }
    if (payer_account->lamports < out.fee) {
      out.TxError("InsufficientFundsForFee", "Insufficient funds for fee");
      return out;
    }
    for (const TxInstruction& ix : tx.instructions) {
      if (ix.program_index >= n) {
        out.TxError("SanitizeFailure", "Transaction failed to sanitize accounts offsets correctly");
        return out;
      }
      const Pubkey& program = tx.key(ix.program_index);
      if (program != SystemProgramId() && program != DelegationProgramId() &&
          program != ComputeBudgetProgramId() && program != MemoProgramId()) {
        out.TxError("ProgramAccountNotFound", "Attempt to load a program that does not exist");
        return out;
      }
    }
    overlay->Mut(payer)->lamports -= out.fee;
  }
  const auto saved = overlay->changes;
  for (size_t i = 0; i < tx.instructions.size(); ++i) {
    if (!ExecuteInstruction(tx, i, slot, overlay, &out)) {
      overlay->changes = saved;
      break;
    }
  }
  return out;
}

bool Bank::ExecuteInstruction(const TxMessage& tx, size_t index, Slot slot, Overlay* overlay,
                              ExecOutcome* out) const {
  const TxInstruction& ix = tx.instructions[index];
  const size_t n = tx.key_count();
  if (ix.program_index >= n) {
    out->TxError("SanitizeFailure", "Transaction failed to sanitize accounts offsets correctly");
    return false;
  }
  for (uint8_t a : ix.accounts) {
    if (a >= n) {
      out->TxError("SanitizeFailure", "Transaction failed to sanitize accounts offsets correctly");
      return false;
    }
  }
  const Pubkey& program = tx.key(ix.program_index);
  auto acct = [&](size_t pos) -> const Pubkey& { return tx.key(ix.accounts[pos]); };
  auto is_signer = [&](size_t pos) { return tx.internal || tx.signer[ix.accounts[pos]]; };
  auto fail = [&](std::string_view json_value, std::string_view display) {
    out->logs.push_back(fmt::format("Program {} failed: {}", program.ToBase58(), display));
    out->IxError(index, json_value, display);
    return false;
  };
  auto fail_custom = [&](uint32_t code) {
    out->logs.push_back(
        fmt::format("Program {} failed: custom program error: {:#x}", program.ToBase58(), code));
    out->IxCustom(index, code);
    return false;
  };
  out->logs.push_back(ProgramInvoke(program));
  const std::string_view data = ix.data;

  if (program == ComputeBudgetProgramId() || program == MemoProgramId()) {
    out->units += 150;
    out->logs.push_back(ProgramSuccess(program));
    return true;
  }

  if (program == SystemProgramId()) {
    out->units += 150;
    if (data.size() < 4) return fail("\"InvalidInstructionData\"", "invalid instruction data");
    const uint32_t kind = LoadU32LE(AsBytes(data.data()));
    auto need = [&](size_t accounts, size_t bytes) {
      return ix.accounts.size() >= accounts && data.size() >= bytes;
    };
    switch (kind) {
      case 0: {  // CreateAccount {lamports, space, owner}
        if (!need(2, 52)) return fail("\"InvalidInstructionData\"", "invalid instruction data");
        const uint64_t lamports = LoadU64LE(AsBytes(data.data() + 4));
        const uint64_t space = LoadU64LE(AsBytes(data.data() + 12));
        const Pubkey owner = Pubkey::FromBytes(AsBytes(data.data() + 20));
        if (!is_signer(0) || !is_signer(1)) {
          return fail("\"MissingRequiredSignature\"", "missing required signature for instruction");
        }
        if (space > 10 * 1024 * 1024) {
          return fail("\"InvalidRealloc\"", "Failed to reallocate account data");
        }
        const Account* existing = overlay->Get(acct(1));
        if (existing != nullptr && (existing->lamports > 0 || !existing->data.empty())) {
          out->logs.push_back(fmt::format(
              "Create Account: account Address {{ address: {}, base: None }} already in use",
              acct(1).ToBase58()));
          return fail_custom(0);
        }
        const Account* from = overlay->Get(acct(0));
        if (from == nullptr || from->lamports < lamports) {
          out->logs.push_back(fmt::format("Transfer: insufficient lamports {}, need {}",
                                          from == nullptr ? 0 : from->lamports, lamports));
          return fail_custom(1);
        }
        overlay->Mut(acct(0))->lamports -= lamports;
        Account* to = overlay->Mut(acct(1));
        to->lamports += lamports;
        to->owner = owner;
        to->data.assign(space, '\0');
        break;
      }
      case 1: {  // Assign {owner}
        if (!need(1, 36)) return fail("\"InvalidInstructionData\"", "invalid instruction data");
        if (!is_signer(0)) {
          return fail("\"MissingRequiredSignature\"", "missing required signature for instruction");
        }
        overlay->Mut(acct(0))->owner = Pubkey::FromBytes(AsBytes(data.data() + 4));
        break;
      }
      case 2: {  // Transfer {lamports}
        if (!need(2, 12)) return fail("\"InvalidInstructionData\"", "invalid instruction data");
        const uint64_t lamports = LoadU64LE(AsBytes(data.data() + 4));
        if (!is_signer(0)) {
          return fail("\"MissingRequiredSignature\"", "missing required signature for instruction");
        }
        const Account* from = overlay->Get(acct(0));
        if (from != nullptr && !from->data.empty()) {
          out->logs.push_back("Transfer: `from` must not carry data");
          return fail("\"InvalidArgument\"", "invalid program argument");
        }
        if (from == nullptr || from->lamports < lamports) {
          out->logs.push_back(fmt::format("Transfer: insufficient lamports {}, need {}",
                                          from == nullptr ? 0 : from->lamports, lamports));
          return fail_custom(1);
        }
        overlay->Mut(acct(0))->lamports -= lamports;
        overlay->Mut(acct(1))->lamports += lamports;
        break;
      }
      case 8: {  // Allocate {space}
        if (!need(1, 12)) return fail("\"InvalidInstructionData\"", "invalid instruction data");
        if (!is_signer(0)) {
          return fail("\"MissingRequiredSignature\"", "missing required signature for instruction");
        }
        const uint64_t space = LoadU64LE(AsBytes(data.data() + 4));
        if (space > 10 * 1024 * 1024) {
          return fail("\"InvalidRealloc\"", "Failed to reallocate account data");
        }
        overlay->Mut(acct(0))->data.assign(space, '\0');
        break;
      }
      default:
        return fail("\"InvalidInstructionData\"", "invalid instruction data");
    }
    out->logs.push_back(ProgramSuccess(program));
    return true;
  }

  if (program == DelegationProgramId()) {
    const DelegationIx decoded = DecodeDelegationIx(tx, ix);
    out->units += 5000;
    if (decoded.malformed) {
      return fail("\"InvalidInstructionData\"", "invalid instruction data");
    }
    if (decoded.kind == DelegationIxKind::kDelegate) {
      out->logs.push_back("Program log: Processing instruction: Delegate");
      if (ix.accounts.size() < 7)
        return fail("\"NotEnoughAccountKeys\"", "insufficient account keys for instruction");
      const Pubkey& payer = acct(0);
      const Pubkey& delegated = acct(1);
      const Pubkey& owner_program = acct(2);
      const Account* account = overlay->Get(delegated);
      if (account == nullptr) {
        return fail("\"UninitializedAccount\"", "instruction requires an initialized account");
      }
      if (account->owner == DelegationProgramId()) {
        return fail("\"AccountAlreadyInitialized\"",
                    "instruction requires an uninitialized account");
      }
      if (account->owner != owner_program) {
        return fail("\"IncorrectProgramId\"", "incorrect program id for instruction");
      }
      DelegationRecord record;
      record.authority = decoded.validator.value_or(Pubkey());
      record.owner = owner_program;
      record.delegation_slot = slot;
      record.lamports = account->lamports;
      record.commit_frequency_ms = decoded.commit_frequency_ms;
      overlay->Mut(delegated)->owner = DelegationProgramId();
      Account* rec = overlay->Mut(pdas_.Record(delegated));
      rec->owner = DelegationProgramId();
      rec->data = EncodeDelegationRecord(record);
      rec->lamports = RentExempt(rec->data.size());
      Account* meta = overlay->Mut(pdas_.Metadata(delegated));
      meta->owner = DelegationProgramId();
      DelegationMetadata metadata;
      metadata.rent_payer = payer;
      meta->data = EncodeDelegationMetadata(metadata);
      meta->lamports = RentExempt(meta->data.size());
    } else if (decoded.kind == DelegationIxKind::kUndelegate) {
      out->logs.push_back("Program log: Processing instruction: Undelegate");
      if (ix.accounts.size() < 8)
        return fail("\"NotEnoughAccountKeys\"", "insufficient account keys for instruction");
      const Pubkey& delegated = acct(1);
      const Pubkey record_key = pdas_.Record(delegated);
      const Account* rec = overlay->Get(record_key);
      const Account* account = overlay->Get(delegated);
      std::optional<DelegationRecord> record;
      if (rec != nullptr) {
        auto decoded_record = DecodeDelegationRecord(
            {reinterpret_cast<const uint8_t*>(rec->data.data()), rec->data.size()});
        if (decoded_record.ok()) record = *decoded_record;
      }
      if (!record.has_value() || account == nullptr || account->owner != DelegationProgramId()) {
        return fail("\"InvalidAccountOwner\"", "Invalid account owner");
      }
      overlay->Mut(delegated)->owner = record->owner;
      for (const Pubkey& closed : {record_key, pdas_.Metadata(delegated)}) {
        Account* a = overlay->Mut(closed);
        *a = Account{};
      }
    } else {
      return fail("\"InvalidInstructionData\"", "invalid instruction data");
    }
    out->logs.push_back(ProgramConsumed(program, 5000));
    out->logs.push_back(ProgramSuccess(program));
    return true;
  }
  return fail("\"UnsupportedProgramId\"", "Unsupported program id");
}

void Bank::AddHistory(TxRecordRef record) {
  const size_t n = record->message.key_count();
  for (size_t i = 0; i < n; ++i) {
    auto& list = by_address_[record->message.key(i)];
    if (list.empty() || list.back() != record) list.push_back(record);
  }
  history_order_.push_back(record->id);
  history_.emplace(record->id, std::move(record));
  while (history_order_.size() > options_.max_transaction_history) ForgetOldestTransaction();
}

void Bank::ForgetOldestTransaction() {
  auto it = history_.find(history_order_.front());
  history_order_.pop_front();
  if (it == history_.end()) return;
  const TxRecordRef old = it->second;
  history_.erase(it);
  for (size_t i = 0; i < old->message.key_count(); ++i) {
    auto a = by_address_.find(old->message.key(i));
    if (a == by_address_.end()) continue;
    if (!a->second.empty() && a->second.front() == old) a->second.pop_front();
    if (a->second.empty()) by_address_.erase(a);
  }
}

SlotEffects Bank::AdvanceSlot() {
  std::vector<TxMessage> batch;
  std::vector<std::pair<Pubkey, Account>> writes;
  {
    absl::MutexLock lock(&pending_mu_);
    batch.swap(pending_);
    writes.swap(pending_writes_);
    pending_ids_.clear();
  }
  SlotEffects effects;
  const int64_t now = absl::ToUnixSeconds(clock_->Now());
  absl::flat_hash_map<Pubkey, AccountRef> changed;
  {
    absl::MutexLock lock(&mu_);
    const Slot parent = slot();
    const Slot next = parent + 1;
    effects.slot = next;
    effects.parent = parent;
    const uint64_t height = block_height() + 1;
    for (TxMessage& tx : batch) {
      if (history_.contains(tx.signatures[0])) continue;
      if (!BlockhashValidAt(tx.recent_blockhash, height)) {
        dropped_.fetch_add(1, std::memory_order_relaxed);
        continue;
      }
      Overlay overlay{&accounts_, {}};
      auto record = std::make_shared<TxRecord>();
      record->pre_balances.reserve(tx.key_count());
      for (size_t i = 0; i < tx.key_count(); ++i) {
        const Account* a = overlay.Get(tx.key(i));
        record->pre_balances.push_back(a == nullptr ? 0 : a->lamports);
      }
      ExecOutcome outcome = Execute(tx, next, &overlay);
      for (auto& [key, account] : overlay.changes) {
        AccountRef ref;
        if (account.lamports == 0) {
          if (accounts_.erase(key) == 0) continue;
        } else {
          ref = std::make_shared<const Account>(std::move(account));
          accounts_[key] = ref;
        }
        changed[key] = ref;
      }
      for (size_t i = 0; i < tx.key_count(); ++i) {
        auto it = accounts_.find(tx.key(i));
        record->post_balances.push_back(it == accounts_.end() ? 0 : it->second->lamports);
      }
      record->id = tx.signatures[0];
      record->slot = next;
      record->block_time = now;
      record->err_json = std::move(outcome.err_json);
      record->logs = std::move(outcome.logs);
      record->fee = outcome.fee;
      record->units_consumed = outcome.units;
      record->message = std::move(tx);
      effects.transactions.push_back(record);
      AddHistory(std::move(record));
    }
    for (auto& [key, account] : writes) {
      AccountRef ref;
      if (account.lamports == 0) {
        if (accounts_.erase(key) == 0) continue;
      } else {
        ref = std::make_shared<const Account>(std::move(account));
        accounts_[key] = ref;
      }
      changed[key] = ref;
    }
    // This block's own blockhash: the latest from now on.
    blockhash_ = Sha256(AsView(blockhash_), std::to_string(next));
    recent_blockhashes_.emplace(blockhash_, height);
    recent_order_.push_back(blockhash_);
    while (!recent_order_.empty() &&
           recent_blockhashes_.at(recent_order_.front()) + options_.blockhash_validity < height) {
      recent_blockhashes_.erase(recent_order_.front());
      recent_order_.pop_front();
    }
    if (const uint64_t keep = options_.max_transaction_history_slots; keep > 0) {
      while (!history_order_.empty()) {
        auto oldest = history_.find(history_order_.front());
        if (oldest != history_.end() && oldest->second->slot + keep > next) break;
        ForgetOldestTransaction();
      }
    }
    EndBlock(effects, height, now, &changed);
    slot_.store(next, std::memory_order_release);
    block_height_.store(height, std::memory_order_release);
  }
  effects.changed.assign(changed.begin(), changed.end());
  return effects;
}

TxRecordRef Bank::GetTransaction(const Signature& sig) const {
  absl::ReaderMutexLock lock(&mu_);
  auto it = history_.find(sig);
  return it == history_.end() ? nullptr : it->second;
}

void Bank::EndBlock(const SlotEffects& effects, uint64_t height, int64_t now,
                    absl::flat_hash_map<Pubkey, AccountRef>* changed) {
  AccountRef clock = ClockSysvar(effects.slot, genesis_time_, now);
  accounts_[ClockSysvarId()] = clock;
  (*changed)[ClockSysvarId()] = std::move(clock);
  auto block = std::make_shared<BlockRecord>();
  block->slot = effects.slot;
  block->parent_slot = effects.parent;
  block->block_height = height;
  block->block_time = now;
  block->blockhash = blockhash_;
  block->previous_blockhash = blocks_.empty() ? genesis_hash_ : blocks_.back()->blockhash;
  block->transactions = effects.transactions;
  blocks_.push_back(std::move(block));
  while (blocks_.size() > options_.max_block_history) blocks_.pop_front();
}

std::shared_ptr<const BlockRecord> Bank::GetBlock(Slot slot) const {
  absl::ReaderMutexLock lock(&mu_);
  if (blocks_.empty() || slot < blocks_.front()->slot) return nullptr;
  const Slot index = slot - blocks_.front()->slot;
  return index < blocks_.size() ? blocks_[index] : nullptr;
}

Slot Bank::first_available_block() const {
  absl::ReaderMutexLock lock(&mu_);
  return blocks_.empty() ? 0 : blocks_.front()->slot;
}

std::optional<SignatureStatus> Bank::GetSignatureStatus(const Signature& sig) const {
  absl::ReaderMutexLock lock(&mu_);
  auto it = history_.find(sig);
  if (it == history_.end()) return std::nullopt;
  return SignatureStatus{it->second->slot, it->second->err_json};
}

std::vector<TxRecordRef> Bank::SignaturesForAddress(const Pubkey& address, size_t limit,
                                                    const std::optional<Signature>& before,
                                                    const std::optional<Signature>& until) const {
  std::vector<TxRecordRef> out;
  absl::ReaderMutexLock lock(&mu_);
  auto it = by_address_.find(address);
  if (it == by_address_.end()) return out;
  bool started = !before.has_value();
  for (auto r = it->second.rbegin(); r != it->second.rend() && out.size() < limit; ++r) {
    if (!started) {
      if ((*r)->id == *before) started = true;
      continue;
    }
    if (until.has_value() && (*r)->id == *until) break;
    out.push_back(*r);
  }
  return out;
}

}  // namespace switchyard::localnet
