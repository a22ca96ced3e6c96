#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/metrics.h"
#include "common/slot.h"
#include "engine/state_digest.h"
#include "engine/state_store.h"

namespace switchyard {

// What another replica says of its sealed digests. Implemented by the app over the peer's
// admin endpoint GET /status/digest. Used by one thread at a time; calls may block.
class PeerDigestSource {
 public:
  virtual ~PeerDigestSource() = default;
  // The peer, for messages and metric labels (its admin URL).
  virtual const std::string& name() const = 0;
  // The peer's highest sealed slot with its digest; nullopt when it has sealed none.
  virtual absl::StatusOr<std::optional<SealedDigestAt>> Latest() = 0;
  // The digest the peer sealed at `slot`; nullopt when its applied slot never stopped there.
  virtual absl::StatusOr<std::optional<StateDigest>> At(Slot slot) = 0;
};

struct PeerCheckOptions {
  // The sample: this many of this replica's highest sealed slots at or below the peer's
  // highest sealed slot.
  size_t max_slots = 100;
};

// Two replicas' digests at one slot that differ. A value type.
struct PeerDivergence {
  Slot slot = 0;
  StateDigest local;
  StateDigest peer;
};

// What one check found. A value type.
struct PeerCheckResult {
  std::optional<Slot> peer_latest;  // the peer's highest sealed slot (nullopt: none)
  size_t sampled = 0;               // local sealed slots in the sample
  size_t compared = 0;              // of them, sealed by the peer too, and compared
  std::optional<Slot> first_compared;
  std::optional<Slot> last_compared;
  std::optional<PeerDivergence> divergence;  // the first, in slot order
};

// Compares this replica's sealed digests with a peer's at the slots both have sealed: the
// peer's highest sealed slot bounds the sample, which is the `max_slots` highest slots this
// replica sealed at or below it, asked of the peer one by one in ascending slot order. A slot
// the peer did not stop at is skipped (replicas of a multi-partition log may step over
// different slots). Stops at the first slot whose digests differ. Errors are the peer's (it
// cannot be reached, a malformed answer) or the local store's.
absl::StatusOr<PeerCheckResult> CheckPeer(SealedDigestReader& local, PeerDigestSource& peer,
                                          const PeerCheckOptions& options);

struct PeerVerifierOptions {
  absl::Duration interval = absl::Seconds(60);
  PeerCheckOptions check;
};

// The peer checks' metrics, per peer, declared in one place.
struct PeerVerifierMetrics {
  PeerVerifierMetrics(MetricsRegistry& registry, const std::string& peer);
  Counter& checks;       // checks that compared the two replicas (agreeing or not)
  Counter& divergences;  // checks that found a slot whose digests differ
  Counter& failures;     // checks that could not compare (the peer unreachable, ...)
  Gauge& agreed_slot;    // the highest slot of the last agreeing check
};

// Runs CheckPeer against every peer every `interval`, on a thread of its own, from Start()
// to Stop(): a divergence is an error log line naming the slot and both digests, and a
// counter; a peer that cannot be checked is a warning (when it starts failing) and a counter.
// Owned by the app; Start() and Stop() from one control thread. `local` and the registry must
// outlive it.
class PeerVerifier {
 public:
  PeerVerifier(PeerVerifierOptions options, SealedDigestReader* local,
               std::vector<std::unique_ptr<PeerDigestSource>> peers, MetricsRegistry* registry);
  ~PeerVerifier();
  PeerVerifier(const PeerVerifier&) = delete;
  PeerVerifier& operator=(const PeerVerifier&) = delete;

  void Start();
  void Stop();
  // Checks every peer once now (the thread does it every interval).
  void CheckAll();

 private:
  struct Peer {
    std::unique_ptr<PeerDigestSource> source;
    std::unique_ptr<PeerVerifierMetrics> metrics;
    bool failing = false;
  };
  PeerVerifierOptions options_;
  SealedDigestReader* local_;
  std::vector<Peer> peers_;  // CheckAll's thread only
  absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace switchyard
