#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/base58.h"
#include "common/pubkey.h"
#include "engine/account_map.h"
#include "engine/snapshot.h"
#include "solana/base64.h"
#include "solana/transaction.h"

namespace switchyard::api_test {

inline Pubkey Key(uint8_t fill) {
  std::array<uint8_t, 32> bytes;
  bytes.fill(fill);
  return Pubkey(bytes);
}

// Builds snapshots by hand: account → validator identity.
class SnapshotBuilder {
 public:
  SnapshotBuilder& Delegate(const Pubkey& account, const Pubkey& validator) {
    AccountState state;
    state.validator = validator;
    state.owner_program = Key(0xAA);
    state.delegation_slot = 10;
    state.lamports = 1000;
    state.last_event_slot = 10;
    state.delegated = true;
    accounts_.Upsert(account, state);
    ++count_;
    return *this;
  }
  // An account whose delegation ended at `slot` (the state keeps it, undelegated).
  SnapshotBuilder& Undelegate(const Pubkey& account, Slot slot) {
    AccountState state;
    state.owner_program = Key(0xAA);
    state.delegation_slot = 10;
    state.lamports = 1000;
    state.last_event_slot = slot;
    state.delegated = false;
    accounts_.Upsert(account, state);
    return *this;
  }
  std::shared_ptr<const Snapshot> Build(Slot applied_slot = 100,
                                        std::optional<Slot> limbo_since = std::nullopt,
                                        SnapshotChanges changes = {}) {
    return std::make_shared<const Snapshot>(accounts_, applied_slot, StateDigest(), limbo_since,
                                            count_, std::move(changes));
  }

 private:
  AccountMap accounts_;
  size_t count_ = 0;
};

// A signed-looking transaction (signatures are not checked by the router): `payer` signs and
// is writable, `writable` are writable unsigned keys, `program` is invoked.
inline Transaction MakeTransaction(const Pubkey& payer, const std::vector<Pubkey>& writable,
                                   const Pubkey& program, uint8_t signature_fill = 7) {
  Transaction tx;
  std::array<uint8_t, 64> sig;
  sig.fill(signature_fill);
  tx.signatures.push_back(Signature(sig));
  tx.header.num_required_signatures = 1;
  tx.header.num_readonly_unsigned = 1;
  tx.static_keys.push_back(payer);
  for (const Pubkey& key : writable) tx.static_keys.push_back(key);
  tx.static_keys.push_back(program);
  tx.recent_blockhash = Key(0x42);
  CompiledInstruction ix;
  ix.program_id_index = static_cast<uint8_t>(tx.static_keys.size() - 1);
  for (size_t i = 0; i + 1 < tx.static_keys.size(); ++i)
    ix.accounts.push_back(static_cast<uint8_t>(i));
  ix.data = "\x02\x00\x00\x00";
  tx.instructions.push_back(ix);
  return tx;
}

inline std::string TransactionBase64(const Transaction& tx) {
  return Base64Encode(*EncodeTransaction(tx));
}

inline std::string TransactionBase58(const Transaction& tx) {
  std::string wire = *EncodeTransaction(tx);
  return Base58Encode(std::span(reinterpret_cast<const uint8_t*>(wire.data()), wire.size()));
}

}  // namespace switchyard::api_test
