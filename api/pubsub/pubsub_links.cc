#include "api/pubsub/pubsub_links.h"

#include <simdjson.h>

#include <chrono>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "api/jsonrpc/raw_json.h"
#include "api/jsonrpc/rpc_errors.h"
#include "fmt/format.h"
#include "spdlog/spdlog.h"

namespace switchyard {
namespace {

// A JSON-RPC error object from an upstream (raw), as a Status (rpc_errors.h decides the kind).
absl::Status UpstreamErrorStatus(std::string_view raw) {
  simdjson::dom::parser parser;
  simdjson::dom::element error;
  int64_t code = -32603;
  std::string_view message = "upstream error";
  if (parser.parse(raw.data(), raw.size()).get(error) == simdjson::SUCCESS) {
    if (error["code"].get_int64().get(code) != simdjson::SUCCESS) code = -32603;
    if (error["message"].get_string().get(message) != simdjson::SUCCESS) message = "upstream error";
  }
  return RpcStatusFromUpstreamError(code, message);
}

}  // namespace

PubsubLinks::PubsubLinks(PubsubRouter* router, boost::asio::io_context& io, Owner* owner)
    : router_(router), io_(io), metrics_(router->metrics()), owner_(owner) {}

PubsubLinks::~PubsubLinks() = default;

void PubsubLinks::Start(std::weak_ptr<void> lifetime) { lifetime_ = std::move(lifetime); }

void PubsubLinks::Shutdown() {
  shut_down_ = true;
  for (auto& [target, link] : links_) link->upstream->Close();
  for (auto& [serial, leg] : legs_) {
    if (leg->counted) CountLeg(*leg, false);
  }
  legs_.clear();
  link_of_.clear();
  links_.clear();
}

PubsubLink& PubsubLinks::LinkFor(const std::string& target) {
  auto it = links_.find(target);
  if (it != links_.end()) return *it->second;
  auto link = std::make_unique<PubsubLink>();
  link->upstream = std::make_shared<PubsubUpstream>(
      io_, target, router_->EndpointsOf(target), router_->options().upstream, router_->tls(), this);
  link_of_[link->upstream.get()] = link.get();
  return *links_.emplace(target, std::move(link)).first->second;
}

PubsubLink* PubsubLinks::LinkOf(const PubsubUpstream& upstream) const {
  auto it = link_of_.find(&upstream);
  return it == link_of_.end() ? nullptr : it->second;
}

std::unique_ptr<PubsubLeg> PubsubLinks::NewLeg(PubsubSubscription& sub, const std::string& target) {
  auto leg = std::make_unique<PubsubLeg>();
  leg->serial = next_serial_++;
  leg->sub = &sub;
  leg->target = target;
  leg->link = &LinkFor(target);
  legs_[leg->serial] = leg.get();
  leg->link->legs.insert(leg.get());
  return leg;
}

void PubsubLinks::Open(PubsubLeg& leg) {
  if (leg.link->upstream->open()) {
    Subscribe(leg);
  } else {
    leg.link->upstream->Start();
  }
}

void PubsubLinks::Subscribe(PubsubLeg& leg) {
  const uint64_t token = next_token_++;
  leg.call_token = token;
  std::weak_ptr<PubsubUpstream> upstream = leg.link->upstream;
  leg.link->upstream->Call(
      leg.sub->method->subscribe, leg.sub->params.params,
      [this, lifetime = lifetime_, serial = leg.serial, token, upstream,
       unsubscribe = leg.sub->method->unsubscribe](absl::StatusOr<PubsubUpstream::Answer> answer) {
        if (auto alive = lifetime.lock()) {
          OnSubscribed(serial, token, upstream, unsubscribe, std::move(answer));
        }
      });
}

void PubsubLinks::OnSubscribed(uint64_t serial, uint64_t token,
                               const std::weak_ptr<PubsubUpstream>& upstream,
                               std::string_view unsubscribe,
                               absl::StatusOr<PubsubUpstream::Answer> answer) {
  if (shut_down_) return;
  PubsubLeg* leg = FindLeg(serial);
  uint64_t upstream_id = 0;
  const bool has_id =
      answer.ok() && answer->error.empty() &&
      absl::SimpleAtoi(std::string(api_internal::Trim(answer->result)), &upstream_id);
  if (leg == nullptr || leg->call_token != token) {
    // The leg went away while the call was in flight: undo it upstream.
    if (has_id) {
      if (auto connection = upstream.lock(); connection && connection->open()) {
        connection->Call(unsubscribe, fmt::format("[{}]", upstream_id), nullptr);
      }
    }
    return;
  }
  leg->call_token = 0;
  if (!answer.ok()) {
    // A lost connection makes its legs again when it opens again (or fails them).
    if (absl::IsUnavailable(answer.status())) return;
    owner_->OnLegFailed(*leg, MakeRpcStatus(RpcErrorKind::kInternal,
                                            fmt::format("upstream {}: {}", leg->target,
                                                        std::string(answer.status().message()))));
    return;
  }
  if (!answer->error.empty()) {
    owner_->OnLegFailed(*leg, UpstreamErrorStatus(answer->error));
    return;
  }
  if (!has_id) {
    owner_->OnLegFailed(*leg,
                        MakeRpcStatus(RpcErrorKind::kInternal,
                                      fmt::format("upstream {} answered {} with {}", leg->target,
                                                  leg->sub->method->subscribe, answer->result)));
    return;
  }
  leg->upstream_id = upstream_id;
  leg->live = true;
  leg->link->by_upstream_id[upstream_id] = leg;
  CountLeg(*leg, true);
  const bool reconnected = leg->ever_live;
  leg->ever_live = true;
  owner_->OnLegLive(*leg, reconnected);
}

void PubsubLinks::Close(std::unique_ptr<PubsubLeg>& leg, bool unsubscribe) {
  if (!leg) return;
  PubsubLink* link = leg->link;
  if (leg->live) {
    link->by_upstream_id.erase(leg->upstream_id);
    if (unsubscribe) {
      link->upstream->Call(leg->sub->method->unsubscribe, fmt::format("[{}]", leg->upstream_id),
                           nullptr);
    }
  }
  if (leg->counted) CountLeg(*leg, false);
  link->legs.erase(leg.get());
  legs_.erase(leg->serial);
  leg.reset();
}

void PubsubLinks::MarkEnded(PubsubLeg& leg) {
  leg.link->by_upstream_id.erase(leg.upstream_id);
  leg.live = false;
}

PubsubLeg* PubsubLinks::FindLeg(uint64_t serial) const {
  auto it = legs_.find(serial);
  return it == legs_.end() ? nullptr : it->second;
}

void PubsubLinks::CountLeg(PubsubLeg& leg, bool counted) {
  leg.counted = counted;
  metrics_->UpstreamSubscriptions(leg.sub->method->label, leg.target).Add(counted ? 1 : -1);
}

void PubsubLinks::Follow(PubsubSubscription& sub, const std::string& target) {
  if (target == sub.active->target) {
    Close(sub.pending);
    return;
  }
  if (sub.pending && sub.pending->target == target) return;
  Close(sub.pending);
  if (!sub.answered) {
    Close(sub.active);
    sub.active = NewLeg(sub, target);
    Open(*sub.active);
    return;
  }
  sub.switch_started = std::chrono::steady_clock::now();
  sub.pending = NewLeg(sub, target);
  Open(*sub.pending);
}

void PubsubLinks::CompleteSwitch(PubsubSubscription& sub) {
  Close(sub.active);
  sub.active = std::move(sub.pending);
  sub.switch_failures = 0;
  metrics_->switches.Increment();
  metrics_->switch_seconds.Observe(
      std::chrono::duration<double>(std::chrono::steady_clock::now() - sub.switch_started).count());
}

std::string PubsubLinks::AbandonSwitch(PubsubSubscription& sub) {
  metrics_->switch_failures.Increment();
  std::string target = sub.pending ? sub.pending->target : "?";
  Close(sub.pending);
  ++sub.switch_failures;
  return target;
}

void PubsubLinks::OnUpstreamOpen(PubsubUpstream& upstream, bool reconnected) {
  PubsubLink* link = LinkOf(upstream);
  if (link == nullptr) return;
  if (reconnected) {
    metrics_->upstream_reconnects.Increment();
    spdlog::info("pubsub: upstream {} reconnected; re-creating {} subscriptions", upstream.target(),
                 link->legs.size());
  }
  const std::vector<PubsubLeg*> legs(link->legs.begin(), link->legs.end());
  for (PubsubLeg* leg : legs) {
    if (!leg->live && leg->call_token == 0) Subscribe(*leg);
  }
}

void PubsubLinks::OnUpstreamLost(PubsubUpstream& upstream, const absl::Status& why) {
  PubsubLink* link = LinkOf(upstream);
  if (link == nullptr) return;
  metrics_->upstream_disconnects.Increment();
  spdlog::warn("pubsub: upstream {} lost ({} subscriptions): {}", upstream.target(),
               link->legs.size(), std::string(why.message()));
  link->by_upstream_id.clear();
  for (PubsubLeg* leg : link->legs) {
    leg->live = false;
    leg->call_token = 0;
    if (leg->counted) CountLeg(*leg, false);
    leg->baseline.Cancel();
  }
}

void PubsubLinks::OnUpstreamFailed(PubsubUpstream& upstream, const absl::Status& why) {
  PubsubLink* link = LinkOf(upstream);
  if (link == nullptr) return;
  metrics_->upstream_failures.Increment();
  spdlog::warn("pubsub: giving up on upstream {}: {}", upstream.target(),
               std::string(why.message()));
  std::vector<uint64_t> serials;
  for (PubsubLeg* leg : link->legs) serials.push_back(leg->serial);
  const absl::Status status = MakeRpcStatus(RpcErrorKind::kInternal, std::string(why.message()));
  for (uint64_t serial : serials) {
    if (PubsubLeg* leg = FindLeg(serial)) owner_->OnLegFailed(*leg, status);
  }
}

void PubsubLinks::OnUpstreamNotification(PubsubUpstream& upstream, std::string_view message,
                                         const UpstreamMessage& parsed) {
  PubsubLeg* leg = nullptr;
  if (PubsubLink* link = LinkOf(upstream)) {
    auto it = link->by_upstream_id.find(parsed.subscription);
    if (it != link->by_upstream_id.end()) leg = it->second;
  }
  owner_->OnNotification(leg, message, parsed);
}

}  // namespace switchyard
