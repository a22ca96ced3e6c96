// The configuration file as a whole, across sections: text parsed as a file is read, bytes the
// TOML parser cannot take, missing and skipped files, and the bounds of integers and durations.

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "app/config.h"
#include "tests/app/serve_config_fixture.h"

namespace switchyard {
namespace {

// Regression: integers were cast into their field unchecked, so a weight of 2^32 became 0 and
// max_attempts = 2^32 + 1 became a valid-looking 1.
TEST_F(ServeConfigTest, IntegersThatDoNotFitTheirFieldAreRefused) {
  const std::string file = dir_.Sub("serve.toml");
  struct Case {
    std::string text;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"[upstreams.base]\nendpoints = [{url = \"http://127.0.0.1:7799\", weight = 4294967296}]\n",
       "'upstreams.base.endpoints[0].weight' must be an integer from 1 to 4294967295, not "
       "4294967296"},
      {std::string(kBase) + "[log]\nkafka_partitions = 2147483648\n",
       "'log.kafka_partitions' must be an integer from 1 to 2147483647, not 2147483648"},
      {std::string(kBase) + "[log]\nkafka_replication_factor = 32768\n",
       "'log.kafka_replication_factor' must be an integer from 1 to 32767, not 32768"},
      {std::string(kBase) + "[storage]\nblock_cache_mb = 17592186044416\n",
       "'storage.block_cache_mb' must be an integer from 1 to 17592186044415, not "
       "17592186044416"},
      {std::string(kBase) + "[storage]\ningest_min_rows = -1\n",
       "'storage.ingest_min_rows' must be a non-negative integer"},
      {std::string(kBase) + "[cache]\nmax_mb = 17592186044416\n",
       "'cache.max_mb' must be an integer from 1 to 17592186044415, not 17592186044416"},
      {std::string(kBase) + "[cache]\nmax_entry_kb = 18014398509481984\n",
       "'cache.max_entry_kb' must be an integer from 1 to 18014398509481983, not "
       "18014398509481984"},
      {std::string(kBase) + "[upstream_health]\nmax_attempts = 4294967297\n",
       "'upstream_health.max_attempts' must be an integer from 1 to 4294967295, not 4294967297"},
      {std::string(kBase) + "[upstream_health]\nretry_budget_min = 4294967296\n",
       "'upstream_health.retry_budget_min' must be an integer from 0 to 4294967295, not "
       "4294967296"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.text);
    EXPECT_EQ(Error(c.text), file + ": " + c.message);
  }
}

TEST_F(ServeConfigTest, IntegersAtTheTopOfTheirFieldAreRead) {
  absl::StatusOr<Config> config = Load(R"(
[upstreams.base]
endpoints = [{url = "http://127.0.0.1:7799", weight = 4294967295}]
[log]
kafka_partitions = 2147483647
kafka_replication_factor = 32767
kafka_min_insync_replicas = 32767
kafka_retention_ms = 9223372036854775807
[storage]
block_cache_mb = 17592186044415
[cache]
max_mb = 17592186044415
max_entry_kb = 18014398509481983
)");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->serve.router.upstreams[0].endpoints[0].weight, 4294967295u);
  EXPECT_EQ(config->kafka_partitions, 2147483647);
  EXPECT_EQ(config->kafka_replication_factor, std::optional<int16_t>(32767));
  EXPECT_EQ(config->kafka_min_insync_replicas, std::optional<int32_t>(32767));
  EXPECT_EQ(config->kafka_retention_ms, std::optional<int64_t>(9223372036854775807));
  EXPECT_EQ(config->block_cache_mb, size_t{17592186044415});
  EXPECT_EQ(config->serve.router.cache.max_bytes, size_t{17592186044415} << 20);
  EXPECT_EQ(config->serve.router.cache.max_entry_bytes, size_t{18014398509481983} << 10);
}

// Regression: a duration key took any int64, and a deadline of now + 2^63 - 1 ms overflowed the
// clock into the past. Every `*_ms` and `*_s` key is bounded by 30 days.
TEST_F(ServeConfigTest, DurationsBeyondThirtyDaysAreRefused) {
  const std::string file = dir_.Sub("serve.toml");
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"[router]\nupstream_timeout_ms = 9223372036854775807\n",
       "'router.upstream_timeout_ms' must be an integer from 1 to 2592000000, not "
       "9223372036854775807"},
      {"[consistency]\nmax_wait_ms = 2592000001\n",
       "'consistency.max_wait_ms' must be an integer from 0 to 2592000000, not 2592000001"},
      {"[fold]\npublish_interval_ms = 2592000001\n",
       "'fold.publish_interval_ms' must be an integer from 1 to 2592000000, not 2592000001"},
      {"[ingest]\nreconcile_interval_ms = 2592000001\n",
       "'ingest.reconcile_interval_ms' must be an integer from 1 to 2592000000, not 2592000001"},
      {"[cache]\nfinal_ttl_ms = 2592000001\n",
       "'cache.final_ttl_ms' must be an integer from 0 to 2592000000, not 2592000001"},
      {"[snapshot]\ninterval_s = 2592001\n",
       "'snapshot.interval_s' must be an integer from 1 to 2592000, not 2592001"},
      {"[verify]\ninterval_s = 2592001\n",
       "'verify.interval_s' must be an integer from 1 to 2592000, not 2592001"},
  };
  for (const auto& [text, message] : cases) {
    SCOPED_TRACE(text);
    EXPECT_EQ(Error(std::string(kBase) + text), file + ": " + message);
  }
  absl::StatusOr<Config> config = Load(std::string(kBase) +
                                       "[router]\nupstream_timeout_ms = 2592000000\n"
                                       "[snapshot]\ninterval_s = 2592000\n");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->serve.router.upstream.request_timeout, absl::Hours(24 * 30));
  EXPECT_EQ(config->serve.snapshot_interval, absl::Hours(24 * 30));
}

// The file loader is ParseConfig over the file's bytes: the same values, the same messages.
TEST_F(ServeConfigTest, ParsesTextAsItReadsAFile) {
  const std::string text = std::string(kBase) + R"(
[storage]
data_dir = "/var/lib/switchyard"
sync = false
block_cache_mb = 128
ingest_min_rows = 0
[log]
url = "kafka://k1:9092,k2:9092/events"
kafka_partitions = 24
kafka_replication_factor = 3
kafka_min_insync_replicas = 2
kafka_retention_ms = 86400000
kafka_properties = {"security.protocol" = "SSL"}
[fold]
max_batch_records = 1000
publish_interval_ms = 20
pipelined_commits = false
[api]
listen = "0.0.0.0:8000"
cors_origins = ["https://app.example"]
gzip_level = 6
[upstreams.er1]
endpoints = [{url = "http://127.0.0.1:7800", weight = 3}, {url = "http://127.0.0.1:7801"}]
[[ers]]
identity = "11111111111111111111111111111113"
upstream = "er1"
block_time_ms = 30
[routing]
default_er = "er1"
methods = {"getAsset*" = "base"}
[cache]
max_mb = 8
methods = {"getAsset*" = "final"}
[pubsub]
port = 0
max_message_bytes = 4096
[ingest]
base_url = "https://rpc.example:8899/key"
max_lag_slots = 7
)";
  const std::string file = dir_.Sub("serve.toml");
  absl::StatusOr<Config> from_file = Load(text);
  absl::StatusOr<Config> from_text = ParseConfig(text, file);
  ASSERT_TRUE(from_file.ok()) << from_file.status();
  ASSERT_TRUE(from_text.ok()) << from_text.status();
  const Config& a = *from_file;
  const Config& b = *from_text;
  EXPECT_EQ(b.source, file);
  EXPECT_EQ(a.source, b.source);
  EXPECT_EQ(b.data_dir, "/var/lib/switchyard");
  EXPECT_EQ(a.data_dir, b.data_dir);
  EXPECT_EQ(a.sync, b.sync);
  EXPECT_EQ(b.block_cache_mb, 128u);
  EXPECT_EQ(a.block_cache_mb, b.block_cache_mb);
  EXPECT_EQ(b.ingest_min_rows, 0u);
  EXPECT_EQ(Config().ingest_min_rows, 25'000u);
  EXPECT_EQ(a.ingest_min_rows, b.ingest_min_rows);
  EXPECT_EQ(b.log_url, "kafka://k1:9092,k2:9092/events");
  EXPECT_EQ(a.log_url, b.log_url);
  EXPECT_EQ(b.kafka_partitions, 24);
  EXPECT_EQ(a.kafka_partitions, b.kafka_partitions);
  EXPECT_EQ(b.kafka_replication_factor, std::optional<int16_t>(3));
  EXPECT_EQ(a.kafka_replication_factor, b.kafka_replication_factor);
  EXPECT_EQ(b.kafka_min_insync_replicas, std::optional<int32_t>(2));
  EXPECT_EQ(a.kafka_min_insync_replicas, b.kafka_min_insync_replicas);
  EXPECT_EQ(b.kafka_retention_ms, std::optional<int64_t>(86400000));
  EXPECT_EQ(a.kafka_retention_ms, b.kafka_retention_ms);
  EXPECT_EQ(a.kafka_properties, b.kafka_properties);
  EXPECT_EQ(b.fold.max_batch_records, 1000u);
  EXPECT_EQ(a.fold.max_batch_records, b.fold.max_batch_records);
  EXPECT_EQ(a.fold.publish_interval, b.fold.publish_interval);
  EXPECT_FALSE(b.fold.pipelined_commits);
  EXPECT_EQ(a.fold.pipelined_commits, b.fold.pipelined_commits);
  EXPECT_EQ(b.serve.api.port, 8000);
  EXPECT_EQ(a.serve.api.address, b.serve.api.address);
  EXPECT_EQ(a.serve.api.port, b.serve.api.port);
  EXPECT_EQ(a.serve.api.cors.allowed_origins, b.serve.api.cors.allowed_origins);
  EXPECT_EQ(b.serve.api.gzip.level, 6);
  EXPECT_EQ(a.serve.api.gzip.level, b.serve.api.gzip.level);
  ASSERT_EQ(b.serve.router.upstreams.size(), 2u);
  ASSERT_EQ(a.serve.router.upstreams.size(), b.serve.router.upstreams.size());
  for (size_t i = 0; i < a.serve.router.upstreams.size(); ++i) {
    const UpstreamTarget& x = a.serve.router.upstreams[i];
    const UpstreamTarget& y = b.serve.router.upstreams[i];
    EXPECT_EQ(x.name, y.name);
    ASSERT_EQ(x.endpoints.size(), y.endpoints.size());
    for (size_t j = 0; j < x.endpoints.size(); ++j) {
      EXPECT_EQ(x.endpoints[j].url, y.endpoints[j].url);
      EXPECT_EQ(x.endpoints[j].weight, y.endpoints[j].weight);
    }
  }
  EXPECT_EQ(b.serve.router.upstreams[1].endpoints[0].weight, 3u);
  ASSERT_EQ(b.serve.router.ers.size(), 1u);
  ASSERT_EQ(a.serve.router.ers.size(), 1u);
  EXPECT_EQ(a.serve.router.ers[0].identity, b.serve.router.ers[0].identity);
  EXPECT_EQ(a.serve.router.ers[0].block_time_ms, b.serve.router.ers[0].block_time_ms);
  EXPECT_EQ(a.serve.router.routing.default_er, b.serve.router.routing.default_er);
  ASSERT_EQ(b.serve.router.routing.method_rules.size(), 1u);
  ASSERT_EQ(a.serve.router.routing.method_rules.size(), 1u);
  EXPECT_EQ(a.serve.router.routing.method_rules[0].target,
            b.serve.router.routing.method_rules[0].target);
  EXPECT_EQ(b.serve.router.cache.max_bytes, size_t{8} << 20);
  EXPECT_EQ(a.serve.router.cache.max_bytes, b.serve.router.cache.max_bytes);
  ASSERT_EQ(a.serve.router.cache.rules.size(), b.serve.router.cache.rules.size());
  EXPECT_EQ(b.serve.pubsub_port, 0);
  EXPECT_EQ(a.serve.pubsub_port, b.serve.pubsub_port);
  EXPECT_EQ(a.serve.pubsub.max_message_bytes, b.serve.pubsub.max_message_bytes);
  ASSERT_EQ(b.ingest.endpoints.size(), 1u);
  ASSERT_EQ(a.ingest.endpoints.size(), 1u);
  EXPECT_EQ(a.ingest.endpoints[0].url, b.ingest.endpoints[0].url);
  EXPECT_EQ(b.ingest.max_lag_slots, 7);
  EXPECT_EQ(a.ingest.max_lag_slots, b.ingest.max_lag_slots);

  // A syntax error and a semantic one read the same, position included.
  for (const std::string& bad :
       {std::string(kBase) + "[api]\nthreads = \n", std::string(kBase) + "[api]\nthreads = -1\n"}) {
    const std::string from_file_error = Error(bad);
    absl::StatusOr<Config> bad_text = ParseConfig(bad, file);
    ASSERT_FALSE(bad_text.ok());
    EXPECT_EQ(std::string(bad_text.status().message()), from_file_error);
    EXPECT_EQ(from_file_error.rfind(file + ":", 0), 0u) << from_file_error;
  }
  EXPECT_EQ(Error(std::string(kBase) + "[api]\nthreads = \n").rfind(file + ":4:", 0), 0u);
}

// Regression: a non-ASCII character outside a string (or first on a line continued by a
// backslash in a multi-line string) reached a __builtin_unreachable() inside toml++ 3.3.
TEST_F(ServeConfigTest, NonAsciiWhereTheTomlParserCannotReadItIsRefused) {
  EXPECT_EQ(ParseConfig("\xC2\xA1", "serve.toml").status().message(),
            "serve.toml:1:1: a non-ASCII character outside a string or a comment");
  EXPECT_EQ(ParseConfig("[api]\nthreads = 2 \xC3\xA9\n", "serve.toml").status().message(),
            "serve.toml:2:13: a non-ASCII character outside a string or a comment");
  EXPECT_EQ(
      ParseConfig("[router]\nfqdn = \"\"\"\\\n  \xC3\xA9\"\"\"\n", "serve.toml").status().message(),
      "serve.toml:3:3: a non-ASCII character first after a line-ending backslash (put it "
      "on the backslash's line, or escape it as \\uXXXX)");

  // In strings and comments, and as a byte order mark, they are read as before.
  absl::StatusOr<Config> config = ParseConfig(
      "\xEF\xBB\xBF# caf\xC3\xA9\n" + std::string(kBase) +
          "[router]\nfqdn = \"https://rout\xC3\xA9r.example\"  # \xC2\xA1\n"
          "[[ers]]\nidentity = \"11111111111111111111111111111113\"\nupstream = \"base\"\n"
          "country_code = '''\xC3\xA9\\\n\xC3\xA9'''\nfqdn = \"\"\"\xC3\xA9\\\n  x\xC3\xA9\"\"\"\n",
      "serve.toml");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->serve.router.fqdn, "https://rout\xC3\xA9r.example");
  ASSERT_EQ(config->serve.router.ers.size(), 1u);
  EXPECT_EQ(config->serve.router.ers[0].country_code, "\xC3\xA9\\\n\xC3\xA9");
  EXPECT_EQ(config->serve.router.ers[0].fqdn, "\xC3\xA9x\xC3\xA9");
}

// Regression (config_fuzzer, a 10 M-execution run): after `=1` a quote did not open a string
// for toml++, which went on reading a bare value and asked whether the following non-ASCII
// character was whitespace, reaching its __builtin_unreachable().
TEST_F(ServeConfigTest, AQuoteWhereNoStringMayBeginIsRefused) {
  EXPECT_EQ(
      ParseConfig("[aQpi]\ntls_cert_file =1\"\xC8\x9B" + std::string(30, 'X') + "\"", "serve.toml")
          .status()
          .message(),
      "serve.toml:2:17: a quote inside a bare value (a number, a date, true or false)");
  EXPECT_EQ(ParseConfig("[api]\nthreads = 2 'x'\n", "serve.toml").status().message(),
            "serve.toml:2:13: a quote after '2', where no string may begin");
  // The second and third (the same run again, once the first was refused): a bare value runs to
  // a space, ',', ']', '}', '#' or a line break, dots and brackets included.
  EXPECT_EQ(
      ParseConfig("cache.\"max_mb\" = 0o17e.\"get\xD1\xAE\"\n", "serve.toml").status().message(),
      "serve.toml:1:24: a quote inside a bare value (a number, a date, true or false)");
  EXPECT_EQ(ParseConfig("e=1['6\xEF\xBB\x90"
                        "e=1['",
                        "serve.toml")
                .status()
                .message(),
            "serve.toml:1:5: a quote inside a bare value (a number, a date, true or false)");
  // The same where an array's element begins a line.
  EXPECT_EQ(ParseConfig("a = [\n  1['\xC8\x9B']\n]\n", "serve.toml").status().message(),
            "serve.toml:2:5: a quote inside a bare value (a number, a date, true or false)");

  // Quotes where TOML lets a string begin: a key at a line's start or after a dot, a table
  // header, a value after '=', '[', ',' or '{', also on the next line of an array.
  absl::StatusOr<Config> config = ParseConfig(
      "[\"upstreams\".base]\n\"endpoints\" = [\n  {url = \"http://127.0.0.1:7799\"},\n"
      "  { \"url\" = 'http://127.0.0.1:7800' }\n]\n"
      "[api]\ncors_origins = [ \"https://app.example\",\"http://127.0.0.1:3000\" ]\n"
      "[routing.methods]\n\"getAsset*\" = \"base\"\n"
      "[cache]\nmethods = { \"getBalance\" = \"never\", \"getSlot\" = 'coalesce' }\n",
      "serve.toml");
  ASSERT_TRUE(config.ok()) << config.status();
  ASSERT_EQ(config->serve.router.upstreams.size(), 1u);
  EXPECT_EQ(config->serve.router.upstreams[0].endpoints.size(), 2u);
  EXPECT_EQ(config->serve.api.cors.allowed_origins.size(), 2u);
  EXPECT_EQ(config->serve.router.cache.rules.size(), 2u);
}

TEST_F(ServeConfigTest, AMissingFileIsRefusedNamingIt) {
  const std::string missing = dir_.Sub("missing.toml");
  absl::StatusOr<Config> config = LoadConfig(missing);
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.status().message(), missing + ":0:0: File could not be opened for reading");
}

// ConfigFiles::kSkip keeps the names of the key file and the TLS files without opening them.
TEST_F(ServeConfigTest, SkippedFilesAreNotOpened) {
  const std::string keys = dir_.Sub("no-such-keys.toml");
  const std::string cert = dir_.Sub("no-such-cert.pem");
  const std::string key = dir_.Sub("no-such-key.pem");
  const std::string text = std::string(kBase) + "[access]\nkeys_file = \"" + keys +
                           "\"\n[api]\ntls_cert_file = \"" + cert + "\"\ntls_key_file = \"" + key +
                           "\"\n";
  absl::StatusOr<Config> checked = ParseConfig(text, "serve.toml");
  EXPECT_FALSE(checked.ok());
  absl::StatusOr<Config> skipped = ParseConfig(text, "serve.toml", ConfigFiles::kSkip);
  ASSERT_TRUE(skipped.ok()) << skipped.status();
  EXPECT_EQ(skipped->serve.keys_file, keys);
  EXPECT_TRUE(skipped->serve.router.access.load_key_file != nullptr);
  EXPECT_EQ(skipped->serve.api.tls.certificate_file, cert);
  EXPECT_EQ(skipped->serve.api.tls.private_key_file, key);
  // Still both or neither.
  absl::StatusOr<Config> half =
      ParseConfig(std::string(kBase) + "[api]\ntls_cert_file = \"" + cert + "\"\n", "serve.toml",
                  ConfigFiles::kSkip);
  ASSERT_FALSE(half.ok());
  EXPECT_EQ(half.status().message(),
            "serve.toml: 'api.tls_key_file' is required with api.tls_cert_file");
}

}  // namespace
}  // namespace switchyard
