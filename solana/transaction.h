#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "common/pubkey.h"

namespace switchyard {

// Size limits of a raw transaction as Solana's RPC enforces them (PACKET_DATA_SIZE and the
// encoded sizes that can hold it).
inline constexpr size_t kMaxTransactionSize = 1232;
inline constexpr size_t kMaxBase64TransactionSize = 1644;
inline constexpr size_t kMaxBase58TransactionSize = 1683;

// One instruction of a message: indexes into the message's account keys, and opaque data.
struct CompiledInstruction {
  uint8_t program_id_index = 0;
  std::vector<uint8_t> accounts;
  std::string data;

  friend bool operator==(const CompiledInstruction&, const CompiledInstruction&) = default;
};

// A v0 message's reference to accounts stored in an address lookup table.
struct AddressTableLookup {
  Pubkey table;
  std::vector<uint8_t> writable_indexes;
  std::vector<uint8_t> readonly_indexes;

  friend bool operator==(const AddressTableLookup&, const AddressTableLookup&) = default;
};

struct MessageHeader {
  uint8_t num_required_signatures = 0;
  uint8_t num_readonly_signed = 0;
  uint8_t num_readonly_unsigned = 0;

  friend bool operator==(const MessageHeader&, const MessageHeader&) = default;
};

// A decoded VersionedTransaction: a legacy message, or a v0 message with address-table
// lookups. A value type; any thread may use its own copies.
//
// DecodeTransaction only returns transactions that pass Solana's sanitize rules (see there),
// so on those the accessors below never see inconsistent counts; on hand-built values they
// stay in bounds too.
struct Transaction {
  bool versioned = false;
  uint8_t version = 0;  // 0 for v0; meaningless when !versioned
  std::vector<Signature> signatures;
  MessageHeader header;
  std::vector<Pubkey> static_keys;
  Hash recent_blockhash;
  std::vector<CompiledInstruction> instructions;
  std::vector<AddressTableLookup> lookups;  // always empty for legacy messages
  // The serialized message exactly as it was on the wire: what the signatures sign.
  std::string message_bytes;

  // Whether account `index` (into the full key list) must sign: the first
  // header.num_required_signatures static keys. Keys loaded from tables never sign.
  bool IsSigner(size_t index) const;
  // Whether static key `index` is writable by the header's rules: writable signers come
  // first, then read-only signers, then writable unsigned keys, then read-only unsigned keys.
  // This is the header only: the runtime also demotes invoked program ids and reserved
  // (sysvar/builtin) keys to read-only, which this does not model. Out of range: false.
  bool IsStaticWritable(size_t index) const;
  // The transaction id: its first signature (the fee payer's). An all-zero signature when
  // there is none, which a decoded transaction never has.
  const Signature& id() const;

  friend bool operator==(const Transaction&, const Transaction&) = default;
};

// Decodes a wire-format transaction and checks it the way Solana's RPC does before it
// forwards one (VersionedTransaction deserialization plus sanitize). Fails with
// InvalidArgument, naming the byte offset where it applies, on:
// - more than kMaxTransactionSize bytes, or bytes left over after the message;
// - a truncated field, including a truncated compact-u16 ("shortvec") length; a compact-u16
//   that is non-canonical (a redundant zero byte), longer than 3 bytes or over 65535;
// - more signatures than fit in the buffer, or a count different from the header's
//   num_required_signatures; a message version other than 0;
// - a header whose counts do not fit the static keys, or without a writable fee payer;
// - a program id index that is 0 (the fee payer) or not a static key, an account index
//   beyond the static and looked-up keys, more than 256 keys in all, a lookup that loads
//   nothing, or a static key listed twice.
// Never reads outside `wire`.
absl::StatusOr<Transaction> DecodeTransaction(std::span<const uint8_t> wire);

enum class TransactionEncoding { kBase58, kBase64 };

// Decodes the text form that sendTransaction/simulateTransaction carry. Rejects text longer
// than kMaxBase58TransactionSize/kMaxBase64TransactionSize before decoding it.
absl::StatusOr<Transaction> DecodeTransactionText(std::string_view text,
                                                  TransactionEncoding encoding);

// Serializes the message from the fields (message_bytes is ignored): the bytes to sign.
// Fails when a list is longer than a compact-u16 can count.
absl::StatusOr<std::string> EncodeMessage(const Transaction& transaction);

// Serializes the whole transaction to wire bytes (signatures, then EncodeMessage). Does not
// enforce kMaxTransactionSize, so tests can build oversized input.
absl::StatusOr<std::string> EncodeTransaction(const Transaction& transaction);

// An account of a transaction with its resolved key and permissions.
struct AccountMeta {
  Pubkey key;
  bool signer = false;
  bool writable = false;

  friend bool operator==(const AccountMeta&, const AccountMeta&) = default;
};

// The full account list the instructions index into: the static keys, then, for v0, the
// writable keys of every lookup in order, then the read-only keys of every lookup in order.
// Loaded writable keys are writable, loaded read-only keys are not, and no loaded key signs.
// `table_lookup` returns the addresses of a table, or nullptr when the table is unknown
// (NotFound). Fails with InvalidArgument when an index is past the end of its table or a key
// appears twice in the resolved list (the runtime's AccountLoadedTwice).
absl::StatusOr<std::vector<AccountMeta>> ResolveAccountKeys(
    const Transaction& transaction,
    absl::FunctionRef<const std::vector<Pubkey>*(const Pubkey& table)> table_lookup);

// The static keys that IsStaticWritable calls writable, in message order.
std::vector<Pubkey> StaticWritableKeys(const Transaction& transaction);

}  // namespace switchyard
