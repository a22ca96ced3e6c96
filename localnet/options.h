#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "common/pubkey.h"
#include "solana/er_record.h"

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
  uint64_t start_slot = 0;  // no transactions before this slot
  uint64_t stop_slot = 0;   // no new transactions from this slot on; 0: never stop
};

// Faults for the tests of clients (ingest, the router's upstreams). Every draw is made from
// `seed`: the same sequence of requests meets the same faults.
struct FaultOptions {
  // Close every WebSocket when this slot is applied (0 = never).
  uint64_t drop_websockets_at_slot = 0;
  // Fraction of notifications silently dropped, drawn from `seed`.
  double drop_notification_rate = 0.0;
  uint64_t seed = 1;
  // Fractions of HTTP JSON-RPC requests (POSTs) that meet a fault instead of their answer;
  // together at most 1. A 429 carries `Retry-After: retry_after_seconds`; a 5xx has the
  // status `server_error_status`; a reset connection is cut with a TCP RST once the request
  // is read, before any byte of the answer.
  double http_429_rate = 0.0;
  uint32_t retry_after_seconds = 1;
  double http_5xx_rate = 0.0;
  unsigned server_error_status = 503;
  double reset_rate = 0.0;
  // Fraction of requests answered normally after `delay`.
  double delay_rate = 0.0;
  absl::Duration delay = absl::Milliseconds(0);
  // HTTP without pipelining: a request read while the next one is already buffered is answered
  // with Connection: close and the connection closed, the next one unanswered (as servers that
  // do not pipeline do).
  bool no_pipelining = false;
  // HTTP answers report the slot (getSlot, every context slot, minContextSlot checks, block
  // height and epoch info) this many slots behind the bank's.
  uint64_t slot_lag = 0;
  // HTTP answers report every account's lamports this much above the bank's (getBalance,
  // getAccountInfo, getMultipleAccounts, getProgramAccounts): an endpoint that lies.
  uint64_t lie_lamports = 0;
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
  // Transactions older than this many slots are forgotten, as by a node whose ledger was
  // pruned; 0: never by age.
  uint64_t max_transaction_history_slots = 0;
  size_t max_body_bytes = 1 << 20;
  size_t max_ws_queue = 65536;
  // A JSON-RPC answer of at least this many bytes is gzip-compressed (level 1) for a request
  // whose Accept-Encoding takes gzip, as a node behind a compressing proxy answers; 0: never.
  size_t gzip_min_bytes = 1024;
  // An HTTP connection on which no byte of a next request arrives for this long is closed,
  // as a node's HTTP server (5 s) closes idle keep-alive connections; zero: never.
  absl::Duration idle_timeout = absl::Seconds(5);
  // A request must be read and answered within this once its first byte has arrived.
  absl::Duration request_timeout = absl::Seconds(30);
  // Every WebSocket is pinged at this interval; one from which nothing (a pong, a message)
  // arrives between a ping and the next is closed. Zero: no pings, never closed for silence.
  absl::Duration ws_ping_interval = absl::Seconds(15);
  // A transaction's recent blockhash is valid for this many blocks after it was the latest
  // (Solana's MAX_PROCESSING_AGE); getLatestBlockhash's lastValidBlockHeight is the block
  // height plus this.
  uint64_t blockhash_validity_blocks = 150;
  // Accounts funded at genesis (lamports each).
  std::vector<std::pair<Pubkey, uint64_t>> genesis_accounts;
  // Base mode: the Magic Domain Program's ER records at genesis (--registry-er).
  std::vector<ErRecord> registry_records;
  ScenarioOptions scenario;
  FaultOptions faults;
};

}  // namespace switchyard::localnet
