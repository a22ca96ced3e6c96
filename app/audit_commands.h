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

// `audit-digest --slot S`: the SHA-256 audit digest of the delegated set as of the end of slot
// S (engine/audit_digest.h, docs/audit-digest.md), rebuilt from the history; S may not be above
// the applied slot. Hex on stdout, or with --format json {"slot","accounts","sha256",
// "applied_slot"}.
struct AuditDigestArgs {
  Slot slot = 0;
  std::string format = "text";  // text, json
};
int RunAuditDigest(const Config& config, const AuditDigestArgs& args);

// `verify --peer URL`: this replica's sealed digests against another replica's, read from its
// admin listener (CheckPeer, engine/peer_check.h). Exit 0 when every slot compared agrees (or
// none could be compared), 1 at the first slot whose digests differ, 2 when the check could not
// be made (the peer unreachable or answering something else, no local state).
struct VerifyPeerArgs {
  std::string peer;  // http://HOST:PORT of its admin listener
  size_t max_slots = 100;
  int64_t timeout_ms = 5000;  // each request to the peer
};
int RunVerifyPeer(const Config& config, const VerifyPeerArgs& args);

}  // namespace switchyard
