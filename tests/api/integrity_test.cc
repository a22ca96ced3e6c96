// Integrity (docs/architecture.md §22) against real switchyard-localnet processes: three
// endpoints of one base target serving the same genesis, one or more of them made to lie about
// lamports with POST /faults. Sampled cross-checks find and eject the liar; consensus reads
// answer what two of three agree on and fail clearly when none agree; admission keeps a
// lagging endpoint out until it catches up and a slow one out for good.
#include <gtest/gtest.h>
#include <signal.h>
#include <simdjson.h>
#include <sys/wait.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "api/admin/admin_handler.h"
#include "api/metrics/api_metrics.h"
#include "api/net/http_server.h"
#include "api/rpc/router.h"
#include "common/clock.h"
#include "common/metrics.h"
#include "engine/snapshot.h"
#include "fmt/format.h"
#include "tests/api/test_client.h"
#include "tests/api/test_support.h"
#include "tests/support/localnet_process.h"
#include "tests/support/sanitizer.h"
#include "tests/support/temp_dir.h"

// GCC 12 reports a false -Wrestrict on `"literal" + std::string` (GCC bug 105329).
#pragma GCC diagnostic ignored "-Wrestrict"

namespace switchyard::api_test {
namespace {

constexpr uint64_t kLamports = 1'000'000;
const Pubkey kAccount = Key(0x41);

std::string GetBalance(int id) {
  return R"({"jsonrpc":"2.0","id":)" + std::to_string(id) +
         R"(,"method":"getBalance","params":[")" + kAccount.ToBase58() + R"("]})";
}

// The lamports of a getBalance answer; -1 when it is not one.
int64_t LamportsOf(const std::string& body) {
  simdjson::dom::parser parser;
  simdjson::dom::element root;
  uint64_t lamports = 0;
  if (parser.parse(body).get(root) != simdjson::SUCCESS ||
      root["result"]["value"].get_uint64().get(lamports) != simdjson::SUCCESS) {
    return -1;
  }
  return static_cast<int64_t>(lamports);
}

// Waits for `condition` with a deadline, checking it every millisecond.
bool WaitFor(const std::function<bool()>& condition, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (!condition()) {
    if (absl::Now() > deadline) return false;
    absl::SleepFor(absl::Milliseconds(1));
  }
  return true;
}

class IntegrityTest : public ::testing::Test {
 protected:
  // Three localnets with the same genesis. A long slot keeps them all at their first slot, so
  // that every answer is comparable; `slot_ms` short makes their slots advance.
  void StartChains(int slot_ms = 600'000) {
    for (int i = 0; i < 3; ++i) {
      testing::LocalnetProcess process = testing::StartLocalnetProcess(
          SWITCHYARD_LOCALNET_BINARY, dir_.Sub(fmt::format("base{}.ready", i)),
          {"--slot-ms", std::to_string(slot_ms), "--fund",
           fmt::format("{}={}", kAccount.ToBase58(), kLamports)});
      ASSERT_GT(process.http_port, 0);
      pids_.push_back(process.pid);
      ports_.push_back(process.http_port);
    }
  }

  void StartRouter(std::function<void(RouterOptions&)> customize) {
    RouterOptions router;
    UpstreamTarget base{"base", {}};
    for (uint16_t port : ports_) base.endpoints.push_back({Url(port), 1});
    router.upstreams = {base};
    router.verify_owner = false;  // one upstream read per client read
    router.upstream_batch_max = 0;
    router.cache.enabled = false;  // every read goes upstream
    router.cache.coalesce = false;
    router.health.min_ejection = absl::Seconds(60);  // an ejection stands for the test
    router.health.hedge = false;
    customize(router);
    snapshots_.Publish(SnapshotBuilder().Build(1));
    absl::StatusOr<std::unique_ptr<RouterContext>> context =
        RouterContext::Create(std::move(router), &snapshots_, &clock_, &metrics_);
    ASSERT_TRUE(context.ok()) << context.status();
    context_ = *std::move(context);
    HttpServerOptions server;
    server.threads = 1;
    server_ = std::make_unique<HttpServer>(server, context_->HandlerFactory(), &metrics_);
    ASSERT_TRUE(server_->Start().ok());
  }

  // The upstream monitor (probes and admission) over the router's health, every 50 ms.
  void StartMonitor() {
    UpstreamMonitorOptions options;
    options.targets = context_->options().upstreams;
    options.interval = absl::Milliseconds(50);
    options.health = context_->health();
    options.upstream.request_timeout = absl::Seconds(3);
    monitor_ = std::make_unique<UpstreamMonitor>(options, &registry_);
    ASSERT_TRUE(monitor_->Start().ok());
    admin_ = std::make_unique<AdminContext>(AdminOptions{}, &snapshots_, &registry_, monitor_.get(),
                                            nullptr, &admin_metrics_);
  }

  bool Admitted(size_t i) { return base().endpoint(i).admission() == AdmissionState::kPassed; }

  // The getSlot answer of localnet `i`, asked directly.
  uint64_t SlotOf(size_t i) {
    TestClient client(ports_[i]);
    simdjson::dom::parser parser;
    simdjson::dom::element root;
    uint64_t slot = 0;
    const std::string body = client.Post(R"({"jsonrpc":"2.0","id":1,"method":"getSlot"})").body;
    if (parser.parse(body).get(root) != simdjson::SUCCESS ||
        root["result"].get_uint64().get(slot) != simdjson::SUCCESS) {
      return 0;
    }
    return slot;
  }

  void TearDown() override {
    admin_.reset();
    if (monitor_) monitor_->Stop();
    if (server_) server_->Stop();
    for (pid_t pid : pids_) {
      if (pid <= 0) continue;  // stopped by the test
      kill(pid, SIGKILL);
      int status = 0;
      waitpid(pid, &status, 0);
    }
  }

  static std::string Url(uint16_t port) { return "http://127.0.0.1:" + std::to_string(port); }

  // POST /faults to localnet `i`; its answer.
  std::string SetFaults(size_t i, const std::string& json) {
    TestClient client(ports_[i]);
    std::string request = TestClient::Request(json);
    request.replace(0, 6, "POST /faults");
    client.WriteRaw(request);
    ClientResponse response = client.Read();
    EXPECT_EQ(response.status, 200u) << response.body;
    return response.body;
  }

  ClientResponse Read(int id,
                      const std::vector<std::pair<std::string, std::string>>& headers = {}) {
    TestClient client(server_->port());
    return client.Post(GetBalance(id), headers);
  }

  TargetHealth& base() { return *context_->health()->Find("base"); }

  // The value of a series as rendered; -1 when it is not there.
  int64_t Value(const std::string& series) const {
    const std::string text = registry_.RenderPrometheus();
    const std::string prefix = "\n" + series + " ";
    const size_t at = text.find(prefix);
    if (at == std::string::npos) return -1;
    const size_t begin = at + prefix.size();
    return std::stoll(text.substr(begin, text.find('\n', begin) - begin));
  }

  testing::TempDir dir_;
  std::vector<pid_t> pids_;
  std::vector<uint16_t> ports_;
  SystemClock clock_;
  MetricsRegistry registry_;
  ApiMetrics metrics_{registry_};
  SnapshotHolder snapshots_;
  std::unique_ptr<RouterContext> context_;
  std::unique_ptr<HttpServer> server_;
  AdminMetrics admin_metrics_{registry_};
  std::unique_ptr<UpstreamMonitor> monitor_;
  std::unique_ptr<AdminContext> admin_;
};

TEST_F(IntegrityTest, LocalnetLiesAboutLamportsWhenToldTo) {
  StartChains();
  EXPECT_EQ(SetFaults(2, R"({"lie_lamports":777})"),
            R"({"slot_lag":0,"lie_lamports":777,"delay_ms":0})");
  TestClient liar(ports_[2]);
  TestClient honest(ports_[0]);
  EXPECT_EQ(LamportsOf(liar.Post(GetBalance(1)).body), static_cast<int64_t>(kLamports + 777));
  EXPECT_EQ(LamportsOf(honest.Post(GetBalance(1)).body), static_cast<int64_t>(kLamports));
}

TEST_F(IntegrityTest, ALyingEndpointIsFoundBySamplingAndEjected) {
  StartChains();
  StartRouter([](RouterOptions& router) {
    router.integrity.sample_rate = 1.0;
    router.integrity.eject_after = 3;
  });
  SetFaults(2, R"({"lie_lamports":1000})");
  int id = 0;
  ASSERT_TRUE(WaitFor(
      [&] {
        Read(++id);
        return base().endpoint(2).state() == EndpointState::kEjected;
      },
      absl::Seconds(20)))
      << "after " << id << " reads";
  const EndpointStatus liar = base().endpoint(2).Status();
  EXPECT_EQ(liar.ejected_reason.rfind("integrity: ", 0), 0u) << liar.ejected_reason;
  EXPECT_GE(liar.minority_answers, 3u);
  EXPECT_GE(liar.disagreements, 3u);
  // The honest endpoints were never outside the majority and stay in rotation.
  for (size_t i : {0u, 1u}) {
    const EndpointStatus honest = base().endpoint(i).Status();
    EXPECT_EQ(honest.minority_answers, 0u) << i;
    EXPECT_EQ(honest.state, EndpointState::kHealthy) << i;
  }
  EXPECT_EQ(
      Value(R"(switchyard_upstream_endpoint_integrity_minority_total{target="base",endpoint=")" +
            Url(ports_[2]) + R"("})"),
      static_cast<int64_t>(liar.minority_answers));
  // With the liar out, every read answers the truth, and the two honest endpoints, checked
  // against each other, agree.
  const uint64_t honest_minority = base().endpoint(0).Status().minority_answers;
  for (int i = 0; i < 20; ++i) {
    EXPECT_EQ(LamportsOf(Read(++id).body), static_cast<int64_t>(kLamports));
  }
  EXPECT_TRUE(WaitFor(
      [&] {
        return base().endpoint(0).Status().integrity_checks > 0 &&
               base().endpoint(1).Status().integrity_checks > 0;
      },
      absl::Seconds(5)));
  EXPECT_EQ(base().endpoint(0).Status().minority_answers, honest_minority);
  EXPECT_EQ(base().endpoint(2).Status().state, EndpointState::kEjected);
}

TEST_F(IntegrityTest, TwoHonestEndpointsOfThreeOutvoteTheLiarInAConsensusRead) {
  StartChains();
  StartRouter([](RouterOptions& router) { router.integrity.consensus_header = true; });
  SetFaults(1, R"({"lie_lamports":5})");
  for (int id = 1; id <= 10; ++id) {
    const ClientResponse response = Read(id, {{"X-Switchyard-Consensus", "2/3"}});
    EXPECT_EQ(LamportsOf(response.body), static_cast<int64_t>(kLamports)) << response.body;
    EXPECT_NE(response.body.find(R"("id":)" + std::to_string(id)), std::string::npos);
  }
  EXPECT_EQ(Value(R"(switchyard_upstream_consensus_reads_total{target="base",outcome="agreed"})"),
            10);
  EXPECT_EQ(Value(R"(switchyard_upstream_consensus_reads_total{target="base",outcome="failed"})"),
            0);
  // The liar's answer, early or late, was never among the agreeing ones.
  EXPECT_TRUE(WaitFor([&] { return base().endpoint(1).Status().consensus_dissents == 10; },
                      absl::Seconds(5)))
      << base().endpoint(1).Status().consensus_dissents;
  EXPECT_EQ(base().endpoint(0).Status().consensus_dissents, 0u);
  EXPECT_EQ(base().endpoint(2).Status().consensus_dissents, 0u);
}

TEST_F(IntegrityTest, AConsensusReadFailsClearlyWhenAllThreeDisagree) {
  StartChains();
  StartRouter([](RouterOptions& router) { router.integrity.consensus_header = true; });
  SetFaults(1, R"({"lie_lamports":1})");
  SetFaults(2, R"({"lie_lamports":2})");
  const ClientResponse response = Read(9, {{"X-Switchyard-Consensus", "2/3"}});
  EXPECT_EQ(response.status, 200u);
  EXPECT_EQ(LamportsOf(response.body), -1);
  EXPECT_NE(response.body.find(R"("code":-32605)"), std::string::npos) << response.body;
  EXPECT_NE(response.body.find("consensus not reached on base: 2 of 3 endpoints had to agree, at "
                               "most 1 did (3 different answers, 0 without a result)"),
            std::string::npos)
      << response.body;
  EXPECT_NE(response.body.find(R"("groups":[1,1,1])"), std::string::npos) << response.body;
  EXPECT_NE(response.body.find(R"("id":9)"), std::string::npos) << response.body;
  EXPECT_EQ(Value(R"(switchyard_upstream_consensus_reads_total{target="base",outcome="failed"})"),
            1);
}

TEST_F(IntegrityTest, AConsensusMethodIsReadByConsensusWithoutAHeader) {
  StartChains();
  StartRouter([](RouterOptions& router) {
    router.integrity.consensus_methods["getBalance"] = ConsensusRule{2, 3};
  });
  SetFaults(0, R"({"lie_lamports":3})");
  for (int id = 1; id <= 6; ++id) {
    const ClientResponse response = Read(id);
    EXPECT_EQ(LamportsOf(response.body), static_cast<int64_t>(kLamports)) << response.body;
  }
  EXPECT_EQ(Value(R"(switchyard_upstream_consensus_reads_total{target="base",outcome="agreed"})"),
            6);
  // The header is not honoured without consensus_header: a 3/3 read is still the method's 2/3.
  const ClientResponse response = Read(7, {{"X-Switchyard-Consensus", "3/3"}});
  EXPECT_EQ(LamportsOf(response.body), static_cast<int64_t>(kLamports)) << response.body;
  EXPECT_EQ(Value(R"(switchyard_upstream_consensus_reads_total{target="base",outcome="failed"})"),
            0);
}

TEST_F(IntegrityTest, AConsensusReadBeyondTheRetryBudgetFailsClearly) {
  StartChains();
  StartRouter([](RouterOptions& router) {
    router.integrity.consensus_header = true;
    router.health.retry_budget_ratio = 0;
    router.health.retry_budget_min = 0;
  });
  const ClientResponse response = Read(4, {{"X-Switchyard-Consensus", "2/3"}});
  EXPECT_EQ(LamportsOf(response.body), -1);
  EXPECT_NE(response.body.find(R"("code":-32605)"), std::string::npos) << response.body;
  EXPECT_NE(response.body.find("2 endpoints must agree and 1 could be asked (3 in rotation, "
                               "within the retry budget)"),
            std::string::npos)
      << response.body;
  EXPECT_EQ(Value(R"(switchyard_upstream_consensus_reads_total{target="base",outcome="failed"})"),
            1);
  EXPECT_GE(Value(R"(switchyard_upstream_retry_budget_exhausted_total{target="base"})"), 1);
  // A one-endpoint "consensus" needs no budget and is answered.
  EXPECT_EQ(LamportsOf(Read(5, {{"X-Switchyard-Consensus", "1/1"}}).body),
            static_cast<int64_t>(kLamports));
}

TEST_F(IntegrityTest, AMalformedConsensusHeaderIsRefused) {
  StartChains();
  StartRouter([](RouterOptions& router) { router.integrity.consensus_header = true; });
  const ClientResponse response = Read(1, {{"X-Switchyard-Consensus", "3/2"}});
  EXPECT_EQ(response.status, 400u);
  EXPECT_NE(response.body.find("-32600"), std::string::npos) << response.body;
  EXPECT_NE(response.body.find("X-Switchyard-Consensus"), std::string::npos) << response.body;
}

TEST_F(IntegrityTest, ALaggingEndpointIsNotAdmittedUntilItCatchesUp) {
  // The chains start one after another, each counting its own slots: the gap between their
  // starts must stay well under admission_max_lag slots. A sanitized localnet starts several
  // times slower, so its slots are longer.
  StartChains(/*slot_ms=*/10 * switchyard::testing::kTimeScale);
  SetFaults(2, R"({"slot_lag":400})");
  // Far enough into the chain that the lag shows (a lagged slot stops at 0).
  ASSERT_TRUE(
      WaitFor([&] { return SlotOf(0) > 150; }, switchyard::testing::Scaled(absl::Seconds(10))));
  StartRouter([](RouterOptions& router) {
    router.integrity.admission = true;
    router.integrity.admission_max_lag = 30;
    router.integrity.admission_latency_requests = 10;
    router.health.max_slot_lag = 1'000'000;  // only admission keeps it out
  });
  StartMonitor();
  ASSERT_TRUE(WaitFor([&] { return Admitted(0) && Admitted(1); },
                      switchyard::testing::Scaled(absl::Seconds(10))));
  ASSERT_TRUE(WaitFor([&] { return base().endpoint(2).Status().admission_failures >= 3; },
                      switchyard::testing::Scaled(absl::Seconds(10))));
  EndpointStatus lagging = base().endpoint(2).Status();
  EXPECT_EQ(lagging.admission, AdmissionState::kPending);
  EXPECT_EQ(lagging.admission_result.rfind("not synced: ", 0), 0u) << lagging.admission_result;
  EXPECT_NE(admin_->StatusJson().find(R"("admission":{"state":"pending")"), std::string::npos);
  // Out of rotation: no read reaches it.
  for (int id = 1; id <= 30; ++id) {
    EXPECT_EQ(LamportsOf(Read(id).body), static_cast<int64_t>(kLamports));
  }
  EXPECT_EQ(base().endpoint(2).Status().requests, 0u);
  // Caught up, it is admitted and takes reads.
  SetFaults(2, R"({"slot_lag":0})");
  ASSERT_TRUE(WaitFor([&] { return Admitted(2); }, switchyard::testing::Scaled(absl::Seconds(10))))
      << base().endpoint(2).Status().admission_result;
  EXPECT_EQ(base().endpoint(2).Status().admission_result.rfind("passed: ", 0), 0u);
  int id = 100;
  EXPECT_TRUE(WaitFor(
      [&] {
        Read(++id);
        return base().endpoint(2).Status().requests > 0;
      },
      switchyard::testing::Scaled(absl::Seconds(10))));
}

// The liar is endpoint 0, asked first by the others while none is admitted: it must not keep
// the honest ones out, and its own answers, outvoted, keep it pending.
TEST_F(IntegrityTest, AnEndpointWhoseAnswersDifferFromTheOthersIsNotAdmitted) {
  StartChains();
  SetFaults(0, R"({"lie_lamports":9})");
  StartRouter([](RouterOptions& router) {
    router.integrity.admission = true;
    router.integrity.admission_latency_requests = 5;
    router.integrity.admission_accounts = {kAccount.ToBase58()};
  });
  StartMonitor();
  ASSERT_TRUE(WaitFor([&] { return Admitted(1) && Admitted(2); }, absl::Seconds(10)))
      << base().endpoint(1).Status().admission_result << " / "
      << base().endpoint(2).Status().admission_result;
  EXPECT_NE(base().endpoint(1).Status().admission_result.find("2 of 2 fixed reads equal"),
            std::string::npos)
      << base().endpoint(1).Status().admission_result;
  ASSERT_TRUE(WaitFor([&] { return base().endpoint(0).Status().admission_failures >= 2; },
                      absl::Seconds(10)));
  const EndpointStatus liar = base().endpoint(0).Status();
  EXPECT_EQ(liar.admission, AdmissionState::kPending);
  EXPECT_EQ(liar.admission_result.rfind("answers differ: getBalance answered ", 0), 0u)
      << liar.admission_result;
  EXPECT_NE(liar.admission_result.find(std::to_string(kLamports + 9)), std::string::npos)
      << liar.admission_result;
  // /status shows each endpoint's admission and integrity objects.
  const std::string status = admin_->StatusJson();
  EXPECT_NE(status.find(R"("admission":{"state":"pending")"), std::string::npos) << status;
  EXPECT_NE(status.find(R"("admission":{"state":"passed")"), std::string::npos) << status;
  EXPECT_NE(status.find(R"("integrity":{"checks":0,"skipped":0,"disagreements":0,"minority":0,)"
                        R"("consensus_dissents":0})"),
            std::string::npos)
      << status;
  EXPECT_NE(status.find("answers differ: getBalance"), std::string::npos) << status;
  for (int id = 1; id <= 20; ++id) {
    EXPECT_EQ(LamportsOf(Read(id).body), static_cast<int64_t>(kLamports));
  }
  EXPECT_EQ(base().endpoint(0).Status().requests, 0u);
}

// The others probed and down: the one that answers is admitted alone rather than the target
// left with none.
TEST_F(IntegrityTest, TheOnlyEndpointThatAnswersIsAdmittedAlone) {
  StartChains();
  for (size_t i : {1u, 2u}) {
    kill(pids_[i], SIGKILL);
    int status = 0;
    waitpid(pids_[i], &status, 0);
    pids_[i] = -1;
  }
  StartRouter([](RouterOptions& router) {
    router.integrity.admission = true;
    router.integrity.admission_latency_requests = 5;
    router.integrity.admission_accounts = {kAccount.ToBase58()};
  });
  StartMonitor();
  ASSERT_TRUE(WaitFor([&] { return Admitted(0); }, absl::Seconds(10)))
      << base().endpoint(0).Status().admission_result;
  EXPECT_NE(base().endpoint(0).Status().admission_result.find("0 of 2 fixed reads equal to no "
                                                              "other endpoint"),
            std::string::npos)
      << base().endpoint(0).Status().admission_result;
  EXPECT_FALSE(Admitted(1));
  EXPECT_FALSE(Admitted(2));
  EXPECT_EQ(LamportsOf(Read(1).body), static_cast<int64_t>(kLamports));
}

TEST_F(IntegrityTest, ASlowEndpointFailsAdmission) {
  StartChains();
  SetFaults(2, R"({"delay_ms":250})");
  StartRouter([](RouterOptions& router) {
    router.integrity.admission = true;
    router.integrity.admission_latency_requests = 10;
    router.integrity.admission_latency_p95 = absl::Milliseconds(100);
  });
  StartMonitor();
  ASSERT_TRUE(WaitFor([&] { return Admitted(0) && Admitted(1); }, absl::Seconds(10)));
  ASSERT_TRUE(WaitFor([&] { return base().endpoint(2).Status().admission_failures >= 1; },
                      absl::Seconds(10)));
  const EndpointStatus slow = base().endpoint(2).Status();
  EXPECT_EQ(slow.admission, AdmissionState::kPending);
  EXPECT_EQ(slow.admission_result.rfind("slow: p95 ", 0), 0u) << slow.admission_result;
  for (int id = 1; id <= 20; ++id) Read(id);
  EXPECT_EQ(base().endpoint(2).Status().requests, 0u);
  EXPECT_GE(
      Value(R"(switchyard_upstream_endpoint_admission_checks_total{target="base",endpoint=")" +
            Url(ports_[2]) + R"(",result="failed"})"),
      1);
}

}  // namespace
}  // namespace switchyard::api_test
