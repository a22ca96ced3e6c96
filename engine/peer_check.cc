#include "engine/peer_check.h"

#include <spdlog/spdlog.h>

#include <utility>

#include "common/status.h"

namespace switchyard {

absl::StatusOr<PeerCheckResult> CheckPeer(SealedDigestReader& local, PeerDigestSource& peer,
                                          const PeerCheckOptions& options) {
  PeerCheckResult result;
  ASSIGN_OR_RETURN(std::optional<SealedDigestAt> latest, peer.Latest());
  if (!latest) return result;
  result.peer_latest = latest->slot;
  ASSIGN_OR_RETURN(std::vector<SealedDigestAt> sample,
                   local.LastSealedDigests(latest->slot, options.max_slots));
  result.sampled = sample.size();
  for (const SealedDigestAt& mine : sample) {
    std::optional<StateDigest> theirs;
    if (mine.slot == latest->slot) {
      theirs = latest->digest;
    } else {
      ASSIGN_OR_RETURN(theirs, peer.At(mine.slot));
    }
    if (!theirs) continue;
    ++result.compared;
    if (!result.first_compared) result.first_compared = mine.slot;
    result.last_compared = mine.slot;
    if (*theirs != mine.digest) {
      result.divergence = PeerDivergence{mine.slot, mine.digest, *theirs};
      return result;
    }
  }
  return result;
}

PeerVerifierMetrics::PeerVerifierMetrics(MetricsRegistry& r, const std::string& peer)
    : checks(r.AddCounter("switchyard_verify_peer_checks_total",
                          "Checks of the sealed digests against a peer replica that compared them",
                          {{"peer", peer}})),
      divergences(r.AddCounter(
          "switchyard_verify_peer_divergences_total",
          "Checks against a peer replica that found a slot whose sealed digests differ",
          {{"peer", peer}})),
      failures(r.AddCounter("switchyard_verify_peer_failures_total",
                            "Checks against a peer replica that could not compare (unreachable, "
                            "a malformed answer, a local read error)",
                            {{"peer", peer}})),
      agreed_slot(r.AddGauge("switchyard_verify_peer_agreed_slot",
                             "The highest slot of the last check that agreed with a peer replica",
                             {{"peer", peer}})) {}

PeerVerifier::PeerVerifier(PeerVerifierOptions options, SealedDigestReader* local,
                           std::vector<std::unique_ptr<PeerDigestSource>> peers,
                           MetricsRegistry* registry)
    : options_(options), local_(local) {
  for (auto& source : peers) {
    Peer peer;
    peer.metrics = std::make_unique<PeerVerifierMetrics>(*registry, source->name());
    peer.source = std::move(source);
    peers_.push_back(std::move(peer));
  }
}

PeerVerifier::~PeerVerifier() { Stop(); }

void PeerVerifier::Start() {
  thread_ = std::thread([this] {
    while (true) {
      CheckAll();
      absl::MutexLock lock(&mu_);
      mu_.AwaitWithTimeout(absl::Condition(&stopping_), options_.interval);
      if (stopping_) return;
    }
  });
}

void PeerVerifier::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

void PeerVerifier::CheckAll() {
  for (Peer& peer : peers_) {
    absl::StatusOr<PeerCheckResult> result = CheckPeer(*local_, *peer.source, options_.check);
    if (!result.ok()) {
      peer.metrics->failures.Increment();
      if (!peer.failing) {
        spdlog::warn("verify: cannot check the sealed digests against peer {}: {}",
                     peer.source->name(), std::string(result.status().message()));
      }
      peer.failing = true;
      continue;
    }
    if (peer.failing) spdlog::info("verify: peer {} can be checked again", peer.source->name());
    peer.failing = false;
    if (result->compared == 0) continue;
    peer.metrics->checks.Increment();
    if (const std::optional<PeerDivergence>& d = result->divergence) {
      peer.metrics->divergences.Increment();
      spdlog::error(
          "verify: the state diverges from peer {} at slot {}: local digest {}, peer digest {}",
          peer.source->name(), d->slot, d->local.ToHex(), d->peer.ToHex());
      continue;
    }
    peer.metrics->agreed_slot.Set(static_cast<int64_t>(*result->last_compared));
  }
}

}  // namespace switchyard
