// The configuration files docker-compose.yml mounts (deploy/*/) load with the keys `switchyard`
// accepts and say what the compose services rely on.
#include <gtest/gtest.h>

#include <optional>
#include <string>

#include "app/config.h"

namespace switchyard {
namespace {

const std::string kDeploy = std::string(SWITCHYARD_SOURCE_DIR) + "/deploy/";
// docker-compose.yml's three brokers.
constexpr char kLogUrl[] = "kafka://kafka-1:9092,kafka-2:9092,kafka-3:9092/switchyard.delegations";

bool HasUpstream(const Config& config, const std::string& name) {
  for (const UpstreamTarget& target : config.serve.router.upstreams) {
    if (target.name == name && !target.endpoints.empty()) return true;
  }
  return false;
}

class DeployConfigTest : public ::testing::TestWithParam<std::string> {};

TEST_P(DeployConfigTest, IngestConfigLoadsAndWritesTheComposeTopic) {
  absl::StatusOr<Config> config = LoadConfig(kDeploy + GetParam() + "/ingest.toml");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->log_url, kLogUrl);
  EXPECT_EQ(config->kafka_partitions, 6);
  EXPECT_EQ(config->data_dir, "/var/lib/switchyard/data");
  ASSERT_EQ(config->ingest.endpoints.size(), 1u);
  EXPECT_FALSE(config->ingest.endpoints[0].url.empty());
  EXPECT_FALSE(config->ingest.endpoints[0].pubsub_url.empty());
}

TEST_P(DeployConfigTest, RouterConfigLoadsListensOnTheComposePortsAndRoutesToAnEr) {
  absl::StatusOr<Config> config = LoadConfig(kDeploy + GetParam() + "/router.toml");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->log_url, kLogUrl);
  EXPECT_EQ(config->data_dir, "/var/lib/switchyard/data");
  EXPECT_EQ(config->serve.api.address, "0.0.0.0");
  EXPECT_EQ(config->serve.api.port, 8899);
  EXPECT_EQ(config->serve.admin.address, "0.0.0.0");
  EXPECT_EQ(config->serve.admin.port, 9899);  // the healthcheck's /ready
  EXPECT_TRUE(HasUpstream(*config, "base"));
  ASSERT_GE(config->serve.router.ers.size(), 1u);
  for (const ErRoute& er : config->serve.router.ers) EXPECT_TRUE(HasUpstream(*config, er.target));
  EXPECT_TRUE(config->ingest.endpoints.empty()) << "the routers must not run a second watcher";
}

TEST(DevnetDeployTest, ListsEveryPublicMagicBlockDevnetErAndDiscoversTheRegistry) {
  absl::StatusOr<Config> config = LoadConfig(kDeploy + std::string("devnet/router.toml"));
  ASSERT_TRUE(config.ok()) << config.status();
  std::vector<std::string> identities;
  for (const ErRoute& er : config->serve.router.ers) identities.push_back(er.identity.ToBase58());
  EXPECT_EQ(identities, (std::vector<std::string>{"MAS1Dt9qreoRMQ14YQuhg8UTZMMzDdKhmkZMECCzk57",
                                                  "MEUGGrYPxKk17hCr7wpT6s8dtNokZj5U2L57vjYMS8e",
                                                  "MUS3hc9TCw4cGC12vHNoYcCGzJG1txjgQLZWVoeNHNd",
                                                  "MTEWGuqxUpYZGFJQcp8tLN7x5v9BSeoFHYWQQ3n3xzo"}));
  EXPECT_TRUE(config->serve.registry_enabled);
  EXPECT_EQ(config->serve.registry.url, "https://api.devnet.solana.com");
  EXPECT_TRUE(config->serve.router.discovered_ers);
  EXPECT_TRUE(config->serve.router.routing.default_er.empty());
}

// Whichever of ingest and the routers starts first creates the topic: each asks for the same
// one, replicated on the three brokers, acknowledged by two, and never compacted away.
TEST_P(DeployConfigTest, EveryServiceAsksForTheSameReplicatedTopic) {
  absl::StatusOr<Config> ingest = LoadConfig(kDeploy + GetParam() + "/ingest.toml");
  absl::StatusOr<Config> router = LoadConfig(kDeploy + GetParam() + "/router.toml");
  ASSERT_TRUE(ingest.ok()) << ingest.status();
  ASSERT_TRUE(router.ok()) << router.status();
  for (const Config* config : {&*ingest, &*router}) {
    SCOPED_TRACE(config->source);
    EXPECT_EQ(config->kafka_replication_factor, std::optional<int16_t>(3));
    EXPECT_EQ(config->kafka_min_insync_replicas, std::optional<int32_t>(2));
    ASSERT_TRUE(config->kafka_retention_ms.has_value());
  }
  EXPECT_EQ(ingest->kafka_partitions, router->kafka_partitions);
  EXPECT_EQ(ingest->kafka_retention_ms, router->kafka_retention_ms);
}

// In devnet the routers make the snapshots a replica needs once the topic has dropped its first
// records, often enough that the last two are within the retention.
TEST(DeployRetentionTest, DevnetRoutersSnapshotWithinTheRetention) {
  absl::StatusOr<Config> devnet = LoadConfig(kDeploy + std::string("devnet/router.toml"));
  ASSERT_TRUE(devnet.ok()) << devnet.status();
  EXPECT_EQ(devnet->serve.snapshot_dir.rfind(devnet->data_dir + "/", 0), 0u)
      << "snapshots outside the router's volume: " << devnet->serve.snapshot_dir;
  ASSERT_TRUE(devnet->kafka_retention_ms.has_value());
  EXPECT_LE(2 * devnet->serve.snapshot_interval, absl::Milliseconds(*devnet->kafka_retention_ms));
  EXPECT_GE(devnet->serve.snapshot_keep, 2u);
}

// localnet keeps its topic whole, so a replica on an empty volume refolds it from offset 0;
// devnet keeps a week, which a replica bridges with a snapshot (README.md).
TEST(DeployRetentionTest, LocalnetKeepsEveryRecordAndDevnetKeepsAWeek) {
  absl::StatusOr<Config> localnet = LoadConfig(kDeploy + std::string("localnet/router.toml"));
  absl::StatusOr<Config> devnet = LoadConfig(kDeploy + std::string("devnet/router.toml"));
  ASSERT_TRUE(localnet.ok()) << localnet.status();
  ASSERT_TRUE(devnet.ok()) << devnet.status();
  EXPECT_EQ(localnet->kafka_retention_ms, std::optional<int64_t>(-1));
  EXPECT_EQ(devnet->kafka_retention_ms, std::optional<int64_t>(7 * 24 * 3600 * 1000LL));
}

INSTANTIATE_TEST_SUITE_P(Deploy, DeployConfigTest, ::testing::Values("localnet", "devnet"));

}  // namespace
}  // namespace switchyard
