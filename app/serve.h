#pragma once

#include <string>

#include "app/config.h"

namespace switchyard {

struct ServeArgs {
  // When set, {"api":PORT,"admin":PORT} is written here once both listeners accept.
  std::string ready_file;
  // When set and the state directory holds no state yet: restore the snapshot in this
  // directory into it first (storage/state_snapshot.h), then fold the log from its offsets.
  std::string bootstrap_from;
};

// `switchyard serve`: folds the log into the state and routes JSON-RPC requests against its
// snapshots, with the admin endpoints on their own port, until SIGTERM or SIGINT. Returns the
// process exit code: 0 after a clean drain, 1 when start-up failed, 2 for a config error.
int RunServe(const Config& config, const ServeArgs& args);

}  // namespace switchyard
