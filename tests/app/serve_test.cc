#include <gtest/gtest.h>
#include <signal.h>
#include <sodium.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "common/endian.h"
#include "common/pubkey.h"
#include "fmt/format.h"
#include "simdjson.h"
#include "solana/base64.h"
#include "solana/delegation.h"
#include "solana/transaction.h"
#include "tests/app/process_test.h"
#include "tests/localnet/test_clients.h"
#include "tests/support/subprocess.h"
#include "tests/support/temp_dir.h"
#include "tests/support/test_transactions.h"

namespace switchyard {
namespace {

using namespace std::chrono_literals;
using localnet::testing::HttpClient;
using testing::DelegateTransaction;
using testing::HttpAnswer;
using testing::HttpGet;
using testing::JsonInt;
using testing::Keypair;
using testing::MakeKeypair;
using testing::MetricValue;
using testing::ReadFile;
using testing::Request;
using testing::RunCommand;
using testing::StartProcess;
using testing::TempDir;
using testing::TransferTransaction;
using testing::WaitFor;

constexpr std::string_view kSystemProgram = "11111111111111111111111111111111";

// A JSON answer kept alive with its parser.
struct Json {
  simdjson::dom::parser parser;
  simdjson::dom::element root;
  std::string text;
};

std::unique_ptr<Json> Parse(const std::optional<std::string>& text) {
  auto json = std::make_unique<Json>();
  EXPECT_TRUE(text.has_value());
  json->text = text.value_or("{}");
  EXPECT_EQ(json->parser.parse(json->text).get(json->root), simdjson::SUCCESS) << json->text;
  return json;
}

class ServeTest : public testing::ProcessTest {};

uint64_t GetSlot(HttpClient& client) {
  auto json = Parse(client.Post(Request("getSlot", "[]")));
  return json->root["result"].get_uint64().value();
}

Hash BlockhashOf(const Json& json, simdjson::dom::element value) {
  std::string_view text;
  EXPECT_EQ(value["blockhash"].get_string().get(text), simdjson::SUCCESS) << json.text;
  return Hash::FromBase58(text).value_or(Hash());
}

// The latest blockhash of the node behind `client`.
Hash LatestBlockhash(HttpClient& client) {
  auto json = Parse(client.Post(Request("getLatestBlockhash", "[]")));
  return BlockhashOf(*json, json->root["result"]["value"]);
}

// The blockhash for a transaction that writes `accounts`, asked of the router as MagicBlock's
// SDK asks it: that of the ER they are delegated to, else the base layer's.
Hash BlockhashForAccounts(HttpClient& router, const std::vector<Pubkey>& accounts) {
  std::string keys;
  for (const Pubkey& key : accounts)
    keys += fmt::format("{}\"{}\"", keys.empty() ? "" : ",", key.ToBase58());
  auto json = Parse(router.Post(Request("getBlockhashForAccounts", fmt::format("[[{}]]", keys))));
  return BlockhashOf(*json, json->root["result"]);
}

// Waits until `signature` is processed without error on the node behind `client`.
bool WaitForSuccess(HttpClient& client, const std::string& signature) {
  return WaitFor(
      [&] {
        auto json = Parse(
            client.Post(Request("getSignatureStatuses", fmt::format(R"([["{}"]])", signature))));
        simdjson::dom::element status;
        if (json->root["result"]["value"].at(0).get(status) != simdjson::SUCCESS) return false;
        return !status.is_null() && status["err"].is_null();
      },
      10s);
}

std::string Owner(const Json& json) {
  std::string_view owner;
  if (json.root["result"]["value"]["owner"].get_string().get(owner) != simdjson::SUCCESS) {
    return "";
  }
  return std::string(owner);
}

TEST_F(ServeTest, RejectsAConfigWithAnUnknownKeyNamingKeyAndFile) {
  const std::string config = WriteFile("bad.toml",
                                       "[upstreams.base]\n"
                                       "endpoints = [{url = \"http://127.0.0.1:1\"}]\n"
                                       "[admin]\n"
                                       "ready_max_lag = 3\n");
  auto r =
      RunCommand({SWITCHYARD_BINARY, "serve", "--config", config, "--data-dir", dir_.Sub("data")});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("bad.toml: unknown key 'admin.ready_max_lag'"), std::string::npos) << r.err;

  const std::string no_base = WriteFile("nobase.toml", "[api]\nlisten = \"127.0.0.1:0\"\n");
  r = RunCommand({SWITCHYARD_BINARY, "serve", "--config", no_base, "--data-dir", dir_.Sub("data")});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("nobase.toml: [upstreams.base] is required"), std::string::npos) << r.err;

  const std::string bad_er = WriteFile("bader.toml",
                                       "[upstreams.base]\n"
                                       "endpoints = [{url = \"http://127.0.0.1:1\"}]\n"
                                       "[[ers]]\n"
                                       "identity = \"11111111111111111111111111111112\"\n"
                                       "upstream = \"er9\"\n");
  r = RunCommand({SWITCHYARD_BINARY, "serve", "--config", bad_er, "--data-dir", dir_.Sub("data")});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("bader.toml: 'ers[0].upstream' names no configured upstream"),
            std::string::npos)
      << r.err;

  const std::string bad_listen = WriteFile("badlisten.toml",
                                           "[upstreams.base]\n"
                                           "endpoints = [{url = \"http://127.0.0.1:1\"}]\n"
                                           "[api]\nlisten = \"8899\"\n");
  r = RunCommand(
      {SWITCHYARD_BINARY, "serve", "--config", bad_listen, "--data-dir", dir_.Sub("data")});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("badlisten.toml: 'api.listen' must be \"HOST:PORT\""), std::string::npos)
      << r.err;
}

TEST_F(ServeTest, NotReadyWhileTheBaseSlotIsUnknownAndDrainsInFlightCallsOnSigterm) {
  // A base upstream that refuses connections: the port of a listener that is gone.
  const std::string config = WriteFile("serve.toml",
                                       "[api]\nlisten = \"127.0.0.1:0\"\n"
                                       "[admin]\nlisten = \"127.0.0.1:0\"\n"
                                       "probe_interval_ms = 50\n"
                                       "[consistency]\nmax_wait_ms = 1500\n"
                                       "[upstreams.base]\n"
                                       "endpoints = [{url = \"http://127.0.0.1:1\"}]\n");
  const std::string ready = dir_.Sub("serve.ready");
  const pid_t serve = Start({SWITCHYARD_BINARY, "serve", "--config", config, "--data-dir",
                             dir_.Sub("data"), "--ready-file", ready});
  const std::string ports = WaitForReadyFile(ready);
  const auto admin_port = static_cast<uint16_t>(JsonInt(ports, "admin"));
  ASSERT_GT(admin_port, 0) << ports;

  auto health = HttpGet(admin_port, "/health");
  ASSERT_TRUE(health.has_value());
  EXPECT_EQ(health->status, 200u);
  // Wait until a probe has failed, then /ready must still say no.
  std::string status_body;
  ASSERT_TRUE(WaitFor(
      [&] {
        auto status = HttpGet(admin_port, "/status");
        if (!status) return false;
        status_body = status->body;
        return JsonInt(status->body, "failures") > 0;
      },
      10s))
      << status_body;
  auto not_ready = HttpGet(admin_port, "/ready");
  ASSERT_TRUE(not_ready.has_value());
  EXPECT_EQ(not_ready->status, 503u);
  EXPECT_NE(not_ready->body.find("base layer's slot is not known"), std::string::npos)
      << not_ready->body;
  EXPECT_NE(status_body.find("\"applied_slot\":0"), std::string::npos) << status_body;
  auto missing = HttpGet(admin_port, "/nope");
  ASSERT_TRUE(missing.has_value());
  EXPECT_EQ(missing->status, 404u);

  // A call that waits in the consistency gate is in flight when SIGTERM arrives: it still
  // gets its answer (412 once the wait is over), and then the process exits 0.
  const auto api_port = static_cast<uint16_t>(JsonInt(ports, "api"));
  std::optional<std::string> gated;
  std::thread client([&] {
    HttpClient router(api_port);
    gated = router.Post(Request(
        "getAccountInfo", R"(["11111111111111111111111111111111",{"minContextSlot":1000000}])"));
  });
  const bool waiting = WaitFor(
      [&] {
        auto metrics = HttpGet(admin_port, "/metrics");
        return metrics && MetricValue(metrics->body, "switchyard_api_gate_waits_total") == 1;
      },
      10s);
  const int exit_code = Terminate(serve, 15s);
  client.join();
  EXPECT_TRUE(waiting);
  EXPECT_EQ(exit_code, 0);
  ASSERT_TRUE(gated.has_value());
  EXPECT_NE(gated->find("-32016"), std::string::npos) << *gated;
}

TEST_F(ServeTest, RoutesByDelegationAcrossBaseAndTwoErsThroughServe) {
  ASSERT_GE(sodium_init(), 0);
  const Keypair payer = MakeKeypair(1);
  const Keypair a = MakeKeypair(2);   // delegated to ER 1
  const Keypair a2 = MakeKeypair(3);  // delegated to ER 1
  const Keypair b = MakeKeypair(4);   // delegated to ER 2
  const Keypair b2 = MakeKeypair(6);  // delegated to ER 2
  const Keypair c = MakeKeypair(5);   // not delegated
  const Pubkey er1_identity = MakeKeypair(10).pubkey;
  const Pubkey er2_identity = MakeKeypair(11).pubkey;
  constexpr uint64_t kFunds = 1'000'000'000;

  // Base slots are 10x faster than ER slots, so a context slot tells base answers from ER
  // answers; the owner tells the two ERs apart (an ER shows an account delegated to it with
  // its original owner, any other ER with the delegation program).
  const uint16_t base_port = StartLocalnet(
      "base", {"--slot-ms", "5", "--fund", fmt::format("{}=10000000000", payer.pubkey.ToBase58()),
               "--fund", fmt::format("{}={}", a.pubkey.ToBase58(), kFunds), "--fund",
               fmt::format("{}={}", a2.pubkey.ToBase58(), kFunds), "--fund",
               fmt::format("{}={}", b.pubkey.ToBase58(), kFunds), "--fund",
               fmt::format("{}={}", b2.pubkey.ToBase58(), kFunds), "--fund",
               fmt::format("{}={}", c.pubkey.ToBase58(), kFunds)});
  ASSERT_GT(base_port, 0);
  const std::string base_url = fmt::format("http://127.0.0.1:{}", base_port);
  const uint16_t er1_port = StartLocalnet("er1", {"--er", "--identity", er1_identity.ToBase58(),
                                                  "--base", base_url, "--slot-ms", "50"});
  const uint16_t er2_port = StartLocalnet("er2", {"--er", "--identity", er2_identity.ToBase58(),
                                                  "--base", base_url, "--slot-ms", "50"});
  ASSERT_GT(er1_port, 0);
  ASSERT_GT(er2_port, 0);
  HttpClient base(base_port);
  HttpClient er1(er1_port);
  HttpClient er2(er2_port);

  // Delegate on the base layer.
  std::vector<std::string> signatures;
  for (const auto& [account, validator] :
       {std::pair{&a, er1_identity}, std::pair{&a2, er1_identity}, std::pair{&b, er2_identity},
        std::pair{&b2, er2_identity}}) {
    auto sent = Parse(base.Post(Request(
        "sendTransaction", fmt::format(R"(["{}",{{"encoding":"base64"}}])",
                                       DelegateTransaction(payer, account->pubkey, validator,
                                                           LatestBlockhash(base))))));
    std::string_view signature;
    ASSERT_EQ(sent->root["result"].get_string().get(signature), simdjson::SUCCESS) << sent->text;
    signatures.emplace_back(signature);
  }
  for (const std::string& signature : signatures) {
    ASSERT_TRUE(WaitForSuccess(base, signature)) << signature;
  }
  const std::string delegated_account_info = Request(
      "getAccountInfo", fmt::format(R"(["{}",{{"encoding":"base64"}}])", a.pubkey.ToBase58()));
  EXPECT_EQ(Owner(*Parse(base.Post(delegated_account_info))), kDelegationProgramId);
  EXPECT_EQ(Owner(*Parse(er1.Post(delegated_account_info))), kSystemProgram);

  // A transfer on ER 2 itself, so that B's balance there differs from everywhere else.
  auto direct = Parse(
      er2.Post(Request("sendTransaction",
                       fmt::format(R"(["{}",{{"encoding":"base64"}}])",
                                   TransferTransaction(b, b2.pubkey, 777, LatestBlockhash(er2))))));
  std::string_view direct_signature;
  ASSERT_EQ(direct->root["result"].get_string().get(direct_signature), simdjson::SUCCESS)
      << direct->text;
  ASSERT_TRUE(WaitForSuccess(er2, std::string(direct_signature)));

  // The same delegations in serve's log, sealed at the base layer's slot now.
  const uint64_t sealed_slot = GetSlot(base);
  std::string events;
  for (const auto& [account, validator] :
       {std::pair{&a, er1_identity}, std::pair{&a2, er1_identity}, std::pair{&b, er2_identity},
        std::pair{&b2, er2_identity}}) {
    events += fmt::format(
        R"({{"kind":"delegated","account":"{}","validator":"{}","owner":"{}","slot":{},)"
        R"("lamports":{}}})"
        "\n",
        account->pubkey.ToBase58(), validator.ToBase58(), kSystemProgram, sealed_slot, kFunds);
  }
  events += fmt::format(R"({{"kind":"slot_sealed","slot":{}}})"
                        "\n",
                        sealed_slot);
  const std::string data_dir = dir_.Sub("data");
  auto appended = RunCommand({SWITCHYARD_BINARY, "log", "append", "--jsonl",
                              WriteFile("events.jsonl", events), "--data-dir", data_dir});
  ASSERT_EQ(appended.exit_code, 0) << appended.err;

  const std::string config = WriteFile(
      "serve.toml",
      fmt::format("[api]\nlisten = \"127.0.0.1:0\"\nthreads = 2\n"
                  "[admin]\nlisten = \"127.0.0.1:0\"\n"
                  "ready_max_lag_slots = 100000000\n"
                  "probe_interval_ms = 50\nrefresh_interval_ms = 50\n"
                  "[upstreams.base]\nendpoints = [{{url = \"{}\"}}]\n"
                  "[upstreams.er1]\nendpoints = [{{url = \"http://127.0.0.1:{}\"}}]\n"
                  "[upstreams.er2]\nendpoints = [{{url = \"http://127.0.0.1:{}\"}}]\n"
                  "[[ers]]\nidentity = \"{}\"\nupstream = \"er1\"\n"
                  "[[ers]]\nidentity = \"{}\"\nupstream = \"er2\"\n"
                  "[routing]\ndefault_er = \"er1\"\n",
                  base_url, er1_port, er2_port, er1_identity.ToBase58(), er2_identity.ToBase58()));
  const std::string ready = dir_.Sub("serve.ready");
  const pid_t serve = Start({SWITCHYARD_BINARY, "serve", "--config", config, "--data-dir", data_dir,
                             "--ready-file", ready});
  const std::string ports = WaitForReadyFile(ready);
  const auto api_port = static_cast<uint16_t>(JsonInt(ports, "api"));
  const auto admin_port = static_cast<uint16_t>(JsonInt(ports, "admin"));
  ASSERT_GT(api_port, 0) << ports;
  ASSERT_GT(admin_port, 0) << ports;
  std::string ready_body;
  ASSERT_TRUE(WaitFor(
      [&] {
        auto r = HttpGet(admin_port, "/ready");
        if (r) ready_body = r->body;
        // Ready comes with the loaded state; the fold then catches up with the log (this
        // config allows any lag, so ready alone does not say it has).
        return r && r->status == 200 &&
               JsonInt(r->body, "applied_slot") >= static_cast<int64_t>(sealed_slot);
      },
      10s))
      << ready_body;
  EXPECT_EQ(JsonInt(ready_body, "applied_slot"), static_cast<int64_t>(sealed_slot));

  HttpClient router(api_port);
  auto account_info = [&](const Keypair& k) {
    return Parse(router.Post(Request(
        "getAccountInfo", fmt::format(R"(["{}",{{"encoding":"base64"}}])", k.pubkey.ToBase58()))));
  };
  auto context_slot = [](const Json& json) {
    return json.root["result"]["context"]["slot"].get_uint64().value();
  };
  auto lamports = [](const Json& json) {
    return json.root["result"]["value"]["lamports"].get_uint64().value();
  };

  // A transfer between two accounts delegated to ER 1 lands on ER 1, and only there. Its
  // blockhash must be ER 1's: the client asks the router for the accounts' blockhash.
  const Hash er1_blockhash = BlockhashForAccounts(router, {a.pubkey, a2.pubkey});
  const std::string is_valid =
      Request("isBlockhashValid", fmt::format(R"(["{}"])", er1_blockhash.ToBase58()));
  EXPECT_TRUE(Parse(er1.Post(is_valid))->root["result"]["value"].get_bool().value());
  EXPECT_FALSE(Parse(base.Post(is_valid))->root["result"]["value"].get_bool().value());
  auto sent = Parse(router.Post(Request(
      "sendTransaction", fmt::format(R"(["{}",{{"encoding":"base64"}}])",
                                     TransferTransaction(a, a2.pubkey, 1234, er1_blockhash)))));
  std::string_view signature_view;
  ASSERT_EQ(sent->root["result"].get_string().get(signature_view), simdjson::SUCCESS) << sent->text;
  const std::string signature(signature_view);
  ASSERT_TRUE(WaitForSuccess(er1, signature));
  const std::string statuses =
      Request("getSignatureStatuses", fmt::format(R"([["{}"]])", signature));
  EXPECT_TRUE(Parse(base.Post(statuses))->root["result"]["value"].at(0).is_null());
  EXPECT_TRUE(Parse(er2.Post(statuses))->root["result"]["value"].at(0).is_null());
  auto balance =
      Parse(router.Post(Request("getBalance", fmt::format(R"(["{}"])", a2.pubkey.ToBase58()))));
  EXPECT_EQ(balance->root["result"]["value"].get_uint64().value(), kFunds + 1234) << balance->text;

  // Each read lands where only that target has that balance: A changed on ER 1 only, B on
  // ER 2 only; C is on the base layer, whose slots are far ahead of the ERs'.
  auto on_er1 = account_info(a);
  EXPECT_EQ(lamports(*on_er1), kFunds - 1234) << on_er1->text;
  EXPECT_EQ(Owner(*on_er1), kSystemProgram) << on_er1->text;
  EXPECT_LE(context_slot(*on_er1), GetSlot(er1));
  auto on_er2 = account_info(b);
  EXPECT_EQ(lamports(*on_er2), kFunds - 777) << on_er2->text;
  EXPECT_EQ(Owner(*on_er2), kSystemProgram) << on_er2->text;
  EXPECT_LE(context_slot(*on_er2), GetSlot(er2));
  const uint64_t base_slot_before = GetSlot(base);
  ASSERT_GT(base_slot_before, GetSlot(er1));
  auto on_base = account_info(c);
  EXPECT_EQ(lamports(*on_base), kFunds) << on_base->text;
  EXPECT_GE(context_slot(*on_base), base_slot_before) << on_base->text;

  // getMultipleAccounts across all three, merged in request order; the context is base's.
  const uint64_t base_slot_before_multi = GetSlot(base);
  auto multi = Parse(router.Post(
      Request("getMultipleAccounts",
              fmt::format(R"([["{}","{}","{}"],{{"encoding":"base64"}}])", a.pubkey.ToBase58(),
                          b.pubkey.ToBase58(), c.pubkey.ToBase58()))));
  simdjson::dom::array values;
  ASSERT_EQ(multi->root["result"]["value"].get_array().get(values), simdjson::SUCCESS)
      << multi->text;
  ASSERT_EQ(values.size(), 3u);
  const uint64_t expected[] = {kFunds - 1234, kFunds - 777, kFunds};
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(values.at(i)["owner"].get_string().value(), kSystemProgram) << multi->text;
    EXPECT_EQ(values.at(i)["lamports"].get_uint64().value(), expected[i]) << multi->text;
  }
  EXPECT_GE(multi->root["result"]["context"]["slot"].get_uint64().value(), base_slot_before_multi);

  // /status: the applied slot, the digest, the log position and every upstream.
  std::string status_body;
  ASSERT_TRUE(WaitFor(
      [&] {
        auto status = HttpGet(admin_port, "/status");
        if (!status) return false;
        status_body = status->body;
        return status_body.find("\"healthy\":false") == std::string::npos &&
               status_body.find("\"next_offset\":5") != std::string::npos;
      },
      10s))
      << status_body;
  auto status = Parse(status_body);
  EXPECT_EQ(status->root["applied_slot"].get_uint64().value(), sealed_slot);
  EXPECT_EQ(status->root["digest"].get_string().value().size(), 32u) << status_body;
  EXPECT_TRUE(status->root["limbo_since"].is_null());
  EXPECT_EQ(status->root["log"]["partitions"].at(0)["sealed_slot"].get_uint64().value(),
            sealed_slot);
  EXPECT_EQ(status->root["upstreams"].get_array().value().size(), 3u);
  EXPECT_GE(status->root["base_slot"].get_uint64().value(), sealed_slot);

  // /metrics: the calls counted above (3 getAccountInfo, 1 getMultipleAccounts,
  // 1 getBlockhashForAccounts, 1 sendTransaction, 1 getBalance), none re-routed, and the
  // fold's applied slot.
  auto metrics = HttpGet(admin_port, "/metrics");
  ASSERT_TRUE(metrics.has_value());
  EXPECT_EQ(metrics->status, 200u);
  EXPECT_EQ(MetricValue(metrics->body, "switchyard_api_rpc_calls_total"), 7) << metrics->body;
  EXPECT_EQ(MetricValue(metrics->body, "switchyard_api_split_accounts_total"), 1);
  EXPECT_EQ(MetricValue(metrics->body, "switchyard_api_owner_reroutes_total"), 0);
  EXPECT_EQ(MetricValue(metrics->body, "switchyard_fold_applied_slot"),
            static_cast<int64_t>(sealed_slot));
  EXPECT_EQ(MetricValue(metrics->body, "switchyard_ready"), 1);
  EXPECT_NE(metrics->body.find("switchyard_upstream_slot{target=\"er2\"}"), std::string::npos);

  EXPECT_EQ(Terminate(serve, 15s), 0);
  // The fold committed before the exit: the state shows the delegation.
  auto state =
      RunCommand({SWITCHYARD_BINARY, "state", "get", b.pubkey.ToBase58(), "--data-dir", data_dir});
  EXPECT_EQ(state.exit_code, 0) << state.err;
  EXPECT_NE(state.out.find("validator=" + er2_identity.ToBase58()), std::string::npos) << state.out;
}

}  // namespace
}  // namespace switchyard

namespace switchyard {
namespace {

// With [ingest] base_url set, serve runs the watcher in-process: the base layer's scenario
// delegations reach the state without any `log append`.
TEST_F(ServeTest, IngestInsideServeFollowsTheBaseLayer) {
  const std::string truth = dir_.Sub("truth.jsonl");
  const uint16_t base = StartLocalnet(
      "base", {"--slot-ms", "10", "--seed", "4", "--accounts", "40", "--delegate-rate", "2",
               "--undelegate-rate", "1", "--scenario-er-count", "2", "--ground-truth", truth,
               "--scenario-stop-slot", "120"});
  const std::string url = fmt::format("http://127.0.0.1:{}", base);
  const std::string config = WriteFile(
      "serve.toml", fmt::format("[api]\nlisten = \"127.0.0.1:0\"\n"
                                "[admin]\nlisten = \"127.0.0.1:0\"\n"
                                "[upstreams.base]\nendpoints = [{{url = \"{}\"}}]\n"
                                "[ingest]\nbase_url = \"{}\"\nreconcile_interval_ms = 200\n",
                                url, url));
  const std::string ready = dir_.Sub("serve.ready");
  const pid_t serve = Start({SWITCHYARD_BINARY, "serve", "--config", config, "--data-dir",
                             dir_.Sub("data"), "--ready-file", ready});
  const auto admin_port = static_cast<uint16_t>(JsonInt(WaitForReadyFile(ready), "admin"));
  ASSERT_GT(admin_port, 0);
  // Past the scenario's end and one reconciliation after it.
  std::string status_body;
  ASSERT_TRUE(WaitFor(
      [&] {
        auto status = HttpGet(admin_port, "/status");
        if (!status) return false;
        status_body = status->body;
        return JsonInt(status->body, "applied_slot") > 200;
      },
      30s))
      << status_body;
  auto metrics = HttpGet(admin_port, "/metrics");
  ASSERT_TRUE(metrics.has_value());
  EXPECT_GT(MetricValue(metrics->body, "switchyard_ingest_events_written_total"), 0);
  EXPECT_EQ(Terminate(serve, 15s), 0);

  // Every account the base says is delegated is delegated in serve's state, to the same ER.
  std::ifstream in(truth);
  std::string last;
  for (std::string line; std::getline(in, line);) last = line;
  auto parsed = Parse(last);
  ASSERT_NE(parsed, nullptr);
  simdjson::dom::object delegated;
  ASSERT_EQ(parsed->root["delegated"].get_object().get(delegated), simdjson::SUCCESS);
  size_t checked = 0;
  for (auto [account, authority] : delegated) {
    testing::CommandResult get = RunCommand(
        {SWITCHYARD_BINARY, "state", "get", std::string(account), "--data-dir", dir_.Sub("data")});
    ASSERT_EQ(get.exit_code, 0) << get.err;
    EXPECT_NE(get.out.find("status=delegated"), std::string::npos) << get.out;
    EXPECT_NE(get.out.find(std::string("validator=") + std::string(authority.get_string().value())),
              std::string::npos)
        << get.out;
    ++checked;
  }
  EXPECT_GT(checked, 0u);
}

}  // namespace
}  // namespace switchyard
