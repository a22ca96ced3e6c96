#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/pubkey.h"
#include "common/slot.h"

namespace switchyard::localnet {

// One account of the local ledger. Immutable once published (see AccountRef).
struct Account {
  uint64_t lamports = 0;
  Pubkey owner;
  std::string data;
  bool executable = false;
};
using AccountRef = std::shared_ptr<const Account>;

// A compiled instruction: indexes into the transaction's account keys.
struct TxInstruction {
  uint8_t program_index = 0;
  std::vector<uint8_t> accounts;
  std::string data;
};

// A transaction in the form the executor runs and getTransaction shows. Built from the
// wire format by wire.h, or directly by the airdrop faucet and the scenario driver.
struct TxMessage {
  std::vector<Signature> signatures;
  uint8_t num_required_signatures = 0;
  uint8_t num_readonly_signed = 0;
  uint8_t num_readonly_unsigned = 0;
  std::vector<Pubkey> static_keys;
  // v0 only: keys loaded from address lookup tables.
  std::vector<Pubkey> loaded_writable;
  std::vector<Pubkey> loaded_readonly;
  std::string lookups_json = "[]";  // the message's addressTableLookups, as JSON
  // Over all keys (static, then loaded writable, then loaded readonly).
  std::vector<bool> signer;
  std::vector<bool> writable;
  Hash recent_blockhash;
  std::vector<TxInstruction> instructions;
  int version = -1;           // -1 legacy, 0 for v0
  std::string wire;           // the serialized transaction, when it came from the wire
  std::string message_bytes;  // what the signatures sign
  bool internal = false;      // faucet and scenario: no fee, no signature check

  size_t key_count() const {
    return static_keys.size() + loaded_writable.size() + loaded_readonly.size();
  }
  const Pubkey& key(size_t i) const {
    if (i < static_keys.size()) return static_keys[i];
    i -= static_keys.size();
    if (i < loaded_writable.size()) return loaded_writable[i];
    return loaded_readonly[i - loaded_writable.size()];
  }
};

// A processed transaction, as getTransaction, getSignatureStatuses and the pubsub
// notifications show it.
struct TxRecord {
  Signature id;
  Slot slot = 0;
  int64_t block_time = 0;
  std::string err_json = "null";  // a Solana TransactionError as JSON, or null
  std::vector<std::string> logs;
  uint64_t fee = 0;
  uint64_t units_consumed = 0;
  std::vector<uint64_t> pre_balances;
  std::vector<uint64_t> post_balances;
  TxMessage message;
};
using TxRecordRef = std::shared_ptr<const TxRecord>;

// One produced block, as getBlock shows it.
struct BlockRecord {
  Slot slot = 0;
  Slot parent_slot = 0;
  uint64_t block_height = 0;
  int64_t block_time = 0;
  Hash blockhash;
  Hash previous_blockhash;
  std::vector<TxRecordRef> transactions;
};

// What one slot changed; handed to the pubsub hub after the slot is applied.
struct SlotEffects {
  Slot slot = 0;
  Slot parent = 0;
  // Final state per changed account; nullptr when the account was closed.
  std::vector<std::pair<Pubkey, AccountRef>> changed;
  std::vector<TxRecordRef> transactions;
};

inline constexpr Slot kNoSlot = ~0ull;

}  // namespace switchyard::localnet
