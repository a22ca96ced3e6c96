#include "localnet/wire.h"

#include <utility>

#include "fmt/format.h"
#include "solana/delegation.h"
#include "solana/transaction.h"

namespace switchyard::localnet {

const Pubkey& SystemProgramId() {
  static const Pubkey key;  // 11111111111111111111111111111111: all zero bytes
  return key;
}

absl::StatusOr<TxMessage> DecodeTransactionPayload(std::string_view text, bool base64,
                                                   const LookupTableFn& lookup) {
  auto decoded = DecodeTransactionText(
      text, base64 ? TransactionEncoding::kBase64 : TransactionEncoding::kBase58);
  if (!decoded.ok()) return decoded.status();
  Transaction& tx = *decoded;
  // Tables are copied here so the FunctionRef below can hand out stable pointers.
  std::vector<std::pair<Pubkey, std::vector<Pubkey>>> tables;
  for (const AddressTableLookup& l : tx.lookups) {
    auto addresses = lookup(l.table);
    if (!addresses.has_value()) {
      return absl::InvalidArgumentError(
          fmt::format("address lookup table {} not found", l.table.ToBase58()));
    }
    tables.emplace_back(l.table, *std::move(addresses));
  }
  auto metas = ResolveAccountKeys(tx, [&](const Pubkey& table) -> const std::vector<Pubkey>* {
    for (const auto& [key, addresses] : tables) {
      if (key == table) return &addresses;
    }
    return nullptr;
  });
  if (!metas.ok()) return metas.status();

  TxMessage out;
  out.signatures = tx.signatures;
  out.num_required_signatures = tx.header.num_required_signatures;
  out.num_readonly_signed = tx.header.num_readonly_signed;
  out.num_readonly_unsigned = tx.header.num_readonly_unsigned;
  out.static_keys = tx.static_keys;
  for (size_t i = tx.static_keys.size(); i < metas->size(); ++i) {
    ((*metas)[i].writable ? out.loaded_writable : out.loaded_readonly).push_back((*metas)[i].key);
  }
  for (const AccountMeta& meta : *metas) {
    out.signer.push_back(meta.signer);
    out.writable.push_back(meta.writable);
  }
  // Invoked programs are read-only at runtime.
  for (const CompiledInstruction& ix : tx.instructions) {
    if (ix.program_id_index < out.writable.size()) out.writable[ix.program_id_index] = false;
  }
  out.recent_blockhash = tx.recent_blockhash;
  for (CompiledInstruction& ix : tx.instructions) {
    out.instructions.push_back(
        TxInstruction{ix.program_id_index, std::move(ix.accounts), std::move(ix.data)});
  }
  out.version = tx.versioned ? tx.version : -1;
  if (tx.versioned) {
    std::string json = "[";
    for (size_t i = 0; i < tx.lookups.size(); ++i) {
      const AddressTableLookup& l = tx.lookups[i];
      if (i > 0) json.push_back(',');
      json.append(
          fmt::format("{{\"accountKey\":\"{}\",\"readonlyIndexes\":[{}],"
                      "\"writableIndexes\":[{}]}}",
                      l.table.ToBase58(), fmt::join(l.readonly_indexes, ","),
                      fmt::join(l.writable_indexes, ",")));
    }
    json.push_back(']');
    out.lookups_json = std::move(json);
  }
  out.message_bytes = std::move(tx.message_bytes);
  auto wire = EncodeTransaction(tx);
  if (wire.ok()) out.wire = *std::move(wire);
  return out;
}

void SerializeLegacy(TxMessage* tx) {
  Transaction wire;
  wire.signatures = tx->signatures;
  wire.header = MessageHeader{tx->num_required_signatures, tx->num_readonly_signed,
                              tx->num_readonly_unsigned};
  wire.static_keys = tx->static_keys;
  wire.recent_blockhash = tx->recent_blockhash;
  for (const TxInstruction& ix : tx->instructions) {
    wire.instructions.push_back(CompiledInstruction{ix.program_index, ix.accounts, ix.data});
  }
  if (auto message = EncodeMessage(wire); message.ok()) tx->message_bytes = *std::move(message);
  if (auto bytes = EncodeTransaction(wire); bytes.ok()) tx->wire = *std::move(bytes);
}

absl::StatusOr<std::string> Base58DecodeAny(std::string_view text) {
  static constexpr std::string_view kAlphabet =
      "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz";
  constexpr size_t kMaxBytes = 128;
  std::string bytes;  // big-endian magnitude
  size_t zeros = 0;
  while (zeros < text.size() && text[zeros] == '1') ++zeros;
  for (size_t i = zeros; i < text.size(); ++i) {
    const size_t digit = kAlphabet.find(text[i]);
    if (digit == std::string_view::npos) {
      return absl::InvalidArgumentError("invalid base58 character");
    }
    uint32_t carry = static_cast<uint32_t>(digit);
    for (auto it = bytes.rbegin(); it != bytes.rend(); ++it) {
      carry += static_cast<uint8_t>(*it) * 58u;
      *it = static_cast<char>(carry & 0xff);
      carry >>= 8;
    }
    while (carry > 0) {
      bytes.insert(bytes.begin(), static_cast<char>(carry & 0xff));
      carry >>= 8;
    }
    if (bytes.size() + zeros > kMaxBytes) return absl::InvalidArgumentError("base58 too long");
  }
  return std::string(zeros, '\0') + bytes;
}

Pubkey PdaCache::Get(PdaKind kind, const Pubkey& account, const Pubkey& owner) {
  const auto key = std::make_tuple(static_cast<uint8_t>(kind), account, owner);
  {
    absl::MutexLock lock(&mu_);
    auto it = map_.find(key);
    if (it != map_.end()) return it->second;
  }
  Pubkey pda;
  switch (kind) {
    case PdaKind::kRecord:
      pda = DelegationRecordPda(account);
      break;
    case PdaKind::kMetadata:
      pda = DelegationMetadataPda(account);
      break;
    case PdaKind::kDelegateBuffer:
      pda = DelegateBufferPda(account, owner);
      break;
    case PdaKind::kUndelegateBuffer:
      pda = UndelegateBufferPda(account);
      break;
    case PdaKind::kCommitState:
      pda = CommitStatePda(account);
      break;
    case PdaKind::kCommitRecord:
      pda = CommitRecordPda(account);
      break;
    case PdaKind::kValidatorFeesVault:
      pda = ValidatorFeesVaultPda(account);
      break;
  }
  absl::MutexLock lock(&mu_);
  if (map_.size() >= max_entries_) map_.clear();
  map_.emplace(key, pda);
  return pda;
}

DelegationIx DecodeDelegationIx(const TxMessage& tx, const TxInstruction& ix) {
  DelegationIx out;
  std::vector<Pubkey> keys;
  keys.reserve(tx.key_count());
  for (size_t i = 0; i < tx.key_count(); ++i) keys.push_back(tx.key(i));
  auto decoded = DecodeDelegationInstruction(
      CompiledInstruction{ix.program_index, ix.accounts, ix.data}, keys);
  if (!decoded.ok()) {
    out.malformed = true;
    return out;
  }
  switch (decoded->kind) {
    case DelegationInstructionKind::kDelegate:
      out.kind = DelegationIxKind::kDelegate;
      break;
    case DelegationInstructionKind::kUndelegate:
      out.kind = DelegationIxKind::kUndelegate;
      break;
    case DelegationInstructionKind::kOther:
      out.kind = DelegationIxKind::kOther;
      break;
  }
  out.validator = decoded->validator;
  out.commit_frequency_ms = decoded->commit_frequency_ms;
  return out;
}

}  // namespace switchyard::localnet
