// The sections `serve` reads beyond storage, log, fold and ingest: [api] with TLS and
// [[regions]], [admin], [consistency], [router], [upstream_health], [upstreams.*] and [[ers]],
// [routing], [registry], [verify], [er_probe], [cache] and [pubsub]. [access] and [[keys]] are
// read in config_access.cc.
#include <toml++/toml.h>

#include <cstdint>
#include <string>
#include <utility>

#include "app/config.h"
#include "app/internal/config_reader.h"
#include "common/status.h"
#include "common/url.h"
#include "fmt/format.h"

namespace switchyard::config_internal {
namespace {

bool HasUpstream(const RouterOptions& router, const std::string& name) {
  for (const UpstreamTarget& t : router.upstreams) {
    if (t.name == name) return true;
  }
  return false;
}

// [api], its TLS files and the [[regions]] it names.
absl::Status ReadApi(const toml::table& root, const SectionOf& section, const std::string& file,
                     ConfigFiles files, ServeConfig* serve) {
  TableReader api(section("api"), "api.", file);
  HttpServerOptions& http = serve->api;
  RETURN_IF_ERROR(api.ReadListen("listen", &http.address, &http.port));
  RETURN_IF_ERROR(api.ReadSize("threads", &http.threads, /*allow_zero=*/true));
  RETURN_IF_ERROR(api.ReadSize("max_connections", &http.max_connections));
  RETURN_IF_ERROR(api.ReadSize("max_body_bytes", &http.max_body_bytes));
  RETURN_IF_ERROR(api.ReadSize("max_header_bytes", &http.max_header_bytes));
  RETURN_IF_ERROR(api.ReadSize("max_batch_size", &serve->router.codec.max_batch_size));
  RETURN_IF_ERROR(api.ReadSize("max_pipelined", &http.max_pipelined));
  RETURN_IF_ERROR(api.ReadMillis("idle_timeout_ms", &http.idle_timeout));
  RETURN_IF_ERROR(api.ReadMillis("header_timeout_ms", &http.header_timeout));
  RETURN_IF_ERROR(api.ReadMillis("body_timeout_ms", &http.body_timeout));
  RETURN_IF_ERROR(api.ReadMillis("write_timeout_ms", &http.write_timeout));
  RETURN_IF_ERROR(api.ReadMillis("drain_timeout_ms", &http.drain_timeout));
  RETURN_IF_ERROR(api.ReadCorsOrigins("cors_origins", &http.cors.allowed_origins));
  RETURN_IF_ERROR(api.ReadBool("gzip", &http.gzip.enabled));
  int64_t gzip_level = http.gzip.level;
  RETURN_IF_ERROR(api.ReadPositive("gzip_level", &gzip_level));
  if (gzip_level > 9) return api.Error("gzip_level", "must be 1 (fastest) to 9 (smallest)");
  http.gzip.level = static_cast<int>(gzip_level);
  RETURN_IF_ERROR(api.ReadSize("gzip_min_bytes", &http.gzip.min_bytes, /*allow_zero=*/true));
  RETURN_IF_ERROR(api.ReadBool("gzip_upstreams", &serve->router.upstream_gzip));
  RETURN_IF_ERROR(api.ReadString("tls_cert_file", &http.tls.certificate_file));
  RETURN_IF_ERROR(api.ReadString("tls_key_file", &http.tls.private_key_file));
  RETURN_IF_ERROR(api.ReadString("region", &http.regions.own_region));
  RETURN_IF_ERROR(api.ReadString("default_region", &http.regions.default_region));
  RETURN_IF_ERROR(api.CheckNoUnknownKeys());
  RETURN_IF_ERROR(CheckTls(api, http.tls, files));
  RETURN_IF_ERROR(ReadRegions(root, api, file, &http.regions));
  return absl::OkStatus();
}

absl::Status ReadAdmin(const SectionOf& section, const std::string& file, ServeConfig* serve) {
  TableReader admin(section("admin"), "admin.", file);
  RETURN_IF_ERROR(admin.ReadListen("listen", &serve->admin.address, &serve->admin.port));
  RETURN_IF_ERROR(admin.ReadSize("ready_max_lag_slots", &serve->admin_options.ready_max_lag_slots,
                                 /*allow_zero=*/true));
  RETURN_IF_ERROR(admin.ReadMillis("probe_interval_ms", &serve->probe_interval));
  RETURN_IF_ERROR(admin.ReadMillis("refresh_interval_ms", &serve->admin_options.refresh_interval));
  RETURN_IF_ERROR(
      admin.ReadMillis("snapshot_export_ttl_ms", &serve->admin_options.snapshot_export_ttl));
  RETURN_IF_ERROR(admin.CheckNoUnknownKeys());
  return absl::OkStatus();
}

// [consistency] and [router].
absl::Status ReadRouter(const SectionOf& section, const std::string& file, ServeConfig* serve) {
  RouterOptions& router = serve->router;
  TableReader consistency(section("consistency"), "consistency.", file);
  RETURN_IF_ERROR(
      consistency.ReadMillis("max_wait_ms", &router.max_gate_wait, /*allow_zero=*/true));
  RETURN_IF_ERROR(consistency.CheckNoUnknownKeys());

  TableReader router_table(section("router"), "router.", file);
  RETURN_IF_ERROR(router_table.ReadPubkey("identity", &router.identity));
  RETURN_IF_ERROR(router_table.ReadString("fqdn", &router.fqdn));
  RETURN_IF_ERROR(router_table.ReadBool("verify_owner", &router.verify_owner));
  RETURN_IF_ERROR(router_table.ReadBool("verify_owner_multiple", &router.verify_owner_multiple));
  RETURN_IF_ERROR(router_table.ReadSize("signature_memory_size", &router.signature_memory_size));
  RETURN_IF_ERROR(router_table.ReadMillis("upstream_timeout_ms", &router.upstream.request_timeout));
  RETURN_IF_ERROR(router_table.ReadMillis("upstream_deadline_ms", &router.upstream.request_deadline,
                                          /*allow_zero=*/true));
  RETURN_IF_ERROR(router_table.ReadSize("upstream_max_connections",
                                        &router.upstream.max_connections_per_endpoint));
  RETURN_IF_ERROR(
      router_table.ReadSize("upstream_max_idle", &router.upstream.max_idle_per_endpoint));
  RETURN_IF_ERROR(
      router_table.ReadSize("upstream_max_waiting", &router.upstream.max_waiting_per_endpoint));
  RETURN_IF_ERROR(router_table.ReadBool("verify_tls", &router.upstream.verify_tls));
  std::string pipeline = router.upstream.pipeline == UpstreamOptions::Pipeline::kOff  ? "off"
                         : router.upstream.pipeline == UpstreamOptions::Pipeline::kOn ? "on"
                                                                                      : "auto";
  RETURN_IF_ERROR(router_table.ReadString("upstream_pipeline", &pipeline));
  if (pipeline == "off") {
    router.upstream.pipeline = UpstreamOptions::Pipeline::kOff;
  } else if (pipeline == "auto") {
    router.upstream.pipeline = UpstreamOptions::Pipeline::kAuto;
  } else if (pipeline == "on") {
    router.upstream.pipeline = UpstreamOptions::Pipeline::kOn;
  } else {
    return absl::InvalidArgumentError(fmt::format(
        "{}: 'router.upstream_pipeline' must be \"auto\", \"on\" or \"off\", not \"{}\"", file,
        pipeline));
  }
  RETURN_IF_ERROR(
      router_table.ReadSize("upstream_pipeline_depth", &router.upstream.pipeline_depth));
  RETURN_IF_ERROR(router_table.ReadSize("upstream_pipeline_connections",
                                        &router.upstream.pipeline_connections));
  RETURN_IF_ERROR(
      router_table.ReadSize("upstream_batch_max", &router.upstream_batch_max, /*allow_zero=*/true));
  if (router.upstream_batch_max > 1024) {
    return absl::InvalidArgumentError(
        fmt::format("{}: 'router.upstream_batch_max' must be at most 1024 calls, not {}", file,
                    router.upstream_batch_max));
  }
  RETURN_IF_ERROR(router_table.ReadSize("upstream_batch_after", &router.upstream_batch_after,
                                        /*allow_zero=*/true));
  RETURN_IF_ERROR(router_table.CheckNoUnknownKeys());
  return absl::OkStatus();
}

absl::Status ReadUpstreamHealth(const SectionOf& section, const std::string& file,
                                ServeConfig* serve) {
  // [upstream_health]: how endpoints are judged, chosen, retried and hedged.
  UpstreamHealthOptions& health = serve->router.health;
  TableReader health_table(section("upstream_health"), "upstream_health.", file);
  health.probe_interval = serve->probe_interval;
  RETURN_IF_ERROR(health_table.ReadMillis("probe_interval_ms", &health.probe_interval));
  serve->probe_interval = health.probe_interval;
  RETURN_IF_ERROR(
      health_table.ReadSize("eject_consecutive_failures", &health.eject_consecutive_failures));
  RETURN_IF_ERROR(health_table.ReadFraction("eject_error_rate", &health.eject_error_rate));
  RETURN_IF_ERROR(health_table.ReadMillis("window_ms", &health.window));
  RETURN_IF_ERROR(health_table.ReadSize("min_requests", &health.min_requests));
  RETURN_IF_ERROR(health_table.ReadSize("max_slot_lag", &health.max_slot_lag));
  RETURN_IF_ERROR(health_table.ReadMillis("min_ejection_ms", &health.min_ejection, true));
  RETURN_IF_ERROR(health_table.ReadSize("recover_probes", &health.recover_probes));
  RETURN_IF_ERROR(health_table.ReadMillis("ramp_up_ms", &health.ramp_up, true));
  RETURN_IF_ERROR(health_table.ReadFraction("latency_decay", &health.latency_decay));
  RETURN_IF_ERROR(health_table.ReadFraction("circuit_failure_rate", &health.circuit_failure_rate));
  RETURN_IF_ERROR(health_table.ReadSize("circuit_min_requests", &health.circuit_min_requests));
  RETURN_IF_ERROR(health_table.ReadMillis("circuit_window_ms", &health.circuit_window));
  RETURN_IF_ERROR(health_table.ReadMillis("circuit_open_ms", &health.circuit_open, true));
  RETURN_IF_ERROR(health_table.ReadSize("half_open_trials", &health.half_open_trials));
  RETURN_IF_ERROR(health_table.ReadSize("max_attempts", &health.max_attempts));
  RETURN_IF_ERROR(health_table.ReadFraction("retry_budget_ratio", &health.retry_budget_ratio));
  RETURN_IF_ERROR(
      health_table.ReadSize("retry_budget_min", &health.retry_budget_min, /*allow_zero=*/true));
  RETURN_IF_ERROR(health_table.ReadBool("hedge", &health.hedge));
  RETURN_IF_ERROR(health_table.ReadMillis("hedge_delay_ms", &health.hedge_delay, true));
  RETURN_IF_ERROR(health_table.ReadMillis("hedge_min_delay_ms", &health.hedge_min_delay, true));
  RETURN_IF_ERROR(health_table.CheckNoUnknownKeys());
  if (absl::Status valid = ValidateHealthOptions(health); !valid.ok()) {
    return absl::InvalidArgumentError(fmt::format("{}: {}", file, std::string(valid.message())));
  }
  return absl::OkStatus();
}

// [integrity]: sampled cross-checks, consensus reads, admission (docs/architecture.md §22).
absl::Status ReadIntegrity(const SectionOf& section, const std::string& file,
                           RouterOptions* router) {
  IntegrityOptions& integrity = router->integrity;
  TableReader integrity_table(section("integrity"), "integrity.", file);
  RETURN_IF_ERROR(integrity_table.ReadFraction("sample_rate", &integrity.sample_rate));
  if (const toml::node* rates = integrity_table.Node("sample_rates")) {
    if (!rates->is_table())
      return integrity_table.Error("sample_rates", "must be a table of numbers");
    TableReader rate_table(*rates->as_table(), "integrity.sample_rates.", file);
    for (const auto& [method, value] : *rates->as_table()) {
      const std::string name(method.str());
      double rate = 0;
      RETURN_IF_ERROR(rate_table.ReadFraction(name.c_str(), &rate));
      integrity.sample_rates[name] = rate;
    }
  }
  RETURN_IF_ERROR(integrity_table.ReadSize("tiebreak_endpoints", &integrity.tiebreak_endpoints,
                                           /*allow_zero=*/true));
  RETURN_IF_ERROR(integrity_table.ReadSize("eject_after", &integrity.eject_after));
  RETURN_IF_ERROR(integrity_table.ReadMillis("window_ms", &integrity.window));
  RETURN_IF_ERROR(integrity_table.ReadSize("log_answer_bytes", &integrity.log_answer_bytes));
  if (const toml::node* methods = integrity_table.Node("consensus_methods")) {
    if (!methods->is_table()) {
      return integrity_table.Error("consensus_methods", "must be a table of \"K/N\" strings");
    }
    for (const auto& [method, value] : *methods->as_table()) {
      const std::string key = fmt::format("consensus_methods.\"{}\"", method.str());
      if (!value.is_string()) return integrity_table.Error(key, "must be a \"K/N\" string");
      absl::StatusOr<ConsensusRule> rule = ParseConsensusRule(value.as_string()->get());
      if (!rule.ok()) return integrity_table.Error(key, std::string(rule.status().message()));
      integrity.consensus_methods[std::string(method.str())] = *rule;
    }
  }
  RETURN_IF_ERROR(integrity_table.ReadBool("consensus_header", &integrity.consensus_header));
  RETURN_IF_ERROR(integrity_table.ReadBool("admission", &integrity.admission));
  RETURN_IF_ERROR(integrity_table.ReadSize("admission_max_lag", &integrity.admission_max_lag,
                                           /*allow_zero=*/true));
  RETURN_IF_ERROR(integrity_table.ReadSize("admission_latency_requests",
                                           &integrity.admission_latency_requests));
  RETURN_IF_ERROR(
      integrity_table.ReadMillis("admission_latency_p95_ms", &integrity.admission_latency_p95));
  if (const toml::node* accounts = integrity_table.Node("admission_accounts")) {
    const toml::array* list = accounts->as_array();
    if (list == nullptr) {
      return integrity_table.Error("admission_accounts", "must be an array of base58 pubkeys");
    }
    for (const toml::node& item : *list) {
      if (!item.is_string() || !Pubkey::FromBase58(item.as_string()->get()).ok()) {
        return integrity_table.Error("admission_accounts", "must be an array of base58 pubkeys");
      }
      integrity.admission_accounts.push_back(item.as_string()->get());
    }
  }
  RETURN_IF_ERROR(integrity_table.CheckNoUnknownKeys());
  if (absl::Status valid = ValidateIntegrityOptions(integrity); !valid.ok()) {
    return absl::InvalidArgumentError(fmt::format("{}: {}", file, std::string(valid.message())));
  }
  return absl::OkStatus();
}

// [upstreams.NAME] and [[ers]], each ER naming one of them.
absl::Status ReadUpstreams(const toml::table& root, const SectionOf& section,
                           const std::string& file, RouterOptions* options) {
  RouterOptions& router = *options;
  // [upstreams.NAME] endpoints = [{url, weight}]
  for (const auto& [name_key, node] : section("upstreams")) {
    const std::string name(name_key.str());
    const std::string prefix = fmt::format("upstreams.{}.", name);
    if (!node.is_table()) {
      return absl::InvalidArgumentError(
          fmt::format("{}: 'upstreams.{}' must be a table", file, name));
    }
    TableReader upstream(*node.as_table(), prefix, file);
    const toml::node* endpoints = upstream.Node("endpoints");
    if (endpoints == nullptr) return upstream.Error("endpoints", "is required");
    if (!endpoints->is_array() || endpoints->as_array()->empty()) {
      return upstream.Error("endpoints", "must be a non-empty array of {url, weight} tables");
    }
    UpstreamTarget target;
    target.name = name;
    const toml::array& list = *endpoints->as_array();
    for (size_t i = 0; i < list.size(); ++i) {
      const std::string element = fmt::format("{}endpoints[{}].", prefix, i);
      if (!list[i].is_table()) {
        return absl::InvalidArgumentError(
            fmt::format("{}: '{}endpoints[{}]' must be a table {{url = \"...\", weight = 1}}", file,
                        prefix, i));
      }
      TableReader endpoint_table(*list[i].as_table(), element, file);
      UpstreamEndpoint endpoint;
      if (list[i].as_table()->get("url") == nullptr) {
        return endpoint_table.Error("url", "is required");
      }
      RETURN_IF_ERROR(endpoint_table.ReadString("url", &endpoint.url));
      if (absl::StatusOr<ParsedUrl> url = ParseUpstreamUrl(endpoint.url); !url.ok()) {
        return endpoint_table.Error(
            "url", fmt::format("is not a usable URL: {}", std::string(url.status().message())));
      }
      RETURN_IF_ERROR(endpoint_table.ReadSize("weight", &endpoint.weight));
      RETURN_IF_ERROR(endpoint_table.CheckNoUnknownKeys());
      target.endpoints.push_back(std::move(endpoint));
    }
    RETURN_IF_ERROR(upstream.CheckNoUnknownKeys());
    router.upstreams.push_back(std::move(target));
  }

  // [[ers]]
  if (const toml::array* ers = root["ers"].as_array()) {
    for (size_t i = 0; i < ers->size(); ++i) {
      TableReader er_table(*(*ers)[i].as_table(), fmt::format("ers[{}].", i), file);
      ErRoute er;
      RETURN_IF_ERROR(er_table.ReadPubkey("identity", &er.identity, /*required=*/true));
      if ((*ers)[i].as_table()->get("upstream") == nullptr) {
        return er_table.Error("upstream", "is required");
      }
      RETURN_IF_ERROR(er_table.ReadString("upstream", &er.target));
      if (!HasUpstream(router, er.target)) {
        return er_table.Error("upstream",
                              fmt::format("names no configured upstream (\"{}\")", er.target));
      }
      RETURN_IF_ERROR(er_table.ReadString("fqdn", &er.fqdn));
      RETURN_IF_ERROR(er_table.ReadSize("base_fee", &er.base_fee, /*allow_zero=*/true));
      auto block_time_ms = static_cast<int64_t>(er.block_time_ms);
      RETURN_IF_ERROR(er_table.ReadMillis("block_time_ms", &block_time_ms));
      er.block_time_ms = static_cast<uint64_t>(block_time_ms);
      RETURN_IF_ERROR(er_table.ReadString("country_code", &er.country_code));
      RETURN_IF_ERROR(er_table.ReadBool("pin", &er.pinned));
      RETURN_IF_ERROR(er_table.CheckNoUnknownKeys());
      for (const ErRoute& other : router.ers) {
        if (other.identity == er.identity) {
          return er_table.Error("identity", "repeats the identity of an earlier [[ers]] entry");
        }
      }
      router.ers.push_back(std::move(er));
    }
  }
  return absl::OkStatus();
}

// [routing] and [registry].
absl::Status ReadRouting(const SectionOf& section, const std::string& file, ServeConfig* serve) {
  RouterOptions& router = serve->router;
  // [routing]
  TableReader routing(section("routing"), "routing.", file);
  RoutingTable& table = router.routing;
  RETURN_IF_ERROR(routing.ReadString("default_er", &table.default_er));
  if (!table.default_er.empty() && !HasUpstream(router, table.default_er)) {
    return routing.Error("default_er",
                         fmt::format("names no configured upstream (\"{}\")", table.default_er));
  }
  RETURN_IF_ERROR(routing.ReadBool("forward_unknown_methods", &table.forward_unknown_methods));
  if (const toml::node* methods = routing.Node("methods")) {
    if (!methods->is_table()) return routing.Error("methods", "must be a table of strings");
    for (const auto& [pattern, target] : *methods->as_table()) {
      const std::string key = fmt::format("methods.\"{}\"", pattern.str());
      if (!target.is_string()) return routing.Error(key, "must be a string (an upstream name)");
      const std::string name = target.as_string()->get();
      if (!HasUpstream(router, name)) {
        return routing.Error(key, fmt::format("names no configured upstream (\"{}\")", name));
      }
      table.method_rules.push_back(MethodRule{std::string(pattern.str()), name});
    }
  }
  RETURN_IF_ERROR(routing.CheckNoUnknownKeys());

  // [registry]: ER discovery from the Magic Domain Program.
  TableReader registry(section("registry"), "registry.", file);
  ErRegistryWatcherOptions& watcher = serve->registry;
  RETURN_IF_ERROR(registry.ReadBool("enabled", &serve->registry_enabled));
  RETURN_IF_ERROR(registry.ReadString("url", &watcher.url));
  RETURN_IF_ERROR(registry.ReadString("pubsub_url", &watcher.pubsub_url));
  RETURN_IF_ERROR(registry.ReadPubkey("program", &watcher.program));
  RETURN_IF_ERROR(registry.ReadMillis("resync_interval_ms", &watcher.resync_interval));
  RETURN_IF_ERROR(registry.ReadMillis("request_timeout_ms", &watcher.request_timeout));
  RETURN_IF_ERROR(registry.CheckNoUnknownKeys());
  if (serve->registry_enabled) {
    if (watcher.url.empty()) {
      for (const UpstreamTarget& t : router.upstreams) {
        if (t.name == table.base && !t.endpoints.empty()) watcher.url = t.endpoints[0].url;
      }
    }
    if (absl::StatusOr<Url> url = ParseUrl(watcher.url); !url.ok() || url->websocket()) {
      return registry.Error(
          "url", fmt::format("is not an http(s) URL of the base layer (\"{}\")", watcher.url));
    }
    if (!watcher.pubsub_url.empty()) {
      if (absl::StatusOr<Url> url = ParseUrl(watcher.pubsub_url); !url.ok() || !url->websocket()) {
        return registry.Error("pubsub_url",
                              fmt::format("is not a ws(s) URL (\"{}\")", watcher.pubsub_url));
      }
    }
    router.discovered_ers = true;
  }
  return absl::OkStatus();
}

// [verify] and [er_probe].
absl::Status ReadChecks(const SectionOf& section, const std::string& file, ServeConfig* serve) {
  // [verify]: the sealed digests against other replicas.
  TableReader verify(section("verify"), "verify.", file);
  if (const toml::node* peers = verify.Node("peers")) {
    if (!peers->is_array()) return verify.Error("peers", "must be an array of admin URLs");
    for (const toml::node& item : *peers->as_array()) {
      if (!item.is_string()) return verify.Error("peers", "must be an array of admin URLs");
      const std::string& peer = item.as_string()->get();
      if (absl::StatusOr<Url> url = ParseUrl(peer); !url.ok() || url->websocket()) {
        return verify.Error(
            "peers",
            fmt::format("has \"{}\", which is not an http(s) URL of an admin listener", peer));
      }
      serve->verify_peers.push_back(peer);
    }
  }
  RETURN_IF_ERROR(verify.ReadSeconds("interval_s", &serve->verify.interval));
  RETURN_IF_ERROR(verify.ReadSize("max_slots", &serve->verify.check.max_slots));
  RETURN_IF_ERROR(verify.ReadMillis("timeout_ms", &serve->verify_timeout));
  RETURN_IF_ERROR(verify.CheckNoUnknownKeys());

  // [snapshot]: the state snapshots serve makes by itself.
  TableReader snapshot(section("snapshot"), "snapshot.", file);
  RETURN_IF_ERROR(snapshot.ReadString("dir", &serve->snapshot_dir));
  if (!serve->snapshot_dir.empty() && serve->snapshot_dir.front() != '/') {
    return snapshot.Error("dir", "must be an absolute path");
  }
  RETURN_IF_ERROR(snapshot.ReadSeconds("interval_s", &serve->snapshot_interval));
  RETURN_IF_ERROR(snapshot.ReadSize("keep", &serve->snapshot_keep));
  RETURN_IF_ERROR(snapshot.CheckNoUnknownKeys());

  // [er_probe]: the latency probe of every ER.
  TableReader probe(section("er_probe"), "er_probe.", file);
  RETURN_IF_ERROR(probe.ReadBool("enabled", &serve->er_probe.enabled));
  RETURN_IF_ERROR(probe.ReadMillis("interval_ms", &serve->er_probe.interval));
  RETURN_IF_ERROR(probe.ReadMillis("timeout_ms", &serve->er_probe.timeout));
  RETURN_IF_ERROR(probe.CheckNoUnknownKeys());
  return absl::OkStatus();
}

absl::Status ReadCache(const SectionOf& section, const std::string& file, RouterOptions* router) {
  // [cache]
  TableReader cache_table(section("cache"), "cache.", file);
  CacheOptions& cache = router->cache;
  RETURN_IF_ERROR(cache_table.ReadBool("enabled", &cache.enabled));
  RETURN_IF_ERROR(cache_table.ReadBool("coalesce", &cache.coalesce));
  RETURN_IF_ERROR(cache_table.ReadScaledSize("max_mb", &cache.max_bytes, 20));
  RETURN_IF_ERROR(cache_table.ReadScaledSize("max_entry_kb", &cache.max_entry_bytes, 10));
  RETURN_IF_ERROR(cache_table.ReadMillis("final_ttl_ms", &cache.final_ttl, /*allow_zero=*/true));
  RETURN_IF_ERROR(cache_table.ReadMillis("slot_ttl_ms", &cache.slot_ttl, /*allow_zero=*/true));
  RETURN_IF_ERROR(
      cache_table.ReadMillis("negative_ttl_ms", &cache.negative_ttl, /*allow_zero=*/true));
  RETURN_IF_ERROR(cache_table.ReadString("redis", &cache.redis_url));
  if (!cache.redis_url.empty()) {
    if (absl::StatusOr<RedisEndpoint> redis = ParseRedisUrl(cache.redis_url); !redis.ok()) {
      return cache_table.Error("redis", std::string(redis.status().message()));
    }
  }
  RETURN_IF_ERROR(cache_table.ReadMillis("redis_timeout_ms", &cache.redis_timeout));
  if (const toml::node* methods = cache_table.Node("methods")) {
    if (!methods->is_table()) return cache_table.Error("methods", "must be a table of strings");
    for (const auto& [pattern, value] : *methods->as_table()) {
      const std::string key = fmt::format("methods.\"{}\"", pattern.str());
      const std::string text = value.is_string() ? value.as_string()->get() : "";
      CacheMethodRule rule;
      rule.pattern = std::string(pattern.str());
      if (text == "never") {
        rule.cache_class = CacheClass::kNever;
      } else if (text == "coalesce") {
        rule.cache_class = CacheClass::kCoalesce;
      } else if (text == "final") {
        rule.cache_class = CacheClass::kFinal;
      } else if (text == "slot") {
        rule.cache_class = CacheClass::kSlotBounded;
      } else {
        return cache_table.Error(key, "must be \"never\", \"coalesce\", \"final\" or \"slot\"");
      }
      if (rule.pattern.empty() || rule.pattern.find('*') < rule.pattern.size() - 1) {
        return cache_table.Error(key, "must be a method name or a prefix ending in '*'");
      }
      cache.rules.push_back(std::move(rule));
    }
  }
  RETURN_IF_ERROR(cache_table.CheckNoUnknownKeys());
  return absl::OkStatus();
}

absl::Status ReadPubsub(const SectionOf& section, const std::string& file, ServeConfig* serve) {
  // [pubsub]
  TableReader pubsub(section("pubsub"), "pubsub.", file);
  PubsubServerOptions& ws = serve->pubsub;
  RETURN_IF_ERROR(pubsub.ReadBool("enabled", &serve->pubsub_enabled));
  if (pubsub.Node("port") != nullptr) {
    int64_t port = 0;
    RETURN_IF_ERROR(pubsub.ReadNonNegative("port", &port));
    if (port > 65535) return pubsub.Error("port", "must be a port from 0 (none) to 65535");
    serve->pubsub_port = static_cast<int32_t>(port);
  }
  RETURN_IF_ERROR(pubsub.ReadSize("threads", &serve->pubsub_threads, /*allow_zero=*/true));
  RETURN_IF_ERROR(pubsub.ReadSize("max_connections", &ws.max_connections));
  RETURN_IF_ERROR(
      pubsub.ReadSize("max_subscriptions_per_connection", &ws.max_subscriptions_per_connection));
  RETURN_IF_ERROR(pubsub.ReadSize("max_message_bytes", &ws.max_message_bytes));
  RETURN_IF_ERROR(pubsub.ReadMillis("idle_timeout_ms", &ws.idle_timeout));
  RETURN_IF_ERROR(pubsub.ReadSize("max_send_queue_messages", &ws.max_send_queue_messages));
  RETURN_IF_ERROR(pubsub.ReadSize("max_send_queue_bytes", &ws.max_send_queue_bytes));
  RETURN_IF_ERROR(pubsub.ReadMillis("upstream_timeout_ms", &ws.router.upstream.call_timeout));
  RETURN_IF_ERROR(pubsub.ReadMillis("reconnect_give_up_ms", &ws.router.upstream.reconnect_give_up));
  if (const toml::node* upstreams = pubsub.Node("upstreams")) {
    if (!upstreams->is_table()) return pubsub.Error("upstreams", "must be a table of URL lists");
    for (const auto& [name_key, urls] : *upstreams->as_table()) {
      const std::string name(name_key.str());
      const std::string key = fmt::format("upstreams.{}", name);
      if (!HasUpstream(serve->router, name)) {
        return pubsub.Error(key, fmt::format("names no configured upstream (\"{}\")", name));
      }
      std::vector<std::string> list;
      const toml::array* array = urls.as_array();
      if (array == nullptr || array->empty()) {
        return pubsub.Error(key, "must be a non-empty array of \"ws://...\" URLs");
      }
      for (const toml::node& url : *array) {
        if (!url.is_string() || !ParseWsUrl(url.as_string()->get()).ok()) {
          return pubsub.Error(key, "must be a non-empty array of \"ws://...\" URLs");
        }
        list.push_back(url.as_string()->get());
      }
      ws.router.endpoints.emplace_back(name, std::move(list));
    }
  }
  RETURN_IF_ERROR(pubsub.CheckNoUnknownKeys());
  return absl::OkStatus();
}

}  // namespace

absl::Status ReadServeConfig(const toml::table& root, const SectionOf& section,
                             const std::string& file, ConfigFiles files, ServeConfig* serve) {
  RETURN_IF_ERROR(ReadApi(root, section, file, files, serve));
  RETURN_IF_ERROR(ReadAdmin(section, file, serve));
  RETURN_IF_ERROR(ReadRouter(section, file, serve));
  RETURN_IF_ERROR(ReadUpstreamHealth(section, file, serve));
  RETURN_IF_ERROR(ReadIntegrity(section, file, &serve->router));
  RETURN_IF_ERROR(ReadUpstreams(root, section, file, &serve->router));
  RETURN_IF_ERROR(ReadRouting(section, file, serve));
  RETURN_IF_ERROR(ReadChecks(section, file, serve));
  RETURN_IF_ERROR(ReadCache(section, file, &serve->router));
  RETURN_IF_ERROR(ReadAccess(root, section, file, files, serve));
  return ReadPubsub(section, file, serve);
}

}  // namespace switchyard::config_internal
