// Switchyard on Kafka as separate processes over real sockets: switchyard-kafka-mock (librdkafka's
// mock cluster), a localnet base running the delegation scenario, `switchyard ingest` writing
// the topic, and `switchyard serve` replicas folding it, each into its own RocksDB.
#include <gtest/gtest.h>
#include <signal.h>

#include <cstdlib>
#include <functional>
#include <map>
#include <set>

#include "fmt/format.h"
#include "storage/rocksdb_state_store.h"
#include "tests/kafka/kafka_stack.h"
#include "tests/support/localnet_process.h"
#include "tests/support/sanitizer.h"
#include "tests/support/subprocess.h"

namespace switchyard {
namespace {

using namespace std::chrono_literals;
using testing::KafkaStack;
using testing::Replica;
using testing::ReplicaStatus;
using testing::WaitUntil;

std::vector<std::string> Scenario(int seed, int accounts, int slot_ms, Slot stop_slot) {
  return {"--slot-ms",
          std::to_string(slot_ms),
          "--seed",
          std::to_string(seed),
          "--accounts",
          std::to_string(accounts),
          "--delegate-rate",
          "2",
          "--undelegate-rate",
          "1",
          "--scenario-er-count",
          "3",
          "--scenario-stop-slot",
          std::to_string(stop_slot)};
}

// What the replicas reported on /status while they ran: per replica, the digest it showed at
// each applied slot it was seen at. A replica must never show two digests for one slot.
struct StatusSamples {
  std::map<std::string, std::map<Slot, std::string>> seen;  // replica -> slot -> digest
  std::vector<std::string> conflicts;
};

void Sample(const std::vector<Replica>& replicas, StatusSamples* samples) {
  for (const Replica& r : replicas) {
    auto status = testing::GetReplicaStatus(r.admin_port);
    if (!status) continue;
    auto [it, inserted] = samples->seen[r.name].emplace(status->applied_slot, status->digest);
    if (!inserted && it->second != status->digest) {
      samples->conflicts.push_back(
          fmt::format("{} showed two digests at slot {}", r.name, status->applied_slot));
    }
  }
}

// The value of a Prometheus series without labels, or 0.
int64_t MetricValue(const std::string& text, const std::string& series) {
  const size_t at = text.find("\n" + series + " ");
  if (at == std::string::npos) return 0;
  return std::atoll(text.c_str() + at + series.size() + 2);
}

Slot AppliedSlot(const Replica& replica) {
  auto status = testing::GetReplicaStatus(replica.admin_port);
  return status ? status->applied_slot : 0;
}

// The delegated set (account -> validator) of a state.
std::map<Pubkey, Pubkey> Delegated(const AccountMap& accounts) {
  std::map<Pubkey, Pubkey> out;
  accounts.ForEach([&](const Pubkey& account, const AccountState& state) {
    if (state.delegated) out[account] = state.validator;
  });
  return out;
}

// For a failure message: the accounts whose delegation differs from the ground truth, with
// the replica's state of each and the events of each in the log.
std::string Differences(const std::map<Pubkey, Pubkey>& delegated,
                        const std::map<Pubkey, Pubkey>& truth, const AccountMap& accounts,
                        const testing::TopicContents& topic) {
  std::set<Pubkey> differing;
  for (const auto& [account, validator] : delegated) {
    auto it = truth.find(account);
    if (it == truth.end() || it->second != validator) differing.insert(account);
  }
  for (const auto& [account, validator] : truth) {
    if (!delegated.contains(account)) differing.insert(account);
  }
  std::string out;
  int shown = 0;
  for (const Pubkey& account : differing) {
    if (++shown > 8) break;
    const std::optional<AccountState> state = accounts.Find(account);
    out += fmt::format("{}: replica {} (delegation slot {}, last event slot {}), truth {}\n",
                       account.ToBase58(),
                       state && state->delegated ? state->validator.ToBase58() : "undelegated",
                       state ? state->delegation_slot : 0, state ? state->last_event_slot : 0,
                       truth.contains(account) ? truth.at(account).ToBase58() : "undelegated");
    out += testing::AccountEventsText(topic, account);
  }
  return fmt::format("{} accounts differ\n{}", differing.size(), out);
}

class KafkaReplicasTest : public ::testing::Test {
 protected:
  void SetUp() override {
    stack_ = std::make_unique<KafkaStack>(/*brokers=*/3, /*partitions=*/4);
    ASSERT_TRUE(stack_->ok()) << "switchyard-kafka-mock did not start";
  }
  void TearDown() override {
    if (HasFailure()) std::cerr << stack_->LogTails();
    stack_.reset();
  }

  // Waits until every replica's applied slot reaches `slot`, sampling /status meanwhile and
  // calling `between` after every round of samples.
  bool RunUntilApplied(const std::vector<Replica>& replicas, Slot slot,
                       std::chrono::milliseconds deadline,
                       const std::function<void(Slot)>& between = {}) {
    return WaitUntil(
        [&] {
          Sample(replicas, &samples_);
          Slot lowest = std::numeric_limits<Slot>::max();
          for (const Replica& r : replicas) lowest = std::min(lowest, AppliedSlot(r));
          if (between) between(AppliedSlot(replicas[0]));
          return lowest >= slot;
        },
        deadline);
  }

  // Stops ingest, waits until the replicas stand still at one applied slot, stops them, and
  // checks them against each other, the log and the localnet's ground truth: at the end, and
  // with `history_is_exact` at slots along the way too. (Only when ingest never fell behind
  // the chain: a watcher that catches up repairs what it missed with events of older slots,
  // which the fold counts for a later slot than the ground truth does.)
  void StopAndVerify(pid_t ingest, std::vector<Replica> replicas, bool history_is_exact) {
    EXPECT_EQ(stack_->Stop(ingest, SIGTERM, 30s), 0) << "ingest did not stop cleanly";
    // A watcher that fell behind the chain (a loaded machine) repairs what it missed by
    // reconciliation, with events of later slots than the chain's: the history along the way
    // is then not the ground truth's, while everything else still holds.
    if (history_is_exact &&
        stack_->LogOf("ingest").find("reconciliation at slot") != std::string::npos) {
      std::cerr << "ingest repaired missed events by reconciliation: the history along the way "
                   "is not compared with the ground truth\n";
      history_is_exact = false;
    }
    std::vector<ReplicaStatus> last;
    int stable = 0;
    const bool settled = WaitUntil(
        [&] {
          std::vector<ReplicaStatus> now;
          for (const Replica& r : replicas) {
            auto s = testing::GetReplicaStatus(r.admin_port);
            if (!s) return false;
            now.push_back(*s);
          }
          bool same = true;
          for (const auto& s : now) same &= s.applied_slot == now[0].applied_slot;
          stable =
              same && !last.empty() && last[0].applied_slot == now[0].applied_slot ? stable + 1 : 0;
          last = now;
          std::this_thread::sleep_for(200ms);
          return stable >= 4;
        },
        60s);
    ASSERT_TRUE(settled) << "the replicas did not settle on one applied slot";
    for (const auto& s : last) {
      EXPECT_EQ(s.digest, last[0].digest) << "replicas at one applied slot disagree";
    }
    EXPECT_TRUE(samples_.conflicts.empty()) << samples_.conflicts.front();
    // The slots every replica was seen at on /status: each showed the same digest there.
    std::map<Slot, std::string> common = samples_.seen[replicas[0].name];
    for (const Replica& r : replicas) {
      const auto& seen = samples_.seen[r.name];
      EXPECT_GE(seen.size(), 10u) << r.name << " answered /status too rarely";
      std::erase_if(common, [&](const auto& entry) {
        auto it = seen.find(entry.first);
        if (it == seen.end()) return true;
        EXPECT_EQ(it->second, entry.second)
            << r.name << " and " << replicas[0].name << " at slot " << entry.first;
        return false;
      });
    }
    EXPECT_GE(common.size(), 3u) << "too few slots at which every replica was seen";
    for (const Replica& r : replicas) {
      EXPECT_EQ(stack_->Stop(r.pid, SIGTERM, 30s), 0) << r.name << " did not stop cleanly";
    }

    const auto topic = testing::ReadTopic(stack_->mock().bootstraps(), KafkaStack::kTopic);
    ASSERT_TRUE(topic.has_value()) << "cannot read the topic back";
    EXPECT_EQ(testing::DuplicateAccountEvents(*topic), 0u) << "ingest wrote an event twice";

    std::optional<std::vector<std::pair<Slot, StateDigest>>> first_sealed;
    for (const Replica& r : replicas) {
      SCOPED_TRACE(r.name);
      auto store = RocksDbStateStore::Open(r.data_dir + "/state");
      ASSERT_TRUE(store.ok()) << store.status();
      auto loaded = (*store)->Load();
      ASSERT_TRUE(loaded.ok()) << loaded.status();
      const FoldPosition& position = loaded->position;
      EXPECT_EQ(position.applied_slot, last[0].applied_slot);
      EXPECT_EQ(position.digest.ToHex(), last[0].digest);

      // Nothing lost, nothing applied twice: every account event the replica read from the
      // log is in its history exactly once.
      auto rows = (*store)->CountHistoryRows();
      ASSERT_TRUE(rows.ok());
      const uint64_t read = testing::AccountEventsBefore(*topic, position.partitions);
      EXPECT_GT(read, 0u);
      EXPECT_EQ(*rows, read) << "history rows vs account events read from the log";
      EXPECT_EQ(position.counters.applied + position.counters.ignored_stale, read);
      // Ingest writes only what changes the state; a watcher that fell behind may repair
      // with events the fold then finds stale.
      if (history_is_exact) {
        EXPECT_EQ(position.counters.ignored_stale, 0u);
      }
      EXPECT_EQ(position.counters.quarantined, 0u);

      // The final state is the ground truth's at the applied slot.
      const auto truth = testing::GroundTruthAt(stack_->truth_path(), position.applied_slot);
      EXPECT_FALSE(truth.empty());
      const std::map<Pubkey, Pubkey> delegated = Delegated(loaded->accounts);
      EXPECT_EQ(delegated, truth) << "at slot " << position.applied_slot << "\n"
                                  << Differences(delegated, truth, loaded->accounts, *topic);

      // Every applied slot on the way has the same digest on every replica, and the digests
      // seen live on /status are the ones stored.
      auto sealed = (*store)->SealedDigests();
      ASSERT_TRUE(sealed.ok());
      EXPECT_GT(sealed->size(), 40u);
      if (!first_sealed) {
        first_sealed = *sealed;
      } else {
        EXPECT_TRUE(*sealed == *first_sealed) << "the replicas' digest histories differ";
      }
      const std::map<Slot, StateDigest> by_slot(sealed->begin(), sealed->end());
      for (const auto& [slot, hex] : samples_.seen[r.name]) {
        if (slot == 0) continue;  // nothing applied yet
        auto it = by_slot.find(slot);
        EXPECT_TRUE(it != by_slot.end()) << "no stored digest for live slot " << slot;
        if (it != by_slot.end()) {
          EXPECT_EQ(it->second.ToHex(), hex) << "at slot " << slot;
        }
      }

      // At checked slots along the way, the state equals the ground truth then.
      const size_t step = std::max<size_t>(1, sealed->size() / 12);
      for (size_t i = 0; history_is_exact && i < sealed->size(); i += step) {
        const Slot slot = (*sealed)[i].first;
        std::map<Pubkey, Pubkey> at;
        loaded->accounts.ForEach([&](const Pubkey& account, const AccountState&) {
          auto state = (*store)->GetAccountAt(account, slot);
          ASSERT_TRUE(state.ok());
          if (*state && (*state)->delegated) at[account] = (*state)->validator;
        });
        EXPECT_EQ(at, testing::GroundTruthAt(stack_->truth_path(), slot)) << "at slot " << slot;
      }
    }
  }

  std::unique_ptr<KafkaStack> stack_;
  StatusSamples samples_;
};

// Two replicas on one four-partition topic, fed by ingest from localnet: whenever both report
// the same applied slot on /status their digests agree, and their state is the ground truth.
TEST_F(KafkaReplicasTest, TwoReplicasAgreeWithEachOtherAndTheGroundTruth) {
  constexpr Slot kStop = 120;
  ASSERT_NE(stack_->StartLocalnet(Scenario(31, 200, 50, kStop)), 0) << "localnet did not start";
  const pid_t ingest = stack_->StartIngest();
  const Replica a = stack_->StartReplica("replica-a");
  const Replica b = stack_->StartReplica("replica-b");
  ASSERT_NE(a.admin_port, 0) << stack_->LogOf("replica-a");
  ASSERT_NE(b.admin_port, 0) << stack_->LogOf("replica-b");
  ASSERT_TRUE(RunUntilApplied({a, b}, kStop + 20, 90s)) << "the replicas did not get there";
  StopAndVerify(ingest, {a, b}, /*history_is_exact=*/true);
}

// A replica started late, with an empty state, folds the topic from offset 0 and reaches the
// same applied slot, digest and digest history as the one that followed from the start.
TEST_F(KafkaReplicasTest, ALateReplicaCatchesUpFromOffsetZero) {
  constexpr Slot kStop = 120;
  ASSERT_NE(stack_->StartLocalnet(Scenario(32, 200, 50, kStop)), 0) << "localnet did not start";
  const pid_t ingest = stack_->StartIngest();
  const Replica a = stack_->StartReplica("replica-a");
  ASSERT_NE(a.admin_port, 0) << stack_->LogOf("replica-a");
  ASSERT_TRUE(RunUntilApplied({a}, kStop + 20, 90s));
  const Replica late = stack_->StartReplica("replica-late");
  ASSERT_NE(late.admin_port, 0) << stack_->LogOf("replica-late");
  // Caught up, and then following along with the other, long enough for /status to be sampled
  // at ten slots or more (the sampling is slower under a sanitizer).
  ASSERT_TRUE(RunUntilApplied({a, late}, AppliedSlot(a) + 30 * testing::kTimeScale,
                              60s * testing::kTimeScale))
      << "the late replica lags";
  StopAndVerify(ingest, {a, late}, /*history_is_exact=*/true);
}

// Two replicas folding one topic check each other with `switchyard verify --peer`: they agree
// (exit 0), and once one replica's sealed digest at a slot both sealed is corrupted on disk,
// the check names that slot (exit 1).
TEST_F(KafkaReplicasTest, VerifyPeerAgreesAndNamesTheSlotOfACorruptedDigest) {
  constexpr Slot kStop = 60;
  ASSERT_NE(stack_->StartLocalnet(Scenario(34, 100, 50, kStop)), 0) << "localnet did not start";
  const pid_t ingest = stack_->StartIngest();
  const Replica a = stack_->StartReplica("replica-a");
  const Replica b = stack_->StartReplica("replica-b");
  ASSERT_NE(a.admin_port, 0) << stack_->LogOf("replica-a");
  ASSERT_NE(b.admin_port, 0) << stack_->LogOf("replica-b");
  ASSERT_TRUE(RunUntilApplied({a, b}, kStop + 10, 60s)) << "the replicas did not get there";
  EXPECT_EQ(stack_->Stop(ingest, SIGTERM, 30s), 0);
  // Both stand still at the last slot ingest wrote; then A stops and B answers for both.
  ASSERT_TRUE(WaitUntil(
      [&] {
        const Slot slot = AppliedSlot(a);
        std::this_thread::sleep_for(300ms);
        return slot == AppliedSlot(a) && slot == AppliedSlot(b);
      },
      30s));
  ASSERT_EQ(stack_->Stop(a.pid, SIGTERM, 30s), 0);
  auto verify = [&] {
    return testing::RunCommand({SWITCHYARD_BINARY, "verify", "--peer",
                                fmt::format("http://127.0.0.1:{}", b.admin_port), "--data-dir",
                                a.data_dir, "--timeout-ms", "5000"});
  };
  const testing::CommandResult agreed = verify();
  EXPECT_EQ(agreed.exit_code, 0) << agreed.out << agreed.err;
  EXPECT_NE(agreed.out.find(" result=ok"), std::string::npos) << agreed.out;
  EXPECT_EQ(agreed.out.find("compared=0 "), std::string::npos) << agreed.out;

  // A slot in the middle of A's sample that B sealed too (with four partitions an applied
  // slot may step over slots, differently on each replica).
  Slot corrupted = 0;
  {
    auto store = RocksDbStateStore::Open(a.data_dir + "/state");
    ASSERT_TRUE(store.ok()) << store.status();
    auto sealed = (*store)->SealedDigests();
    ASSERT_TRUE(sealed.ok());
    ASSERT_GT(sealed->size(), 10u);
    for (size_t i = sealed->size() / 2; i > 0 && corrupted == 0; --i) {
      const Slot slot = (*sealed)[i].first;
      auto peer = testing::HttpGet(b.admin_port, fmt::format("/status/digest?slot={}", slot));
      if (peer && peer->first == 200) corrupted = slot;
    }
    ASSERT_NE(corrupted, 0u) << "no slot sealed by both replicas";
    auto position = (*store)->Position();
    ASSERT_TRUE(position.ok());
    FoldBatch batch;
    batch.sealed_digests.emplace_back(corrupted, StateDigest::FromParts(7, 11));
    batch.position = *position;
    ASSERT_TRUE((*store)->Commit(batch).ok());
  }
  const testing::CommandResult diverged = verify();
  EXPECT_EQ(diverged.exit_code, 1) << diverged.out << diverged.err;
  EXPECT_NE(diverged.out.find(fmt::format(" result=DIVERGED slot={} local_digest={} ", corrupted,
                                          StateDigest::FromParts(7, 11).ToHex())),
            std::string::npos)
      << diverged.out;
  EXPECT_EQ(stack_->Stop(b.pid, SIGTERM, 30s), 0);
}

// Faults while the replicas fold: added latency, injected produce and fetch errors, a replica
// SIGKILLed and restarted, every broker down and up again. Nothing is lost or applied twice
// and the digests still agree. SWITCHYARD_KAFKA_FAULT_ROUNDS repeats the cycle (more rounds
// under the `slow` label).
TEST_F(KafkaReplicasTest, FaultsLoseNothingAndApplyNothingTwice) {
  const char* rounds_env = std::getenv("SWITCHYARD_KAFKA_FAULT_ROUNDS");
  const int rounds = rounds_env != nullptr ? std::max(1, std::atoi(rounds_env)) : 1;
  constexpr Slot kRoundSlots = 160;
  constexpr Slot kFirst = 40;
  const Slot stop = kFirst + kRoundSlots * static_cast<Slot>(rounds) + 20;
  ASSERT_NE(stack_->StartLocalnet(Scenario(33, 200, 50, stop)), 0) << "localnet did not start";
  const pid_t ingest = stack_->StartIngest();
  Replica a = stack_->StartReplica("replica-a");
  Replica b = stack_->StartReplica("replica-b");
  ASSERT_NE(a.admin_port, 0) << stack_->LogOf("replica-a");
  ASSERT_NE(b.admin_port, 0) << stack_->LogOf("replica-b");

  auto command = [&](const std::string& line) {
    EXPECT_EQ(stack_->mock().Command(line), "ok") << line;
  };
  // Each fault fires once, when replica A's applied slot passes its slot.
  struct Fault {
    Slot at;
    std::function<void()> apply;
    bool done = false;
  };
  std::vector<Fault> faults;
  for (int round = 0; round < rounds; ++round) {
    const Slot base = kFirst + kRoundSlots * static_cast<Slot>(round);
    faults.push_back({base, [&] { command("rtt all 80"); }});
    faults.push_back({base + 30, [&] { command("rtt all 0"); }});
    faults.push_back({base + 40, [&] {
                        command("request-errors produce 10 NOT_LEADER_FOR_PARTITION");
                        command("request-errors produce 5 REQUEST_TIMED_OUT");
                        command("request-errors produce 5 NOT_ENOUGH_REPLICAS");
                      }});
    faults.push_back({base + 70, [&] {
                        command("request-errors fetch 10 NOT_LEADER_FOR_PARTITION");
                        command("request-errors fetch 5 UNKNOWN_TOPIC_OR_PART");
                        command("request-errors fetch 5 REQUEST_TIMED_OUT");
                      }});
    faults.push_back({base + 100, [&] {
                        kill(b.pid, SIGKILL);
                        EXPECT_EQ(stack_->Stop(b.pid, SIGKILL, 10s), 128 + SIGKILL);
                      }});
    faults.push_back({base + 115, [&] {
                        b = stack_->StartReplica("replica-b");
                        EXPECT_NE(b.admin_port, 0) << "replica-b did not restart";
                      }});
    faults.push_back(
        {base + 140, [&] {
           // Nothing advances while every broker is down: wait by the clock.
           command("broker-down all");
           std::this_thread::sleep_for(2500ms);
           EXPECT_TRUE(stack_->Running(a.pid)) << "replica-a exited";
           EXPECT_TRUE(stack_->Running(ingest)) << "ingest exited";
           command("broker-up all");
           // The replica saw the outage: its Kafka client reported it.
           auto metrics = testing::HttpGet(a.admin_port, "/metrics");
           ASSERT_TRUE(metrics.has_value());
           EXPECT_GT(
               MetricValue(metrics->second, "switchyard_kafka_client_errors_total") +
                   MetricValue(metrics->second, "switchyard_kafka_consumer_transient_errors_total"),
               0)
               << metrics->second;
         }});
  }
  bool b_up = true;
  const bool done = WaitUntil(
      [&] {
        const Slot slot = AppliedSlot(a);
        for (Fault& f : faults) {
          if (!f.done && slot >= f.at) {
            f.done = true;
            f.apply();
          }
        }
        b_up = b.admin_port != 0 && testing::GetReplicaStatus(b.admin_port).has_value();
        if (b_up) Sample({a, b}, &samples_);
        return b_up && slot >= stop + 20 && AppliedSlot(b) >= stop + 20;
      },
      std::chrono::seconds(60 + 40 * rounds));
  for (const Fault& f : faults) EXPECT_TRUE(f.done) << "a fault at slot " << f.at << " never ran";
  ASSERT_TRUE(done) << "the replicas did not reach slot " << stop + 20;
  StopAndVerify(ingest, {a, b}, /*history_is_exact=*/false);
}

// With every broker unreachable, serve and ingest keep retrying with a clear message instead
// of exiting; serve opens no listener meanwhile, so it claims no readiness. Once the brokers
// are back both proceed, and /ready turns 200 only when the fold has caught up.
TEST_F(KafkaReplicasTest, UnreachableBrokersAreWaitedForWithoutClaimingReadiness) {
  ASSERT_NE(stack_->StartLocalnet({"--slot-ms", "10"}), 0) << "localnet did not start";
  ASSERT_EQ(stack_->mock().Command("broker-down all"), "ok");
  const Replica replica = stack_->StartReplica("replica", /*wait=*/false);
  // The first attempt gives up after the request timeout (10 s), then says why and retries.
  std::string log;
  EXPECT_TRUE(WaitUntil(
      [&] {
        log = stack_->LogOf("replica");
        return log.find("cannot open the log") != std::string::npos;
      },
      30s))
      << log;
  EXPECT_NE(log.find(stack_->mock().bootstraps()), std::string::npos) << log;
  EXPECT_TRUE(stack_->Running(replica.pid)) << log;
  EXPECT_EQ(stack_->ReadyAdminPort("replica"), 0) << "serve became ready without its log";

  ASSERT_EQ(stack_->mock().Command("broker-up all"), "ok");
  uint16_t admin = 0;
  ASSERT_TRUE(WaitUntil([&] { return (admin = stack_->ReadyAdminPort("replica")) != 0; }, 30s))
      << stack_->LogOf("replica");
  // Nothing is ingested yet: the applied slot stays far behind the base layer's.
  std::optional<std::pair<int, std::string>> ready;
  ASSERT_TRUE(WaitUntil(
      [&] {
        ready = testing::HttpGet(admin, "/ready");
        return ready && ready->second.find("behind") != std::string::npos;
      },
      10s));
  EXPECT_EQ(ready->first, 503) << ready->second;

  ASSERT_EQ(stack_->mock().Command("broker-down all"), "ok");
  const pid_t ingest = stack_->StartIngest();
  std::this_thread::sleep_for(2s);
  EXPECT_TRUE(stack_->Running(ingest)) << stack_->LogOf("ingest");
  ASSERT_EQ(stack_->mock().Command("broker-up all"), "ok");
  EXPECT_TRUE(WaitUntil(
      [&] {
        ready = testing::HttpGet(admin, "/ready");
        return ready && ready->first == 200;
      },
      60s))
      << (ready ? ready->second : "no answer");
  EXPECT_EQ(stack_->Stop(ingest, SIGTERM, 30s), 0);
  EXPECT_EQ(stack_->Stop(replica.pid, SIGTERM, 30s), 0);
}

}  // namespace
}  // namespace switchyard
