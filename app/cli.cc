#include "app/cli.h"

#include <CLI/CLI.hpp>
#include <iostream>

#include "app/audit_commands.h"
#include "app/commands.h"
#include "app/ingest_command.h"
#include "app/serve.h"
#include "app/snapshot_commands.h"

namespace switchyard {

int RunCli(int argc, char** argv) {
  CLI::App app{"Switchyard: a delegation-aware JSON-RPC router for Solana and Ephemeral Rollups"};
  app.require_subcommand(1);

  std::optional<std::string> config_path;
  std::optional<std::string> data_dir;
  std::optional<std::string> log_url;
  auto add_common = [&](CLI::App* cmd) {
    cmd->add_option("--config", config_path, "TOML configuration file");
    cmd->add_option("--data-dir", data_dir, "Data directory (overrides storage.data_dir)");
    cmd->add_option("--log", log_url,
                    "embedded, or kafka://HOST:PORT[,HOST:PORT]/TOPIC (overrides log.url)");
  };

  CLI::App* log = app.add_subcommand("log", "Read and write the embedded event log");
  log->require_subcommand(1);
  LogAppendArgs append_args;
  CLI::App* append = log->add_subcommand("append", "Append events given as JSON lines");
  append->add_option("--jsonl", append_args.jsonl_path, "File of events, one JSON object a line")
      ->required();
  append->add_flag("--skip-invalid", append_args.skip_invalid,
                   "Skip invalid lines instead of rejecting the file");
  add_common(append);
  LogDumpArgs dump_args;
  CLI::App* dump = log->add_subcommand("dump", "Print log records as JSON lines");
  dump->add_option("--from", dump_args.from, "First offset")->check(CLI::NonNegativeNumber);
  dump->add_option("--limit", dump_args.limit, "Number of records")->check(CLI::PositiveNumber);
  add_common(dump);

  LogDropBeforeArgs drop_args;
  CLI::App* drop = log->add_subcommand(
      "drop-before", "Delete the embedded log's records before an offset (retention)");
  drop->add_option("--offset", drop_args.offset, "The first offset kept")
      ->required()
      ->check(CLI::NonNegativeNumber);
  add_common(drop);

  CLI::App* fold = app.add_subcommand("fold", "Fold the log into the state until caught up");
  add_common(fold);

  StateGetArgs get_args;
  CLI::App* state = app.add_subcommand("state", "Read the delegation state");
  state->require_subcommand(1);
  CLI::App* get = state->add_subcommand("get", "Show one account");
  get->add_option("account", get_args.account, "Account (base58)")->required();
  get->add_option("--at-slot", get_args.at_slot, "As of the end of this slot");
  add_common(get);

  AuditArgs audit_args;
  CLI::App* audit = app.add_subcommand(
      "audit", "Show an account's delegation history (beside a running serve, too)");
  audit->add_option("account", audit_args.account, "Account (base58)")->required();
  audit->add_option("--from-slot", audit_args.from_slot, "First slot shown");
  audit->add_option("--to-slot", audit_args.to_slot, "Last slot shown");
  audit->add_option("--format", audit_args.format, "text, json or csv")
      ->check(CLI::IsMember({"text", "json", "csv"}));
  add_common(audit);

  AuditDigestArgs audit_digest_args;
  CLI::App* audit_digest = app.add_subcommand(
      "audit-digest",
      "SHA-256 of the delegated set as of the end of a slot, in the canonical form of "
      "docs/audit-digest.md (beside a running serve, too)");
  audit_digest->add_option("--slot", audit_digest_args.slot, "As of the end of this slot")
      ->required();
  audit_digest->add_option("--format", audit_digest_args.format, "text (the hex digest) or json")
      ->check(CLI::IsMember({"text", "json"}));
  add_common(audit_digest);

  CLI::App* history = app.add_subcommand("history", "Read the history of every account");
  history->require_subcommand(1);
  HistoryExportArgs export_args;
  CLI::App* history_export = history->add_subcommand(
      "export", "Every history row of a slot range, in slot order, streamed");
  history_export->add_option("--from-slot", export_args.from_slot, "First slot");
  history_export->add_option("--to-slot", export_args.to_slot, "Last slot");
  history_export->add_option("--format", export_args.format, "jsonl or csv")
      ->check(CLI::IsMember({"jsonl", "csv"}));
  history_export->add_option("--out", export_args.out, "Write here instead of stdout");
  history_export
      ->add_option("--progress-ms", export_args.progress_interval_ms,
                   "Progress on stderr at most this often (0: none)")
      ->check(CLI::NonNegativeNumber);
  add_common(history_export);
  HistoryDiffArgs diff_args;
  CLI::App* history_diff = history->add_subcommand(
      "diff", "The accounts whose delegation differs between two slots, with the events");
  history_diff->add_option("--at", diff_args.at, "A slot; given twice")->required()->expected(2);
  history_diff->add_option("--format", diff_args.format, "text or json")
      ->check(CLI::IsMember({"text", "json"}));
  add_common(history_diff);

  ReplayArgs replay_args;
  CLI::App* replay = app.add_subcommand("replay", "Fold a fresh state from the log up to a slot");
  replay->add_option("--to-slot", replay_args.to_slot, "Last slot to apply")->required();
  replay->add_option("--out", replay_args.out_dir, "Directory for the new state")->required();
  add_common(replay);

  VerifyPeerArgs verify_peer_args;
  CLI::App* verify = app.add_subcommand(
      "verify",
      "Replay to the live applied slot and compare digests (exit 1 on a mismatch); with --peer, "
      "compare the sealed digests with another replica's instead (exit 1 on a divergence, 2 "
      "when the peer cannot be checked)");
  verify->add_option("--peer", verify_peer_args.peer,
                     "Admin URL of another replica, http://HOST:PORT");
  verify
      ->add_option("--max-slots", verify_peer_args.max_slots,
                   "With --peer: compare at most this many sealed slots (the highest ones "
                   "at or below the peer's highest)")
      ->check(CLI::PositiveNumber);
  verify
      ->add_option("--timeout-ms", verify_peer_args.timeout_ms,
                   "With --peer: the deadline of each request to the peer")
      ->check(CLI::PositiveNumber);
  add_common(verify);

  CLI::App* snapshot = app.add_subcommand(
      "snapshot", "Make a snapshot of the state, or start a new replica's state from one");
  snapshot->require_subcommand(1);
  SnapshotCreateArgs create_args;
  CLI::App* snapshot_create = snapshot->add_subcommand(
      "create",
      "A RocksDB checkpoint of the state with its manifest (offsets, applied slot, "
      "digest, files) in DIR, a new or empty directory");
  snapshot_create->add_option("dir", create_args.dir, "Directory of the snapshot")->required();
  snapshot_create->add_option(
      "--admin", create_args.admin_url,
      "Admin URL of the serve that holds the state, http://HOST:PORT: it makes the snapshot "
      "without stopping (POST /admin/snapshot)");
  snapshot_create
      ->add_option("--timeout-ms", create_args.timeout_ms, "With --admin: the request's deadline")
      ->check(CLI::PositiveNumber);
  add_common(snapshot_create);
  SnapshotRestoreArgs restore_args;
  CLI::App* snapshot_restore = snapshot->add_subcommand(
      "restore", "Verify a snapshot (manifest, files, digest) and restore it as a new state");
  snapshot_restore
      ->add_option(
          "source", restore_args.dir,
          "Directory of the snapshot, or a serve's admin URL http://HOST:PORT (a new "
          "export of its state is downloaded) or http://HOST:PORT/admin/snapshot/export/ID")
      ->required();
  snapshot_restore->add_option("--state-dir", restore_args.state_dir,
                               "The new state directory, new or empty (default: DATA_DIR/state)");
  add_common(snapshot_restore);

  ServeArgs serve_args;
  CLI::App* serve = app.add_subcommand(
      "serve", "Fold the log and route JSON-RPC requests, with admin endpoints, until SIGTERM");
  serve->add_option("--ready-file", serve_args.ready_file,
                    "Write {\"api\":PORT,\"admin\":PORT} here once both listeners accept");
  serve->add_option("--bootstrap-from", serve_args.bootstrap_from,
                    "Snapshot directory, or a peer serve's admin URL http://HOST:PORT, to restore "
                    "first when the state directory holds no state (ignored once it does); the "
                    "fold then reads the log from its offsets");
  add_common(serve);

  std::vector<std::string> ingest_bases;
  std::optional<int64_t> reconcile_ms;
  CLI::App* ingest = app.add_subcommand(
      "ingest", "Watch the base layer and write delegation events to the log until SIGTERM");
  ingest
      ->add_option("--base", ingest_bases,
                   "Base layer JSON-RPC URL; repeated or comma-separated for several, in order "
                   "of preference (overrides ingest.endpoints and ingest.base_url)")
      ->delimiter(',');
  ingest
      ->add_option("--reconcile-interval-ms", reconcile_ms,
                   "Full reconciliation period (overrides ingest.reconcile_interval_ms)")
      ->check(CLI::PositiveNumber);
  add_common(ingest);

  CLI11_PARSE(app, argc, argv);

  absl::StatusOr<Config> config = LoadConfig(config_path);
  if (!config.ok()) {
    std::cerr << "error: " << config.status().message() << "\n";
    return 2;
  }
  if (data_dir) config->data_dir = *data_dir;
  if (log_url) config->log_url = *log_url;

  if (*append) return RunLogAppend(*config, append_args);
  if (*dump) return RunLogDump(*config, dump_args);
  if (*drop) return RunLogDropBefore(*config, drop_args);
  if (*fold) return RunFold(*config);
  if (*get) return RunStateGet(*config, get_args);
  if (*audit) return RunAudit(*config, audit_args);
  if (*audit_digest) return RunAuditDigest(*config, audit_digest_args);
  if (*history_export) return RunHistoryExport(*config, export_args);
  if (*history_diff) return RunHistoryDiff(*config, diff_args);
  if (*replay) return RunReplay(*config, replay_args);
  if (*verify) {
    if (!verify_peer_args.peer.empty()) return RunVerifyPeer(*config, verify_peer_args);
    return RunVerify(*config);
  }
  if (*snapshot_create) return RunSnapshotCreate(*config, create_args);
  if (*snapshot_restore) return RunSnapshotRestore(*config, restore_args);
  if (*serve) return RunServe(*config, serve_args);
  if (*ingest) {
    if (!ingest_bases.empty()) {
      config->ingest.endpoints.clear();
      for (const std::string& url : ingest_bases) config->ingest.endpoints.push_back({url, ""});
    }
    if (reconcile_ms) config->ingest.reconcile_interval_ms = *reconcile_ms;
    if (config->ingest.endpoints.empty()) {
      std::cerr << "error: ingest needs --base, ingest.endpoints or ingest.base_url\n";
      return 2;
    }
    return RunIngest(*config);
  }
  return 2;
}

}  // namespace switchyard
