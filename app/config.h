#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "api/admin/admin_handler.h"
#include "api/net/http_server.h"
#include "api/pubsub/pubsub_server.h"
#include "api/rpc/er_prober.h"
#include "api/rpc/router.h"
#include "engine/fold_runner.h"
#include "engine/peer_check.h"
#include "ingest/er_registry_watcher.h"

namespace switchyard {

// The longest duration a config key (`*_ms`, `*_s`) may name: 30 days. A deadline is a clock
// reading plus a duration, and a duration near the top of int64 milliseconds overflows the
// clock's nanoseconds into a deadline in the past, so every wait would end at once.
inline constexpr int64_t kMaxConfigDurationMs = int64_t{30} * 24 * 60 * 60 * 1000;

// The process configuration, read once at start-up from a TOML file. Every key is optional;
// unknown keys, wrong types and integers too large for their field (a weight past 2^32 - 1, a
// cache.max_mb whose bytes pass 2^64 - 1) are errors that name the key and the file. A duration
// (`*_ms`, `*_s`; not log.kafka_retention_ms, which is the broker's) is at most 30 days.
//
//   [storage]
//   data_dir = "switchyard-data"   # holds log/ (the embedded log) and state/ (RocksDB)
//   sync = true                    # fsync every log append and fold commit
//   block_cache_mb = 32
//   ingest_min_rows = 25000        # a fold commit of this many history rows or more is written
//                                  # as table files (docs/architecture.md, "Crash safety"); 0:
//                                  # never
//
//   [log]
//   url = "embedded"               # or "kafka://HOST:PORT[,HOST:PORT...]/TOPIC"
//   kafka_partitions = 12          # when Switchyard creates the topic
//   kafka_replication_factor = 3   # when Switchyard creates the topic; unset: the broker's
//                                  # default.replication.factor
//   kafka_min_insync_replicas = 2  # the topic's min.insync.replicas (at most the replication
//                                  # factor); unset: the broker's default
//   kafka_retention_ms = 604800000 # the topic's retention.ms, -1 to keep every record; unset:
//                                  # the broker's log.retention.*; longer than the time between
//                                  # two snapshots (docs/architecture.md §7, "Retention")
//   kafka_properties = {}          # librdkafka properties for the producer and the readers,
//                                  # e.g. {"security.protocol" = "SSL"}; librdkafka warns
//                                  # about one that does not apply to a client
//   An existing topic keeps its settings; Switchyard warns about each one weaker than asked.
//
//   [fold]
//   max_batch_records = 50000
//   publish_interval_ms = 50
//   max_pending_per_partition = 200000
//   pipelined_commits = true       # write a batch while the next is folded (catch-up)
//
// and, for `serve`, the sections of ServeConfig below.

// What `switchyard serve` needs besides storage, log and fold:
//
//   [api]          listen = "127.0.0.1:8899", threads = 0, max_connections = 10000,
//                  max_body_bytes = 1048576, max_batch_size = 100, max_pipelined = 16,
//                  idle_timeout_ms = 60000, header_timeout_ms = 10000, body_timeout_ms = 30000,
//                  write_timeout_ms = 30000, drain_timeout_ms = 5000,
//                  cors_origins = ["*"] (the origins whose browser pages may call the api and
//                  pubsub listeners: "*" any, as Solana's RPC server; a list of exact origins
//                  such as "https://app.example.com", whose Origin is echoed with Vary:
//                  Origin; [] turns CORS off. A WebSocket handshake carrying an Origin the list
//                  does not allow gets 403, also with []),
//                  gzip = true (answers compressed for clients that accept gzip; request
//                  bodies with Content-Encoding: gzip inflated within max_body_bytes),
//                  gzip_level = 1 (1 fastest .. 9 smallest), gzip_min_bytes = 1024 (smaller
//                  answers are sent as they are), gzip_upstreams = true (a plain forward for
//                  a client that accepts gzip asks its upstream for gzip and passes the
//                  compressed bytes through; docs/architecture.md §9)
//   [admin]        listen = "127.0.0.1:9899", ready_max_lag_slots = 32,
//                  probe_interval_ms = 1000, refresh_interval_ms = 1000,
//                  snapshot_export_ttl_ms = 600000 (an export no one reads is removed)
//   [consistency]  max_wait_ms = 500
//   [router]       identity = "PUBKEY", fqdn = "", verify_owner = true,
//                  verify_owner_multiple = false,
//                  signature_memory_size = 100000, upstream_timeout_ms = 10000,
//                  upstream_max_connections = 64, upstream_max_idle = 64,
//                  upstream_max_waiting = 4096, upstream_deadline_ms = 0 (0: twice
//                  upstream_timeout_ms; a request's bound over every attempt and hedge),
//                  verify_tls = true
//   [upstream_health]  probe_interval_ms = 1000 (the same setting as admin.probe_interval_ms),
//                  eject_consecutive_failures = 5, eject_error_rate = 0.5, window_ms = 10000,
//                  min_requests = 20, max_slot_lag = 50, min_ejection_ms = 1000,
//                  recover_probes = 2, ramp_up_ms = 3000, latency_decay = 0.2,
//                  circuit_failure_rate = 0.5, circuit_min_requests = 10,
//                  circuit_window_ms = 5000, circuit_open_ms = 5000, half_open_trials = 3,
//                  max_attempts = 3, retry_budget_ratio = 0.2, retry_budget_min = 10,
//                  hedge = true, hedge_delay_ms = 0 (0: each endpoint's p95),
//                  hedge_min_delay_ms = 5   (docs/architecture.md §11)
//   [upstreams.NAME]  endpoints = [{url = "http://127.0.0.1:7799", weight = 1}]
//   [[ers]]        identity = "PUBKEY", upstream = "er1", fqdn = "", base_fee = 0,
//                  block_time_ms = 50, country_code = "", pin = false (true: the registry's
//                  record of this identity changes nothing, not its status, not its closing)
//   [registry]     enabled = false (ERs discovered from the Magic Domain Program's records),
//                  url = "" (the base layer's RPC; empty: the first endpoint of the base
//                  upstream), pubsub_url = "" (empty: derived from url), program =
//                  "DmnRGfyyftzacFb1XadYhWF6vWqXwtQk5tbr6XgR3BA1", resync_interval_ms = 30000
//                  (a full getProgramAccounts; closed records are seen here),
//                  request_timeout_ms = 5000   (docs/architecture.md §20)
//   [er_probe]     enabled = true, interval_ms = 30000, timeout_ms = 5000 (getIdentity of
//                  each ER: EWMA 0.85/0.15, 3 failures in a row → unreachable)
//   [routing]      default_er = "er1", forward_unknown_methods = false,
//                  methods = {"getAsset*" = "indexer"}
//
//   [cache]        enabled = true, coalesce = true, max_mb = 64, max_entry_kb = 256,
//                  final_ttl_ms = 3600000, slot_ttl_ms = 400 (ERs: their block_time_ms),
//                  negative_ttl_ms = 500, redis = "" ("redis://HOST:PORT[/DB]": the shared
//                  tier), redis_timeout_ms = 5,
//                  methods = {"getAsset*" = "final"} (never | coalesce | final | slot;
//                  docs/architecture.md §19)
//   [access]       keys_required = false, keys_file = "" ([[keys]], reloaded on SIGHUP),
//                  address_requests_per_second = 0, address_burst = 0 (0: a second's worth),
//                  max_addresses = 1000000, ws_messages_per_second = 0, ws_messages_burst = 0
//                  (per WebSocket connection), redis = "" (shares the keys' request limits),
//                  replicas = 1 (the local share while Redis is unreachable: limit / replicas),
//                  redis_timeout_ms = 200
//   [[keys]]       name = "game-a", key = "SECRET", allowed_methods = [], denied_methods = [],
//                  requests_per_second = 0, burst = 0, ws_messages_per_second = 0,
//                  ws_messages_burst = 0, max_subscriptions = 0   (docs/architecture.md §9)
//   [pubsub]       enabled = true, port = <api port + 1> (0: no own listener; Upgrade on
//                  the api port still works), max_connections = 10000 (WebSocket ones;
//                  threads is read and ignored: pubsub runs on the api workers),
//                  max_subscriptions_per_connection = 1000, max_message_bytes = 1048576,
//                  idle_timeout_ms = 60000, max_send_queue_messages = 16384,
//                  max_send_queue_bytes = 16777216, upstream_timeout_ms = 10000,
//                  reconnect_give_up_ms = 10000
//   [pubsub.upstreams]  NAME = ["ws://HOST:PORT", ...]  (default: each endpoint's URL as
//                  Solana clients derive it: ws(s), port + 1)
//   [verify]       peers = [] (the admin URLs of other replicas, "http://HOST:PORT", whose
//                  sealed digests serve compares with its own), interval_s = 60,
//                  max_slots = 100 (the sample of each check), timeout_ms = 5000 (each
//                  request to a peer)   (docs/architecture.md §21)
//   [snapshot]     dir = "" (an absolute path; empty: no periodic snapshot), interval_s = 21600,
//                  keep = 2: a state snapshot in DIR/snapshot-UNIX_MS every interval, DIR/latest
//                  pointing at the newest, all but the newest `keep` deleted. With a Kafka
//                  retention, log.kafka_retention_ms must be at least twice interval_s
//                  (docs/architecture.md §7, "Retention")
//
// Every name that routing and ers use must be an upstream; `serve` requires upstreams.base.
struct ServeConfig {
  ServeConfig() {
    api.port = 8899;
    api.cors.allowed_origins = {"*"};
    api.gzip.enabled = true;
    admin.port = 9899;
    admin.threads = 1;
  }
  HttpServerOptions api;
  HttpServerOptions admin;
  AdminOptions admin_options;
  absl::Duration probe_interval = absl::Seconds(1);
  RouterOptions router;  // upstreams, ers, routing, identity, consistency
  // [pubsub]. pubsub_port: -1 for the api port + 1 (a free port when the api's is 0), 0 for no
  // own listener, else the port; serve resolves it into pubsub.port.
  bool pubsub_enabled = true;
  int32_t pubsub_port = -1;
  // pubsub.threads, still read so that older configs load: pubsub runs on the api.threads
  // workers, and serve warns when it is set.
  size_t pubsub_threads = 0;
  PubsubServerOptions pubsub;
  // [access] keys_file: [[keys]] read at start and again on SIGHUP.
  std::string keys_file;
  // [registry]: ER discovery from the Magic Domain Program (docs/architecture.md §20).
  bool registry_enabled = false;
  ErRegistryWatcherOptions registry;
  // [er_probe]
  ErProbeOptions er_probe;
  // [verify]: the periodic check of the sealed digests against other replicas.
  std::vector<std::string> verify_peers;
  PeerVerifierOptions verify;
  absl::Duration verify_timeout = absl::Seconds(5);
  // [snapshot]: the state snapshots serve makes by itself (storage/periodic_snapshots.h); none
  // while `snapshot_dir` is empty.
  std::string snapshot_dir;
  absl::Duration snapshot_interval = absl::Hours(6);
  size_t snapshot_keep = 2;
};

// Reads a key file: [[keys]] tables as in the config (name, key, allowed_methods,
// denied_methods, requests_per_second, burst, ws_messages_per_second, ws_messages_burst,
// max_subscriptions). InvalidArgument names the file and the key's name.
absl::StatusOr<std::vector<ApiKeyOptions>> LoadKeyFile(const std::string& path);

// [ingest]: the base layer the watcher follows. `switchyard serve` runs the watcher when an
// endpoint is set; `switchyard ingest` takes them from here or from --base.
//
//   [ingest]
//   endpoints = [{url = "http://rpc-a:8899"},                   # in order of preference
//                {url = "https://rpc-b/KEY", pubsub_url = "wss://ws-b/KEY"}]
//   # or, for one endpoint (not together with endpoints):
//   # base_url = "http://rpc-a:8899", pubsub_url = "ws://rpc-a:8900"
//   max_lag_slots = 50         # an endpoint this far behind the best other one is lagging
//   probe_interval_ms = 1000   # getSlot of every endpoint (with two or more)
//   verify_tls = true, tls_ca_file = "", reconcile_interval_ms = 60000
//
// pubsub_url is optional: derived from url as Solana clients do it (ws/wss, port + 1). The
// watcher follows one endpoint at a time, starting with the first, and moves to another when
// the active one dies (its WebSocket cannot reconnect, its reads keep failing, it stops
// answering getSlot) or lags; it stays on the new one until that one fails in turn
// (docs/architecture.md §6).
struct IngestEndpointConfig {
  std::string url;         // http(s)://HOST[:PORT][/PATH]
  std::string pubsub_url;  // ws(s)://HOST[:PORT][/PATH]; empty: derived from url
};
struct IngestConfig {
  std::vector<IngestEndpointConfig> endpoints;  // empty: no watcher
  bool verify_tls = true;                       // check the certificate of an https/wss base
  std::string tls_ca_file;                      // PEM bundle to trust instead of the system's store
  int64_t reconcile_interval_ms = 60'000;
  int64_t max_lag_slots = 50;
  int64_t probe_interval_ms = 1'000;
};

struct Config {
  std::string data_dir = "switchyard-data";
  bool sync = true;
  size_t block_cache_mb = 32;
  size_t ingest_min_rows = 25'000;
  std::string log_url = "embedded";
  int32_t kafka_partitions = 12;
  // The settings of a topic Switchyard creates; unset, the broker's defaults.
  std::optional<int16_t> kafka_replication_factor;
  std::optional<int32_t> kafka_min_insync_replicas;
  std::optional<int64_t> kafka_retention_ms;                          // -1: keep every record
  std::vector<std::pair<std::string, std::string>> kafka_properties;  // applied last
  FoldRunnerOptions fold;
  ServeConfig serve;
  IngestConfig ingest;
  // The file the config came from ("" for the defaults), for messages that name it.
  std::string source;

  std::string LogDir() const { return data_dir + "/log"; }
  std::string StateDir() const { return data_dir + "/state"; }
};

// Whether a parse opens the files a config names: access.keys_file (its [[keys]] read and
// checked with the config's) and api.tls_cert_file with api.tls_key_file (loaded as a pair).
// With kSkip they stay names, read when serve starts; for input that must not reach the file
// system, such as the fuzz target's.
enum class ConfigFiles { kCheck, kSkip };

// Reads a config from its text; `source` names it in messages and in Config::source.
absl::StatusOr<Config> ParseConfig(std::string_view text, std::string_view source,
                                   ConfigFiles files = ConfigFiles::kCheck);

// Reads `path` (with ParseConfig); with no path, the defaults.
absl::StatusOr<Config> LoadConfig(const std::optional<std::string>& path);

}  // namespace switchyard
