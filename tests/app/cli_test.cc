#include <gtest/gtest.h>
#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>

#include <fstream>
#include <regex>

#include "app/event_json.h"
#include "engine/event_codec.h"
#include "storage/rocksdb_state_store.h"
#include "tests/support/event_generator.h"
#include "tests/support/subprocess.h"
#include "tests/support/temp_dir.h"

namespace switchyard {
namespace {

using testing::CommandResult;
using testing::RunCommand;
using testing::TempDir;

class CliTest : public ::testing::Test {
 protected:
  CommandResult Run(std::vector<std::string> args) {
    args.insert(args.begin(), SWITCHYARD_BINARY);
    args.push_back("--data-dir");
    args.push_back(dir_.Sub("data"));
    return RunCommand(args);
  }
  std::string WriteFile(const std::string& name, const std::string& content) {
    const std::string path = dir_.Sub(name);
    std::ofstream(path) << content;
    return path;
  }
  std::string WriteEvents(const std::vector<Event>& events) {
    std::string text;
    for (const Event& e : events) text += EventToJson(e) + "\n";
    return WriteFile("events.jsonl", text);
  }
  static std::string Field(const std::string& out, const std::string& key) {
    std::smatch m;
    if (!std::regex_search(out, m, std::regex(key + "=([^ \n]+)"))) return "";
    return m[1];
  }

  TempDir dir_;
};

TEST_F(CliTest, AppendRejectsAWholeFileWithAnInvalidLine) {
  const std::string path = WriteFile("bad.jsonl",
                                     "{\"kind\":\"slot_sealed\",\"slot\":1}\n"
                                     "{\"kind\":\"delegated\",\"account\":\"0OIl\",\"validator\":"
                                     "\"11111111111111111111111111111111\","
                                     "\"owner\":\"11111111111111111111111111111111\",\"slot\":2}\n"
                                     "{\"kind\":\"slot_sealed\",\"slot\":2}\n");
  CommandResult r = Run({"log", "append", "--jsonl", path});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("bad.jsonl:2:"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("field 'account'"), std::string::npos) << r.err;
  CommandResult dump = Run({"log", "dump"});
  EXPECT_EQ(dump.out, "");

  CommandResult skip = Run({"log", "append", "--jsonl", path, "--skip-invalid"});
  EXPECT_EQ(skip.exit_code, 0) << skip.err;
  EXPECT_EQ(Field(skip.out, "appended"), "2");
  EXPECT_EQ(Field(skip.out, "partitions"), "1");
  EXPECT_EQ(Field(skip.out, "skipped"), "1");
  dump = Run({"log", "dump", "--from", "1"});
  EXPECT_EQ(dump.out,
            "{\"partition\":0,\"offset\":1,\"event\":{\"kind\":\"slot_sealed\",\"slot\":2}}\n");
}

// The read-only commands work on a state written by `replay` as on the live one: the replayed
// state holds exactly the rows the live one holds up to the replay's slot, less the late
// corrections folded after it.
TEST_F(CliTest, AuditHistoryAndStateGetReadAReplayedState) {
  testing::GeneratorOptions options;
  options.slots = 60;
  options.late_fraction = 0;
  const std::vector<Event> events = testing::GenerateEvents(options);
  ASSERT_EQ(Run({"log", "append", "--jsonl", WriteEvents(events)}).exit_code, 0);
  ASSERT_EQ(Run({"fold"}).exit_code, 0);
  const std::string replayed = dir_.Sub("replayed");
  CommandResult replay = Run({"replay", "--to-slot", "30", "--out", replayed + "/state"});
  ASSERT_EQ(replay.exit_code, 0) << replay.err;
  auto on = [&](const std::string& data_dir, std::vector<std::string> args) {
    args.insert(args.begin(), SWITCHYARD_BINARY);
    args.push_back("--data-dir");
    args.push_back(data_dir);
    return RunCommand(args);
  };
  CommandResult from_replay = on(replayed, {"history", "export", "--format", "csv"});
  CommandResult from_live =
      on(dir_.Sub("data"), {"history", "export", "--to-slot", "30", "--format", "csv"});
  ASSERT_EQ(from_replay.exit_code, 0) << from_replay.err;
  ASSERT_EQ(from_live.exit_code, 0) << from_live.err;
  EXPECT_GT(std::count(from_replay.out.begin(), from_replay.out.end(), '\n'), 10);
  EXPECT_EQ(from_replay.out, from_live.out);
  const Pubkey account = testing::GeneratedAccounts(options)[0];
  CommandResult audit = on(replayed, {"audit", account.ToBase58(), "--format", "csv"});
  CommandResult live_audit =
      on(dir_.Sub("data"), {"audit", account.ToBase58(), "--to-slot", "30", "--format", "csv"});
  ASSERT_EQ(audit.exit_code, 0) << audit.err;
  EXPECT_EQ(audit.out, live_audit.out);
  EXPECT_EQ(on(replayed, {"state", "get", account.ToBase58()}).out,
            on(dir_.Sub("data"), {"state", "get", account.ToBase58(), "--at-slot", "30"}).out);
}

TEST_F(CliTest, FoldStateGetAuditReplayAndVerify) {
  testing::GeneratorOptions options;
  options.slots = 80;
  options.gap_probability = 0.05;
  const std::vector<Event> events = testing::GenerateEvents(options);
  testing::ReferenceFold reference;
  for (const Event& e : events) reference.Apply(e);
  ASSERT_EQ(Run({"log", "append", "--jsonl", WriteEvents(events)}).exit_code, 0);

  CommandResult fold = Run({"fold"});
  ASSERT_EQ(fold.exit_code, 0) << fold.err;
  EXPECT_EQ(Field(fold.out, "applied_slot"), "80");
  EXPECT_EQ(Field(fold.out, "digest"), reference.digest.ToHex());
  EXPECT_EQ(Field(fold.out, "next_offset"), std::to_string(events.size()));

  // An account that is delegated now.
  const auto delegated = reference.Delegated();
  ASSERT_FALSE(delegated.empty());
  const auto& [account, state] = *delegated.begin();
  CommandResult get = Run({"state", "get", account.ToBase58()});
  ASSERT_EQ(get.exit_code, 0) << get.err;
  EXPECT_EQ(Field(get.out, "status"), "delegated");
  EXPECT_EQ(Field(get.out, "validator"), state.validator.ToBase58());
  EXPECT_EQ(Field(get.out, "delegation_slot"), std::to_string(state.delegation_slot));
  CommandResult before = Run({"state", "get", account.ToBase58(), "--at-slot", "0"});
  EXPECT_EQ(Field(before.out, "status"), "unknown");
  CommandResult bad = Run({"state", "get", "not-a-key"});
  EXPECT_EQ(bad.exit_code, 1);

  CommandResult audit = Run({"audit", account.ToBase58()});
  ASSERT_EQ(audit.exit_code, 0) << audit.err;
  size_t account_events = 0;
  for (const Event& e : events) {
    if (AccountOf(e) != nullptr && *AccountOf(e) == account) ++account_events;
  }
  EXPECT_EQ(static_cast<size_t>(std::count(audit.out.begin(), audit.out.end(), '\n')),
            account_events + 1);  // plus the header

  for (Slot s : {Slot{1}, Slot{17}, Slot{40}, Slot{80}}) {
    const std::string out = dir_.Sub("replay-" + std::to_string(s));
    CommandResult replay = Run({"replay", "--to-slot", std::to_string(s), "--out", out});
    ASSERT_EQ(replay.exit_code, 0) << replay.err;
    EXPECT_EQ(Field(replay.out, "digest"), reference.sealed_digests.at(s).ToHex()) << s;
  }
  CommandResult too_far = Run({"replay", "--to-slot", "500", "--out", dir_.Sub("far")});
  EXPECT_EQ(too_far.exit_code, 1);
  EXPECT_NE(too_far.err.find("only up to 80"), std::string::npos) << too_far.err;

  CommandResult verify = Run({"verify"});
  EXPECT_EQ(verify.exit_code, 0) << verify.out << verify.err;
  EXPECT_EQ(Field(verify.out, "result"), "ok");
}

TEST_F(CliTest, VerifyFailsWhenTheLiveStateDisagreesWithTheLog) {
  testing::GeneratorOptions options;
  options.slots = 20;
  ASSERT_EQ(
      Run({"log", "append", "--jsonl", WriteEvents(testing::GenerateEvents(options))}).exit_code,
      0);
  ASSERT_EQ(Run({"fold"}).exit_code, 0);
  {
    // Tamper with the live state: a delegation the log never contained.
    auto store = RocksDbStateStore::Open(dir_.Sub("data") + "/state");
    ASSERT_TRUE(store.ok()) << store.status();
    auto position = (*store)->Position();
    FoldBatch batch;
    batch.position = *position;
    AccountState forged;
    forged.delegated = true;
    forged.delegation_slot = 5;
    batch.accounts.push_back({Pubkey(), forged});
    batch.position.digest.Add(Pubkey(), forged);
    ASSERT_TRUE((*store)->Commit(batch).ok());
  }
  CommandResult verify = Run({"verify"});
  EXPECT_EQ(verify.exit_code, 1);
  EXPECT_EQ(Field(verify.out, "result"), "MISMATCH");
}

// The same commands on a Kafka log: librdkafka's mock cluster, in this process, serves the
// command-line processes over loopback.
TEST_F(CliTest, FoldReplayAndVerifyOnAKafkaLog) {
  rd_kafka_conf_t* conf = rd_kafka_conf_new();
  char error[256];
  ASSERT_EQ(rd_kafka_conf_set(conf, "test.mock.num.brokers", "2", error, sizeof(error)),
            RD_KAFKA_CONF_OK);
  rd_kafka_t* host = rd_kafka_new(RD_KAFKA_PRODUCER, conf, error, sizeof(error));
  ASSERT_NE(host, nullptr) << error;
  rd_kafka_mock_cluster_t* cluster = rd_kafka_handle_mock_cluster(host);
  ASSERT_EQ(rd_kafka_mock_topic_create(cluster, "delegations", 3, 1), RD_KAFKA_RESP_ERR_NO_ERROR);
  const std::string url =
      std::string("kafka://") + rd_kafka_mock_cluster_bootstraps(cluster) + "/delegations";

  testing::GeneratorOptions options;
  options.slots = 40;
  options.late_fraction = 0;
  const std::vector<Event> events = testing::GenerateEvents(options);
  testing::ReferenceFold reference;
  for (const Event& e : events) reference.Apply(e);
  CommandResult append = Run({"log", "append", "--jsonl", WriteEvents(events), "--log", url});
  ASSERT_EQ(append.exit_code, 0) << append.err;
  EXPECT_EQ(Field(append.out, "partitions"), "3");

  CommandResult fold = Run({"fold", "--log", url});
  ASSERT_EQ(fold.exit_code, 0) << fold.err;
  EXPECT_EQ(Field(fold.out, "applied_slot"), "40");
  EXPECT_EQ(Field(fold.out, "digest"), reference.digest.ToHex());
  CommandResult replay =
      Run({"replay", "--to-slot", "25", "--out", dir_.Sub("replay"), "--log", url});
  ASSERT_EQ(replay.exit_code, 0) << replay.err;
  EXPECT_EQ(Field(replay.out, "digest"), reference.sealed_digests.at(25).ToHex());
  CommandResult verify = Run({"verify", "--log", url});
  EXPECT_EQ(verify.exit_code, 0) << verify.out << verify.err;
  EXPECT_EQ(Field(verify.out, "result"), "ok");
  CommandResult bad = Run({"fold", "--log", "kafka://nowhere"});
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.err.find("kafka://HOST:PORT/TOPIC"), std::string::npos) << bad.err;
  rd_kafka_destroy(host);
}

TEST_F(CliTest, ConfigErrorsNameTheKeyAndTheFile) {
  const std::string bad_type = WriteFile("bad-type.toml", "[fold]\nmax_batch_records = \"many\"\n");
  CommandResult r = Run({"fold", "--config", bad_type});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("bad-type.toml"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("'fold.max_batch_records'"), std::string::npos) << r.err;

  const std::string unknown = WriteFile("unknown.toml", "[storage]\ndata_dri = \"x\"\n");
  r = Run({"fold", "--config", unknown});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("unknown.toml: unknown key 'storage.data_dri'"), std::string::npos) << r.err;

  const std::string syntax = WriteFile("syntax.toml", "[fold\n");
  r = Run({"fold", "--config", syntax});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("syntax.toml:1:"), std::string::npos) << r.err;

  const std::string good = WriteFile("good.toml", "[fold]\nmax_batch_records = 10\n");
  EXPECT_EQ(Run({"fold", "--config", good}).exit_code, 0);
}

// --base takes several endpoints, repeated or comma-separated, in order: the second one here
// is refused by its index.
TEST_F(CliTest, IngestBaseTakesSeveralEndpointsInOrder) {
  for (const std::vector<std::string>& bases :
       {std::vector<std::string>{"--base", "http://127.0.0.1:1,wss://127.0.0.1:2"},
        std::vector<std::string>{"--base", "http://127.0.0.1:1", "--base", "wss://127.0.0.1:2"}}) {
    std::vector<std::string> args = {"ingest"};
    args.insert(args.end(), bases.begin(), bases.end());
    const CommandResult r = Run(args);
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find("base-layer endpoint 1: 'wss://127.0.0.1:2' is not an http:// or "
                         "https:// URL"),
              std::string::npos)
        << r.err;
  }
  const CommandResult none = Run({"ingest"});
  EXPECT_EQ(none.exit_code, 2);
  EXPECT_NE(none.err.find("ingest needs --base, ingest.endpoints or ingest.base_url"),
            std::string::npos)
      << none.err;
}

}  // namespace
}  // namespace switchyard
