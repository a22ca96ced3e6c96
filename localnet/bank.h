#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/clock.h"
#include "common/pubkey.h"
#include "common/slot.h"
#include "localnet/types.h"
#include "localnet/wire.h"

namespace switchyard::localnet {

// The outcome of running a transaction against the current state without keeping it.
struct SimulationResult {
  std::string err_json = "null";
  std::string err_display;  // the validator's human text for err_json
  std::vector<std::string> logs;
  uint64_t units_consumed = 0;
};

struct BankOptions {
  uint64_t fee_lamports_per_signature = 5000;
  size_t max_pending_transactions = 100000;
  size_t max_transaction_history = 1000000;
  // Transactions older than this many slots are forgotten (getTransaction, getSignatureStatuses
  // and getSignaturesForAddress no longer know them), as a node with a pruned ledger; 0: kept
  // while max_transaction_history allows.
  uint64_t max_transaction_history_slots = 0;
  // getBlock answers for this many recent slots.
  size_t max_block_history = 100000;
  // ER mode: only accounts marked delegated (MarkDelegated) may be written or pay fees.
  bool er_mode = false;
  // Blockhashes stay valid for this many blocks (lastValidBlockHeight = height + this).
  uint64_t blockhash_validity = 150;
  // Seeds the genesis hash, and so every blockhash: chains with different seeds share none.
  std::string chain_seed;
};

struct BlockhashInfo {
  Hash blockhash;
  uint64_t last_valid_block_height = 0;
  Slot slot = 0;
};

struct SignatureStatus {
  Slot slot = 0;
  std::string err_json;
};

// The local ledger: accounts, the slot, pending and processed transactions. Reads take a
// reader lock and return immutable AccountRefs; AdvanceSlot (the slot thread) is the only
// writer of executed state. All methods are thread-safe.
class Bank {
 public:
  Bank(BankOptions options, const Clock* clock);

  Slot slot() const { return slot_.load(std::memory_order_acquire); }
  uint64_t block_height() const { return block_height_.load(std::memory_order_acquire); }
  BlockhashInfo LatestBlockhash() const;
  Hash genesis_hash() const { return genesis_hash_; }

  AccountRef GetAccount(const Pubkey& key) const;
  // The slot is read under the same lock as the accounts.
  std::vector<AccountRef> GetAccounts(std::span<const Pubkey> keys, Slot* slot) const;
  // Every account owned by `program` that passes `filter`, sorted by pubkey.
  std::vector<std::pair<Pubkey, AccountRef>> ProgramAccounts(
      const Pubkey& program, const std::function<bool(const Account&)>& filter, Slot* slot) const;
  bool HasAccount(const Pubkey& key) const;

  // Genesis, faucet and ER cloning: sets an account outside of any transaction.
  void SetAccount(const Pubkey& key, Account account);
  // Writes an account at the next slot, as a transaction of that slot would (its subscribers
  // are notified with the slot's changes); lamports 0 closes it. For programs the bank does not
  // run, whose effects a test or the scenario makes (the ER registry's records).
  void QueueAccountWrite(const Pubkey& key, Account account);
  // Sets an account only if it is absent; returns whether it did.
  bool SetAccountIfAbsent(const Pubkey& key, Account account);
  // ER mode: `key` may be written and may pay fees.
  void MarkDelegated(const Pubkey& key);
  bool IsDelegated(const Pubkey& key) const;

  // Runs `tx` against the current state and keeps nothing. With `check_blockhash`, a recent
  // blockhash that would not be valid in the next block fails it with BlockhashNotFound.
  SimulationResult Simulate(const TxMessage& tx, bool check_blockhash = true) const;
  // Queues `tx` to be applied at the next slot. Fails when the queue is full or the
  // signature was seen before.
  absl::Status Submit(TxMessage tx);

  // Whether a transaction with this recent blockhash may go into the next block: the hash
  // was the latest at a block height h with h + blockhash_validity >= the next block's height.
  bool IsBlockhashValid(const Hash& blockhash) const;

  // Advances to the next slot, applying every queued transaction in order; one whose
  // blockhash is not valid in this block is dropped (no status, no history), as a validator
  // drops it. Called by the slot clock only.
  SlotEffects AdvanceSlot();
  // Transactions dropped so far for an unknown or expired blockhash.
  uint64_t dropped_count() const { return dropped_.load(std::memory_order_relaxed); }

  TxRecordRef GetTransaction(const Signature& sig) const;
  // The block of `slot`, or nullptr when it is not produced yet or no longer kept.
  std::shared_ptr<const BlockRecord> GetBlock(Slot slot) const;
  // The oldest slot whose block is still kept.
  Slot first_available_block() const;
  std::optional<SignatureStatus> GetSignatureStatus(const Signature& sig) const;
  // Newest first, as getSignaturesForAddress.
  std::vector<TxRecordRef> SignaturesForAddress(const Pubkey& address, size_t limit,
                                                const std::optional<Signature>& before,
                                                const std::optional<Signature>& until) const;
  size_t pending_count() const;

  // The delegation program's PDAs, memoized for every user of this bank.
  PdaCache& pdas() const { return pdas_; }

 private:
  struct Overlay;
  struct ExecOutcome;
  ExecOutcome Execute(const TxMessage& tx, Slot slot, Overlay* overlay) const
      ABSL_SHARED_LOCKS_REQUIRED(mu_);
  bool ExecuteInstruction(const TxMessage& tx, size_t index, Slot slot, Overlay* overlay,
                          ExecOutcome* out) const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  void AddHistory(TxRecordRef record) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Forgets the oldest transaction of the history.
  void ForgetOldestTransaction() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool BlockhashValidAt(const Hash& blockhash, uint64_t height) const
      ABSL_SHARED_LOCKS_REQUIRED(mu_);
  // Closes a slot (after its blockhash is set): the Clock sysvar, the block record.
  void EndBlock(const SlotEffects& effects, uint64_t height, int64_t now,
                absl::flat_hash_map<Pubkey, AccountRef>* changed)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const BankOptions options_;
  mutable PdaCache pdas_;
  const Clock* const clock_;
  Hash genesis_hash_;
  const int64_t genesis_time_ = absl::ToUnixSeconds(clock_->Now());

  std::atomic<Slot> slot_{0};
  std::atomic<uint64_t> block_height_{0};
  std::atomic<uint64_t> dropped_{0};

  mutable absl::Mutex mu_;
  Hash blockhash_ ABSL_GUARDED_BY(mu_);
  // The blockhashes still valid, each with the block height at which it was the latest; the
  // order is oldest first.
  absl::flat_hash_map<Hash, uint64_t> recent_blockhashes_ ABSL_GUARDED_BY(mu_);
  std::deque<Hash> recent_order_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<Pubkey, AccountRef> accounts_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_set<Pubkey> delegated_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<Signature, TxRecordRef> history_ ABSL_GUARDED_BY(mu_);
  std::deque<Signature> history_order_ ABSL_GUARDED_BY(mu_);
  // One block per slot, oldest first: blocks_[i] is slot blocks_.front()->slot + i.
  std::deque<std::shared_ptr<const BlockRecord>> blocks_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<Pubkey, std::deque<TxRecordRef>> by_address_ ABSL_GUARDED_BY(mu_);

  mutable absl::Mutex pending_mu_;
  std::vector<TxMessage> pending_ ABSL_GUARDED_BY(pending_mu_);
  std::vector<std::pair<Pubkey, Account>> pending_writes_ ABSL_GUARDED_BY(pending_mu_);
  absl::flat_hash_set<Signature> pending_ids_ ABSL_GUARDED_BY(pending_mu_);
};

// Well-known program ids.
const Pubkey& ComputeBudgetProgramId();
const Pubkey& MemoProgramId();
const Pubkey& TokenProgramId();
const Pubkey& Token2022ProgramId();
const Pubkey& SysvarProgramId();
const Pubkey& ClockSysvarId();

}  // namespace switchyard::localnet
