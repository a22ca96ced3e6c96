#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "localnet/bank.h"
#include "solana/er_record.h"

namespace switchyard::localnet {

// The Magic Domain Program's ER records on a local base layer (docs/architecture.md §18, §20):
// each record is an account of the program at ["er-record", identity], written with the
// program's own layout and rent-exempt lamports, so that getProgramAccounts and
// programSubscribe serve it as a validator serves the real program's. The program itself does
// not run: records are set at genesis and changed through Apply (POST /registry), whose effect
// lands in the next slot as the program's Register, Sync or Unregister would. Thread-safe.
class LocalErRegistry {
 public:
  explicit LocalErRegistry(Bank* bank) : bank_(bank) {}

  // Writes `record` at genesis (before the first slot).
  void SetAtGenesis(const ErRecord& record);

  // A control request, JSON:
  //   {"op":"register"|"sync", "identity":"PUBKEY", "status":"active"|"draining"|"offline",
  //    "addr":"http://127.0.0.1:PORT", "block_time_ms":50, "base_fee":0, "load_average":0,
  //    "country_code":"276", "features":[0,1]}  (fields left out: 0 / active / empty)
  //   {"op":"unregister", "identity":"PUBKEY"}  (the record is closed: 0 lamports, no data)
  //   {"op":"raw", "identity":"PUBKEY", "data_base64":"..."}  (any bytes at the identity's
  //   record address, for records of other versions or malformed ones)
  // answers {"pda":"...","slot":S} (S: the slot the change lands in), or an error.
  absl::StatusOr<std::string> Apply(std::string_view request);

 private:
  Bank* const bank_;
};

// The lamports a rent-exempt account of `size` bytes holds (Solana's default rent).
uint64_t RentExemptLamports(size_t size);

}  // namespace switchyard::localnet
