#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "app/config.h"

namespace switchyard {

// The subcommands of the `switchyard` binary. Each returns the process exit code and
// prints its result to stdout, errors to stderr.

struct LogAppendArgs {
  std::string jsonl_path;
  bool skip_invalid = false;
};
int RunLogAppend(const Config& config, const LogAppendArgs& args);

struct LogDumpArgs {
  int64_t from = 0;
  std::optional<int64_t> limit;
};
int RunLogDump(const Config& config, const LogDumpArgs& args);

// `switchyard log drop-before --offset N`: retention for the embedded log (Kafka's is the
// topic's retention). A state whose next offset is below N can no longer be folded from it.
struct LogDropBeforeArgs {
  int64_t offset = 0;
};
int RunLogDropBefore(const Config& config, const LogDropBeforeArgs& args);

int RunFold(const Config& config);

struct ReplayArgs {
  Slot to_slot = 0;
  std::string out_dir;
};
int RunReplay(const Config& config, const ReplayArgs& args);

int RunVerify(const Config& config);

}  // namespace switchyard
