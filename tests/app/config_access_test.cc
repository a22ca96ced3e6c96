// The [access] section, [[keys]] and where a request carries its API key
// (app/config_access.cc).
#include <gtest/gtest.h>

#include <fstream>
#include <optional>
#include <string>

#include "app/config.h"
#include "tests/app/serve_config_fixture.h"

namespace switchyard {
namespace {

class AccessConfigTest : public ServeConfigTest {};

TEST_F(AccessConfigTest, ReadsAccessAndKeys) {
  const std::string keys = dir_.Sub("keys.toml");
  std::ofstream(keys) << "[[keys]]\nname = \"from-file\"\nkey = \"file-key-0123456789\"\n";
  absl::StatusOr<Config> config = Load(std::string(kBase) + R"(
[access]
keys_required = true
keys_file = ")" + keys + R"("
address_requests_per_second = 50
address_burst = 100
ws_messages_per_second = 10.5
redis = "redis://127.0.0.1:6390"
replicas = 3
[[keys]]
name = "game-a"
key = "secret-0123456789"
allowed_methods = ["getAccountInfo"]
denied_methods = ["sendTransaction"]
requests_per_second = 100
burst = 200
max_subscriptions = 5
)");
  ASSERT_TRUE(config.ok()) << config.status();
  const AccessOptions& access = config->serve.router.access;
  EXPECT_TRUE(access.keys_required);
  EXPECT_DOUBLE_EQ(access.address_requests.per_second, 50);
  EXPECT_DOUBLE_EQ(access.address_requests.burst, 100);
  EXPECT_DOUBLE_EQ(access.ws_messages_per_connection.per_second, 10.5);
  EXPECT_EQ(access.redis_url, "redis://127.0.0.1:6390");
  EXPECT_EQ(access.replicas, 3u);
  ASSERT_EQ(access.keys.size(), 1u);
  EXPECT_EQ(access.keys[0].name, "game-a");
  EXPECT_EQ(access.keys[0].allowed_methods, std::vector<std::string>{"getAccountInfo"});
  EXPECT_DOUBLE_EQ(access.keys[0].requests.per_second, 100);
  EXPECT_EQ(access.keys[0].max_subscriptions, 5u);
  ASSERT_TRUE(access.load_key_file != nullptr);
  absl::StatusOr<std::vector<ApiKeyOptions>> from_file = access.load_key_file();
  ASSERT_TRUE(from_file.ok());
  ASSERT_EQ(from_file->size(), 1u);
  EXPECT_EQ((*from_file)[0].name, "from-file");
}

TEST_F(AccessConfigTest, ErrorsNameTheKeyButNeverTheSecret) {
  const std::string file = dir_.Sub("serve.toml");
  EXPECT_EQ(Error(std::string(kBase) +
                  "[[keys]]\nname = \"game-a\"\nkey = \"secret-0123\"\nburst = -1\n"),
            file + ": 'keys[\"game-a\"].burst' must be within [0, 1000000000]");
  EXPECT_EQ(Error(std::string(kBase) + "[[keys]]\nname = \"game-a\"\nkey = \"short\"\n"),
            file +
                ": key \"game-a\": 'key' must be at least 8 characters of A-Z, a-z, 0-9, '_' and "
                "'-'");
  EXPECT_EQ(Error(std::string(kBase) + "[[keys]]\nname = \"a\"\nkey = \"secret-0123\"\n"
                                       "[[keys]]\nname = \"a\"\nkey = \"secret-4567\"\n"),
            file + ": key \"a\": 'name' is used by another key");
  EXPECT_EQ(Error(std::string(kBase) + "[[keys]]\nkey = \"secret-0123\"\n"),
            file + ": 'keys[0].name' is required");
  EXPECT_EQ(Error(std::string(kBase) + "[[keys]]\nname = \"a\"\nkey = \"secret-0123\"\nrate = 1\n"),
            file + ": unknown key 'keys[\"a\"].rate'");
  EXPECT_EQ(Error(std::string(kBase) + "[access]\nkeys_required = true\n"),
            file + ": 'access.keys_required' needs [[keys]] or 'access.keys_file'");
  EXPECT_EQ(Error(std::string(kBase) + "[access]\nredis = \"http://x\"\n"),
            file + ": 'access.redis' Redis URL 'http://x' must start with redis://");
  EXPECT_EQ(Error(std::string(kBase) + "[access]\nreplicas = 0\n"),
            file + ": 'access.replicas' must be a positive integer");
  EXPECT_EQ(Error(std::string(kBase) + "[access]\naddress_burst = 5\n"),
            file + ": 'access.address_burst' needs 'address_requests_per_second'");
  const std::string keys = dir_.Sub("bad-keys.toml");
  std::ofstream(keys) << "[[keys]]\nname = \"x y\"\nkey = \"secret-0123\"\n";
  EXPECT_EQ(Error(std::string(kBase) + "[access]\nkeys_file = \"" + keys + "\"\n"),
            keys +
                ": key \"x y\": 'name' must be letters, digits, '_', '-' or '.' (it is a "
                "metric label)");
}

TEST(ApiKeyCarriers, HeaderThenQueryThenTheWholePath) {
  EXPECT_EQ(FindApiKey("/path-key", std::string_view("header-key")), "header-key");
  EXPECT_EQ(FindApiKey("/?a=1&api-key=query-key&b=2", std::nullopt), "query-key");
  EXPECT_EQ(FindApiKey("/path-key", std::nullopt), "path-key");
  EXPECT_EQ(FindApiKey("/path-key/", std::nullopt), "path-key");
  EXPECT_EQ(FindApiKey("/path-key?x=1", std::nullopt), "path-key");
  EXPECT_EQ(FindApiKey("/", std::nullopt), std::nullopt);
  EXPECT_EQ(FindApiKey("/a/b", std::nullopt), std::nullopt);
}

}  // namespace
}  // namespace switchyard
