#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "fmt/format.h"
#include "simdjson.h"
#include "solana/delegation.h"
#include "tests/app/process_test.h"
#include "tests/localnet/test_clients.h"
#include "tests/support/fault_proxy.h"
#include "tests/support/test_transactions.h"

// ER discovery through a real `switchyard serve`: a localnet base layer holds the Magic Domain
// Program's records (written with the program's layout, served by getProgramAccounts and
// programSubscribe), two localnet ERs each behind a FaultProxy. The ERs hold the test
// accounts with different balances (ER A: 1000 + i, ER B: 2000 + i), so a getBalance through
// the router says which ER served it.

namespace switchyard {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using localnet::testing::HttpClient;
using testing::Fault;
using testing::FaultMode;
using testing::FaultProxy;
using testing::JsonInt;
using testing::MakeKeypair;
using testing::Request;
using testing::RunCommand;
using testing::WaitFor;
using testing::WsClient;

constexpr auto kDeadline = 20s;  // for any condition: generous on a loaded 2-core machine
constexpr std::string_view kAnyEr = "11111111111111111111111111111111";

struct RpcResult {
  bool ok = false;       // a result
  int64_t code = 0;      // the error's code
  std::string message;   // the error's message
  int64_t number = -1;   // result.value or result as an integer
  std::string identity;  // result.identity
  std::string raw;
};

RpcResult Parse(const std::optional<std::string>& body) {
  RpcResult out;
  if (!body) return out;
  out.raw = *body;
  simdjson::dom::parser parser;
  simdjson::dom::element root;
  if (parser.parse(*body).get(root) != simdjson::SUCCESS) return out;
  simdjson::dom::element result;
  if (root["result"].get(result) == simdjson::SUCCESS) {
    out.ok = true;
    int64_t n = 0;
    if (result["value"].get_int64().get(n) == simdjson::SUCCESS ||
        result.get_int64().get(n) == simdjson::SUCCESS) {
      out.number = n;
    }
    std::string_view identity;
    if (result["identity"].get_string().get(identity) == simdjson::SUCCESS) {
      out.identity = std::string(identity);
    }
  }
  simdjson::dom::element error;
  if (root["error"].get(error) == simdjson::SUCCESS) {
    if (error["code"].get_int64().get(out.code) != simdjson::SUCCESS) out.code = 0;
    std::string_view message;
    if (error["message"].get_string().get(message) == simdjson::SUCCESS) {
      out.message = std::string(message);
    }
  }
  return out;
}

class ErDiscoveryTest : public testing::ProcessTest {
 protected:
  static constexpr int kAccounts = 4;  // 0: on A, 1: on B, 2: any ER, 3: on C (never registered)

  void SetUp() override {
    er_a_ = MakeKeypair(41).pubkey;
    er_b_ = MakeKeypair(42).pubkey;
    er_c_ = MakeKeypair(43).pubkey;
    for (int i = 0; i < kAccounts; ++i) accounts_.push_back(MakeKeypair(50 + i).pubkey);
  }

  // The base localnet, with the ER records of `genesis` at genesis.
  uint16_t StartBase(const std::vector<std::pair<Pubkey, std::string>>& genesis) {
    std::vector<std::string> args = {
        "--slot-ms", "20",
        "--fund",    fmt::format("{}=1000000000", payer_.pubkey.ToBase58()),
        "--fund",    fmt::format("{}=7000", receiver_.pubkey.ToBase58()),
        "--fund",    fmt::format("{}=1000000000", funder_.pubkey.ToBase58())};
    for (const auto& [identity, addr] : genesis) {
      args.push_back("--registry-er");
      args.push_back(fmt::format("{}={}", identity.ToBase58(), addr));
    }
    return StartLocalnet("base", args);
  }

  uint16_t StartEr(const std::string& name, const Pubkey& identity, int offset) {
    std::vector<std::string> args = {"--er",
                                     "--identity",
                                     identity.ToBase58(),
                                     "--base",
                                     fmt::format("http://127.0.0.1:{}", base_port_),
                                     "--slot-ms",
                                     "20"};
    for (int i = 0; i < kAccounts; ++i) {
      args.push_back("--fund");
      args.push_back(fmt::format("{}={}", accounts_[i].ToBase58(), offset + i));
    }
    return StartLocalnet(name, args);
  }

  std::unique_ptr<FaultProxy> Proxy(uint16_t port) {
    auto proxy = FaultProxy::Start(fmt::format("http://127.0.0.1:{}", port));
    EXPECT_TRUE(proxy.ok()) << proxy.status();
    return proxy.ok() ? *std::move(proxy) : nullptr;
  }

  // The delegations, through serve's log: account 0 to A, 1 to B, 2 to any ER, 3 to C, and
  // the payer to A.
  void StartServe(const std::string& extra_config, bool pubsub = false) {
    const Pubkey validators[kAccounts] = {er_a_, er_b_, Pubkey(), er_c_};
    std::string events;
    for (int i = 0; i < kAccounts; ++i) {
      events += fmt::format(
          R"({{"kind":"delegated","account":"{}","validator":"{}","owner":"{}","slot":5,)"
          R"("lamports":1}})"
          "\n",
          accounts_[i].ToBase58(), validators[i].ToBase58(), kAnyEr);
    }
    events +=
        fmt::format(R"({{"kind":"delegated","account":"{}","validator":"{}","owner":"{}","slot":5,)"
                    R"("lamports":1}})"
                    "\n",
                    payer_.pubkey.ToBase58(), er_a_.ToBase58(), kAnyEr);
    events += R"({"kind":"slot_sealed","slot":10})"
              "\n";
    const std::string data_dir = dir_.Sub("data");
    auto appended = RunCommand({SWITCHYARD_BINARY, "log", "append", "--jsonl",
                                WriteFile("events.jsonl", events), "--data-dir", data_dir});
    ASSERT_EQ(appended.exit_code, 0) << appended.err;
    const std::string config =
        WriteFile("serve.toml",
                  fmt::format("[api]\nlisten = \"127.0.0.1:0\"\nthreads = 2\n"
                              "[admin]\nlisten = \"127.0.0.1:0\"\nready_max_lag_slots = 100000000\n"
                              "[pubsub]\nenabled = {}\n"
                              "[router]\nverify_owner = false\nupstream_timeout_ms = 2000\n"
                              "[cache]\nenabled = false\ncoalesce = false\n"
                              "[upstreams.base]\nendpoints = [{{url = \"http://127.0.0.1:{}\"}}]\n"
                              "[registry]\nenabled = true\nresync_interval_ms = 300\n"
                              "[er_probe]\ninterval_ms = 100\ntimeout_ms = 1000\n{}",
                              pubsub, base_port_, extra_config));
    const std::string ready = dir_.Sub("serve.ready");
    ASSERT_GT(Start({SWITCHYARD_BINARY, "serve", "--config", config, "--data-dir", data_dir,
                     "--ready-file", ready}),
              0);
    const std::string ports = WaitForReadyFile(ready);
    api_port_ = static_cast<uint16_t>(JsonInt(ports, "api"));
    admin_port_ = static_cast<uint16_t>(JsonInt(ports, "admin"));
    if (pubsub) pubsub_port_ = static_cast<uint16_t>(JsonInt(ports, "pubsub"));
    ASSERT_GT(api_port_, 0) << ports;
    ASSERT_TRUE(WaitFor(
        [&] {
          auto body = testing::HttpGet(admin_port_, "/ready");
          return body && JsonInt(body->body, "applied_slot") >= 10;
        },
        kDeadline));
    router_ = std::make_unique<HttpClient>(api_port_);
    registry_ = std::make_unique<HttpClient>(base_port_, "/registry");
  }

  RpcResult Balance(int account) {
    return Parse(router_->Post(
        Request("getBalance", fmt::format(R"(["{}"])", accounts_[account].ToBase58()))));
  }
  RpcResult Call(std::string_view method) { return Parse(router_->Post(Request(method, "[]"))); }

  // Changes a record on the base layer; the change lands in the next slot.
  void Registry(const std::string& body) {
    localnet::testing::HttpAnswer answer;
    ASSERT_FALSE(registry_->Exchange(body, 5s, &answer));
    ASSERT_EQ(answer.status, 200u) << answer.body;
  }
  std::string Register(const Pubkey& identity, std::string_view op, std::string_view status,
                       const std::string& addr) {
    return fmt::format(R"({{"op":"{}","identity":"{}","status":"{}","addr":"{}"}})", op,
                       identity.ToBase58(), status, addr);
  }

  std::string Metrics() {
    auto body = testing::HttpGet(admin_port_, "/metrics");
    return body ? body->body : std::string();
  }

  Pubkey er_a_, er_b_, er_c_;
  // Funded on the base layer: the payer of transactions on an ER, and of its delegation.
  const testing::Keypair payer_ = MakeKeypair(60);
  const testing::Keypair funder_ = MakeKeypair(61);
  const testing::Keypair receiver_ = MakeKeypair(62);
  std::vector<Pubkey> accounts_;
  uint16_t base_port_ = 0;
  uint16_t api_port_ = 0;
  uint16_t admin_port_ = 0;
  uint16_t pubsub_port_ = 0;
  std::unique_ptr<HttpClient> router_;
  std::unique_ptr<HttpClient> registry_;
};

TEST_F(ErDiscoveryTest, RegisteredMidRunRoutesDrainingKeepsItsAccountsOfflineFailsClosedIsGone) {
  // The ER processes need the base's port, and the base's genesis needs A's address: A's
  // proxy is started first, in front of the port A will listen on once it is up.
  base_port_ = StartBase({});
  ASSERT_GT(base_port_, 0);
  const uint16_t port_a = StartEr("er_a", er_a_, 1000);
  const uint16_t port_b = StartEr("er_b", er_b_, 2000);
  ASSERT_GT(port_a, 0);
  ASSERT_GT(port_b, 0);
  std::unique_ptr<FaultProxy> proxy_a = Proxy(port_a);
  std::unique_ptr<FaultProxy> proxy_b = Proxy(port_b);
  ASSERT_TRUE(proxy_a && proxy_b);
  registry_ = std::make_unique<HttpClient>(base_port_, "/registry");
  Registry(Register(er_a_, "register", "active", proxy_a->url()));
  ASSERT_NO_FATAL_FAILURE(StartServe(""));

  // A is in the registry from the start: its account is served by A.
  ASSERT_TRUE(WaitFor([&] { return Balance(0).number == 1000; }, kDeadline)) << Balance(0).raw;
  // B is not registered yet: its account names an unknown ER node, with MagicBlock's code.
  RpcResult unknown = Balance(1);
  EXPECT_EQ(unknown.code, -32604) << unknown.raw;
  EXPECT_NE(unknown.message.find(er_b_.ToBase58()), std::string::npos) << unknown.raw;
  EXPECT_NE(unknown.message.find("unknown ER node"), std::string::npos) << unknown.raw;

  // Registered mid-run: routable without a restart.
  const auto registered_at = Clock::now();
  Registry(Register(er_b_, "register", "active", proxy_b->url()));
  ASSERT_TRUE(WaitFor([&] { return Balance(1).number == 2001; }, kDeadline)) << Balance(1).raw;
  RecordProperty("discovery_delay_ms",
                 static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                      Clock::now() - registered_at)
                                      .count()));

  // A slowed down: B is the closest, so new work ("any ER", getIdentity) goes to B.
  proxy_a->Set(Fault{.mode = FaultMode::kDelay, .delay = absl::Milliseconds(150)});
  ASSERT_TRUE(WaitFor([&] { return Call("getIdentity").identity == er_b_.ToBase58(); }, kDeadline))
      << Call("getIdentity").raw;
  EXPECT_EQ(Balance(2).number, 2002);

  // Draining: B still serves its own account, but new work goes to A although B is closer.
  Registry(Register(er_b_, "sync", "draining", proxy_b->url()));
  ASSERT_TRUE(WaitFor([&] { return Call("getIdentity").identity == er_a_.ToBase58(); }, kDeadline))
      << Call("getIdentity").raw;
  EXPECT_EQ(Call("getClosestValidator").identity, er_a_.ToBase58());
  EXPECT_EQ(Balance(2).number, 1002);
  EXPECT_EQ(Balance(1).number, 2001);
  const RpcResult routes = Call("getRoutes");
  EXPECT_NE(routes.raw.find(er_a_.ToBase58()), std::string::npos) << routes.raw;
  EXPECT_EQ(routes.raw.find(er_b_.ToBase58()), std::string::npos) << routes.raw;

  // Offline: B's account gets an error that names B.
  Registry(Register(er_b_, "sync", "offline", proxy_b->url()));
  ASSERT_TRUE(WaitFor([&] { return Balance(1).code == -32604; }, kDeadline)) << Balance(1).raw;
  RpcResult offline = Balance(1);
  EXPECT_NE(offline.message.find(er_b_.ToBase58()), std::string::npos) << offline.raw;
  EXPECT_NE(offline.message.find("offline"), std::string::npos) << offline.raw;

  // Back to active, then closed: the record is gone (a program subscription does not notify a
  // closed account; the periodic full read sees it), and so is the ER.
  Registry(Register(er_b_, "sync", "active", proxy_b->url()));
  ASSERT_TRUE(WaitFor([&] { return Balance(1).number == 2001; }, kDeadline)) << Balance(1).raw;
  Registry(fmt::format(R"({{"op":"unregister","identity":"{}"}})", er_b_.ToBase58()));
  ASSERT_TRUE(WaitFor(
      [&] {
        RpcResult r = Balance(1);
        return r.code == -32604 && r.message.find("unknown ER node") != std::string::npos;
      },
      kDeadline))
      << Balance(1).raw;
  auto status = testing::HttpGet(admin_port_, "/status");
  ASSERT_TRUE(status.has_value());
  EXPECT_NE(status->body.find(er_a_.ToBase58()), std::string::npos) << status->body;
  EXPECT_EQ(status->body.find(er_b_.ToBase58()), std::string::npos) << status->body;
}

Hash LatestBlockhash(HttpClient& client) {
  const std::optional<std::string> body = client.Post(Request("getLatestBlockhash", "[]"));
  simdjson::dom::parser parser;
  std::string_view text;
  if (!body || parser.parse(*body)["result"]["value"]["blockhash"].get_string().get(text) !=
                   simdjson::SUCCESS) {
    return Hash();
  }
  return Hash::FromBase58(text).value_or(Hash());
}

// Lamports in an accountNotification, or -1.
int64_t NotifiedLamports(const std::optional<std::string>& message) {
  if (!message || message->find("accountNotification") == std::string::npos) return -1;
  return JsonInt(*message, "lamports");
}

TEST_F(ErDiscoveryTest, AnAccountOnADiscoveredErIsSubscribedOnThatErsPubsub) {
  base_port_ = StartBase({});
  ASSERT_GT(base_port_, 0);
  const uint16_t port_a = StartEr("er_a", er_a_, 1000);
  ASSERT_GT(port_a, 0);
  registry_ = std::make_unique<HttpClient>(base_port_, "/registry");
  // Only the registry knows A: its pubsub endpoint is its address's, port + 1.
  Registry(Register(er_a_, "register", "active", fmt::format("http://127.0.0.1:{}", port_a)));
  ASSERT_NO_FATAL_FAILURE(StartServe("", /*pubsub=*/true));
  ASSERT_GT(pubsub_port_, 0);

  // The payer and a receiver delegated to A on the base layer: A clones them on first use
  // (so only once both delegations are there) and takes the payer's fees.
  HttpClient base(base_port_);
  HttpClient er_a(port_a);
  for (const Pubkey& account : {payer_.pubkey, receiver_.pubkey}) {
    const std::optional<std::string> sent = base.Post(Request(
        "sendTransaction",
        fmt::format(R"(["{}",{{"encoding":"base64"}}])",
                    testing::DelegateTransaction(funder_, account, er_a_, LatestBlockhash(base)))));
    ASSERT_TRUE(sent && sent->find(R"("result":")") != std::string::npos) << sent.value_or("");
  }
  for (const Pubkey& account : {payer_.pubkey, receiver_.pubkey}) {
    ASSERT_TRUE(WaitFor(
        [&] {
          return base.Post(Request("getAccountInfo", fmt::format(R"(["{}"])", account.ToBase58())))
                     .value_or("")
                     .find(kDelegationProgramId) != std::string::npos;
        },
        kDeadline));
  }

  WsClient client(pubsub_port_);
  ASSERT_TRUE(client.connected());
  ASSERT_TRUE(client.Send(fmt::format(
      R"({{"jsonrpc":"2.0","id":7,"method":"accountSubscribe","params":["{}",{{"encoding":"base64"}}]}})",
      payer_.pubkey.ToBase58())));
  std::optional<std::string> answer = client.ReadAnswer();
  ASSERT_TRUE(answer.has_value()) << client.error().message();
  EXPECT_NE(answer->find(R"("id":7)"), std::string::npos) << *answer;
  EXPECT_NE(answer->find(R"("result":)"), std::string::npos) << *answer;

  // The subscription is answered once A's pubsub has taken it: a transfer on A changes the
  // payer there, and the subscriber sees A's balance, not the base layer's.
  std::string transfer_answer;
  ASSERT_TRUE(WaitFor(
      [&] {
        const std::string transfer =
            testing::TransferTransaction(payer_, receiver_.pubkey, 5, LatestBlockhash(er_a));
        transfer_answer =
            er_a.Post(Request("sendTransaction",
                              fmt::format(R"(["{}",{{"encoding":"base64"}}])", transfer)))
                .value_or("");
        return transfer_answer.find(R"("result":")") != std::string::npos;
      },
      kDeadline))
      << transfer_answer;
  const int64_t notified = NotifiedLamports(client.Read());
  const std::string on_a =
      er_a.Post(Request("getBalance", fmt::format(R"(["{}"])", payer_.pubkey.ToBase58())))
          .value_or("");
  const std::string on_base =
      base.Post(Request("getBalance", fmt::format(R"(["{}"])", payer_.pubkey.ToBase58())))
          .value_or("");
  EXPECT_GT(notified, 0) << client.error().message();
  EXPECT_EQ(notified, JsonInt(on_a, "value")) << on_a;
  EXPECT_NE(notified, JsonInt(on_base, "value")) << on_base;
  EXPECT_EQ(testing::MetricValue(Metrics(), "switchyard_pubsub_upstream_failures_total"), 0);
}

TEST_F(ErDiscoveryTest, RecordsOfAnUnknownVersionOrMalformedAreCountedAndSkipped) {
  base_port_ = StartBase({});
  ASSERT_GT(base_port_, 0);
  const uint16_t port_a = StartEr("er_a", er_a_, 1000);
  ASSERT_GT(port_a, 0);
  registry_ = std::make_unique<HttpClient>(base_port_, "/registry");
  Registry(Register(er_a_, "register", "active", fmt::format("http://127.0.0.1:{}", port_a)));
  // B's record in a version 1 this build does not know, C's cut short.
  Registry(fmt::format(R"({{"op":"raw","identity":"{}","data_base64":"AQID"}})", er_b_.ToBase58()));
  Registry(
      fmt::format(R"({{"op":"raw","identity":"{}","data_base64":"AAECAw=="}})", er_c_.ToBase58()));
  ASSERT_NO_FATAL_FAILURE(StartServe(""));
  ASSERT_TRUE(WaitFor([&] { return Balance(0).number == 1000; }, kDeadline)) << Balance(0).raw;
  ASSERT_TRUE(WaitFor(
      [&] {
        const std::string m = Metrics();
        return testing::MetricValue(m, "switchyard_er_registry_unknown_versions_total") >= 1 &&
               testing::MetricValue(m, "switchyard_er_registry_malformed_total") >= 1;
      },
      kDeadline))
      << Metrics();
  EXPECT_EQ(testing::MetricValue(Metrics(), "switchyard_er_registry_records"), 1);
  EXPECT_EQ(Balance(1).code, -32604);
  EXPECT_EQ(Balance(3).code, -32604);
}

TEST_F(ErDiscoveryTest, AnyErGoesToTheClosestReachableErAndSwitchesWhenItIsUnreachable) {
  base_port_ = StartBase({});
  ASSERT_GT(base_port_, 0);
  const uint16_t port_a = StartEr("er_a", er_a_, 1000);
  const uint16_t port_b = StartEr("er_b", er_b_, 2000);
  ASSERT_GT(port_a, 0);
  ASSERT_GT(port_b, 0);
  std::unique_ptr<FaultProxy> proxy_a = Proxy(port_a);
  std::unique_ptr<FaultProxy> proxy_b = Proxy(port_b);
  ASSERT_TRUE(proxy_a && proxy_b);
  // A is 200 ms away, B is near.
  proxy_a->Set(Fault{.mode = FaultMode::kDelay, .delay = absl::Milliseconds(200)});
  registry_ = std::make_unique<HttpClient>(base_port_, "/registry");
  Registry(Register(er_a_, "register", "active", proxy_a->url()));
  Registry(Register(er_b_, "register", "active", proxy_b->url()));
  // C's record names B's address (a moved host): B answers C's probes as itself.
  Registry(Register(er_c_, "register", "active", fmt::format("http://127.0.0.1:{}", port_b)));
  ASSERT_NO_FATAL_FAILURE(StartServe(""));

  ASSERT_TRUE(WaitFor([&] { return Call("getIdentity").identity == er_b_.ToBase58(); }, kDeadline))
      << Call("getIdentity").raw;
  EXPECT_EQ(Balance(2).number, 2002);
  // C is never chosen although it is as near as B, and its account is refused, not read on B.
  ASSERT_TRUE(WaitFor(
      [&] {
        return testing::MetricValue(
                   Metrics(),
                   fmt::format(R"(switchyard_er_probes_total{{er="{}",outcome="wrong_identity"}})",
                               er_c_.ToBase58())) >= 1;
      },
      kDeadline))
      << Metrics();
  const RpcResult misaddressed = Balance(3);
  EXPECT_EQ(misaddressed.code, -32604) << misaddressed.raw;
  EXPECT_NE(misaddressed.message.find("answers as validator " + er_b_.ToBase58()),
            std::string::npos)
      << misaddressed.raw;
  EXPECT_EQ(Call("getRoutes").raw.find(er_c_.ToBase58()), std::string::npos);
  const RpcResult routes = Call("getRoutes");
  EXPECT_LT(routes.raw.find(er_b_.ToBase58()), routes.raw.find(er_a_.ToBase58())) << routes.raw;

  // The probe cost per ER, over a measured stretch: requests and bytes each second.
  const std::string before = Metrics();
  const uint64_t requests_before = proxy_b->requests();
  const auto measured_from = Clock::now();
  ASSERT_TRUE(WaitFor([&] { return proxy_b->requests() >= requests_before + 20; }, kDeadline));
  const double seconds = std::chrono::duration<double>(Clock::now() - measured_from).count();
  const std::string after = Metrics();
  const double probes_per_second =
      static_cast<double>(proxy_b->requests() - requests_before) / seconds;
  EXPECT_GT(probes_per_second, 0);
  const int64_t sent = testing::MetricValue(after, "switchyard_er_probe_request_bytes_total") -
                       testing::MetricValue(before, "switchyard_er_probe_request_bytes_total");
  const int64_t answered = testing::MetricValue(after, "switchyard_er_probe_answer_bytes_total") -
                           testing::MetricValue(before, "switchyard_er_probe_answer_bytes_total");
  RecordProperty("probe_requests_per_second_per_er", fmt::format("{:.2f}", probes_per_second));
  RecordProperty("probe_body_bytes_per_second_per_er",
                 fmt::format("{:.1f}", static_cast<double>(sent + answered) / seconds / 2));

  // B stops answering: three failed probes make it unreachable, and new work goes to A.
  proxy_b->Set(Fault{.mode = FaultMode::kBlackHole});
  ASSERT_TRUE(WaitFor([&] { return Call("getIdentity").identity == er_a_.ToBase58(); }, kDeadline))
      << Call("getIdentity").raw;
  EXPECT_EQ(Balance(2).number, 1002);
  const std::string metrics = Metrics();
  EXPECT_EQ(testing::MetricValue(
                metrics, fmt::format("switchyard_er_reachable{{er=\"{}\"}}", er_b_.ToBase58())),
            0)
      << metrics;
  auto status = testing::HttpGet(admin_port_, "/status");
  ASSERT_TRUE(status.has_value());
  EXPECT_NE(status->body.find("\"reachable\":false"), std::string::npos) << status->body;

  // Back on its first answered probe.
  proxy_b->Set(Fault{.mode = FaultMode::kPass});
  ASSERT_TRUE(WaitFor([&] { return Call("getIdentity").identity == er_b_.ToBase58(); }, kDeadline))
      << Call("getIdentity").raw;
}

}  // namespace
}  // namespace switchyard
