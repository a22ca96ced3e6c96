#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "localnet/types.h"

namespace switchyard::localnet {

// Account data encodings of the JSON-RPC API that localnet supports.
enum class DataEncoding { kBinary, kBase58, kBase64, kBase64Zstd };

struct DataSlice {
  size_t offset = 0;
  size_t length = 0;
};

// Parses an "encoding" value; fails with a message naming what is supported.
absl::StatusOr<DataEncoding> ParseDataEncoding(std::string_view text);

// Appends `text` as a JSON string (quoted and escaped).
void AppendJsonString(std::string* out, std::string_view text);

// Appends Solana's UiAccount object. Fails only when base58 data is too long.
absl::Status AppendAccountJson(std::string* out, const Account& account, DataEncoding encoding,
                               const std::optional<DataSlice>& slice);

// The JSON of a processed transaction as getTransaction shows it with "json" encoding.
// `with_version` adds the "version" field (when the client set maxSupportedTransactionVersion).
void AppendTransactionJson(std::string* out, const TxRecord& record, bool with_version,
                           bool base64);

// What getBlock shows of a block: its transactions in full, their signatures, or neither;
// the (always empty) rewards; the encoding of full transactions.
enum class BlockDetails { kFull, kSignatures, kNone };
struct BlockView {
  BlockDetails details = BlockDetails::kFull;
  bool rewards = true;
  bool with_version = false;
  bool base64 = false;
};

// The JSON of a block as getBlock shows it.
void AppendBlockJson(std::string* out, const BlockRecord& block, const BlockView& view);

}  // namespace switchyard::localnet
