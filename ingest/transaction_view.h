#pragma once

#include <optional>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "common/pubkey.h"
#include "common/slot.h"
#include "solana/delegation.h"

namespace switchyard {

// The delegation-program instructions of one confirmed transaction.
struct TransactionDelegations {
  Slot slot = 0;
  Signature signature;
  bool failed = false;  // meta.err was set: the instructions had no effect
  std::vector<DelegationInstruction> instructions;  // Delegate and Undelegate only
  // The full account list (static keys, then loaded writable and read-only addresses) and
  // meta.postBalances in its order (empty when the node did not send them).
  std::vector<Pubkey> account_keys;
  std::vector<uint64_t> post_balances;

  // The lamports `account` held after the transaction, when the answer said.
  std::optional<uint64_t> PostBalanceOf(const Pubkey& account) const;
};

// Parses a JSON-RPC response to getTransaction(signature, {"encoding":"base64",
// "maxSupportedTransactionVersion":0}). v0 account keys are resolved with
// meta.loadedAddresses. A null result (not found yet) is NotFound; anything malformed is
// InvalidArgument. Instructions of other programs are skipped; delegation-program
// instructions other than Delegate and Undelegate are left out.
absl::StatusOr<TransactionDelegations> ParseTransactionResponse(std::string_view body);

}  // namespace switchyard
