// libFuzzer target: the TOML config, parsed from bytes as `switchyard` parses its file
// (LoadConfig hands the file's bytes to ParseConfig). Whatever it accepts must hold the
// integers of the text, unwrapped, within their documented ranges, with every name it refers
// to configured; whatever it refuses must name the file.
//
// The parse would open the files a config names (access.keys_file, api.tls_cert_file and
// api.tls_key_file); here it is told not to (ConfigFiles::kSkip), since an input could name
// /dev/zero, a FIFO or any large file and make a run read without end or block. Little is
// lost: a key file's [[keys]] go through the reader of the config's own [[keys]], which this
// target reaches, and the TLS files are OpenSSL's to parse.
#include <toml++/toml.h>

#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>

#include "api/access/access_control.h"
#include "api/upstream/upstream.h"
#include "api/upstream/upstream_health.h"
#include "app/config.h"
#include "common/url.h"
#include "tests/fuzz/fuzz_check.h"

using switchyard::fuzz::Check;

namespace {

using namespace switchyard;

constexpr std::string_view kSource = "fuzz.toml";

// The integer the text holds at `path`, if it holds one there.
std::optional<int64_t> IntegerAt(const toml::table& root, std::string_view path) {
  const toml::value<int64_t>* value = root.at_path(path).as_integer();
  if (value == nullptr) return std::nullopt;
  return value->get();
}

// An integer field that was read holds the text's value, not a wrapped or truncated one.
template <typename T>
void CheckHolds(const toml::table& root, std::string_view path, T field) {
  const std::optional<int64_t> text = IntegerAt(root, path);
  if (!text) return;
  Check(*text >= 0);
  Check(static_cast<uint64_t>(*text) == static_cast<uint64_t>(field));
}

// A size read in units of 2^shift bytes holds the text's count of units, unwrapped.
void CheckHoldsScaled(const toml::table& root, std::string_view path, size_t bytes, int shift) {
  const std::optional<int64_t> text = IntegerAt(root, path);
  if (!text) return;
  Check(*text > 0);
  Check((bytes >> shift) == static_cast<uint64_t>(*text));
  Check((bytes & ((size_t{1} << shift) - 1)) == 0);
}

// Every duration key (a name ending in `_ms` or `_s`) of an accepted config is at most 30 days,
// wherever it is (the broker's log.kafka_retention_ms aside).
void CheckDurationsBounded(const toml::node& node, std::string_view name, std::string_view path) {
  if (const toml::table* table = node.as_table()) {
    for (const auto& [key, child] : *table) {
      const std::string child_path =
          path.empty() ? std::string(key.str()) : std::string(path) + "." + std::string(key.str());
      CheckDurationsBounded(child, key.str(), child_path);
    }
  } else if (const toml::array* array = node.as_array()) {
    for (const toml::node& element : *array) CheckDurationsBounded(element, name, path);
  } else if (const toml::value<int64_t>* value = node.as_integer()) {
    if (path == "log.kafka_retention_ms") return;
    if (name.ends_with("_ms")) Check(value->get() <= kMaxConfigDurationMs);
    if (name.ends_with("_s")) Check(value->get() <= kMaxConfigDurationMs / 1000);
  }
}

void CheckAccepted(const toml::table& root, const Config& config) {
  Check(config.source == kSource);
  CheckDurationsBounded(root, "", "");

  // [storage], [log], [fold]: positive, and what the text says.
  Check(config.block_cache_mb >= 1);
  Check(config.block_cache_mb <= (std::numeric_limits<size_t>::max() >> 20));
  CheckHolds(root, "storage.block_cache_mb", config.block_cache_mb);
  Check(config.kafka_partitions >= 1);
  CheckHolds(root, "log.kafka_partitions", config.kafka_partitions);
  if (config.kafka_replication_factor) {
    Check(*config.kafka_replication_factor >= 1);
    CheckHolds(root, "log.kafka_replication_factor", *config.kafka_replication_factor);
  }
  if (config.kafka_min_insync_replicas) {
    Check(*config.kafka_min_insync_replicas >= 1);
    CheckHolds(root, "log.kafka_min_insync_replicas", *config.kafka_min_insync_replicas);
    Check(!config.kafka_replication_factor ||
          *config.kafka_min_insync_replicas <= *config.kafka_replication_factor);
  }
  Check(config.serve.snapshot_dir.empty() || config.serve.snapshot_dir.front() == '/');
  Check(config.serve.snapshot_interval > absl::ZeroDuration());
  Check(config.serve.snapshot_keep >= 1);
  if (config.kafka_retention_ms) {
    Check(*config.kafka_retention_ms == -1 || *config.kafka_retention_ms >= 1);
    Check(IntegerAt(root, "log.kafka_retention_ms") == config.kafka_retention_ms);
  }
  Check(config.fold.max_batch_records >= 1);
  CheckHolds(root, "fold.max_batch_records", config.fold.max_batch_records);
  Check(config.fold.fold.max_pending_per_partition >= 1);
  Check(config.fold.publish_interval > absl::ZeroDuration());

  const ServeConfig& serve = config.serve;
  const RouterOptions& router = serve.router;

  // [api]
  Check(serve.api.gzip.level >= 1 && serve.api.gzip.level <= 9);
  Check(serve.api.max_connections >= 1);
  CheckHolds(root, "api.max_connections", serve.api.max_connections);
  CheckHolds(root, "api.max_body_bytes", serve.api.max_body_bytes);
  const std::vector<std::string>& origins = serve.api.cors.allowed_origins;
  for (const std::string& origin : origins) Check(origin != "*" || origins.size() == 1);
  Check(serve.api.tls.certificate_file.empty() == serve.api.tls.private_key_file.empty());
  auto has_region = [&](const std::string& name) {
    for (const RegionOptions::Region& region : serve.api.regions.regions) {
      if (region.name == name) return true;
    }
    return false;
  };
  Check(serve.api.regions.own_region.empty() || has_region(serve.api.regions.own_region));
  Check(serve.api.regions.default_region.empty() || has_region(serve.api.regions.default_region));

  // [pubsub]
  Check(serve.pubsub_port >= -1 && serve.pubsub_port <= 65535);
  if (const std::optional<int64_t> port = IntegerAt(root, "pubsub.port")) {
    Check(*port == serve.pubsub_port);
  }
  Check(serve.pubsub.max_connections >= 1);
  CheckHolds(root, "pubsub.max_message_bytes", serve.pubsub.max_message_bytes);

  // [upstream_health]: the 32-bit counts hold the text's values, and the whole passes the
  // check the router makes.
  const UpstreamHealthOptions& health = router.health;
  Check(ValidateHealthOptions(health).ok());
  CheckHolds(root, "upstream_health.eject_consecutive_failures", health.eject_consecutive_failures);
  CheckHolds(root, "upstream_health.min_requests", health.min_requests);
  CheckHolds(root, "upstream_health.recover_probes", health.recover_probes);
  CheckHolds(root, "upstream_health.circuit_min_requests", health.circuit_min_requests);
  CheckHolds(root, "upstream_health.half_open_trials", health.half_open_trials);
  CheckHolds(root, "upstream_health.max_attempts", health.max_attempts);
  CheckHolds(root, "upstream_health.retry_budget_min", health.retry_budget_min);
  CheckHolds(root, "upstream_health.max_slot_lag", health.max_slot_lag);

  // [upstreams.NAME]: at least one endpoint each, an http(s) URL, a weight of at least 1 that
  // is the text's.
  auto has_upstream = [&](const std::string& name) {
    for (const UpstreamTarget& target : router.upstreams) {
      if (target.name == name) return true;
    }
    return false;
  };
  for (const UpstreamTarget& target : router.upstreams) {
    Check(!target.endpoints.empty());
    for (size_t i = 0; i < target.endpoints.size(); ++i) {
      const UpstreamEndpoint& endpoint = target.endpoints[i];
      Check(endpoint.weight >= 1);
      Check(ParseUpstreamUrl(endpoint.url).ok());
      const toml::node_view<const toml::node> text =
          root["upstreams"][target.name]["endpoints"][i]["weight"];
      if (const toml::value<int64_t>* weight = text.as_integer()) {
        Check(static_cast<uint64_t>(weight->get()) == endpoint.weight);
      }
    }
  }

  // [[ers]], [routing]: every name is a configured upstream.
  for (const ErRoute& er : router.ers) {
    Check(has_upstream(er.target));
    Check(er.block_time_ms >= 1);
  }
  Check(router.routing.default_er.empty() || has_upstream(router.routing.default_er));
  for (const MethodRule& rule : router.routing.method_rules) Check(has_upstream(rule.target));

  // [cache]: whole MiB and KiB, never wrapped.
  Check(router.cache.max_bytes >= (size_t{1} << 20));
  Check(router.cache.max_entry_bytes >= (size_t{1} << 10));
  CheckHoldsScaled(root, "cache.max_mb", router.cache.max_bytes, 20);
  CheckHoldsScaled(root, "cache.max_entry_kb", router.cache.max_entry_bytes, 10);
  for (const CacheMethodRule& rule : router.cache.rules) Check(!rule.pattern.empty());

  // [access], [[keys]]
  Check(ValidateApiKeys(router.access.keys).ok());
  Check(router.access.replicas >= 1);
  Check(!router.access.keys_required || !router.access.keys.empty() || !serve.keys_file.empty());

  // [ingest]
  for (const IngestEndpointConfig& endpoint : config.ingest.endpoints) {
    absl::StatusOr<Url> url = ParseUrl(endpoint.url);
    Check(url.ok() && !url->websocket());
  }
  Check(config.ingest.max_lag_slots >= 1);
  Check(config.ingest.probe_interval_ms >= 1);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<Config> config = ParseConfig(text, kSource, ConfigFiles::kSkip);
  if (!config.ok()) {
    // Every refusal names the file it refuses.
    Check(config.status().code() == absl::StatusCode::kInvalidArgument);
    Check(std::string(config.status().message()).starts_with(kSource));
    return 0;
  }
  // The text parsed as TOML, or ParseConfig would have refused it.
  toml::table root;
  try {
    root = toml::parse(text, kSource);
  } catch (const toml::parse_error&) {
    Check(false);
  }
  CheckAccepted(root, *config);
  return 0;
}
