// `switchyard serve` with its state directory, or its embedded log's directory, on a tmpfs
// that fills up while it folds and ingests from a localnet base layer: /ready goes 503 with
// the error, routing answers from the last snapshot, and once space returns the fold and
// ingest go on by themselves, to a state that verifies against the log and matches the base
// layer's ground truth. Mounting needs root; the tests skip, naming the reason, without it.
#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <memory>
#include <regex>
#include <set>
#include <string>

#include "fmt/format.h"
#include "simdjson.h"
#include "tests/app/process_test.h"
#include "tests/support/subprocess.h"
#include "tests/support/tmpfs.h"

namespace switchyard {
namespace {

using namespace std::chrono_literals;
using testing::HttpGet;
using testing::JsonInt;
using testing::MetricValue;
using testing::Request;
using testing::RunCommand;
using testing::WaitFor;

// RocksDB resumes by itself once a memtable's worth (write_buffer_size: 128 MiB for the state
// store, 64 MiB for the log) is free again, so the tmpfs is larger than that.
constexpr int kTmpfsMegabytes = 320;
constexpr int kScenarioStopSlot = 1200;

// The ground truth's delegated accounts (account -> authority) at each slot it changed.
std::map<int64_t, std::map<std::string, std::string>> ReadTruth(const std::string& path) {
  std::map<int64_t, std::map<std::string, std::string>> out;
  std::ifstream in(path);
  simdjson::dom::parser parser;
  for (std::string line; std::getline(in, line);) {
    simdjson::dom::element root;
    if (parser.parse(line).get(root) != simdjson::SUCCESS) continue;  // a line being written
    auto& delegated = out[static_cast<int64_t>(root["slot"].get_int64().value())];
    for (auto [account, authority] : root["delegated"].get_object()) {
      delegated[std::string(account)] = std::string(authority.get_string().value());
    }
  }
  return out;
}

std::string Field(const std::string& out, const std::string& key) {
  std::smatch m;
  if (!std::regex_search(out, m, std::regex(key + "=([^ \n]+)"))) return "";
  return m[1];
}

class DiskFullTest : public testing::ProcessTest {
 protected:
  void TearDown() override {
    ProcessTest::TearDown();  // serve first: it holds files on the tmpfs
    disk_.reset();
  }

  // `on_tmpfs` is "state" or "log": which of serve's directories fills up.
  void RunOutage(const std::string& on_tmpfs) {
    const std::string data = dir_.Sub("data");
    disk_ = std::make_unique<testing::TmpfsMount>(data + "/" + on_tmpfs, kTmpfsMegabytes);
    if (!disk_->error().empty()) GTEST_SKIP() << disk_->error();
    const std::string full_dir = data + "/" + on_tmpfs;

    const std::string truth_path = dir_.Sub("truth.jsonl");
    const uint16_t base = StartLocalnet(
        "base", {"--slot-ms", "10", "--seed", "4", "--accounts", "40", "--delegate-rate", "2",
                 "--undelegate-rate", "1", "--scenario-er-count", "2", "--ground-truth", truth_path,
                 "--scenario-stop-slot", std::to_string(kScenarioStopSlot)});
    ASSERT_GT(base, 0);
    const std::string url = fmt::format("http://127.0.0.1:{}", base);
    const std::string config = WriteFile(
        "serve.toml", fmt::format("[api]\nlisten = \"127.0.0.1:0\"\n"
                                  "[admin]\nlisten = \"127.0.0.1:0\"\nprobe_interval_ms = 50\n"
                                  "[upstreams.base]\nendpoints = [{{url = \"{}\"}}]\n"
                                  "[ingest]\nbase_url = \"{}\"\nreconcile_interval_ms = 200\n",
                                  url, url));
    const std::string ready_file = dir_.Sub("serve.ready");
    // Through a shell that execs serve (same pid) with its log in a file the test reads.
    const std::string serve_log = dir_.Sub("serve.log");
    const pid_t serve =
        Start({"/bin/sh", "-c",
               fmt::format("exec {} serve --config {} --data-dir {} --ready-file {} > {} 2>&1",
                           SWITCHYARD_BINARY, config, data, ready_file, serve_log)});
    const std::string ports = WaitForReadyFile(ready_file);
    const auto admin = static_cast<uint16_t>(JsonInt(ports, "admin"));
    const auto api = static_cast<uint16_t>(JsonInt(ports, "api"));
    ASSERT_GT(admin, 0) << ports;
    ASSERT_GT(api, 0) << ports;
    auto ready_with_slot_above = [&](int64_t slot) {
      auto ready = HttpGet(admin, "/ready");
      return ready && ready->status == 200 && JsonInt(ready->body, "applied_slot") > slot;
    };
    ASSERT_TRUE(WaitFor([&] { return ready_with_slot_above(100); }, 20s));

    // The disk fills: /ready says why, naming the directory, and a counter counts it.
    ASSERT_GT(disk_->Fill(), 0u);
    const std::string counter = on_tmpfs == "state" ? "switchyard_fold_commit_errors_total"
                                                    : "switchyard_ingest_log_append_errors_total";
    const std::string reason = on_tmpfs == "state" ? "the fold is stopped at applied slot"
                                                   : "ingest cannot append to the event log";
    std::string ready_body;
    ASSERT_TRUE(WaitFor(
        [&] {
          auto ready = HttpGet(admin, "/ready");
          if (!ready) return false;
          ready_body = ready->body;
          return ready->status == 503 && ready->body.find(reason) != std::string::npos;
        },
        15s))
        << ready_body;
    EXPECT_NE(ready_body.find(full_dir), std::string::npos) << ready_body;
    EXPECT_NE(ready_body.find("No space left on device"), std::string::npos) << ready_body;
    // The log says it once, naming the directory.
    const std::string logged = on_tmpfs == "state"
                                   ? "fold stopped, serving the last snapshot and retrying"
                                   : "ingest stopped appending to the event log";
    std::string log_text;
    ASSERT_TRUE(WaitFor(
        [&] {
          log_text = testing::ReadFile(serve_log).value_or("");
          const size_t at = log_text.find(logged);
          return at != std::string::npos && log_text.find(full_dir, at) != std::string::npos &&
                 log_text.find('\n', at) != std::string::npos;
        },
        5s))
        << log_text;
    auto status = HttpGet(admin, "/status");
    ASSERT_TRUE(status.has_value());
    const std::string error_field = on_tmpfs == "state" ? "fold_error" : "log_error";
    std::smatch m;
    ASSERT_TRUE(
        std::regex_search(status->body, m, std::regex("\"" + error_field + "\":\"([^\"]*)\"")))
        << status->body;
    EXPECT_NE(m[1].str().find(full_dir), std::string::npos) << m[1];
    auto metrics = HttpGet(admin, "/metrics");
    ASSERT_TRUE(metrics.has_value());
    EXPECT_GT(MetricValue(metrics->body, counter), 0) << counter;

    // Routing answers from the last snapshot meanwhile: it does not move, and every account
    // of the scenario gets its delegation as that snapshot has it (checked below against the
    // state's history at that slot).
    const int64_t frozen = JsonInt(status->body, "applied_slot");
    ASSERT_GT(frozen, 0);
    std::set<std::string> accounts;
    for (const auto& [slot, delegated] : ReadTruth(truth_path)) {
      for (const auto& [account, authority] : delegated) accounts.insert(account);
    }
    ASSERT_FALSE(accounts.empty());
    std::map<std::string, std::string> answered;  // account -> authority, "" when not delegated
    testing::HttpClient client(api);
    ASSERT_TRUE(client.connected());
    for (const std::string& account : accounts) {
      auto response =
          client.Post("/", Request("getDelegationStatus", fmt::format(R"(["{}"])", account)));
      ASSERT_EQ(response.result_int(), 200u) << response.body();
      simdjson::dom::parser parser;
      simdjson::dom::element root;
      ASSERT_EQ(parser.parse(response.body()).get(root), simdjson::SUCCESS) << response.body();
      bool delegated = false;
      ASSERT_EQ(root["result"]["isDelegated"].get_bool().get(delegated), simdjson::SUCCESS)
          << response.body();
      answered[account] =
          delegated
              ? std::string(root["result"]["delegationRecord"]["authority"].get_string().value())
              : "";
    }
    std::this_thread::sleep_for(500ms);  // the outage lasts while the scenario goes on
    auto still = HttpGet(admin, "/status");
    ASSERT_TRUE(still.has_value());
    EXPECT_EQ(JsonInt(still->body, "applied_slot"), frozen) << still->body;
    auto still_ready = HttpGet(admin, "/ready");
    ASSERT_TRUE(still_ready.has_value());
    EXPECT_EQ(still_ready->status, 503u) << still_ready->body;

    // Space returns: serve goes back to ready by itself and folds past the outage.
    disk_->Free();
    ASSERT_TRUE(WaitFor([&] { return ready_with_slot_above(frozen); }, 40s));
    auto recovered = HttpGet(admin, "/status");
    ASSERT_TRUE(recovered.has_value());
    EXPECT_NE(recovered->body.find("\"" + error_field + "\":null"), std::string::npos)
        << recovered->body;
    // Past the scenario's end and a reconciliation after it.
    ASSERT_TRUE(WaitFor([&] { return ready_with_slot_above(kScenarioStopSlot + 100); }, 40s));
    EXPECT_EQ(Terminate(serve, 15s), 0);

    // Nothing corrupted: the state is what a replay of the log gives.
    testing::CommandResult verify = RunCommand({SWITCHYARD_BINARY, "verify", "--data-dir", data});
    EXPECT_EQ(verify.exit_code, 0) << verify.out << verify.err;
    EXPECT_EQ(Field(verify.out, "result"), "ok") << verify.out;
    // The answers during the outage were the state at the frozen slot.
    for (const auto& [account, authority] : answered) {
      testing::CommandResult get =
          RunCommand({SWITCHYARD_BINARY, "state", "get", account, "--at-slot",
                      std::to_string(frozen), "--data-dir", data});
      ASSERT_EQ(get.exit_code, 0) << get.err;
      if (authority.empty()) {
        EXPECT_NE(Field(get.out, "status"), "delegated") << account << ": " << get.out;
      } else {
        EXPECT_EQ(Field(get.out, "status"), "delegated") << account << ": " << get.out;
        EXPECT_EQ(Field(get.out, "validator"), authority) << account << ": " << get.out;
      }
    }
    // No event skipped: the final state is the base layer's, account by account.
    const auto truth = ReadTruth(truth_path);
    ASSERT_FALSE(truth.empty());
    const std::map<std::string, std::string>& final_truth = truth.rbegin()->second;
    for (const std::string& account : accounts) {
      testing::CommandResult get =
          RunCommand({SWITCHYARD_BINARY, "state", "get", account, "--data-dir", data});
      ASSERT_EQ(get.exit_code, 0) << get.err;
      auto it = final_truth.find(account);
      if (it == final_truth.end()) {
        EXPECT_NE(Field(get.out, "status"), "delegated") << account << ": " << get.out;
      } else {
        EXPECT_EQ(Field(get.out, "status"), "delegated") << account << ": " << get.out;
        EXPECT_EQ(Field(get.out, "validator"), it->second) << account << ": " << get.out;
      }
    }
  }

  std::unique_ptr<testing::TmpfsMount> disk_;
};

TEST_F(DiskFullTest, FullStateDiskStopsTheFoldUntilSpaceReturns) { RunOutage("state"); }

TEST_F(DiskFullTest, FullLogDiskStopsIngestUntilSpaceReturns) { RunOutage("log"); }

}  // namespace
}  // namespace switchyard
