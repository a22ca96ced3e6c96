// Replicas checking each other through their admin listeners: GET /status/digest of a
// `switchyard serve`, `switchyard verify --peer` (agreement, a corrupted sealed digest found at
// its slot, an unreachable peer), and serve's own periodic check with its metrics.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "fmt/format.h"
#include "storage/rocksdb_state_store.h"
#include "tests/app/process_test.h"
#include "tests/support/free_port.h"
#include "tests/support/subprocess.h"

namespace switchyard {
namespace {

using namespace std::chrono_literals;
using testing::CommandResult;
using testing::HttpGet;
using testing::JsonInt;
using testing::MetricValue;
using testing::RunCommand;
using testing::WaitFor;

constexpr const char* kValidator = "2uRha4rA8zh42nt8NykaqvUgrS3dYHwu3feRWk4xdzQY";
constexpr const char* kOwner = "5zz8tBGdNS5z3scZgWWJBsGDVdNLGyWZ5GHwj27GXnDu";
constexpr const char* kAccounts[] = {
    "2dSnSNfAiCrnmk5RJUJkAvL3sCUAM1MRHno4JvwaZo6r", "9SW6eUHBNQSaW9KpksGhvhKi1yeK2WBbxUC8utuLmx1R",
    "3dG4fvt6zzitezyHUGFA5xrDXCcZb2ehhszWzfByaWvd", "8RBDNoy5j9N8qVBNdcRH7apNfpoF6Bhw6sAeZcJy3dwn"};
// The slots the log seals: one delegation before each seal, then an undelegation.
constexpr Slot kSealed[] = {10, 20, 30, 40, 50};

std::string Events() {
  std::string out;
  for (size_t i = 0; i < 4; ++i) {
    out += fmt::format(
        R"({{"kind":"delegated","account":"{}","validator":"{}","owner":"{}","slot":{},)"
        R"("lamports":{},"commit_frequency_ms":30000}})"
        "\n",
        kAccounts[i], kValidator, kOwner, kSealed[i] - 1, 1000 + i);
    out += fmt::format(R"({{"kind":"slot_sealed","slot":{}}})"
                       "\n",
                       kSealed[i]);
  }
  out += fmt::format(R"({{"kind":"undelegated","account":"{}","slot":45}})"
                     "\n",
                     kAccounts[0]);
  out += R"({"kind":"slot_sealed","slot":50})"
         "\n";
  return out;
}

// The value of "key":"..." in a small JSON object or a key=value line, or "".
std::string Field(const std::string& text, const std::string& key) {
  for (const std::string& prefix : {"\"" + key + "\":\"", key + "="}) {
    const size_t at = text.find(prefix);
    if (at == std::string::npos) continue;
    const size_t start = at + prefix.size();
    return text.substr(start, text.find_first_of("\" \n", start) - start);
  }
  return "";
}

class VerifyPeerTest : public testing::ProcessTest {
 protected:
  void SetUp() override { events_ = WriteFile("events.jsonl", Events()); }

  // Appends the events to the embedded log of `name` and folds them; returns the data dir.
  std::string FoldReplica(const std::string& name) {
    const std::string data = dir_.Sub(name);
    CommandResult append =
        RunCommand({SWITCHYARD_BINARY, "log", "append", "--jsonl", events_, "--data-dir", data});
    EXPECT_EQ(append.exit_code, 0) << append.err;
    CommandResult fold = RunCommand({SWITCHYARD_BINARY, "fold", "--data-dir", data});
    EXPECT_EQ(fold.exit_code, 0) << fold.err;
    EXPECT_NE(fold.out.find("applied_slot=50 "), std::string::npos) << fold.out;
    return data;
  }

  // Starts serve on the data dir of `name` (its log folded already); returns its admin port.
  uint16_t Serve(const std::string& name, const std::string& extra_config = "") {
    const std::string config = WriteFile(name + ".toml",
                                         "[api]\nlisten = \"127.0.0.1:0\"\n"
                                         "[admin]\nlisten = \"127.0.0.1:0\"\n"
                                         "[pubsub]\nport = 0\n"
                                         "[er_probe]\nenabled = false\n"
                                         "[upstreams.base]\n"
                                         "endpoints = [{url = \"http://127.0.0.1:1\"}]\n" +
                                             extra_config);
    const std::string ready = dir_.Sub(name + ".ready");
    EXPECT_GT(Start({SWITCHYARD_BINARY, "serve", "--config", config, "--data-dir", dir_.Sub(name),
                     "--ready-file", ready}),
              0);
    return static_cast<uint16_t>(JsonInt(WaitForReadyFile(ready), "admin"));
  }

  CommandResult VerifyPeer(const std::string& data, uint16_t peer_port) {
    return RunCommand({SWITCHYARD_BINARY, "verify", "--peer",
                       fmt::format("http://127.0.0.1:{}", peer_port), "--data-dir", data,
                       "--timeout-ms", "2000"});
  }

  // Records `digest` as replica `data`'s sealed digest at `slot`, as a corrupted disk might.
  void CorruptSealedDigest(const std::string& data, Slot slot, const StateDigest& digest) {
    auto store = RocksDbStateStore::Open(data + "/state");
    ASSERT_TRUE(store.ok()) << store.status();
    auto position = (*store)->Position();
    ASSERT_TRUE(position.ok());
    FoldBatch batch;
    batch.sealed_digests.emplace_back(slot, digest);
    batch.position = *position;
    ASSERT_TRUE((*store)->Commit(batch).ok());
  }

  std::string events_;
};

TEST_F(VerifyPeerTest, TheAdminListenerAnswersSealedDigestsBySlot) {
  const std::string data = FoldReplica("a");
  CommandResult fold = RunCommand({SWITCHYARD_BINARY, "fold", "--data-dir", data});
  const std::string final_digest = Field(fold.out, "digest");
  ASSERT_EQ(final_digest.size(), 32u) << fold.out;
  const uint16_t admin = Serve("a");
  ASSERT_GT(admin, 0);

  auto latest = HttpGet(admin, "/status/digest");
  ASSERT_TRUE(latest.has_value());
  EXPECT_EQ(latest->status, 200u);
  EXPECT_EQ(latest->body,
            fmt::format(R"({{"slot":50,"digest":"{}","applied_slot":50}})", final_digest));

  auto at_20 = HttpGet(admin, "/status/digest?slot=20");
  ASSERT_TRUE(at_20.has_value());
  EXPECT_EQ(at_20->status, 200u);
  EXPECT_EQ(JsonInt(at_20->body, "slot"), 20);
  EXPECT_EQ(Field(at_20->body, "digest").size(), 32u) << at_20->body;
  EXPECT_NE(Field(at_20->body, "digest"), final_digest);

  auto not_sealed = HttpGet(admin, "/status/digest?slot=25");
  ASSERT_TRUE(not_sealed.has_value());
  EXPECT_EQ(not_sealed->status, 404u);
  EXPECT_NE(not_sealed->body.find(R"("error":"slot 25 is not sealed here)"), std::string::npos)
      << not_sealed->body;
  EXPECT_EQ(JsonInt(not_sealed->body, "applied_slot"), 50);

  for (const char* bad : {"abc", "", "-1", "18446744073709551616", "1e3"}) {
    auto answer = HttpGet(admin, fmt::format("/status/digest?slot={}", bad));
    ASSERT_TRUE(answer.has_value());
    EXPECT_EQ(answer->status, 400u) << bad;
    EXPECT_NE(answer->body.find(R"("error":"slot must be a slot number)"), std::string::npos)
        << answer->body;
  }
  auto metrics = HttpGet(admin, "/metrics");
  ASSERT_TRUE(metrics.has_value());
  EXPECT_EQ(
      MetricValue(metrics->body, R"(switchyard_admin_digest_requests_total{result="bad_request"})"),
      5);
  EXPECT_EQ(MetricValue(metrics->body, R"(switchyard_admin_digest_requests_total{result="ok"})"),
            2);
  EXPECT_EQ(
      MetricValue(metrics->body, R"(switchyard_admin_digest_requests_total{result="not_sealed"})"),
      1);
}

TEST_F(VerifyPeerTest, TwoReplicasOfTheSameLogAgree) {
  const std::string a = FoldReplica("a");
  FoldReplica("b");
  const uint16_t b_admin = Serve("b");
  ASSERT_GT(b_admin, 0);
  CommandResult r = VerifyPeer(a, b_admin);
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("peer_latest_slot=50 sampled=5 compared=5 first_slot=10 last_slot=50 "
                       "result=ok"),
            std::string::npos)
      << r.out;
}

TEST_F(VerifyPeerTest, ACorruptedSealedDigestIsReportedAtItsSlot) {
  const std::string a = FoldReplica("a");
  FoldReplica("b");
  const StateDigest wrong = StateDigest::FromParts(0x0123456789abcdef, 0xfedcba9876543210);
  CorruptSealedDigest(a, 30, wrong);
  const uint16_t b_admin = Serve("b");
  ASSERT_GT(b_admin, 0);
  auto peer_30 = HttpGet(b_admin, "/status/digest?slot=30");
  ASSERT_TRUE(peer_30.has_value());
  const std::string peer_digest = Field(peer_30->body, "digest");
  ASSERT_EQ(peer_digest.size(), 32u) << peer_30->body;

  CommandResult r = VerifyPeer(a, b_admin);
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_NE(r.out.find(fmt::format("compared=3 first_slot=10 last_slot=30 result=DIVERGED "
                                   "slot=30 local_digest={} peer_digest={}",
                                   wrong.ToHex(), peer_digest)),
            std::string::npos)
      << r.out;
}

TEST_F(VerifyPeerTest, AnUnreachablePeerExitsTwo) {
  const std::string a = FoldReplica("a");
  CommandResult r = VerifyPeer(a, testing::FreePort());
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("error: peer http://127.0.0.1:"), std::string::npos) << r.err;
  EXPECT_EQ(r.out, "");
}

TEST_F(VerifyPeerTest, ServeCountsChecksAndADivergenceFromItsPeers) {
  FoldReplica("a");
  const std::string b = FoldReplica("b");
  const uint16_t a_admin = Serve("a");
  ASSERT_GT(a_admin, 0);
  CorruptSealedDigest(b, 40, StateDigest::FromParts(1, 2));
  const std::string peer = fmt::format("http://127.0.0.1:{}", a_admin);
  const uint16_t b_admin =
      Serve("b", fmt::format("[verify]\npeers = [\"{}\"]\ninterval_s = 1\n", peer));
  ASSERT_GT(b_admin, 0);
  std::string metrics;
  const std::string divergences =
      fmt::format(R"(switchyard_verify_peer_divergences_total{{peer="{}"}})", peer);
  EXPECT_TRUE(WaitFor(
      [&] {
        auto answer = HttpGet(b_admin, "/metrics");
        if (!answer) return false;
        metrics = answer->body;
        return MetricValue(metrics, divergences) >= 1;
      },
      15s))
      << metrics;
  EXPECT_GE(MetricValue(metrics,
                        fmt::format(R"(switchyard_verify_peer_checks_total{{peer="{}"}})", peer)),
            1);
  EXPECT_EQ(MetricValue(metrics,
                        fmt::format(R"(switchyard_verify_peer_failures_total{{peer="{}"}})", peer)),
            0);
}

}  // namespace
}  // namespace switchyard
