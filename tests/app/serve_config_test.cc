#include <gtest/gtest.h>

#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "app/config.h"
#include "fmt/format.h"
#include "tests/app/serve_config_fixture.h"
#include "tests/support/temp_dir.h"
#include "tests/support/test_certificate.h"

namespace switchyard {
namespace {

using testing::TempDir;

TEST_F(ServeConfigTest, ReadsEverySection) {
  absl::StatusOr<Config> config = Load(std::string(kBase) + R"(
[api]
listen = "0.0.0.0:8000"
threads = 3
max_body_bytes = 4096
max_batch_size = 7
idle_timeout_ms = 1500
drain_timeout_ms = 2500
[admin]
listen = "127.0.0.1:0"
ready_max_lag_slots = 5
probe_interval_ms = 250
[consistency]
max_wait_ms = 0
[router]
identity = "11111111111111111111111111111112"
fqdn = "https://router.example"
verify_owner = false
verify_owner_multiple = true
signature_memory_size = 10
[upstreams.er1]
endpoints = [{url = "http://127.0.0.1:7800", weight = 3}, {url = "http://127.0.0.1:7801"}]
[upstreams.indexer]
endpoints = [{url = "https://indexer.example"}]
[[ers]]
identity = "11111111111111111111111111111113"
upstream = "er1"
fqdn = "https://er1.example"
base_fee = 5
block_time_ms = 30
country_code = "DE"
[routing]
default_er = "er1"
forward_unknown_methods = true
methods = {"getAsset*" = "indexer"}
[ingest]
base_url = "https://rpc.example:8899/key"
pubsub_url = "wss://ws.example/key"
verify_tls = false
tls_ca_file = "/etc/switchyard/ca.pem"
reconcile_interval_ms = 900
)");
  ASSERT_TRUE(config.ok()) << config.status();
  const ServeConfig& s = config->serve;
  EXPECT_EQ(s.api.address, "0.0.0.0");
  EXPECT_EQ(s.api.port, 8000);
  EXPECT_EQ(s.api.threads, 3u);
  EXPECT_EQ(s.api.max_body_bytes, 4096u);
  EXPECT_EQ(s.router.codec.max_batch_size, 7u);
  EXPECT_EQ(s.api.idle_timeout, absl::Milliseconds(1500));
  EXPECT_EQ(s.api.drain_timeout, absl::Milliseconds(2500));
  EXPECT_EQ(s.admin.address, "127.0.0.1");
  EXPECT_EQ(s.admin.port, 0);
  EXPECT_EQ(s.admin_options.ready_max_lag_slots, 5u);
  EXPECT_EQ(s.probe_interval, absl::Milliseconds(250));
  EXPECT_EQ(s.router.max_gate_wait, absl::ZeroDuration());
  EXPECT_EQ(s.router.identity.ToBase58(), "11111111111111111111111111111112");
  EXPECT_EQ(s.router.fqdn, "https://router.example");
  EXPECT_FALSE(s.router.verify_owner);
  EXPECT_TRUE(s.router.verify_owner_multiple);
  EXPECT_EQ(s.router.signature_memory_size, 10u);
  ASSERT_EQ(s.router.upstreams.size(), 3u);
  EXPECT_EQ(s.router.upstreams[0].name, "base");
  EXPECT_EQ(s.router.upstreams[1].name, "er1");
  ASSERT_EQ(s.router.upstreams[1].endpoints.size(), 2u);
  EXPECT_EQ(s.router.upstreams[1].endpoints[0].weight, 3u);
  EXPECT_EQ(s.router.upstreams[1].endpoints[1].url, "http://127.0.0.1:7801");
  ASSERT_EQ(s.router.ers.size(), 1u);
  EXPECT_EQ(s.router.ers[0].identity.ToBase58(), "11111111111111111111111111111113");
  EXPECT_EQ(s.router.ers[0].target, "er1");
  EXPECT_EQ(s.router.ers[0].base_fee, 5u);
  EXPECT_EQ(s.router.ers[0].block_time_ms, 30u);
  EXPECT_EQ(s.router.ers[0].country_code, "DE");
  EXPECT_EQ(s.router.routing.default_er, "er1");
  EXPECT_TRUE(s.router.routing.forward_unknown_methods);
  ASSERT_EQ(s.router.routing.method_rules.size(), 1u);
  EXPECT_EQ(s.router.routing.method_rules[0].pattern, "getAsset*");
  EXPECT_EQ(s.router.routing.method_rules[0].target, "indexer");
  ASSERT_EQ(config->ingest.endpoints.size(), 1u);
  EXPECT_EQ(config->ingest.endpoints[0].url, "https://rpc.example:8899/key");
  EXPECT_EQ(config->ingest.endpoints[0].pubsub_url, "wss://ws.example/key");
  EXPECT_FALSE(config->ingest.verify_tls);
  EXPECT_EQ(config->ingest.tls_ca_file, "/etc/switchyard/ca.pem");
  EXPECT_EQ(config->ingest.reconcile_interval_ms, 900);
}

TEST_F(ServeConfigTest, DefaultsListenOnLoopback) {
  absl::StatusOr<Config> config = Load(kBase);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->serve.api.address, "127.0.0.1");
  EXPECT_EQ(config->serve.api.port, 8899);
  EXPECT_EQ(config->serve.admin.port, 9899);
  EXPECT_EQ(config->serve.admin_options.ready_max_lag_slots, 32u);
  EXPECT_EQ(config->serve.router.max_gate_wait, absl::Milliseconds(500));
}

TEST_F(ServeConfigTest, CorsOriginsDefaultToAnyAndAreValidated) {
  absl::StatusOr<Config> config = Load(kBase);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->serve.api.cors.allowed_origins, std::vector<std::string>{"*"});
  EXPECT_TRUE(config->serve.admin.cors.allowed_origins.empty());
  config = Load(std::string(kBase) +
                "[api]\ncors_origins = [\"https://app.example\", \"http://127.0.0.1:3000\"]\n");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->serve.api.cors.allowed_origins,
            (std::vector<std::string>{"https://app.example", "http://127.0.0.1:3000"}));
  config = Load(std::string(kBase) + "[api]\ncors_origins = []\n");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_TRUE(config->serve.api.cors.allowed_origins.empty());

  const std::string file = dir_.Sub("serve.toml");
  EXPECT_EQ(Error(std::string(kBase) + "[api]\ncors_origins = \"*\"\n"),
            file + ": 'api.cors_origins' must be an array of origins (\"*\" for any)");
  EXPECT_EQ(Error(std::string(kBase) + "[api]\ncors_origins = [\"https://app.example/\"]\n"),
            file +
                ": 'api.cors_origins' has \"https://app.example/\", which is not \"*\" nor an "
                "origin (\"https://host[:port]\", no path)");
  EXPECT_EQ(Error(std::string(kBase) + "[api]\ncors_origins = [\"*\", \"https://a.example\"]\n"),
            file + ": 'api.cors_origins' lists \"*\" with other origins: \"*\" must stand alone");
}

TEST_F(ServeConfigTest, GzipIsOnByDefaultAndItsKeysAreValidated) {
  absl::StatusOr<Config> config = Load(kBase);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_TRUE(config->serve.api.gzip.enabled);
  EXPECT_EQ(config->serve.api.gzip.level, 1);
  EXPECT_EQ(config->serve.api.gzip.min_bytes, 1024u);
  EXPECT_TRUE(config->serve.router.upstream_gzip);
  EXPECT_FALSE(config->serve.admin.gzip.enabled);
  config =
      Load(std::string(kBase) +
           "[api]\ngzip = false\ngzip_level = 9\ngzip_min_bytes = 0\ngzip_upstreams = false\n");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_FALSE(config->serve.api.gzip.enabled);
  EXPECT_EQ(config->serve.api.gzip.level, 9);
  EXPECT_EQ(config->serve.api.gzip.min_bytes, 0u);
  EXPECT_FALSE(config->serve.router.upstream_gzip);

  const std::string file = dir_.Sub("serve.toml");
  EXPECT_EQ(Error(std::string(kBase) + "[api]\ngzip = 1\n"),
            file + ": 'api.gzip' must be true or false");
  EXPECT_EQ(Error(std::string(kBase) + "[api]\ngzip_level = 0\n"),
            file + ": 'api.gzip_level' must be a positive integer");
  EXPECT_EQ(Error(std::string(kBase) + "[api]\ngzip_level = 10\n"),
            file + ": 'api.gzip_level' must be 1 (fastest) to 9 (smallest)");
  EXPECT_EQ(Error(std::string(kBase) + "[api]\ngzip_min_bytes = -1\n"),
            file + ": 'api.gzip_min_bytes' must be a non-negative integer");
  EXPECT_EQ(Error(std::string(kBase) + "[api]\ngzip_upstreams = \"yes\"\n"),
            file + ": 'api.gzip_upstreams' must be true or false");
}

TEST_F(ServeConfigTest, ErrorsNameTheKeyAndTheFile) {
  const std::string file = dir_.Sub("serve.toml");
  EXPECT_EQ(Error(std::string(kBase) + "[api]\nthreads = \"two\"\n"),
            file + ": 'api.threads' must be a non-negative integer");
  EXPECT_EQ(Error("[upstreams.base]\nendpoints = [{url = \"ftp://x\"}]\n")
                .rfind(file + ": 'upstreams.base.endpoints[0].url' is not a usable URL", 0),
            0u);
  EXPECT_EQ(Error("[upstreams.base]\nendpoints = [{url = \"http://a:1\", wieght = 2}]\n"),
            file + ": unknown key 'upstreams.base.endpoints[0].wieght'");
  EXPECT_EQ(Error(std::string(kBase) + "[[ers]]\nupstream = \"base\"\n"),
            file + ": 'ers[0].identity' is required");
  EXPECT_EQ(Error(std::string(kBase) + "[[ers]]\nidentity = \"0OIl\"\nupstream = \"base\"\n"),
            file + ": 'ers[0].identity' must be a base58 public key");
  EXPECT_EQ(Error(std::string(kBase) + "[routing]\nmethods = {\"getAsset*\" = \"indexer\"}\n"),
            file + ": 'routing.methods.\"getAsset*\"' names no configured upstream (\"indexer\")");
  EXPECT_EQ(Error(std::string(kBase) + "[router]\nidentity = 5\n"),
            file + ": 'router.identity' must be a string");
  EXPECT_EQ(Error(std::string(kBase) + "[admin]\nlisten = \"127.0.0.1:70000\"\n"),
            file + ": 'admin.listen' must be \"HOST:PORT\" with a port from 0 to 65535");
  EXPECT_EQ(Error("ers = 3\n" + std::string(kBase)),
            file + ": 'ers' must be an array of tables ([[ers]])");
}

// Unset, the topic Switchyard creates takes the broker's defaults.
TEST_F(ServeConfigTest, KafkaTopicSettingsAreUnsetByDefault) {
  absl::StatusOr<Config> config = Load(kBase);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->kafka_replication_factor, std::nullopt);
  EXPECT_EQ(config->kafka_min_insync_replicas, std::nullopt);
  EXPECT_EQ(config->kafka_retention_ms, std::nullopt);
}

TEST_F(ServeConfigTest, KafkaRetentionOfMinusOneKeepsEveryRecord) {
  absl::StatusOr<Config> config = Load(std::string(kBase) + "[log]\nkafka_retention_ms = -1\n");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->kafka_retention_ms, std::optional<int64_t>(-1));
}

TEST_F(ServeConfigTest, KafkaTopicSettingsErrorsNameTheKey) {
  const std::string file = dir_.Sub("serve.toml");
  const std::string log = std::string(kBase) + "[log]\n";
  EXPECT_EQ(Error(log + "kafka_replication_factor = 0\n"),
            file + ": 'log.kafka_replication_factor' must be a positive integer");
  EXPECT_EQ(Error(log + "kafka_min_insync_replicas = -1\n"),
            file + ": 'log.kafka_min_insync_replicas' must be a positive integer");
  EXPECT_EQ(Error(log + "kafka_replication_factor = 2\nkafka_min_insync_replicas = 3\n"),
            file +
                ": 'log.kafka_min_insync_replicas' is 3, more than log.kafka_replication_factor "
                "= 2: no append could ever be acknowledged");
  const std::string retention =
      ": 'log.kafka_retention_ms' must be a positive number of milliseconds, or -1 to keep "
      "every record";
  EXPECT_EQ(Error(log + "kafka_retention_ms = 0\n"), file + retention);
  EXPECT_EQ(Error(log + "kafka_retention_ms = -2\n"), file + retention);
  EXPECT_EQ(Error(log + "kafka_retention_ms = \"7d\"\n"), file + retention);
  EXPECT_EQ(Error(log + "kafka_retention_ms = 1.5\n"), file + retention);
  EXPECT_EQ(Error(log + "kafka_retention = 1\n"), file + ": unknown key 'log.kafka_retention'");
}

TEST_F(ServeConfigTest, PeriodicSnapshotsAreOffByDefault) {
  absl::StatusOr<Config> config = Load(kBase);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->serve.snapshot_dir, "");
  EXPECT_EQ(config->serve.snapshot_interval, absl::Hours(6));
  EXPECT_EQ(config->serve.snapshot_keep, 2u);
}

TEST_F(ServeConfigTest, ReadsTheSnapshotSection) {
  absl::StatusOr<Config> config =
      Load(std::string(kBase) +
           "[snapshot]\ndir = \"/var/lib/snapshots\"\ninterval_s = 3600\nkeep = 3\n");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->serve.snapshot_dir, "/var/lib/snapshots");
  EXPECT_EQ(config->serve.snapshot_interval, absl::Hours(1));
  EXPECT_EQ(config->serve.snapshot_keep, 3u);
}

TEST_F(ServeConfigTest, SnapshotErrorsNameTheKey) {
  const std::string file = dir_.Sub("serve.toml");
  EXPECT_EQ(Error(std::string(kBase) + "[snapshot]\ndir = \"snapshots\"\n"),
            file + ": 'snapshot.dir' must be an absolute path");
  EXPECT_EQ(Error(std::string(kBase) + "[snapshot]\nkeep = 0\n"),
            file + ": 'snapshot.keep' must be a positive integer");
  EXPECT_EQ(Error(std::string(kBase) + "[snapshot]\ninterval_s = 0\n"),
            file + ": 'snapshot.interval_s' must be a positive integer");
  EXPECT_EQ(Error(std::string(kBase) + "[snapshot]\nevery_s = 60\n"),
            file + ": unknown key 'snapshot.every_s'");
}

// The topic must still hold the offsets of the snapshot before the newest.
TEST_F(ServeConfigTest, KafkaRetentionMustCoverTwoSnapshotIntervals) {
  const std::string file = dir_.Sub("serve.toml");
  const std::string snapshot = "[snapshot]\ndir = \"/snapshots\"\ninterval_s = 3600\n";
  EXPECT_TRUE(Load(std::string(kBase) + snapshot + "[log]\nkafka_retention_ms = 7200000\n").ok());
  EXPECT_TRUE(Load(std::string(kBase) + snapshot + "[log]\nkafka_retention_ms = -1\n").ok());
  EXPECT_EQ(Error(std::string(kBase) + snapshot + "[log]\nkafka_retention_ms = 7199999\n"),
            file +
                ": 'log.kafka_retention_ms' is 7199999, less than twice snapshot.interval_s "
                "(3600 s): a replica could need a snapshot whose offsets the topic no longer "
                "holds");
  // Without periodic snapshots the retention is the operator's to match with theirs.
  EXPECT_TRUE(Load(std::string(kBase) + "[log]\nkafka_retention_ms = 1000\n").ok());
}

TEST_F(ServeConfigTest, IntegrityIsOffByDefault) {
  absl::StatusOr<Config> config = Load(kBase);
  ASSERT_TRUE(config.ok()) << config.status();
  const IntegrityOptions& integrity = config->serve.router.integrity;
  EXPECT_FALSE(integrity.enabled());
  EXPECT_EQ(integrity.SampleRateFor("getAccountInfo"), 0);
}

TEST_F(ServeConfigTest, ReadsTheIntegritySection) {
  absl::StatusOr<Config> config = Load(std::string(kBase) + R"(
[integrity]
sample_rate = 0.01
sample_rates = {getSlot = 0.5, getBalance = 0.25}
tiebreak_endpoints = 2
eject_after = 4
window_ms = 30000
log_answer_bytes = 64
consensus_methods = {getAccountInfo = "2/3"}
consensus_header = true
admission = true
admission_max_lag = 20
admission_latency_requests = 100
admission_latency_p95_ms = 250
admission_accounts = ["11111111111111111111111111111112"]
)");
  ASSERT_TRUE(config.ok()) << config.status();
  const IntegrityOptions& integrity = config->serve.router.integrity;
  EXPECT_EQ(integrity.SampleRateFor("getAccountInfo"), 0.01);  // a comparable read
  EXPECT_EQ(integrity.SampleRateFor("getBalance"), 0.25);
  EXPECT_EQ(integrity.SampleRateFor("getSlot"), 0.5);
  EXPECT_EQ(integrity.SampleRateFor("getLatestBlockhash"), 0);  // differs between nodes
  EXPECT_EQ(integrity.max_sample_rate(), 0.5);
  EXPECT_EQ(integrity.tiebreak_endpoints, 2u);
  EXPECT_EQ(integrity.eject_after, 4u);
  EXPECT_EQ(integrity.window, absl::Seconds(30));
  EXPECT_EQ(integrity.log_answer_bytes, 64u);
  ASSERT_TRUE(integrity.ConsensusFor("getAccountInfo").has_value());
  EXPECT_EQ(*integrity.ConsensusFor("getAccountInfo"), (ConsensusRule{2, 3}));
  EXPECT_FALSE(integrity.ConsensusFor("getBalance").has_value());
  EXPECT_TRUE(integrity.consensus_header);
  EXPECT_TRUE(integrity.admission);
  EXPECT_EQ(integrity.admission_max_lag, 20u);
  EXPECT_EQ(integrity.admission_latency_requests, 100u);
  EXPECT_EQ(integrity.admission_latency_p95, absl::Milliseconds(250));
  EXPECT_EQ(integrity.admission_accounts,
            std::vector<std::string>{"11111111111111111111111111111112"});
}

TEST_F(ServeConfigTest, IntegrityErrorsNameTheKey) {
  const std::string file = dir_.Sub("serve.toml");
  EXPECT_EQ(Error(std::string(kBase) + "[integrity]\nsample_rate = 1.5\n"),
            file + ": 'integrity.sample_rate' must be within [0, 1]");
  EXPECT_EQ(Error(std::string(kBase) + "[integrity]\nsample_rates = {getBalance = -1}\n"),
            file + ": 'integrity.sample_rates.getBalance' must be within [0, 1]");
  EXPECT_EQ(Error(std::string(kBase) + "[integrity]\nconsensus_methods = {getBalance = \"3/2\"}\n"),
            file +
                ": 'integrity.consensus_methods.\"getBalance\"' \"3/2\": K/N needs 1 <= K <= N "
                "<= 16");
  EXPECT_EQ(Error(std::string(kBase) + "[integrity]\neject_after = 0\n"),
            file + ": 'integrity.eject_after' must be a positive integer");
  EXPECT_EQ(Error(std::string(kBase) + "[integrity]\nadmission_accounts = [\"0OIl\"]\n"),
            file + ": 'integrity.admission_accounts' must be an array of base58 pubkeys");
  EXPECT_EQ(Error(std::string(kBase) + "[integrity]\nsampel_rate = 0.1\n"),
            file + ": unknown key 'integrity.sampel_rate'");
}

TEST_F(ServeConfigTest, ReadsUpstreamHealth) {
  absl::StatusOr<Config> config = Load(std::string(kBase) + R"(
[router]
upstream_deadline_ms = 4000
[upstream_health]
probe_interval_ms = 200
eject_consecutive_failures = 3
eject_error_rate = 0.25
max_slot_lag = 10
ramp_up_ms = 0
circuit_open_ms = 700
max_attempts = 2
retry_budget_ratio = 0.1
retry_budget_min = 0
hedge = false
hedge_delay_ms = 15
)");
  ASSERT_TRUE(config.ok()) << config.status();
  const RouterOptions& router = config->serve.router;
  EXPECT_EQ(router.upstream.request_deadline, absl::Seconds(4));
  const UpstreamHealthOptions& health = router.health;
  EXPECT_EQ(health.probe_interval, absl::Milliseconds(200));
  EXPECT_EQ(config->serve.probe_interval, absl::Milliseconds(200));  // one setting
  EXPECT_EQ(health.eject_consecutive_failures, 3u);
  EXPECT_DOUBLE_EQ(health.eject_error_rate, 0.25);
  EXPECT_EQ(health.max_slot_lag, 10u);
  EXPECT_EQ(health.ramp_up, absl::ZeroDuration());
  EXPECT_EQ(health.circuit_open, absl::Milliseconds(700));
  EXPECT_EQ(health.max_attempts, 2u);
  EXPECT_DOUBLE_EQ(health.retry_budget_ratio, 0.1);
  EXPECT_EQ(health.retry_budget_min, 0u);
  EXPECT_FALSE(health.hedge);
  EXPECT_EQ(health.hedge_delay, absl::Milliseconds(15));
  // Untouched keys keep their defaults.
  EXPECT_EQ(health.half_open_trials, UpstreamHealthOptions().half_open_trials);
}

TEST_F(ServeConfigTest, UpstreamHealthErrorsNameTheKey) {
  const std::string file = dir_.Sub("serve.toml");
  EXPECT_EQ(Error(std::string(kBase) + "[upstream_health]\neject_error_rate = 1.5\n"),
            file + ": 'upstream_health.eject_error_rate' must be within [0, 1]");
  EXPECT_EQ(Error(std::string(kBase) + "[upstream_health]\nhedge = 1\n"),
            file + ": 'upstream_health.hedge' must be true or false");
  EXPECT_EQ(Error(std::string(kBase) + "[upstream_health]\nhedges = true\n"),
            file + ": unknown key 'upstream_health.hedges'");
  EXPECT_EQ(Error(std::string(kBase) + "[upstream_health]\nmax_attempts = 11\n"),
            file + ": upstream_health.max_attempts must be within 1..10");
  EXPECT_EQ(Error(std::string(kBase) + "[upstream_health]\nlatency_decay = 0\n"),
            file + ": upstream_health.latency_decay must be within (0, 1]");
}

TEST_F(ServeConfigTest, ReadsTheRegistryAndTheProbeAndNamesTheBadKey) {
  absl::StatusOr<Config> config = Load(std::string(kBase) + R"(
[registry]
enabled = true
resync_interval_ms = 500
[er_probe]
interval_ms = 200
timeout_ms = 100
[upstreams.er1]
endpoints = [{url = "http://127.0.0.1:7800"}]
[[ers]]
identity = "11111111111111111111111111111113"
upstream = "er1"
pin = true
)");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_TRUE(config->serve.registry_enabled);
  EXPECT_EQ(config->serve.registry.url, "http://127.0.0.1:7799");  // the base's first endpoint
  EXPECT_EQ(config->serve.registry.resync_interval, absl::Milliseconds(500));
  EXPECT_EQ(config->serve.registry.program.ToBase58(),
            "DmnRGfyyftzacFb1XadYhWF6vWqXwtQk5tbr6XgR3BA1");
  EXPECT_TRUE(config->serve.router.discovered_ers);
  EXPECT_EQ(config->serve.er_probe.interval, absl::Milliseconds(200));
  EXPECT_EQ(config->serve.er_probe.timeout, absl::Milliseconds(100));
  ASSERT_EQ(config->serve.router.ers.size(), 1u);
  EXPECT_TRUE(config->serve.router.ers[0].pinned);

  const std::string file = dir_.Sub("serve.toml");
  EXPECT_NE(Error(std::string(kBase) + "[registry]\nenabled = true\nurl = \"ws://x:1\"\n")
                .find("'registry.url'"),
            std::string::npos);
  EXPECT_NE(
      Error(std::string(kBase) + "[er_probe]\ninterval_ms = 0\n").find("'er_probe.interval_ms'"),
      std::string::npos);
  EXPECT_EQ(Error(std::string(kBase) + "[registry]\nenable = true\n"),
            file + ": unknown key 'registry.enable'");
}

TEST_F(ServeConfigTest, ReadsVerifyPeersAndNamesTheBadKey) {
  absl::StatusOr<Config> defaults = Load(std::string(kBase));
  ASSERT_TRUE(defaults.ok()) << defaults.status();
  EXPECT_TRUE(defaults->serve.verify_peers.empty());
  EXPECT_EQ(defaults->serve.verify.interval, absl::Seconds(60));
  EXPECT_EQ(defaults->serve.verify.check.max_slots, 100u);

  absl::StatusOr<Config> config = Load(std::string(kBase) + R"(
[verify]
peers = ["http://10.0.0.2:9899", "https://replica-c:9899/admin"]
interval_s = 5
max_slots = 20
timeout_ms = 300
)");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->serve.verify_peers,
            (std::vector<std::string>{"http://10.0.0.2:9899", "https://replica-c:9899/admin"}));
  EXPECT_EQ(config->serve.verify.interval, absl::Seconds(5));
  EXPECT_EQ(config->serve.verify.check.max_slots, 20u);
  EXPECT_EQ(config->serve.verify_timeout, absl::Milliseconds(300));

  const std::string file = dir_.Sub("serve.toml");
  EXPECT_EQ(Error(std::string(kBase) + "[verify]\npeers = [\"ws://x:1\"]\n"),
            file +
                ": 'verify.peers' has \"ws://x:1\", which is not an http(s) URL of an admin "
                "listener");
  EXPECT_EQ(Error(std::string(kBase) + "[verify]\npeers = \"http://x:1\"\n"),
            file + ": 'verify.peers' must be an array of admin URLs");
  EXPECT_EQ(Error(std::string(kBase) + "[verify]\ninterval_s = 0\n"),
            file + ": 'verify.interval_s' must be a positive integer");
  EXPECT_EQ(Error(std::string(kBase) + "[verify]\npeer = []\n"),
            file + ": unknown key 'verify.peer'");
}

// Regression: the top-level key list did not name [cache], so every config with it was refused
// as "unknown key 'cache'".
TEST_F(ServeConfigTest, CacheSectionIsNotAnUnknownKey) {
  absl::StatusOr<Config> config = Load(std::string(kBase) + R"(
[cache]
enabled = false
coalesce = false
max_mb = 8
slot_ttl_ms = 250
)");
  ASSERT_TRUE(config.ok()) << config.status();
  const CacheOptions& cache = config->serve.router.cache;
  EXPECT_FALSE(cache.enabled);
  EXPECT_FALSE(cache.coalesce);
  EXPECT_EQ(cache.max_bytes, size_t{8} << 20);
  EXPECT_EQ(cache.slot_ttl, absl::Milliseconds(250));
}

TEST_F(ServeConfigTest, ReadsTlsFilesAndRefusesABadPairNamingTheKey) {
  const testing::TestCertificate one = testing::MakeTestCertificate();
  const testing::TestCertificate two = testing::MakeTestCertificate();
  const std::string cert = dir_.Sub("cert.pem");
  const std::string key = dir_.Sub("key.pem");
  const std::string other_key = dir_.Sub("other_key.pem");
  const std::string garbage = dir_.Sub("garbage.pem");
  std::ofstream(cert) << one.certificate_pem;
  std::ofstream(key) << one.private_key_pem;
  std::ofstream(other_key) << two.private_key_pem;
  std::ofstream(garbage) << "not a certificate\n";
  auto tls = [&](const std::string& c, const std::string& k) {
    std::string text = std::string(kBase) + "[api]\n";
    if (!c.empty()) text += fmt::format("tls_cert_file = \"{}\"\n", c);
    if (!k.empty()) text += fmt::format("tls_key_file = \"{}\"\n", k);
    return text;
  };
  absl::StatusOr<Config> config = Load(tls(cert, key));
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->serve.api.tls.certificate_file, cert);
  EXPECT_EQ(config->serve.api.tls.private_key_file, key);
  EXPECT_FALSE(config->serve.admin.tls.enabled());

  const std::string file = dir_.Sub("serve.toml");
  EXPECT_EQ(Error(tls(cert, "")), file + ": 'api.tls_key_file' is required with api.tls_cert_file");
  EXPECT_EQ(Error(tls("", key)), file + ": 'api.tls_cert_file' is required with api.tls_key_file");
  EXPECT_EQ(Error(tls(dir_.Sub("missing.pem"), key)),
            file + ": 'api.tls_cert_file' is not usable: cannot read certificate file " +
                dir_.Sub("missing.pem"));
  EXPECT_TRUE(Error(tls(garbage, key))
                  .starts_with(file + ": 'api.tls_cert_file' is not usable: " + garbage +
                               " is not a PEM certificate chain"));
  EXPECT_EQ(Error(tls(cert, dir_.Sub("missing.pem"))),
            file + ": 'api.tls_key_file' is not usable: cannot read private key file " +
                dir_.Sub("missing.pem"));
  EXPECT_TRUE(Error(tls(cert, garbage))
                  .starts_with(file + ": 'api.tls_key_file' is not usable: " + garbage));
  const std::string mismatch = Error(tls(cert, other_key));
  EXPECT_TRUE(mismatch.starts_with(file + ": 'api.tls_key_file' is not usable: " + other_key))
      << mismatch;
}

TEST_F(ServeConfigTest, ReadsRegionsAndRefusesBadOnesNamingTheKey) {
  absl::StatusOr<Config> config = Load(std::string(kBase) + R"(
[api]
region = "eu"
default_region = "us"
[[regions]]
name = "eu"
url = "https://eu.example.com"
ranges = ["10.0.0.0/8", "2001:db8::/32"]
[[regions]]
name = "us"
url = "https://us.example.com/v1"
ranges = []
)");
  ASSERT_TRUE(config.ok()) << config.status();
  const RegionOptions& regions = config->serve.api.regions;
  ASSERT_EQ(regions.regions.size(), 2u);
  EXPECT_EQ(regions.regions[0].name, "eu");
  EXPECT_EQ(regions.regions[1].url, "https://us.example.com/v1");
  ASSERT_EQ(regions.regions[0].ranges.size(), 2u);
  EXPECT_EQ(regions.regions[0].ranges[1].prefix_length, 32u);
  EXPECT_EQ(regions.regions[0].ranges[0].prefix_length, 96u + 8u);
  EXPECT_EQ(regions.own_region, "eu");
  EXPECT_EQ(regions.default_region, "us");
  EXPECT_TRUE(config->serve.admin.regions.regions.empty());

  const std::string file = dir_.Sub("serve.toml");
  auto region = [](const std::string& body) { return std::string(kBase) + "[[regions]]\n" + body; };
  EXPECT_EQ(
      Error(region("name = \"eu\"\nurl = \"https://eu.example\"\nranges = [\"10.0.0.1/8\"]\n")),
      file + ": 'regions[0].ranges[0]' '10.0.0.1/8' has address bits set past its /8 prefix");
  EXPECT_EQ(
      Error(region("name = \"eu\"\nurl = \"https://eu.example\"\nranges = [\"10.0.0.0/8\", 7]\n")),
      file + ": 'regions[0].ranges[1]' must be a string (CIDR)");
  EXPECT_EQ(Error(region("name = \"eu\"\nurl = \"https://eu.example\"\n")),
            file + ": 'regions[0].ranges' is required");
  EXPECT_EQ(Error(region("name = \"EU\"\nurl = \"https://eu.example\"\nranges = []\n")),
            file + ": 'regions[0].name' must be 1 to 64 of a-z, 0-9, '-' and '_'");
  EXPECT_EQ(
      Error(region("name = \"eu\"\nurl = \"wss://eu.example\"\nranges = []\n")),
      file + ": 'regions[0].url' must be an http:// or https:// URL, not \"wss://eu.example\"");
  EXPECT_EQ(Error(region("name = \"eu\"\nurl = \"https://eu.example\"\nranges = []\nweight = 1\n")),
            file + ": unknown key 'regions[0].weight'");
  EXPECT_EQ(Error(region("name = \"eu\"\nurl = \"https://eu.example\"\nranges = []\n") +
                  "[[regions]]\nname = \"eu\"\nurl = \"https://eu2.example\"\nranges = []\n"),
            file + ": 'regions[1].name' repeats \"eu\" of an earlier [[regions]] entry");
  EXPECT_EQ(Error(std::string(kBase) + "[api]\nregion = \"eu\"\n"),
            file + ": 'api.region' names no [[regions]] entry (\"eu\")");
  EXPECT_EQ(Error(std::string(kBase) + "[api]\ndefault_region = \"us\"\n"),
            file + ": 'api.default_region' names no [[regions]] entry (\"us\")");
  EXPECT_EQ(Error("regions = 3\n" + std::string(kBase)),
            file + ": 'regions' must be an array of tables ([[regions]])");
}

}  // namespace
}  // namespace switchyard
