#include "engine/peer_check.h"

#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <thread>

namespace switchyard {
namespace {

StateDigest D(uint64_t n) { return StateDigest::FromParts(n, n * 7); }

// Sealed digests held in memory, for both sides.
class MemorySealed final : public SealedDigestReader {
 public:
  explicit MemorySealed(std::map<Slot, StateDigest> sealed) : sealed_(std::move(sealed)) {}
  absl::StatusOr<std::optional<StateDigest>> SealedDigest(Slot slot) override {
    auto it = sealed_.find(slot);
    return it == sealed_.end() ? std::nullopt : std::optional<StateDigest>(it->second);
  }
  absl::StatusOr<std::vector<SealedDigestAt>> LastSealedDigests(Slot at_or_below,
                                                                size_t count) override {
    std::vector<SealedDigestAt> out;
    for (auto it = sealed_.upper_bound(at_or_below); it != sealed_.begin() && out.size() < count;) {
      --it;
      out.insert(out.begin(), SealedDigestAt{it->first, it->second});
    }
    return out;
  }
  std::map<Slot, StateDigest> sealed_;
};

class FakePeer final : public PeerDigestSource {
 public:
  explicit FakePeer(std::map<Slot, StateDigest> sealed) : sealed_(std::move(sealed)) {}
  const std::string& name() const override { return name_; }
  absl::StatusOr<std::optional<SealedDigestAt>> Latest() override {
    if (!reachable) return absl::UnavailableError("peer down");
    if (sealed_.empty()) return std::optional<SealedDigestAt>();
    return std::optional<SealedDigestAt>(
        SealedDigestAt{sealed_.rbegin()->first, sealed_.rbegin()->second});
  }
  absl::StatusOr<std::optional<StateDigest>> At(Slot slot) override {
    if (!reachable) return absl::UnavailableError("peer down");
    asked.push_back(slot);
    auto it = sealed_.find(slot);
    return it == sealed_.end() ? std::nullopt : std::optional<StateDigest>(it->second);
  }
  bool reachable = true;
  std::vector<Slot> asked;
  std::map<Slot, StateDigest> sealed_;
  std::string name_ = "http://peer";
};

TEST(PeerCheckTest, ComparesTheHighestLocalSlotsAtOrBelowThePeersLatestSkippingSlotsItLacks) {
  MemorySealed local({{10, D(1)}, {20, D(2)}, {30, D(3)}, {40, D(4)}, {50, D(5)}});
  FakePeer peer({{10, D(1)}, {25, D(9)}, {30, D(3)}, {40, D(4)}});
  PeerCheckOptions options;
  options.max_slots = 3;
  auto result = CheckPeer(local, peer, options);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->peer_latest, 40u);
  EXPECT_EQ(result->sampled, 3u);   // 20, 30, 40
  EXPECT_EQ(result->compared, 2u);  // the peer did not stop at 20
  EXPECT_EQ(result->first_compared, 30u);
  EXPECT_EQ(result->last_compared, 40u);
  EXPECT_FALSE(result->divergence.has_value());
  // 40 is the peer's latest: it is not asked again.
  EXPECT_EQ(peer.asked, (std::vector<Slot>{20, 30}));
}

TEST(PeerCheckTest, StopsAtTheFirstSlotWhoseDigestsDiffer) {
  MemorySealed local({{10, D(1)}, {20, D(2)}, {30, D(3)}, {40, D(4)}});
  FakePeer peer({{10, D(1)}, {20, D(22)}, {30, D(33)}, {40, D(4)}});
  auto result = CheckPeer(local, peer, PeerCheckOptions());
  ASSERT_TRUE(result.ok());
  ASSERT_TRUE(result->divergence.has_value());
  EXPECT_EQ(result->divergence->slot, 20u);
  EXPECT_EQ(result->divergence->local, D(2));
  EXPECT_EQ(result->divergence->peer, D(22));
  EXPECT_EQ(result->compared, 2u);
  EXPECT_EQ(peer.asked, (std::vector<Slot>{10, 20}));
}

TEST(PeerCheckTest, APeerThatSealedNothingComparesNothingAndADownPeerIsAnError) {
  MemorySealed local({{10, D(1)}});
  FakePeer empty({});
  auto result = CheckPeer(local, empty, PeerCheckOptions());
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(result->compared, 0u);
  EXPECT_FALSE(result->peer_latest.has_value());
  FakePeer down({{10, D(1)}});
  down.reachable = false;
  EXPECT_EQ(CheckPeer(local, down, PeerCheckOptions()).status().code(),
            absl::StatusCode::kUnavailable);
}

TEST(PeerVerifierTest, CountsChecksDivergencesAndFailuresPerPeer) {
  MemorySealed local({{10, D(1)}, {20, D(2)}});
  auto agreeing = std::make_unique<FakePeer>(std::map<Slot, StateDigest>{{10, D(1)}, {20, D(2)}});
  agreeing->name_ = "http://agreeing";
  auto diverging = std::make_unique<FakePeer>(std::map<Slot, StateDigest>{{10, D(1)}, {20, D(3)}});
  diverging->name_ = "http://diverging";
  auto down = std::make_unique<FakePeer>(std::map<Slot, StateDigest>{});
  down->name_ = "http://down";
  down->reachable = false;
  std::vector<std::unique_ptr<PeerDigestSource>> peers;
  peers.push_back(std::move(agreeing));
  peers.push_back(std::move(diverging));
  peers.push_back(std::move(down));
  MetricsRegistry registry;
  PeerVerifier verifier(PeerVerifierOptions(), &local, std::move(peers), &registry);
  verifier.CheckAll();
  verifier.CheckAll();
  const std::string text = registry.RenderPrometheus();
  auto has = [&](const std::string& line) { return text.find(line + "\n") != std::string::npos; };
  EXPECT_TRUE(has(R"(switchyard_verify_peer_checks_total{peer="http://agreeing"} 2)")) << text;
  EXPECT_TRUE(has(R"(switchyard_verify_peer_divergences_total{peer="http://agreeing"} 0)"));
  EXPECT_TRUE(has(R"(switchyard_verify_peer_agreed_slot{peer="http://agreeing"} 20)"));
  EXPECT_TRUE(has(R"(switchyard_verify_peer_checks_total{peer="http://diverging"} 2)"));
  EXPECT_TRUE(has(R"(switchyard_verify_peer_divergences_total{peer="http://diverging"} 2)"));
  EXPECT_TRUE(has(R"(switchyard_verify_peer_agreed_slot{peer="http://diverging"} 0)"));
  EXPECT_TRUE(has(R"(switchyard_verify_peer_failures_total{peer="http://down"} 2)"));
  EXPECT_TRUE(has(R"(switchyard_verify_peer_checks_total{peer="http://down"} 0)"));
}

}  // namespace
}  // namespace switchyard
