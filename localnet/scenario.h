#pragma once

#include <cstdint>
#include <fstream>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "common/pubkey.h"
#include "localnet/bank.h"
#include "localnet/options.h"

namespace switchyard::localnet {

// The scenario driver: before each slot it submits a deterministic (seeded) number of
// Delegate and Undelegate transactions over `accounts` scenario accounts and several ER
// identities; after each slot it records the true delegated set (from the ledger itself)
// and appends it to the ground-truth file when it changed. Runs on the slot thread only.
class ScenarioDriver {
 public:
  ScenarioDriver(ScenarioOptions options, Bank* bank);

  // Creates the scenario's accounts at genesis and opens the ground-truth file.
  absl::Status Start();
  void BeforeSlot();
  void AfterSlot(const SlotEffects& effects);
  void Stop();

  const std::vector<Pubkey>& identities() const { return identities_; }
  const std::vector<Pubkey>& accounts() const { return accounts_; }
  const Pubkey& owner_program() const { return owner_program_; }
  // The true delegated set: account -> authority.
  const std::map<Pubkey, Pubkey>& delegated() const { return truth_; }
  // The Delegate transaction of each delegated account's current delegation.
  const std::map<Pubkey, Signature>& delegate_signatures() const { return truth_signatures_; }

 private:
  Signature NextSignature();
  void SubmitDelegate(const Pubkey& account, const Pubkey& identity);
  void SubmitUndelegate(const Pubkey& account, const Pubkey& identity);
  int Draw(double rate);
  const std::string& Name(const Pubkey& key);

  const ScenarioOptions options_;
  Bank* const bank_;
  std::mt19937_64 rng_;
  uint64_t counter_ = 0;
  Pubkey payer_;
  Pubkey owner_program_;
  std::vector<Pubkey> identities_;
  std::vector<Pubkey> accounts_;
  // What the driver has asked for (including transactions not yet applied).
  absl::flat_hash_map<Pubkey, Pubkey> intended_;
  std::map<Pubkey, Pubkey> truth_;
  std::map<Pubkey, Signature> truth_signatures_;
  // The Delegate transactions submitted and not yet seen applied: signature -> account.
  absl::flat_hash_map<Signature, Pubkey> submitted_delegates_;
  bool truth_written_ = false;
  // Base58 of the keys the ground truth names, computed once.
  absl::flat_hash_map<Pubkey, std::string> names_;
  std::ofstream ground_truth_;
};

}  // namespace switchyard::localnet
