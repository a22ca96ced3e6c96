#include "solana/transaction.h"

#include <algorithm>
#include <utility>

#include "absl/status/status.h"
#include "common/base58.h"
#include "common/status.h"
#include "fmt/format.h"
#include "solana/base64.h"

namespace switchyard {
namespace {

constexpr uint8_t kVersionPrefix = 0x80;
constexpr size_t kMaxAccountKeys = 256;

absl::Status Invalid(std::string message) { return absl::InvalidArgumentError(std::move(message)); }

// Reads the fields of a wire transaction in order. Every read checks the bytes left first,
// so nothing reads past the buffer; errors name the field and its byte offset.
class WireReader {
 public:
  explicit WireReader(std::span<const uint8_t> bytes) : bytes_(bytes) {}

  size_t offset() const { return offset_; }
  size_t remaining() const { return bytes_.size() - offset_; }

  // Solana's "shortvec": 7 bits per byte, least significant first, at most 3 bytes; the
  // encoding must be the shortest one (no zero byte after the first).
  absl::StatusOr<uint16_t> CompactU16(std::string_view what) {
    const size_t start = offset_;
    uint32_t value = 0;
    for (size_t nth = 0;; ++nth) {
      if (offset_ >= bytes_.size()) {
        return Invalid(fmt::format("truncated compact-u16 for {} at byte {}", what, start));
      }
      const uint8_t byte = bytes_[offset_++];
      if (byte == 0 && nth > 0) {
        return Invalid(fmt::format("non-canonical compact-u16 for {} at byte {}", what, start));
      }
      if (nth == 2 && (byte & 0x80) != 0) {
        return Invalid(
            fmt::format("compact-u16 for {} at byte {} is longer than 3 bytes", what, start));
      }
      value |= static_cast<uint32_t>(byte & 0x7f) << (7 * nth);
      if (value > 0xffff) {
        return Invalid(fmt::format("compact-u16 for {} at byte {} overflows 16 bits", what, start));
      }
      if ((byte & 0x80) == 0) return static_cast<uint16_t>(value);
    }
  }

  absl::StatusOr<uint8_t> U8(std::string_view what) {
    if (remaining() < 1) return Truncated(what, 1);
    return bytes_[offset_++];
  }

  absl::StatusOr<std::span<const uint8_t>> Bytes(size_t n, std::string_view what) {
    if (remaining() < n) return Truncated(what, n);
    auto span = bytes_.subspan(offset_, n);
    offset_ += n;
    return span;
  }

  template <typename T>
  absl::StatusOr<T> Read(std::string_view what) {
    ASSIGN_OR_RETURN(auto span, Bytes(T::kSize, what));
    return T::FromBytes(span.data());
  }

  // A compact-u16 count followed by that many single-byte indexes.
  absl::StatusOr<std::vector<uint8_t>> IndexList(std::string_view what) {
    ASSIGN_OR_RETURN(const uint16_t count, CompactU16(fmt::format("{} count", what)));
    ASSIGN_OR_RETURN(auto span, Bytes(count, what));
    return std::vector<uint8_t>(span.begin(), span.end());
  }

 private:
  absl::Status Truncated(std::string_view what, size_t need) const {
    return Invalid(fmt::format("truncated {} at byte {}: needs {} bytes, {} left", what, offset_,
                               need, remaining()));
  }

  std::span<const uint8_t> bytes_;
  size_t offset_ = 0;
};

void AppendCompactU16(std::string* out, uint16_t value) {
  uint32_t rest = value;
  while (true) {
    const uint8_t low = rest & 0x7f;
    rest >>= 7;
    if (rest == 0) {
      out->push_back(static_cast<char>(low));
      return;
    }
    out->push_back(static_cast<char>(low | 0x80));
  }
}

absl::Status AppendCount(std::string* out, size_t count, std::string_view what) {
  if (count > 0xffff) {
    return Invalid(
        fmt::format("{} has {} entries, more than a compact-u16 can count", what, count));
  }
  AppendCompactU16(out, static_cast<uint16_t>(count));
  return absl::OkStatus();
}

template <size_t N>
void AppendFixed(std::string* out, const FixedBytes<N>& value) {
  out->append(reinterpret_cast<const char*>(value.data()), N);
}

// Solana's Message/v0::Message sanitize plus VersionedTransaction::sanitize and the RPC's
// duplicate-key check, on a fully parsed transaction.
absl::Status Sanitize(const Transaction& tx) {
  const MessageHeader& h = tx.header;
  const size_t num_static = tx.static_keys.size();
  if (h.num_required_signatures != tx.signatures.size()) {
    return Invalid(fmt::format("header requires {} signatures but the transaction has {}",
                               h.num_required_signatures, tx.signatures.size()));
  }
  if (size_t{h.num_required_signatures} + h.num_readonly_unsigned > num_static) {
    return Invalid(fmt::format(
        "header counts {} signers and {} read-only unsigned accounts but there are {} static keys",
        h.num_required_signatures, h.num_readonly_unsigned, num_static));
  }
  if (h.num_readonly_signed >= h.num_required_signatures) {
    return Invalid(
        fmt::format("no writable fee payer: {} read-only signers of {} required signatures",
                    h.num_readonly_signed, h.num_required_signatures));
  }
  size_t num_loaded = 0;
  for (size_t i = 0; i < tx.lookups.size(); ++i) {
    const AddressTableLookup& lookup = tx.lookups[i];
    if (lookup.writable_indexes.empty() && lookup.readonly_indexes.empty()) {
      return Invalid(fmt::format("address table lookup {} ({}) loads no accounts", i,
                                 lookup.table.ToBase58()));
    }
    num_loaded += lookup.writable_indexes.size() + lookup.readonly_indexes.size();
  }
  const size_t num_keys = num_static + num_loaded;
  if (num_keys > kMaxAccountKeys) {
    return Invalid(fmt::format("{} account keys ({} static, {} looked up), more than {}", num_keys,
                               num_static, num_loaded, kMaxAccountKeys));
  }
  for (size_t i = 0; i < tx.instructions.size(); ++i) {
    const CompiledInstruction& ix = tx.instructions[i];
    if (ix.program_id_index == 0) {
      return Invalid(fmt::format("instruction {}: program id index 0 is the fee payer", i));
    }
    if (ix.program_id_index >= num_static) {
      return Invalid(
          fmt::format("instruction {}: program id index {} out of range ({} static keys)", i,
                      ix.program_id_index, num_static));
    }
    for (const uint8_t index : ix.accounts) {
      if (index >= num_keys) {
        return Invalid(fmt::format(
            "instruction {}: account index {} out of range ({} account keys)", i, index, num_keys));
      }
    }
  }
  std::vector<Pubkey> sorted = tx.static_keys;
  std::sort(sorted.begin(), sorted.end());
  const auto duplicate = std::adjacent_find(sorted.begin(), sorted.end());
  if (duplicate != sorted.end()) {
    return Invalid(
        fmt::format("account key {} appears twice in the static keys", duplicate->ToBase58()));
  }
  return absl::OkStatus();
}

}  // namespace

bool Transaction::IsSigner(size_t index) const { return index < header.num_required_signatures; }

bool Transaction::IsStaticWritable(size_t index) const {
  const size_t num_static = static_keys.size();
  if (index >= num_static) return false;
  const size_t signers = header.num_required_signatures;
  if (index < signers) {
    return header.num_readonly_signed < signers && index < signers - header.num_readonly_signed;
  }
  return header.num_readonly_unsigned <= num_static &&
         index < num_static - header.num_readonly_unsigned;
}

const Signature& Transaction::id() const {
  static const Signature kNone;
  return signatures.empty() ? kNone : signatures.front();
}

absl::StatusOr<Transaction> DecodeTransaction(std::span<const uint8_t> wire) {
  if (wire.size() > kMaxTransactionSize) {
    return Invalid(fmt::format("transaction is {} bytes, more than the {}-byte limit", wire.size(),
                               kMaxTransactionSize));
  }
  WireReader r(wire);
  Transaction tx;

  ASSIGN_OR_RETURN(const uint16_t num_signatures, r.CompactU16("signature count"));
  if (size_t{num_signatures} * Signature::kSize > r.remaining()) {
    return Invalid(fmt::format("too many signatures: {} signatures need {} bytes, {} left",
                               num_signatures, size_t{num_signatures} * Signature::kSize,
                               r.remaining()));
  }
  tx.signatures.reserve(num_signatures);
  for (size_t i = 0; i < num_signatures; ++i) {
    ASSIGN_OR_RETURN(auto signature, r.Read<Signature>("signature"));
    tx.signatures.push_back(signature);
  }

  const size_t message_start = r.offset();
  ASSIGN_OR_RETURN(const uint8_t first, r.U8("message header"));
  if ((first & kVersionPrefix) != 0) {
    tx.versioned = true;
    tx.version = first & ~kVersionPrefix;
    if (tx.version != 0) {
      return Invalid(
          fmt::format("unsupported transaction version {} at byte {}", tx.version, message_start));
    }
    ASSIGN_OR_RETURN(tx.header.num_required_signatures, r.U8("message header"));
  } else {
    tx.header.num_required_signatures = first;
  }
  ASSIGN_OR_RETURN(tx.header.num_readonly_signed, r.U8("message header"));
  ASSIGN_OR_RETURN(tx.header.num_readonly_unsigned, r.U8("message header"));

  ASSIGN_OR_RETURN(const uint16_t num_keys, r.CompactU16("account key count"));
  if (size_t{num_keys} * Pubkey::kSize > r.remaining()) {
    return Invalid(fmt::format("truncated account keys at byte {}: {} keys need {} bytes, {} left",
                               r.offset(), num_keys, size_t{num_keys} * Pubkey::kSize,
                               r.remaining()));
  }
  tx.static_keys.reserve(num_keys);
  for (size_t i = 0; i < num_keys; ++i) {
    ASSIGN_OR_RETURN(auto key, r.Read<Pubkey>("account key"));
    tx.static_keys.push_back(key);
  }
  ASSIGN_OR_RETURN(tx.recent_blockhash, r.Read<Hash>("recent blockhash"));

  // Each instruction takes at least 3 bytes, which bounds the reservation.
  ASSIGN_OR_RETURN(const uint16_t num_instructions, r.CompactU16("instruction count"));
  tx.instructions.reserve(std::min<size_t>(num_instructions, r.remaining() / 3));
  for (size_t i = 0; i < num_instructions; ++i) {
    CompiledInstruction ix;
    ASSIGN_OR_RETURN(ix.program_id_index, r.U8("instruction program id index"));
    ASSIGN_OR_RETURN(ix.accounts, r.IndexList("instruction account index"));
    ASSIGN_OR_RETURN(const uint16_t data_size, r.CompactU16("instruction data length"));
    ASSIGN_OR_RETURN(auto data, r.Bytes(data_size, "instruction data"));
    ix.data.assign(reinterpret_cast<const char*>(data.data()), data.size());
    tx.instructions.push_back(std::move(ix));
  }

  if (tx.versioned) {
    // Each lookup takes at least 34 bytes.
    ASSIGN_OR_RETURN(const uint16_t num_lookups, r.CompactU16("address table lookup count"));
    tx.lookups.reserve(std::min<size_t>(num_lookups, r.remaining() / 34));
    for (size_t i = 0; i < num_lookups; ++i) {
      AddressTableLookup lookup;
      ASSIGN_OR_RETURN(lookup.table, r.Read<Pubkey>("address table key"));
      ASSIGN_OR_RETURN(lookup.writable_indexes, r.IndexList("writable lookup index"));
      ASSIGN_OR_RETURN(lookup.readonly_indexes, r.IndexList("read-only lookup index"));
      tx.lookups.push_back(std::move(lookup));
    }
  }

  if (r.remaining() != 0) {
    return Invalid(
        fmt::format("{} trailing bytes after the message at byte {}", r.remaining(), r.offset()));
  }
  tx.message_bytes.assign(reinterpret_cast<const char*>(wire.data() + message_start),
                          wire.size() - message_start);
  RETURN_IF_ERROR(Sanitize(tx));
  return tx;
}

absl::StatusOr<Transaction> DecodeTransactionText(std::string_view text,
                                                  TransactionEncoding encoding) {
  absl::StatusOr<std::string> wire;
  switch (encoding) {
    case TransactionEncoding::kBase64:
      if (text.size() > kMaxBase64TransactionSize) {
        return Invalid(fmt::format("base64 transaction is {} characters, more than {}", text.size(),
                                   kMaxBase64TransactionSize));
      }
      wire = Base64Decode(text);
      break;
    case TransactionEncoding::kBase58:
      if (text.size() > kMaxBase58TransactionSize) {
        return Invalid(fmt::format("base58 transaction is {} characters, more than {}", text.size(),
                                   kMaxBase58TransactionSize));
      }
      wire = Base58DecodeBytes(text, kMaxTransactionSize);
      break;
  }
  if (!wire.ok()) {
    return Invalid(fmt::format("transaction text: {}", std::string(wire.status().message())));
  }
  return DecodeTransaction(
      std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(wire->data()), wire->size()));
}

absl::StatusOr<std::string> EncodeMessage(const Transaction& tx) {
  std::string out;
  out.reserve(tx.static_keys.size() * Pubkey::kSize + 128);
  if (tx.versioned) out.push_back(static_cast<char>(kVersionPrefix | tx.version));
  out.push_back(static_cast<char>(tx.header.num_required_signatures));
  out.push_back(static_cast<char>(tx.header.num_readonly_signed));
  out.push_back(static_cast<char>(tx.header.num_readonly_unsigned));
  RETURN_IF_ERROR(AppendCount(&out, tx.static_keys.size(), "static keys"));
  for (const Pubkey& key : tx.static_keys) AppendFixed(&out, key);
  AppendFixed(&out, tx.recent_blockhash);
  RETURN_IF_ERROR(AppendCount(&out, tx.instructions.size(), "instructions"));
  for (const CompiledInstruction& ix : tx.instructions) {
    out.push_back(static_cast<char>(ix.program_id_index));
    RETURN_IF_ERROR(AppendCount(&out, ix.accounts.size(), "instruction accounts"));
    out.append(ix.accounts.begin(), ix.accounts.end());
    RETURN_IF_ERROR(AppendCount(&out, ix.data.size(), "instruction data"));
    out.append(ix.data);
  }
  if (tx.versioned) {
    RETURN_IF_ERROR(AppendCount(&out, tx.lookups.size(), "address table lookups"));
    for (const AddressTableLookup& lookup : tx.lookups) {
      AppendFixed(&out, lookup.table);
      RETURN_IF_ERROR(AppendCount(&out, lookup.writable_indexes.size(), "writable indexes"));
      out.append(lookup.writable_indexes.begin(), lookup.writable_indexes.end());
      RETURN_IF_ERROR(AppendCount(&out, lookup.readonly_indexes.size(), "read-only indexes"));
      out.append(lookup.readonly_indexes.begin(), lookup.readonly_indexes.end());
    }
  }
  return out;
}

absl::StatusOr<std::string> EncodeTransaction(const Transaction& tx) {
  std::string out;
  RETURN_IF_ERROR(AppendCount(&out, tx.signatures.size(), "signatures"));
  for (const Signature& signature : tx.signatures) AppendFixed(&out, signature);
  ASSIGN_OR_RETURN(std::string message, EncodeMessage(tx));
  out.append(message);
  return out;
}

absl::StatusOr<std::vector<AccountMeta>> ResolveAccountKeys(
    const Transaction& tx,
    absl::FunctionRef<const std::vector<Pubkey>*(const Pubkey& table)> table_lookup) {
  std::vector<AccountMeta> accounts;
  accounts.reserve(tx.static_keys.size());
  for (size_t i = 0; i < tx.static_keys.size(); ++i) {
    accounts.push_back({tx.static_keys[i], tx.IsSigner(i), tx.IsStaticWritable(i)});
  }
  if (!tx.lookups.empty()) {
    std::vector<const std::vector<Pubkey>*> tables;
    tables.reserve(tx.lookups.size());
    for (const AddressTableLookup& lookup : tx.lookups) {
      const std::vector<Pubkey>* addresses = table_lookup(lookup.table);
      if (addresses == nullptr) {
        return absl::NotFoundError(
            fmt::format("address lookup table {} not found", lookup.table.ToBase58()));
      }
      tables.push_back(addresses);
    }
    for (const bool writable : {true, false}) {
      for (size_t t = 0; t < tx.lookups.size(); ++t) {
        const AddressTableLookup& lookup = tx.lookups[t];
        const auto& indexes = writable ? lookup.writable_indexes : lookup.readonly_indexes;
        for (const uint8_t index : indexes) {
          if (index >= tables[t]->size()) {
            return Invalid(fmt::format(
                "lookup index {} out of range for address lookup table {} with {} addresses", index,
                lookup.table.ToBase58(), tables[t]->size()));
          }
          accounts.push_back({(*tables[t])[index], false, writable});
        }
      }
    }
  }
  std::vector<Pubkey> sorted;
  sorted.reserve(accounts.size());
  for (const AccountMeta& account : accounts) sorted.push_back(account.key);
  std::sort(sorted.begin(), sorted.end());
  const auto duplicate = std::adjacent_find(sorted.begin(), sorted.end());
  if (duplicate != sorted.end()) {
    return Invalid(fmt::format("account key {} appears twice in the resolved account keys",
                               duplicate->ToBase58()));
  }
  return accounts;
}

std::vector<Pubkey> StaticWritableKeys(const Transaction& tx) {
  std::vector<Pubkey> keys;
  for (size_t i = 0; i < tx.static_keys.size(); ++i) {
    if (tx.IsStaticWritable(i)) keys.push_back(tx.static_keys[i]);
  }
  return keys;
}

}  // namespace switchyard
