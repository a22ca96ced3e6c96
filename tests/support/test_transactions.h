#pragma once

#include <sodium.h>

#include <string>
#include <vector>

#include "common/pubkey.h"
#include "solana/transaction.h"

namespace switchyard::testing {

// An ed25519 keypair made from a seed byte (the same byte gives the same key).
struct Keypair {
  Pubkey pubkey;
  unsigned char secret[crypto_sign_SECRETKEYBYTES];
};
Keypair MakeKeypair(uint8_t seed_byte);

// A legacy transaction signed by `signers`, base64 as sendTransaction takes it. `keys` are
// ordered as the header expects: writable signers, read-only signers, writable unsigned,
// read-only unsigned. With `corrupt_signature`, the first signature is made invalid.
std::string BuildTransaction(const std::vector<const Keypair*>& signers,
                             const std::vector<Pubkey>& keys, MessageHeader header,
                             const Hash& blockhash, std::vector<CompiledInstruction> ixs,
                             bool corrupt_signature = false);

// A Delegate of the system-owned `account` to `validator`, paid by `payer`.
std::string DelegateTransaction(const Keypair& payer, const Pubkey& account,
                                const Pubkey& validator, const Hash& blockhash);

// A system transfer of `lamports` from `from` to `to`.
std::string TransferTransaction(const Keypair& from, const Pubkey& to, uint64_t lamports,
                                const Hash& blockhash);

}  // namespace switchyard::testing
