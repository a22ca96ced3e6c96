#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "app/config.h"
#include "app/ingest_command.h"
#include "tests/support/temp_dir.h"

namespace switchyard {
namespace {

using testing::TempDir;

class IngestConfigTest : public ::testing::Test {
 protected:
  absl::StatusOr<Config> Load(const std::string& text) {
    const std::string path = dir_.Sub("ingest.toml");
    std::ofstream(path) << text;
    return LoadConfig(path);
  }
  std::string Error(const std::string& text) {
    absl::StatusOr<Config> config = Load(text);
    EXPECT_FALSE(config.ok());
    return config.ok() ? "" : std::string(config.status().message());
  }
  std::string File() { return dir_.Sub("ingest.toml"); }

  TempDir dir_;
};

TEST_F(IngestConfigTest, EndpointsAreReadInOrderWithTheirPubsubUrls) {
  absl::StatusOr<Config> config = Load(R"([ingest]
endpoints = [{url = "http://rpc-a:8899"},
             {url = "https://rpc-b.example/KEY", pubsub_url = "wss://ws-b.example/KEY"}]
max_lag_slots = 20
probe_interval_ms = 250
)");
  ASSERT_TRUE(config.ok()) << config.status();
  ASSERT_EQ(config->ingest.endpoints.size(), 2u);
  EXPECT_EQ(config->ingest.endpoints[0].url, "http://rpc-a:8899");
  EXPECT_EQ(config->ingest.endpoints[0].pubsub_url, "");
  EXPECT_EQ(config->ingest.endpoints[1].url, "https://rpc-b.example/KEY");
  EXPECT_EQ(config->ingest.endpoints[1].pubsub_url, "wss://ws-b.example/KEY");
  EXPECT_EQ(config->ingest.max_lag_slots, 20);
  EXPECT_EQ(config->ingest.probe_interval_ms, 250);

  const WatcherOptions options = WatcherOptionsFrom(config->ingest, 0);
  ASSERT_EQ(options.endpoints.size(), 2u);
  EXPECT_EQ(options.endpoints[1].pubsub_url, "wss://ws-b.example/KEY");
  EXPECT_EQ(options.max_lag_slots, 20u);
  EXPECT_EQ(options.probe_interval, absl::Milliseconds(250));
}

TEST_F(IngestConfigTest, BaseUrlIsAOneEndpointList) {
  absl::StatusOr<Config> config =
      Load("[ingest]\nbase_url = \"http://rpc-a:8899\"\npubsub_url = \"ws://ws-a:9000\"\n");
  ASSERT_TRUE(config.ok()) << config.status();
  ASSERT_EQ(config->ingest.endpoints.size(), 1u);
  EXPECT_EQ(config->ingest.endpoints[0].url, "http://rpc-a:8899");
  EXPECT_EQ(config->ingest.endpoints[0].pubsub_url, "ws://ws-a:9000");
}

TEST_F(IngestConfigTest, DefaultsHaveNoEndpointAndTheDocumentedLagAndProbe) {
  absl::StatusOr<Config> config = Load("[ingest]\nreconcile_interval_ms = 5\n");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_TRUE(config->ingest.endpoints.empty());
  EXPECT_EQ(config->ingest.max_lag_slots, 50);
  EXPECT_EQ(config->ingest.probe_interval_ms, 1000);
}

TEST_F(IngestConfigTest, ErrorsNameTheKeyAndTheFile) {
  const std::string file = File();
  EXPECT_EQ(Error("[ingest]\nbase_url = \"http://a:1\"\nendpoints = [{url = \"http://b:1\"}]\n"),
            file +
                ": 'ingest.base_url' cannot be set together with 'ingest.endpoints' (give each "
                "endpoint's pubsub_url in its table)");
  EXPECT_EQ(Error("[ingest]\npubsub_url = \"ws://a:1\"\nendpoints = [{url = \"http://b:1\"}]\n"),
            file +
                ": 'ingest.pubsub_url' cannot be set together with 'ingest.endpoints' (give each "
                "endpoint's pubsub_url in its table)");
  EXPECT_EQ(Error("[ingest]\npubsub_url = \"ws://a:1\"\n"),
            file + ": 'ingest.pubsub_url' needs base_url");
  EXPECT_EQ(Error("[ingest]\nendpoints = []\n"),
            file + ": 'ingest.endpoints' must be a non-empty array of {url, pubsub_url} tables");
  EXPECT_EQ(Error("[ingest]\nendpoints = [\"http://a:1\"]\n"),
            file + ": 'ingest.endpoints[0]' must be a table {url = \"...\", pubsub_url = \"...\"}");
  EXPECT_EQ(Error("[ingest]\nendpoints = [{url = \"http://a:1\"}, {pubsub_url = \"ws://b:2\"}]\n"),
            file + ": 'ingest.endpoints[1].url' is required");
  EXPECT_EQ(Error("[ingest]\nendpoints = [{url = \"http://a:1\", weight = 2}]\n"),
            file + ": unknown key 'ingest.endpoints[0].weight'");
  EXPECT_EQ(Error("[ingest]\nendpoints = [{url = \"ws://a:1\"}]\n"),
            file + ": 'ingest.endpoints[0].url' must be an http:// or https:// URL");
  EXPECT_EQ(Error("[ingest]\nendpoints = [{url = \"http://a:1\", pubsub_url = \"http://a:2\"}]\n"),
            file + ": 'ingest.endpoints[0].pubsub_url' must be a ws:// or wss:// URL");
  EXPECT_EQ(Error("[ingest]\nbase_url = \"ftp://a\"\n")
                .rfind(file + ": 'ingest.base_url' is not a usable URL", 0),
            0u);
  EXPECT_EQ(Error("[ingest]\nbase_url = \"http://a:1\"\nmax_lag_slots = 0\n"),
            file + ": 'ingest.max_lag_slots' must be a positive integer");
  EXPECT_EQ(Error("[ingest]\nbase_url = \"http://a:1\"\nprobe_interval_ms = \"1s\"\n"),
            file + ": 'ingest.probe_interval_ms' must be a positive integer");
}

}  // namespace
}  // namespace switchyard
