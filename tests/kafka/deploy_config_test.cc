// The configuration files docker-compose.yml mounts (deploy/*/) load with the keys `switchyard`
// accepts and say what the compose services rely on.
#include <gtest/gtest.h>

#include <string>

#include "app/config.h"

namespace switchyard {
namespace {

const std::string kDeploy = std::string(SWITCHYARD_SOURCE_DIR) + "/deploy/";

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
  EXPECT_EQ(config->log_url, "kafka://kafka:9092/switchyard.delegations");
  EXPECT_EQ(config->kafka_partitions, 6);
  EXPECT_EQ(config->data_dir, "/var/lib/switchyard/data");
  ASSERT_EQ(config->ingest.endpoints.size(), 1u);
  EXPECT_FALSE(config->ingest.endpoints[0].url.empty());
  EXPECT_FALSE(config->ingest.endpoints[0].pubsub_url.empty());
}

TEST_P(DeployConfigTest, RouterConfigLoadsListensOnTheComposePortsAndRoutesToAnEr) {
  absl::StatusOr<Config> config = LoadConfig(kDeploy + GetParam() + "/router.toml");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->log_url, "kafka://kafka:9092/switchyard.delegations");
  EXPECT_EQ(config->data_dir, "/var/lib/switchyard/data");
  EXPECT_EQ(config->serve.api.address, "0.0.0.0");
  EXPECT_EQ(config->serve.api.port, 8899);
  EXPECT_EQ(config->serve.admin.address, "0.0.0.0");
  EXPECT_EQ(config->serve.admin.port, 9899);  // the healthcheck's /ready
  EXPECT_TRUE(HasUpstream(*config, "base"));
  ASSERT_EQ(config->serve.router.ers.size(), 1u);
  EXPECT_TRUE(HasUpstream(*config, config->serve.router.ers[0].target));
  EXPECT_TRUE(config->ingest.endpoints.empty()) << "the routers must not run a second watcher";
}

INSTANTIATE_TEST_SUITE_P(Deploy, DeployConfigTest, ::testing::Values("localnet", "devnet"));

}  // namespace
}  // namespace switchyard
