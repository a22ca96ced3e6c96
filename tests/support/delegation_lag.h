#pragma once

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "tests/support/test_transactions.h"

namespace switchyard::testing {

struct DelegationLagOptions {
  std::string switchyard_binary;
  std::string localnet_binary;
  std::string work_dir;  // ready files, serve's config and data
  int max_rounds = 64;   // accounts funded at genesis, one per round
  int base_slot_ms = 400;
  // Extra flags of the base localnet (its defaults close idle HTTP connections after 5 s,
  // as a node's HTTP server does).
  std::vector<std::string> base_flags;
};

// The routing lag of new delegations through the whole product: a localnet base layer, one
// localnet ER, and `switchyard serve` with ingest in front of them. Each round waits, sends a
// Delegate of a fresh account to the ER on base, and times from the Delegate's confirmation
// on base (getSignatureStatuses) until the router answers getDelegationStatus with the
// account delegated and routes getAccountInfo of it to the ER. The harness's own clients
// are idle while the round waits too. Kills its processes when destroyed.
class DelegationLagHarness {
 public:
  static absl::StatusOr<std::unique_ptr<DelegationLagHarness>> Start(DelegationLagOptions options);
  ~DelegationLagHarness();

  // One round: `idle` of nothing, then a delegation. The lag, or why the round failed (the
  // account not routed to the ER within `deadline`).
  absl::StatusOr<absl::Duration> Round(absl::Duration idle,
                                       absl::Duration deadline = absl::Seconds(10));

  uint16_t admin_port() const;

  struct Impl;

 private:
  explicit DelegationLagHarness(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace switchyard::testing
