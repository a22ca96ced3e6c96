#include "tests/support/test_transactions.h"

#include <algorithm>

#include "common/endian.h"
#include "solana/base64.h"
#include "solana/delegation.h"

namespace switchyard::testing {

Keypair MakeKeypair(uint8_t seed_byte) {
  Keypair k;
  unsigned char seed[crypto_sign_SEEDBYTES];
  std::fill(std::begin(seed), std::end(seed), seed_byte);
  crypto_sign_seed_keypair(k.pubkey.data(), k.secret, seed);
  return k;
}

std::string BuildTransaction(const std::vector<const Keypair*>& signers,
                             const std::vector<Pubkey>& keys, MessageHeader header,
                             const Hash& blockhash, std::vector<CompiledInstruction> ixs,
                             bool corrupt_signature) {
  Transaction tx;
  tx.header = header;
  tx.static_keys = keys;
  tx.recent_blockhash = blockhash;
  tx.instructions = std::move(ixs);
  tx.signatures.resize(signers.size());
  std::string message = EncodeMessage(tx).value();
  for (size_t i = 0; i < signers.size(); ++i) {
    crypto_sign_detached(tx.signatures[i].data(), nullptr, AsBytes(message.data()), message.size(),
                         signers[i]->secret);
  }
  if (corrupt_signature && !tx.signatures.empty()) tx.signatures[0].data()[5] ^= 1;
  return Base64Encode(EncodeTransaction(tx).value());
}

std::string DelegateTransaction(const Keypair& payer, const Pubkey& account,
                                const Pubkey& validator, const Hash& blockhash) {
  const std::vector<Pubkey> keys = {payer.pubkey,
                                    account,
                                    DelegateBufferPda(account, Pubkey()),
                                    DelegationRecordPda(account),
                                    DelegationMetadataPda(account),
                                    Pubkey(),
                                    DelegationProgramId()};
  return BuildTransaction(
      {&payer}, keys, MessageHeader{1, 0, 2}, blockhash,
      {CompiledInstruction{
          6, {0, 1, 5, 2, 3, 4, 5}, EncodeDelegateInstructionData(1000, {}, validator)}});
}

std::string TransferTransaction(const Keypair& from, const Pubkey& to, uint64_t lamports,
                                const Hash& blockhash) {
  std::string data;
  AppendU32LE(&data, 2);
  AppendU64LE(&data, lamports);
  return BuildTransaction({&from}, {from.pubkey, to, Pubkey()}, MessageHeader{1, 0, 1}, blockhash,
                          {CompiledInstruction{2, {0, 1}, data}});
}

}  // namespace switchyard::testing
