#include "api/rpc/er_prober.h"

#include <chrono>
#include <utility>

#include "api/jsonrpc/rpc_merge.h"
#include "common/clock.h"

namespace switchyard {
namespace asio = boost::asio;

namespace {
constexpr std::string_view kProbeBody = R"({"jsonrpc":"2.0","id":1,"method":"getIdentity"})";

// The identity a getIdentity answer names (`{"result":{"identity":"..."}}`); nullopt for an
// error or an answer without one.
std::optional<Pubkey> AnsweredIdentity(std::string_view body) {
  absl::StatusOr<std::string> result = JsonMember(body, "result");
  if (!result.ok()) return std::nullopt;
  absl::StatusOr<std::string> identity = JsonMember(*result, "identity");
  if (!identity.ok() || identity->size() < 2 || identity->front() != '"') return std::nullopt;
  absl::StatusOr<Pubkey> key =
      Pubkey::FromBase58(std::string_view(*identity).substr(1, identity->size() - 2));
  if (!key.ok()) return std::nullopt;
  return *key;
}
}  // namespace

ErProber::ErProber(ErProbeOptions options, RouterContext* router, MetricsRegistry* registry)
    : options_(options),
      router_(router),
      probe_metrics_(probe_registry_),
      request_bytes_(
          registry->AddCounter("switchyard_er_probe_request_bytes_total",
                               "Bytes of the getIdentity probes' JSON-RPC bodies sent to the ERs")),
      answer_bytes_(
          registry->AddCounter("switchyard_er_probe_answer_bytes_total",
                               "Bytes of the ERs' answers to the getIdentity probes (bodies)")) {
  upstream_options_ = router_->options().upstream;
  upstream_options_.request_timeout = options_.timeout;
  upstream_options_.request_deadline = options_.timeout;
  upstream_options_.max_connections_per_endpoint = 2;
  upstream_options_.max_idle_per_endpoint = 1;
  // A keep-alive connection outlives the interval, so a round trip is one exchange.
  upstream_options_.max_idle_time = options_.interval + options_.timeout + absl::Seconds(5);
}

ErProber::~ErProber() { Stop(); }

absl::Status ErProber::Start() {
  if (!options_.enabled) return absl::OkStatus();
  std::vector<UpstreamTarget> targets;
  for (const ErRoute& er : router_->options().ers) {
    for (const UpstreamTarget& target : router_->options().upstreams) {
      if (target.name == er.target) targets.push_back(target);
    }
  }
  absl::StatusOr<std::unique_ptr<UpstreamSet>> upstreams = UpstreamSet::Create(
      loop_.io_context(), targets, upstream_options_, router_->tls(), &probe_metrics_);
  if (!upstreams.ok()) return upstreams.status();
  ErDirectory* ers = router_->ers();
  UpstreamSet& pools = **upstreams;
  pools.SetDynamicTargets(
      DynamicTargets{[ers] { return ers->generation(); },
                     [ers](std::string_view target) { return ers->DiscoveredUrl(target); }});
  loop_.Start(*std::move(upstreams), options_.interval, [this] { Round(); });
  return absl::OkStatus();
}

void ErProber::Stop() { loop_.Stop(); }

void ErProber::Round() {
  std::shared_ptr<const ErTable> table = router_->ers()->Current();
  for (const ErEntry& er : table->ers) {
    if (er.status == ErStatus::kOffline) continue;
    const Pubkey identity = er.route.identity;
    if (!in_flight_.insert(identity).second) continue;
    const auto sent = std::chrono::steady_clock::now();
    request_bytes_.Increment(kProbeBody.size());
    SendOptions send(RetryPolicy::kNever);
    send.hedge = false;
    loop_.upstreams().Send(er.route.target, std::string(kProbeBody), send,
                           [this, identity, sent](absl::StatusOr<UpstreamResponse> response) {
                             in_flight_.erase(identity);
                             if (loop_.stopping()) return;
                             std::optional<absl::Duration> round_trip;
                             if (response.ok()) {
                               answer_bytes_.Increment(response->body.size());
                               if (response->status == 200) {
                                 std::optional<Pubkey> answered = AnsweredIdentity(response->body);
                                 if (answered && *answered != identity) {
                                   router_->ers()->ReportWrongIdentity(identity, *answered);
                                   return;
                                 }
                                 if (answered) {
                                   round_trip =
                                       absl::FromChrono(std::chrono::steady_clock::now() - sent);
                                 }
                               }
                             }
                             router_->ers()->ReportProbe(identity, round_trip);
                           });
  }
}

}  // namespace switchyard
