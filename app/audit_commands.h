#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "app/config.h"
#include "common/slot.h"

namespace switchyard {

// The read-only subcommands of the `switchyard` binary: they open the state as a RocksDB
// secondary instance, so they run beside a `serve` or `fold` that holds the data directory
// (and on a replayed state directory alike), and see what it has committed. Each returns the
// process exit code; results go to stdout (or --out), progress and errors to stderr.

struct StateGetArgs {
  std::string account;
  std::optional<Slot> at_slot;
};
int RunStateGet(const Config& config, const StateGetArgs& args);

struct AuditArgs {
  std::string account;
  Slot from_slot = 0;
  std::optional<Slot> to_slot;
  std::string format = "text";  // text, json, csv
};
int RunAudit(const Config& config, const AuditArgs& args);

struct HistoryExportArgs {
  Slot from_slot = 0;
  std::optional<Slot> to_slot;
  std::string format = "jsonl";  // jsonl, csv
  std::string out;               // empty: stdout
  // Progress on stderr at most this often (0: none).
  int64_t progress_interval_ms = 1000;
};
int RunHistoryExport(const Config& config, const HistoryExportArgs& args);

struct HistoryDiffArgs {
  std::vector<Slot> at;         // exactly two
  std::string format = "text";  // text, json
};
int RunHistoryDiff(const Config& config, const HistoryDiffArgs& args);

}  // namespace switchyard
