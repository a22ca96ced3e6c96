#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/pubkey.h"
#include "localnet/types.h"

namespace switchyard::localnet {

// The adapter between localnet's TxMessage and solana/'s wire formats.

// Looks up the addresses of an address lookup table account; nullopt when unknown.
using LookupTableFn = std::function<std::optional<std::vector<Pubkey>>(const Pubkey&)>;

// Decodes a sendTransaction/simulateTransaction payload (base58 or base64 text). v0 lookups
// are resolved through `lookup`.
absl::StatusOr<TxMessage> DecodeTransactionPayload(std::string_view text, bool base64,
                                                   const LookupTableFn& lookup);
// Fills `wire` and `message_bytes` of a legacy message built by hand (faucet, scenario).
void SerializeLegacy(TxMessage* tx);

const Pubkey& SystemProgramId();

// Variable-length base58 (getProgramAccounts memcmp bytes), at most 128 decoded bytes.
absl::StatusOr<std::string> Base58DecodeAny(std::string_view text);

// The delegation program's PDAs, memoized: each derivation costs tens of microseconds and the
// executor, the scenario and the cloner ask for the same ones again and again. Thread-safe;
// bounded (cleared past `max_entries`).
enum class PdaKind : uint8_t {
  kRecord,
  kMetadata,
  kDelegateBuffer,  // needs the owner program
  kUndelegateBuffer,
  kCommitState,
  kCommitRecord,
  kValidatorFeesVault,  // of a validator
};
class PdaCache {
 public:
  explicit PdaCache(size_t max_entries = 1 << 20) : max_entries_(max_entries) {}
  Pubkey Get(PdaKind kind, const Pubkey& account, const Pubkey& owner = Pubkey());
  Pubkey Record(const Pubkey& account) { return Get(PdaKind::kRecord, account); }
  Pubkey Metadata(const Pubkey& account) { return Get(PdaKind::kMetadata, account); }

 private:
  const size_t max_entries_;
  absl::Mutex mu_;
  absl::flat_hash_map<std::tuple<uint8_t, Pubkey, Pubkey>, Pubkey> map_ ABSL_GUARDED_BY(mu_);
};

enum class DelegationIxKind { kDelegate, kUndelegate, kOther };
struct DelegationIx {
  DelegationIxKind kind = DelegationIxKind::kOther;
  bool malformed = false;
  std::optional<Pubkey> validator;
  uint32_t commit_frequency_ms = 0;
};
// Decodes instruction `ix` of `tx`, which invokes the delegation program.
DelegationIx DecodeDelegationIx(const TxMessage& tx, const TxInstruction& ix);

}  // namespace switchyard::localnet
