#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "common/pubkey.h"

namespace switchyard::localnet {

// The scenario driver: a deterministic stream of Delegate and Undelegate transactions on
// the base layer, spread over several ER identities.
struct ScenarioOptions {
  bool enabled = false;
  uint64_t seed = 1;
  uint32_t accounts = 100;
  // Expected Delegate (Undelegate) transactions per slot; fractions are drawn per slot.
  double delegate_rate = 0.0;
  double undelegate_rate = 0.0;
  // ER identities the scenario delegates to; derived from the seed when empty.
  std::vector<Pubkey> identities;
  uint32_t identity_count = 3;
  // When set, the delegated set is appended to this file at every slot where it changed.
  std::string ground_truth_path;
  uint64_t stop_slot = 0;  // no new transactions from this slot on; 0: never stop
};

// Faults for ingest tests.
struct FaultOptions {
  // Close every WebSocket when this slot is applied (0 = never).
  uint64_t drop_websockets_at_slot = 0;
  // Fraction of notifications silently dropped, drawn from `seed`.
  double drop_notification_rate = 0.0;
  uint64_t seed = 1;
};

// Everything a localnet needs; validated once by the binary's main.
struct LocalnetOptions {
  std::string bind_address = "127.0.0.1";
  // HTTP JSON-RPC port; pubsub listens on port + 1. 0 picks free ports (two different
  // ones: see Localnet::ws_port()).
  uint16_t port = 8899;
  int io_threads = 0;  // 0 = number of cores
  absl::Duration slot_interval = absl::Milliseconds(400);
  bool verify_signatures = false;
  uint64_t fee_lamports_per_signature = 5000;
  // ER mode.
  bool er_mode = false;
  Pubkey identity;
  std::string base_url;
  absl::Duration base_timeout = absl::Seconds(5);
  // Bounds.
  size_t max_pending_transactions = 100000;
  size_t max_transaction_history = 1000000;
  size_t max_body_bytes = 1 << 20;
  size_t max_ws_queue = 65536;
  absl::Duration idle_timeout = absl::Seconds(120);
  // Accounts funded at genesis (lamports each).
  std::vector<std::pair<Pubkey, uint64_t>> genesis_accounts;
  ScenarioOptions scenario;
  FaultOptions faults;
};

}  // namespace switchyard::localnet
