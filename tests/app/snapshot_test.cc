#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <string>
#include <vector>

#include "app/event_json.h"
#include "fmt/format.h"
#include "tests/app/process_test.h"
#include "tests/support/event_generator.h"
#include "tests/support/free_port.h"
#include "tests/support/subprocess.h"

namespace switchyard {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;
using testing::CommandResult;
using testing::HttpClient;
using testing::HttpGet;
using testing::JsonInt;
using testing::MetricValue;
using testing::RunCommand;
using testing::WaitFor;

// The value of "key":"..." in a small JSON object, or "".
std::string JsonString(const std::string& json, const std::string& key) {
  std::smatch m;
  if (!std::regex_search(json, m, std::regex("\"" + key + "\":\"([^\"]*)\""))) return "";
  return m[1];
}

// `switchyard snapshot` and `serve --bootstrap-from` over the embedded log, with serve running
// against a base upstream that is not there (so /ready says why, and nothing else moves).
class SnapshotTest : public testing::ProcessTest {
 protected:
  void SetUp() override {
    gen_.slots = 3000;
    events_ = testing::GenerateEvents(gen_);
    for (const Event& e : events_) reference_.Apply(e);
    config_ = WriteFile("serve.toml",
                        "[api]\nlisten = \"127.0.0.1:0\"\n"
                        "[admin]\nlisten = \"127.0.0.1:0\"\n"
                        "[upstreams.base]\n"
                        "endpoints = [{url = \"http://127.0.0.1:1\"}]\n");
  }

  CommandResult Run(std::vector<std::string> args, const std::string& data_dir) {
    args.insert(args.begin(), SWITCHYARD_BINARY);
    args.insert(args.end(), {"--config", config_, "--data-dir", data_dir});
    return RunCommand(args);
  }

  // Appends events_[from, to) to the embedded log of `data_dir`.
  void AppendEvents(const std::string& data_dir, size_t from, size_t to) {
    std::string text;
    for (size_t i = from; i < to; ++i) text += EventToJson(events_[i]) + "\n";
    const CommandResult append =
        Run({"log", "append", "--jsonl", WriteFile("events.jsonl", text)}, data_dir);
    ASSERT_EQ(append.exit_code, 0) << append.err;
  }

  // Starts serve on `data_dir` and returns its admin port (0 when it did not start).
  uint16_t StartServe(const std::string& name, const std::string& data_dir,
                      std::vector<std::string> extra = {}) {
    const std::string ready = dir_.Sub(name + ".ready");
    std::vector<std::string> argv = {SWITCHYARD_BINARY, "serve",  "--config",     config_,
                                     "--data-dir",      data_dir, "--ready-file", ready};
    argv.insert(argv.end(), extra.begin(), extra.end());
    pids_[name] = Start(argv);
    return static_cast<uint16_t>(JsonInt(WaitForReadyFile(ready), "admin"));
  }

  // Waits until the replica's /status shows applied slot `slot`; returns its /status.
  std::string WaitForSlot(uint16_t admin_port, Slot slot) {
    std::string body;
    WaitFor(
        [&] {
          auto status = HttpGet(admin_port, "/status");
          if (!status) return false;
          body = status->body;
          return JsonInt(body, "applied_slot") == static_cast<int64_t>(slot);
        },
        60s);
    return body;
  }

  // A copy of `from`'s log in a new data directory, its records before `offset` dropped.
  std::string CopyLogDroppingBefore(const std::string& from, const std::string& name,
                                    int64_t offset) {
    const std::string data = dir_.Sub(name);
    fs::create_directories(data);
    fs::copy(fs::path(from) / "log", fs::path(data) / "log", fs::copy_options::recursive);
    const CommandResult drop =
        Run({"log", "drop-before", "--offset", std::to_string(offset)}, data);
    EXPECT_EQ(drop.exit_code, 0) << drop.err;
    EXPECT_NE(drop.out.find(fmt::format("start_offset={}", offset)), std::string::npos) << drop.out;
    return data;
  }

  // A copy of `from`'s log (and nothing else) in a new data directory.
  std::string CopyLog(const std::string& from, const std::string& name) {
    const std::string data = dir_.Sub(name);
    fs::create_directories(data);
    fs::copy(fs::path(from) / "log", fs::path(data) / "log", fs::copy_options::recursive);
    return data;
  }

  // Replaces `path` (a hard link of the live store's file) with `bytes`.
  static void Rewrite(const fs::path& path, const std::string& bytes) {
    fs::remove(path);
    std::ofstream(path, std::ios::binary) << bytes;
  }

  static std::string Contents(const fs::path& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }

  testing::GeneratorOptions gen_;
  std::vector<Event> events_;
  testing::ReferenceFold reference_;
  std::string config_;
  std::map<std::string, pid_t> pids_;
};

TEST_F(SnapshotTest, SnapshotsOfARunningServeAreConsistentAndBootstrapAReplicaPastAHole) {
  // The first half of the log, up to and including its last seal.
  size_t half = events_.size() / 2;
  while (!std::holds_alternative<SlotSealedEvent>(events_[half - 1])) --half;
  const Slot half_slot = std::get<SlotSealedEvent>(events_[half - 1]).slot;
  const std::string data = dir_.Sub("data");
  AppendEvents(data, 0, half);
  const uint16_t admin = StartServe("first", data);
  ASSERT_GT(admin, 0);

  // While it may still be folding: through the command line, which asks the running serve.
  const std::string early = dir_.Sub("early");
  const CommandResult made = Run(
      {"snapshot", "create", early, "--admin", fmt::format("http://127.0.0.1:{}", admin)}, data);
  ASSERT_EQ(made.exit_code, 0) << made.err;
  const int64_t early_slot = JsonInt(made.out, "applied_slot");
  ASSERT_GE(early_slot, 0) << made.out;
  if (early_slot > 0) {
    EXPECT_EQ(JsonString(made.out, "digest"),
              reference_.sealed_digests.at(static_cast<Slot>(early_slot)).ToHex())
        << made.out;
  }
  // The command line cannot open the state serve holds, and says what to do.
  const CommandResult locked = Run({"snapshot", "create", dir_.Sub("locked")}, data);
  EXPECT_EQ(locked.exit_code, 1);
  EXPECT_NE(locked.err.find("--admin http://HOST:PORT"), std::string::npos) << locked.err;

  const std::string status = WaitForSlot(admin, half_slot);
  ASSERT_EQ(JsonString(status, "digest"), reference_.sealed_digests.at(half_slot).ToHex())
      << status;
  // Through the endpoint, once caught up: every record of the first half is folded.
  const std::string snapshot = dir_.Sub("snapshot");
  HttpClient client(admin, 60s);
  auto answer = client.Post("/admin/snapshot?dir=" + snapshot, "");
  ASSERT_EQ(answer.result_int(), 200u) << answer.body();
  EXPECT_EQ(JsonInt(answer.body(), "applied_slot"), static_cast<int64_t>(half_slot));
  EXPECT_EQ(JsonString(answer.body(), "digest"), reference_.sealed_digests.at(half_slot).ToHex())
      << answer.body();
  EXPECT_NE(answer.body().find(fmt::format("\"next_offsets\":[{}]", half)), std::string::npos)
      << answer.body();
  // A directory that holds something, and one that is not absolute, are refused.
  EXPECT_EQ(client.Post("/admin/snapshot?dir=" + snapshot, "").result_int(), 409u);
  EXPECT_EQ(client.Post("/admin/snapshot", R"({"dir":"relative/path"})").result_int(), 400u);
  EXPECT_EQ(Terminate(pids_["first"], 15s), 0);

  // The early snapshot restores from the command line to its own digest.
  const CommandResult restored =
      Run({"snapshot", "restore", early, "--state-dir", dir_.Sub("restored")}, data);
  ASSERT_EQ(restored.exit_code, 0) << restored.err;
  EXPECT_EQ(JsonString(restored.out, "digest"), JsonString(made.out, "digest"));

  // The log grows, and a copy of it loses every record the snapshot has folded: a replica
  // bootstrapped from the snapshot folds the rest and ends at the digest of a fold from 0.
  AppendEvents(data, half, events_.size());
  const std::string second = CopyLogDroppingBefore(data, "second", static_cast<int64_t>(half));
  const uint16_t bootstrapped = StartServe("second", second, {"--bootstrap-from", snapshot});
  ASSERT_GT(bootstrapped, 0);
  const std::string second_status = WaitForSlot(bootstrapped, gen_.first_slot + gen_.slots - 1);
  EXPECT_EQ(JsonString(second_status, "digest"), reference_.digest.ToHex()) << second_status;
  auto metrics = HttpGet(bootstrapped, "/metrics");
  ASSERT_TRUE(metrics.has_value());
  EXPECT_EQ(MetricValue(metrics->body, "switchyard_fold_records_total"),
            static_cast<int64_t>(events_.size() - half))
      << "the bootstrapped replica read from the snapshot's offset";
  EXPECT_EQ(MetricValue(metrics->body, "switchyard_fold_log_holes_total"), 0);
  // Restarted with the same command line, it keeps its state.
  EXPECT_EQ(Terminate(pids_["second"], 15s), 0);
  const uint16_t restarted = StartServe("second-again", second, {"--bootstrap-from", snapshot});
  ASSERT_GT(restarted, 0);
  const std::string again = WaitForSlot(restarted, gen_.first_slot + gen_.slots - 1);
  EXPECT_EQ(JsonString(again, "digest"), reference_.digest.ToHex()) << again;
}

// [snapshot]: serve makes snapshots by itself, keeps the newest two, and DIR/latest bootstraps
// a replica on a log whose first records are gone.
TEST_F(SnapshotTest, PeriodicSnapshotsOfAServeBootstrapAReplicaPastAHole) {
  const std::string data = dir_.Sub("data");
  AppendEvents(data, 0, events_.size());
  const Slot last_slot = gen_.first_slot + gen_.slots - 1;
  const std::string snapshots = dir_.Sub("snapshots");
  const std::string plain_config = config_;
  config_ = WriteFile("serve-snapshots.toml",
                      "[api]\nlisten = \"127.0.0.1:0\"\n"
                      "[admin]\nlisten = \"127.0.0.1:0\"\n"
                      "[upstreams.base]\n"
                      "endpoints = [{url = \"http://127.0.0.1:1\"}]\n"
                      "[snapshot]\n"
                      "dir = \"" +
                          snapshots + "\"\ninterval_s = 1\nkeep = 2\n");
  const uint16_t admin = StartServe("snapshotting", data);
  config_ = plain_config;
  ASSERT_GT(admin, 0);
  WaitForSlot(admin, last_slot);
  // Three snapshots made after the fold caught up, so the two kept hold the whole log.
  const int64_t made_before = [&] {
    auto metrics = HttpGet(admin, "/metrics");
    return metrics ? MetricValue(metrics->body, "switchyard_snapshots_created_total") : -1;
  }();
  ASSERT_GE(made_before, 0);
  std::string metrics_body;
  ASSERT_TRUE(WaitFor(
      [&] {
        auto metrics = HttpGet(admin, "/metrics");
        if (!metrics) return false;
        metrics_body = metrics->body;
        return MetricValue(metrics_body, "switchyard_snapshots_created_total") >= made_before + 3;
      },
      30s))
      << metrics_body;
  EXPECT_EQ(Terminate(pids_["snapshotting"], 15s), 0);
  EXPECT_EQ(MetricValue(metrics_body, "switchyard_snapshot_failures_total"), 0);
  EXPECT_EQ(MetricValue(metrics_body, "switchyard_snapshot_last_applied_slot"),
            static_cast<int64_t>(last_slot));
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(snapshots)) {
    names.push_back(entry.path().filename().string());
  }
  std::ranges::sort(names);
  ASSERT_EQ(names.size(), 3u) << "the newest two and latest";
  EXPECT_EQ(names[0], "latest");
  EXPECT_EQ(fs::read_symlink(fs::path(snapshots) / "latest").string(), names[2]);

  const std::string second =
      CopyLogDroppingBefore(data, "second", static_cast<int64_t>(events_.size() / 2));
  const uint16_t bootstrapped =
      StartServe("second", second, {"--bootstrap-from", snapshots + "/latest"});
  ASSERT_GT(bootstrapped, 0);
  const std::string status = WaitForSlot(bootstrapped, last_slot);
  EXPECT_EQ(JsonString(status, "digest"), reference_.digest.ToHex()) << status;
}

TEST_F(SnapshotTest, AReplicaOnALogWithAHoleIsNotReadyAndSaysWhy) {
  const std::string data = dir_.Sub("data");
  AppendEvents(data, 0, events_.size());
  const std::string holed = CopyLogDroppingBefore(data, "holed", 100);
  const uint16_t admin = StartServe("holed", holed);
  ASSERT_GT(admin, 0);
  std::string body;
  ASSERT_TRUE(WaitFor(
      [&] {
        auto ready = HttpGet(admin, "/ready");
        if (!ready) return false;
        body = ready->body;
        return ready->status == 503u && body.find("log hole") != std::string::npos;
      },
      15s))
      << body;
  EXPECT_NE(body.find("partition 0 starts at offset 100 but the state's next offset there is 0"),
            std::string::npos)
      << body;
  auto metrics = HttpGet(admin, "/metrics");
  ASSERT_TRUE(metrics.has_value());
  EXPECT_EQ(MetricValue(metrics->body, "switchyard_fold_log_hole"), 1) << metrics->body;
  EXPECT_EQ(MetricValue(metrics->body, "switchyard_fold_log_holes_total"), 1);
  EXPECT_EQ(MetricValue(metrics->body, "switchyard_fold_records_total"), 0);
}

TEST_F(SnapshotTest, ACorruptSnapshotIsRefusedByRestoreAndByServe) {
  const std::string data = dir_.Sub("data");
  AppendEvents(data, 0, events_.size());
  const CommandResult fold = Run({"fold"}, data);
  ASSERT_EQ(fold.exit_code, 0) << fold.err;
  const std::string snapshot = dir_.Sub("snapshot");
  const CommandResult made = Run({"snapshot", "create", snapshot}, data);
  ASSERT_EQ(made.exit_code, 0) << made.err;
  EXPECT_EQ(JsonString(made.out, "digest"), reference_.digest.ToHex()) << made.out;
  // Truncate a table file (a copy: the file is a hard link of the live store's).
  fs::path table;
  for (const auto& entry : fs::directory_iterator(fs::path(snapshot) / "state")) {
    if (entry.path().extension() == ".sst") table = entry.path();
  }
  ASSERT_FALSE(table.empty());
  std::string bytes;
  {
    std::ifstream in(table, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  fs::remove(table);
  std::ofstream(table, std::ios::binary) << bytes.substr(0, bytes.size() / 2);

  const CommandResult restored =
      Run({"snapshot", "restore", snapshot, "--state-dir", dir_.Sub("restored")}, data);
  EXPECT_EQ(restored.exit_code, 1);
  EXPECT_NE(restored.err.find("refused: file " + table.filename().string()), std::string::npos)
      << restored.err;
  EXPECT_FALSE(fs::exists(dir_.Sub("restored")));
  const CommandResult serve = Run({"serve", "--bootstrap-from", snapshot}, dir_.Sub("new-replica"));
  EXPECT_EQ(serve.exit_code, 1);
  EXPECT_NE(serve.err.find("(truncated?)"), std::string::npos) << serve.err;
}

TEST_F(SnapshotTest, AReplicaBootstrapsOverHttpFromAPeersAdminListener) {
  const std::string data = dir_.Sub("data");
  AppendEvents(data, 0, events_.size());
  const uint16_t admin = StartServe("first", data);
  ASSERT_GT(admin, 0);
  const Slot last = gen_.first_slot + gen_.slots - 1;
  const std::string first_status = WaitForSlot(admin, last);
  ASSERT_EQ(JsonString(first_status, "digest"), reference_.digest.ToHex()) << first_status;

  // The new replica has the whole log too: that it folds none of it shows that its state came
  // from the peer's snapshot, which stands at the log's end.
  const std::string second = CopyLog(data, "second");
  const std::string url = fmt::format("http://127.0.0.1:{}", admin);
  const uint16_t bootstrapped = StartServe("second", second, {"--bootstrap-from", url});
  ASSERT_GT(bootstrapped, 0);
  const std::string second_status = WaitForSlot(bootstrapped, last);
  EXPECT_EQ(JsonString(second_status, "digest"), reference_.digest.ToHex()) << second_status;
  EXPECT_EQ(JsonInt(second_status, "delegated_accounts"),
            JsonInt(first_status, "delegated_accounts"));
  auto metrics = HttpGet(bootstrapped, "/metrics");
  ASSERT_TRUE(metrics.has_value());
  EXPECT_EQ(MetricValue(metrics->body, "switchyard_fold_records_total"), 0) << metrics->body;
  EXPECT_FALSE(fs::exists(second + "/state.download"));

  auto peer_metrics = HttpGet(admin, "/metrics");
  ASSERT_TRUE(peer_metrics.has_value());
  EXPECT_EQ(
      MetricValue(peer_metrics->body, R"(switchyard_admin_snapshot_exports_total{result="ok"})"),
      1);
  EXPECT_GT(MetricValue(peer_metrics->body, "switchyard_admin_snapshot_export_bytes_total"), 0);
  EXPECT_EQ(MetricValue(peer_metrics->body,
                        R"(switchyard_admin_snapshot_export_reads_total{result="refused"})"),
            0);
  // The peer keeps one export, in its own directory.
  size_t exports = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(data + "/snapshot-export")) {
    ++exports;
  }
  EXPECT_EQ(exports, 1u);
}

TEST_F(SnapshotTest, ACorruptOrTruncatedDownloadIsRefusedAndLeavesNoState) {
  const std::string data = dir_.Sub("data");
  AppendEvents(data, 0, events_.size());
  const uint16_t admin = StartServe("first", data);
  ASSERT_GT(admin, 0);
  WaitForSlot(admin, gen_.first_slot + gen_.slots - 1);
  HttpClient client(admin, 60s);
  auto exported = client.Post("/admin/snapshot/export", "");
  ASSERT_EQ(exported.result_int(), 200u) << exported.body();
  const std::string id = JsonString(exported.body(), "id");
  ASSERT_FALSE(id.empty()) << exported.body();
  EXPECT_NE(exported.body().find(R"("name":"snapshot.manifest")"), std::string::npos);
  // Only listed files are served.
  const std::string base = "/admin/snapshot/export/" + id;
  EXPECT_EQ(HttpGet(admin, base + "/../../state/CURRENT")->status, 404u);
  EXPECT_EQ(HttpGet(admin, "/admin/snapshot/export/0-0/snapshot.manifest")->status, 404u);
  EXPECT_EQ(HttpGet(admin, base)->body, exported.body());

  std::vector<fs::path> tables;
  for (const auto& entry : fs::directory_iterator(data + "/snapshot-export/" + id + "/state")) {
    if (entry.path().extension() == ".sst") tables.push_back(entry.path());
  }
  ASSERT_FALSE(tables.empty());
  std::sort(tables.begin(), tables.end());
  const std::string url = fmt::format("http://127.0.0.1:{}{}", admin, base);
  const std::string restored = dir_.Sub("restored");

  // One byte changed after the listing was made: its SHA-256 no longer matches.
  const std::string original = Contents(tables.front());
  std::string bytes = original;
  bytes[bytes.size() / 2] = static_cast<char>(bytes[bytes.size() / 2] ^ 0x5a);
  Rewrite(tables.front(), bytes);
  const CommandResult corrupt =
      Run({"snapshot", "restore", url, "--state-dir", restored}, dir_.Sub("new"));
  EXPECT_EQ(corrupt.exit_code, 1);
  EXPECT_NE(corrupt.err.find(fmt::format("snapshot from {}: file state/{}: its SHA-256 is", url,
                                         tables.front().filename().string())),
            std::string::npos)
      << corrupt.err;
  EXPECT_NE(corrupt.err.find("(corrupt)"), std::string::npos) << corrupt.err;
  EXPECT_FALSE(fs::exists(restored));
  EXPECT_FALSE(fs::exists(restored + ".download"));

  // A file cut short: serve stops with the reason, and its data directory holds no state.
  Rewrite(tables.front(), original);
  bytes = Contents(tables.back());
  Rewrite(tables.back(), bytes.substr(0, bytes.size() / 2));
  const std::string replica = dir_.Sub("new-replica");
  const CommandResult serve = Run({"serve", "--bootstrap-from", url}, replica);
  EXPECT_EQ(serve.exit_code, 1);
  EXPECT_NE(serve.err.find(fmt::format("snapshot from {}: file state/{}: the peer sent {} bytes "
                                       "of the {} it listed (truncated)",
                                       url, tables.back().filename().string(), bytes.size() / 2,
                                       bytes.size())),
            std::string::npos)
      << serve.err;
  EXPECT_FALSE(fs::exists(replica + "/state"));
  EXPECT_FALSE(fs::exists(replica + "/state.download"));
}

TEST_F(SnapshotTest, AnUnreachablePeerStopsServeWithTheUrl) {
  const std::string url = fmt::format("http://127.0.0.1:{}", testing::FreePort());
  const std::string replica = dir_.Sub("new-replica");
  const CommandResult serve = Run({"serve", "--bootstrap-from", url}, replica);
  EXPECT_EQ(serve.exit_code, 1);
  EXPECT_NE(serve.err.find("error: snapshot from " + url + ": "), std::string::npos) << serve.err;
  EXPECT_FALSE(fs::exists(replica + "/state"));
  EXPECT_FALSE(fs::exists(replica + "/state.download"));
}

}  // namespace
}  // namespace switchyard
