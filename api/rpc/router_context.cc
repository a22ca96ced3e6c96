// RouterContext: what every worker's Router shares. Create checks the options, then builds the
// per-call metrics, the ER directory, endpoint health, the response cache and access control.
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/thread_pool.hpp>

#include "absl/container/flat_hash_set.h"
#include "api/rpc/internal/router.h"
#include "api/rpc/router.h"
#include "common/status.h"
#include "fmt/format.h"
#include "solana/rpc_methods.h"

namespace switchyard {

namespace asio = boost::asio;

namespace {

// The per-call series for this routing: label values from the method catalogue, the exact
// method names of the routing rules and the upstream groups. The series each method can reach
// are registered now, so they are on /metrics before their first call; anything else is
// registered at its first call.
std::unique_ptr<RpcCallMetrics> MakeCallMetrics(const RouterOptions& options,
                                                MetricsRegistry* registry) {
  const RoutingTable& routing = options.routing;
  std::vector<std::string> methods;
  for (const RpcMethod& method : KnownMethods()) methods.emplace_back(method.name);
  for (const MethodRule& rule : routing.method_rules) {
    if (!rule.pattern.empty() && rule.pattern.back() != '*') methods.push_back(rule.pattern);
  }
  std::vector<std::string> upstreams;
  for (const UpstreamTarget& target : options.upstreams) upstreams.push_back(target.name);
  auto calls = std::make_unique<RpcCallMetrics>(registry, methods, upstreams);

  std::vector<int> account_targets = {calls->TargetId(routing.base)};
  for (const std::string& er : routing.er_targets) account_targets.push_back(calls->TargetId(er));
  if (!routing.default_er.empty()) account_targets.push_back(calls->TargetId(routing.default_er));
  for (size_t m = 0; m < calls->method_count(); ++m) {
    const int method = static_cast<int>(m);
    const std::string& name = calls->MethodName(method);
    const bool other = name == RpcCallMetrics::kOtherMethod;
    calls->Preregister(method, RpcCallMetrics::kRouterTarget, RpcOutcome::kRouterError);
    calls->Preregister(method, RpcCallMetrics::kRouterTarget, RpcOutcome::kRejected);
    std::vector<int> targets;
    switch (other ? RoutingClass::kUnknown : ClassifyMethod(name)) {
      case RoutingClass::kOneAccount:
      case RoutingClass::kTransaction:
        targets = account_targets;
        break;
      case RoutingClass::kAccountList:
        targets = account_targets;
        targets.push_back(RpcCallMetrics::kSplitTarget);
        break;
      case RoutingClass::kSignature:
        targets = account_targets;
        targets.push_back(RpcCallMetrics::kSplitTarget);
        targets.push_back(RpcCallMetrics::kFanoutTarget);
        break;
      case RoutingClass::kRouter:
        calls->Preregister(method, RpcCallMetrics::kRouterTarget, RpcOutcome::kOk);
        if (name == "getBlockhashForAccounts") targets = account_targets;
        break;
      case RoutingClass::kBaseOnly:
      case RoutingClass::kUnknown:
        if (!other) {
          if (std::optional<std::string> target = TargetForMethod(name, routing)) {
            targets.push_back(calls->TargetId(*target));
          }
          break;
        }
        if (routing.forward_unknown_methods) targets.push_back(calls->TargetId(routing.base));
        for (const MethodRule& rule : routing.method_rules) {
          if (!rule.pattern.empty() && rule.pattern.back() == '*') {
            targets.push_back(calls->TargetId(rule.target));
          }
        }
        break;
    }
    for (int target : targets) {
      for (RpcOutcome outcome :
           {RpcOutcome::kOk, RpcOutcome::kRpcError, RpcOutcome::kUpstreamFailure}) {
        calls->Preregister(method, target, outcome);
      }
    }
  }
  return calls;
}

}  // namespace

RouterContext::RouterContext(RouterOptions options, SnapshotHolder* snapshots, const Clock* clock,
                             ApiMetrics* metrics)
    : options_(std::move(options)),
      snapshots_(snapshots),
      clock_(clock),
      metrics_(metrics),
      signatures_(options_.signature_memory_size),
      lookup_tables_(options_.lookup_table_cache_size, options_.lookup_table_ttl, clock) {}

RouterContext::~RouterContext() {
  if (cache_listener_id_ != 0) snapshots_->RemoveListener(cache_listener_id_);
  if (history_pool_) history_pool_->join();
}

void RouterContext::AttachHistory(HistoryReader* history) {
  history_ = history;
  if (history_ != nullptr && !history_pool_) {
    history_pool_ = std::make_unique<asio::thread_pool>(1);
  }
}

namespace {

// The upstreams' names and endpoints; whether any endpoint is reached over TLS.
absl::StatusOr<bool> CheckUpstreams(const std::vector<UpstreamTarget>& upstreams) {
  bool needs_tls = false;
  for (const UpstreamTarget& target : upstreams) {
    if (target.name == "router" || target.name == "split" || target.name == "fanout") {
      return absl::InvalidArgumentError(fmt::format(
          "upstreams.{}: the name is reserved: the metrics label calls with it", target.name));
    }
    for (const UpstreamEndpoint& endpoint : target.endpoints) {
      absl::StatusOr<ParsedUrl> url = ParseUpstreamUrl(endpoint.url);
      if (!url.ok()) {
        return absl::InvalidArgumentError(
            fmt::format("upstreams.{}: {}", target.name, std::string(url.status().message())));
      }
      needs_tls |= url->tls;
    }
    if (target.endpoints.empty()) {
      return absl::InvalidArgumentError(fmt::format("upstreams.{}: no endpoints", target.name));
    }
  }
  return needs_tls;
}

// Every upstream the routing table names is configured.
absl::Status CheckUpstreamNames(const RoutingTable& routing,
                                const std::vector<UpstreamTarget>& upstreams) {
  std::vector<std::pair<std::string, std::string>> named = {{"routing.base", routing.base}};
  if (!routing.default_er.empty()) named.emplace_back("routing.default_er", routing.default_er);
  for (const std::string& er : routing.er_targets) named.emplace_back("ers.target", er);
  for (const MethodRule& rule : routing.method_rules) {
    named.emplace_back(fmt::format("routing.methods.{}", rule.pattern), rule.target);
  }
  absl::flat_hash_set<std::string_view> configured;
  for (const UpstreamTarget& target : upstreams) configured.insert(target.name);
  for (const auto& [key, name] : named) {
    if (!configured.contains(name)) {
      return absl::InvalidArgumentError(
          fmt::format("{}: no upstream named \"{}\" is configured", key, name));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<RouterContext>> RouterContext::Create(RouterOptions options,
                                                                     SnapshotHolder* snapshots,
                                                                     const Clock* clock,
                                                                     ApiMetrics* metrics) {
  if (absl::Status health = ValidateHealthOptions(options.health); !health.ok()) return health;
  RoutingTable& routing = options.routing;
  routing.verify = {options.verify_owner, options.verify_owner_multiple};
  for (const ErRoute& er : options.ers) {
    routing.er_by_identity[er.identity] = er.target;
    if (std::find(routing.er_targets.begin(), routing.er_targets.end(), er.target) ==
        routing.er_targets.end()) {
      routing.er_targets.push_back(er.target);
    }
  }
  ASSIGN_OR_RETURN(const bool needs_tls, CheckUpstreams(options.upstreams));
  RETURN_IF_ERROR(CheckUpstreamNames(routing, options.upstreams));
  std::unique_ptr<RouterContext> context(
      new RouterContext(std::move(options), snapshots, clock, metrics));
  context->call_metrics_ = MakeCallMetrics(context->options_, &metrics->registry);
  for (const UpstreamTarget& target : context->options_.upstreams) {
    metrics->ForUpstream(target.name);
  }
  if (needs_tls || context->options_.discovered_ers) {
    context->tls_ = MakeClientTlsContext(context->options_.upstream.verify_tls);
  }
  context->ers_ = std::make_unique<ErDirectory>(context->options_.routing, context->options_.ers,
                                                context->options_.er_directory, &metrics->registry);
  context->health_ =
      std::make_unique<UpstreamHealth>(context->options_.upstreams, context->options_.health,
                                       &metrics->registry, context->options_.integrity);
  const CacheOptions& cache = context->options_.cache;
  if (cache.enabled || cache.coalesce) {
    std::vector<std::string> targets;
    for (const UpstreamTarget& target : context->options_.upstreams) targets.push_back(target.name);
    context->cache_ = std::make_unique<ResponseCache>(cache, targets, &metrics->registry);
    if (cache.enabled) context->InvalidateCacheOnPublish();
    if (cache.enabled && !cache.redis_url.empty()) {
      RedisTierOptions redis;
      redis.url = cache.redis_url;
      redis.timeout = cache.redis_timeout;
      absl::StatusOr<std::unique_ptr<RedisTier>> tier =
          RedisTier::Start(std::move(redis), &metrics->registry);
      if (!tier.ok()) {
        return absl::InvalidArgumentError(
            fmt::format("cache.redis: {}", std::string(tier.status().message())));
      }
      context->redis_ = *std::move(tier);
    }
  }
  if (context->options_.access.enabled()) {
    absl::StatusOr<std::unique_ptr<AccessControl>> access =
        AccessControl::Create(context->options_.access, clock, &metrics->registry);
    if (!access.ok()) {
      return absl::InvalidArgumentError(
          fmt::format("access: {}", std::string(access.status().message())));
    }
    context->access_ = *std::move(access);
  }
  return context;
}

std::unique_ptr<UpstreamSet> RouterContext::NewUpstreamSet(asio::io_context& io_context,
                                                           bool with_health) const {
  absl::StatusOr<std::unique_ptr<UpstreamSet>> upstreams =
      UpstreamSet::Create(io_context, options_.upstreams, options_.upstream, tls_.get(), metrics_,
                          with_health ? health_.get() : nullptr);
  if (!upstreams.ok()) return std::make_unique<UpstreamSet>();
  return *std::move(upstreams);
}

RequestHandlerFactory RouterContext::HandlerFactory() {
  return [this](asio::io_context& io_context) -> std::unique_ptr<RequestHandler> {
    std::unique_ptr<UpstreamSet> upstreams = NewUpstreamSet(io_context, /*with_health=*/true);
    if (options_.discovered_ers) {
      ErDirectory* ers = ers_.get();
      upstreams->SetDynamicTargets(
          DynamicTargets{[ers] { return ers->generation(); },
                         [ers](std::string_view target) { return ers->DiscoveredUrl(target); }});
    }
    return std::make_unique<Router>(io_context, this, std::move(upstreams));
  };
}

}  // namespace switchyard
