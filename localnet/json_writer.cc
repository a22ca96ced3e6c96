#include "localnet/json_writer.h"

#include <iterator>

#include "absl/container/flat_hash_map.h"
#include "common/base58.h"
#include "fmt/format.h"
#include "solana/base64.h"
#include "zstd.h"

namespace switchyard::localnet {

absl::StatusOr<DataEncoding> ParseDataEncoding(std::string_view text) {
  if (text == "base64") return DataEncoding::kBase64;
  if (text == "base58") return DataEncoding::kBase58;
  if (text == "binary") return DataEncoding::kBinary;
  if (text == "base64+zstd") return DataEncoding::kBase64Zstd;
  return absl::InvalidArgumentError(
      fmt::format("Invalid params: unsupported encoding: {}. Supported encodings: base58, base64, "
                  "base64+zstd",
                  text));
}

void AppendJsonString(std::string* out, std::string_view text) {
  out->push_back('"');
  for (char c : text) {
    switch (c) {
      case '"':
        out->append("\\\"");
        break;
      case '\\':
        out->append("\\\\");
        break;
      case '\n':
        out->append("\\n");
        break;
      case '\r':
        out->append("\\r");
        break;
      case '\t':
        out->append("\\t");
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          fmt::format_to(std::back_inserter(*out), "\\u{:04x}", static_cast<int>(c));
        } else {
          out->push_back(c);
        }
    }
  }
  out->push_back('"');
}

namespace {

// Owners repeat across accounts; base58 costs more than the rest of an answer.
const std::string& CachedBase58(const Pubkey& key) {
  thread_local absl::flat_hash_map<Pubkey, std::string> cache;
  auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  if (cache.size() >= 4096) cache.clear();
  return cache.emplace(key, key.ToBase58()).first->second;
}

// One zstd frame holding `data` (with its content size, as a validator writes it).
absl::StatusOr<std::string> ZstdCompress(std::string_view data) {
  std::string frame(ZSTD_compressBound(data.size()), '\0');
  const size_t size = ZSTD_compress(frame.data(), frame.size(), data.data(), data.size(), 1);
  if (ZSTD_isError(size)) {
    return absl::InternalError(fmt::format("zstd: {}", ZSTD_getErrorName(size)));
  }
  frame.resize(size);
  return frame;
}

}  // namespace

absl::Status AppendAccountJson(std::string* out, const Account& account, DataEncoding encoding,
                               const std::optional<DataSlice>& slice) {
  std::string_view data = account.data;
  if (slice.has_value()) {
    data = slice->offset >= data.size() ? std::string_view()
                                        : data.substr(slice->offset, slice->length);
  }
  out->append("{\"data\":");
  switch (encoding) {
    case DataEncoding::kBase64:
      out->append("[\"");
      out->append(Base64Encode(data));
      out->append("\",\"base64\"]");
      break;
    case DataEncoding::kBase64Zstd: {
      auto frame = ZstdCompress(data);
      if (!frame.ok()) return frame.status();
      out->append("[\"");
      out->append(Base64Encode(*frame));
      out->append("\",\"base64+zstd\"]");
      break;
    }
    case DataEncoding::kBase58:
    case DataEncoding::kBinary: {
      if (data.size() > 128) {
        return absl::InvalidArgumentError(
            "Encoded binary (base 58) data should be less than 128 bytes, please use Base64 "
            "encoding.");
      }
      const std::string text =
          Base58Encode({reinterpret_cast<const uint8_t*>(data.data()), data.size()});
      if (encoding == DataEncoding::kBinary) {
        AppendJsonString(out, text);
      } else {
        out->append("[\"");
        out->append(text);
        out->append("\",\"base58\"]");
      }
      break;
    }
  }
  fmt::format_to(std::back_inserter(*out),
                 ",\"executable\":{},\"lamports\":{},\"owner\":\"{}\",\"rentEpoch\":"
                 "18446744073709551615,\"space\":{}}}",
                 account.executable, account.lamports, CachedBase58(account.owner),
                 account.data.size());
  return absl::OkStatus();
}

namespace {

void AppendKeyArray(std::string* out, const std::vector<Pubkey>& keys) {
  out->push_back('[');
  for (size_t i = 0; i < keys.size(); ++i) {
    if (i > 0) out->push_back(',');
    out->push_back('"');
    out->append(keys[i].ToBase58());
    out->push_back('"');
  }
  out->push_back(']');
}

void AppendU64Array(std::string* out, const std::vector<uint64_t>& values) {
  out->push_back('[');
  for (size_t i = 0; i < values.size(); ++i) {
    if (i > 0) out->push_back(',');
    fmt::format_to(std::back_inserter(*out), "{}", values[i]);
  }
  out->push_back(']');
}

// A transaction with its meta; getTransaction adds its slot and block time, a block's entry
// does not.
void AppendTransactionObject(std::string* out, const TxRecord& record, bool with_version,
                             bool base64, bool with_slot_and_time) {
  const TxMessage& tx = record.message;
  auto it = std::back_inserter(*out);
  out->push_back('{');
  if (with_slot_and_time) fmt::format_to(it, "\"blockTime\":{},", record.block_time);
  fmt::format_to(it, "\"meta\":{{\"computeUnitsConsumed\":{},\"err\":{},", record.units_consumed,
                 record.err_json);
  fmt::format_to(
      it, "\"fee\":{},\"innerInstructions\":[],\"loadedAddresses\":{{\"readonly\":", record.fee);
  AppendKeyArray(out, tx.loaded_readonly);
  out->append(",\"writable\":");
  AppendKeyArray(out, tx.loaded_writable);
  out->append("},\"logMessages\":[");
  for (size_t i = 0; i < record.logs.size(); ++i) {
    if (i > 0) out->push_back(',');
    AppendJsonString(out, record.logs[i]);
  }
  out->append("],\"postBalances\":");
  AppendU64Array(out, record.post_balances);
  out->append(",\"postTokenBalances\":[],\"preBalances\":");
  AppendU64Array(out, record.pre_balances);
  out->append(",\"preTokenBalances\":[],\"rewards\":[],\"status\":");
  if (record.err_json == "null") {
    out->append("{\"Ok\":null}");
  } else {
    fmt::format_to(it, "{{\"Err\":{}}}", record.err_json);
  }
  out->push_back('}');
  if (with_slot_and_time) fmt::format_to(it, ",\"slot\":{}", record.slot);
  out->append(",\"transaction\":");
  if (base64) {
    out->append("[\"");
    out->append(Base64Encode(tx.wire));
    out->append("\",\"base64\"]");
  } else {
    out->append("{\"message\":{\"accountKeys\":");
    AppendKeyArray(out, tx.static_keys);
    if (tx.version >= 0) {
      out->append(",\"addressTableLookups\":");
      out->append(tx.lookups_json);
    }
    fmt::format_to(it,
                   ",\"header\":{{\"numReadonlySignedAccounts\":{},"
                   "\"numReadonlyUnsignedAccounts\":{},\"numRequiredSignatures\":{}}},"
                   "\"instructions\":[",
                   tx.num_readonly_signed, tx.num_readonly_unsigned, tx.num_required_signatures);
    for (size_t i = 0; i < tx.instructions.size(); ++i) {
      const TxInstruction& ix = tx.instructions[i];
      if (i > 0) out->push_back(',');
      out->append("{\"accounts\":[");
      for (size_t a = 0; a < ix.accounts.size(); ++a) {
        if (a > 0) out->push_back(',');
        fmt::format_to(it, "{}", ix.accounts[a]);
      }
      out->append("],\"data\":\"");
      out->append(Base58Encode({reinterpret_cast<const uint8_t*>(ix.data.data()), ix.data.size()}));
      fmt::format_to(it, "\",\"programIdIndex\":{},\"stackHeight\":null}}", ix.program_index);
    }
    fmt::format_to(
        it, "],\"recentBlockhash\":\"{}\"}},\"signatures\":", tx.recent_blockhash.ToBase58());
    out->push_back('[');
    for (size_t i = 0; i < tx.signatures.size(); ++i) {
      if (i > 0) out->push_back(',');
      out->push_back('"');
      out->append(tx.signatures[i].ToBase58());
      out->push_back('"');
    }
    out->append("]}");
  }
  if (with_version) {
    if (tx.version < 0) {
      out->append(",\"version\":\"legacy\"");
    } else {
      fmt::format_to(it, ",\"version\":{}", tx.version);
    }
  }
  out->push_back('}');
}

}  // namespace

void AppendTransactionJson(std::string* out, const TxRecord& record, bool with_version,
                           bool base64) {
  AppendTransactionObject(out, record, with_version, base64, true);
}

void AppendBlockJson(std::string* out, const BlockRecord& block, const BlockView& view) {
  auto it = std::back_inserter(*out);
  fmt::format_to(it,
                 "{{\"blockHeight\":{},\"blockTime\":{},\"blockhash\":\"{}\",\"parentSlot\":{},"
                 "\"previousBlockhash\":\"{}\"",
                 block.block_height, block.block_time, block.blockhash.ToBase58(),
                 block.parent_slot, block.previous_blockhash.ToBase58());
  if (view.rewards) out->append(",\"rewards\":[]");
  if (view.details == BlockDetails::kSignatures) {
    out->append(",\"signatures\":[");
    for (size_t i = 0; i < block.transactions.size(); ++i) {
      if (i > 0) out->push_back(',');
      out->push_back('"');
      out->append(block.transactions[i]->id.ToBase58());
      out->push_back('"');
    }
    out->push_back(']');
  } else if (view.details == BlockDetails::kFull) {
    out->append(",\"transactions\":[");
    for (size_t i = 0; i < block.transactions.size(); ++i) {
      if (i > 0) out->push_back(',');
      AppendTransactionObject(out, *block.transactions[i], view.with_version, view.base64, false);
    }
    out->push_back(']');
  }
  out->push_back('}');
}

}  // namespace switchyard::localnet
