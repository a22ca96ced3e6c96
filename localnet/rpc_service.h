#pragma once

#include <atomic>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "common/clock.h"
#include "common/pubkey.h"
#include "localnet/bank.h"
#include "localnet/http_faults.h"
#include "localnet/options.h"

namespace switchyard::localnet {

// Where an ER-mode localnet gets the accounts it has not seen yet (see BaseCloner).
class AccountSource {
 public:
  virtual ~AccountSource() = default;
  // Loads those of `keys` that the base has into the bank, then calls `done` (on any
  // thread, exactly once, also on failure).
  virtual void Ensure(std::vector<Pubkey> keys, std::function<void()> done) = 0;
};

// The JSON-RPC methods of the localnet over HTTP. Owned by Localnet; any thread may call
// Handle. Request handling never blocks: in ER mode, requests that need accounts not yet
// cloned are finished by the AccountSource's thread.
class RpcService {
 public:
  using Reply = std::function<void(std::string)>;

  // `faults` (the slot lag and the lamports lie of the answers) outlives the service.
  RpcService(const LocalnetOptions& options, Bank* bank, AccountSource* source, const Clock* clock,
             const RuntimeFaults* faults);

  // Handles one HTTP body (a request or a batch); calls `reply` exactly once.
  void Handle(std::string_view body, Reply reply);
  // Handles a body with what the bank has now.
  std::string HandleNow(std::string_view body);

  const Pubkey& identity() const { return identity_; }

 private:
  std::vector<Pubkey> KeysToClone(std::string_view body) const;

  const LocalnetOptions& options_;
  Bank* const bank_;
  AccountSource* const source_;
  const Clock* const clock_;
  const RuntimeFaults* const faults_;
  Pubkey identity_;
  Pubkey faucet_;
  std::atomic<uint64_t> airdrop_counter_{0};
};

// The account that funds requestAirdrop; the localnet gives it a large balance at genesis.
Pubkey FaucetPubkey();

}  // namespace switchyard::localnet
