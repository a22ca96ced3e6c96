#pragma once

#include <map>
#include <string>

#include "absl/status/statusor.h"
#include "app/config.h"
#include "engine/event_log.h"
#include "engine/fold_runner.h"
#include "engine/state_store.h"
#include "ingest/watcher.h"

namespace switchyard {

// Where a (re)started watcher picks up: the delegations the log holds — the folded state
// plus every account event of the unsealed tail, written by an ingest that died before
// sealing them — and the last sealed slot.
struct IngestResume {
  std::map<Pubkey, AccountState> view;
  Slot last_sealed = 0;
};

// Folds the log until caught up with `runner` (initialised, not started), then reads the
// state and the unsealed tail.
absl::StatusOr<IngestResume> ResumeIngest(FoldRunner& runner, StateStore& store, EventLog& log);

// The watcher's options from the [ingest] config.
WatcherOptions WatcherOptionsFrom(const IngestConfig& config, Slot resume_after_slot);

// `switchyard ingest`: watches the base layer and writes delegation events to the configured
// log until SIGTERM or SIGINT. On start it folds the log into its state directory and seeds
// the watcher's view with that state plus the log's unsealed tail, so that a restart rewrites
// nothing the fold would not ignore.
int RunIngest(const Config& config);

}  // namespace switchyard
