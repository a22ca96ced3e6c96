#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "app/config.h"
#include "tests/support/temp_dir.h"

namespace switchyard {
namespace {

class PubsubConfigTest : public ::testing::Test {
 protected:
  absl::StatusOr<Config> Load(const std::string& text) {
    const std::string path = dir_.Sub("pubsub.toml");
    std::ofstream(path) << "[upstreams.base]\nendpoints = [{url = \"http://127.0.0.1:7799\"}]\n"
                        << text;
    return LoadConfig(path);
  }
  std::string Error(const std::string& text) {
    absl::StatusOr<Config> config = Load(text);
    EXPECT_FALSE(config.ok());
    return config.ok() ? "" : std::string(config.status().message());
  }

  testing::TempDir dir_;
};

TEST_F(PubsubConfigTest, DefaultsToTheApiPortPlusOneWithTheIssueLimits) {
  absl::StatusOr<Config> config = Load("");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_TRUE(config->serve.pubsub_enabled);
  EXPECT_EQ(config->serve.pubsub_port, -1);
  EXPECT_EQ(config->serve.pubsub.max_subscriptions_per_connection, 1000u);
  EXPECT_TRUE(config->serve.pubsub.router.endpoints.empty());
}

TEST_F(PubsubConfigTest, ReadsEveryKey) {
  absl::StatusOr<Config> config = Load(R"(
[upstreams.er1]
endpoints = [{url = "http://127.0.0.1:7800"}]
[pubsub]
enabled = true
port = 0
threads = 3
max_connections = 50
max_subscriptions_per_connection = 7
max_message_bytes = 4096
idle_timeout_ms = 1500
max_send_queue_messages = 64
max_send_queue_bytes = 65536
upstream_timeout_ms = 2500
reconnect_give_up_ms = 3500
[pubsub.upstreams]
er1 = ["ws://127.0.0.1:9000", "wss://er1.example/ws"]
)");
  ASSERT_TRUE(config.ok()) << config.status();
  const PubsubServerOptions& pubsub = config->serve.pubsub;
  EXPECT_EQ(config->serve.pubsub_port, 0);
  EXPECT_EQ(config->serve.pubsub_threads, 3u);
  EXPECT_EQ(pubsub.max_connections, 50u);
  EXPECT_EQ(pubsub.max_subscriptions_per_connection, 7u);
  EXPECT_EQ(pubsub.max_message_bytes, 4096u);
  EXPECT_EQ(pubsub.idle_timeout, absl::Milliseconds(1500));
  EXPECT_EQ(pubsub.max_send_queue_messages, 64u);
  EXPECT_EQ(pubsub.max_send_queue_bytes, 65536u);
  EXPECT_EQ(pubsub.router.upstream.call_timeout, absl::Milliseconds(2500));
  EXPECT_EQ(pubsub.router.upstream.reconnect_give_up, absl::Milliseconds(3500));
  ASSERT_EQ(pubsub.router.endpoints.size(), 1u);
  EXPECT_EQ(pubsub.router.endpoints[0].first, "er1");
  EXPECT_EQ(pubsub.router.endpoints[0].second,
            (std::vector<std::string>{"ws://127.0.0.1:9000", "wss://er1.example/ws"}));
}

TEST_F(PubsubConfigTest, NamesTheBadKey) {
  EXPECT_NE(Error("[pubsub]\nport = 70000\n").find("'pubsub.port' must be a port"),
            std::string::npos);
  EXPECT_NE(
      Error("[pubsub]\nmax_subscriptions = 3\n").find("unknown key 'pubsub.max_subscriptions'"),
      std::string::npos);
  EXPECT_NE(Error("[pubsub.upstreams]\ner9 = [\"ws://x:1\"]\n")
                .find("'pubsub.upstreams.er9' names no configured upstream"),
            std::string::npos);
  EXPECT_NE(Error("[pubsub.upstreams]\nbase = [\"http://x:1\"]\n")
                .find("'pubsub.upstreams.base' must be a non-empty array"),
            std::string::npos);
  EXPECT_NE(Error("[pubsub]\nidle_timeout_ms = 0\n").find("'pubsub.idle_timeout_ms'"),
            std::string::npos);
}

}  // namespace
}  // namespace switchyard
