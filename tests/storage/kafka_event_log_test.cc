#include "storage/kafka_event_log.h"

#include <gtest/gtest.h>
#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>

#include <map>
#include <set>
#include <thread>

#include "common/metrics.h"
#include "engine/event_codec.h"
#include "engine/fold_runner.h"
#include "storage/rocksdb_state_store.h"
#include "storage/state_snapshot.h"
#include "tests/support/event_generator.h"
#include "tests/support/temp_dir.h"

// GCC 12 reports a false -Wrestrict on `"literal" + std::string` (GCC bug 105329).
#pragma GCC diagnostic ignored "-Wrestrict"

namespace switchyard {
namespace {

// librdkafka's mock cluster: real Kafka protocol on loopback, in this process.
class MockKafka {
 public:
  explicit MockKafka(int brokers = 3) {
    rd_kafka_conf_t* conf = rd_kafka_conf_new();
    char error[256];
    rd_kafka_conf_set(conf, "test.mock.num.brokers", std::to_string(brokers).c_str(), error,
                      sizeof(error));
    rd_kafka_conf_set(conf, "log_level", "0", error, sizeof(error));
    host_ = rd_kafka_new(RD_KAFKA_PRODUCER, conf, error, sizeof(error));
    cluster_ = rd_kafka_handle_mock_cluster(host_);
    bootstraps_ = rd_kafka_mock_cluster_bootstraps(cluster_);
  }
  ~MockKafka() { rd_kafka_destroy(host_); }

  void CreateTopic(const std::string& topic, int partitions) {
    ASSERT_EQ(rd_kafka_mock_topic_create(cluster_, topic.c_str(), partitions, 1),
              RD_KAFKA_RESP_ERR_NO_ERROR);
  }
  rd_kafka_mock_cluster_t* cluster() { return cluster_; }
  const std::string& bootstraps() const { return bootstraps_; }

 private:
  rd_kafka_t* host_;
  rd_kafka_mock_cluster_t* cluster_;
  std::string bootstraps_;
};

KafkaEventLogOptions Options(const MockKafka& kafka, const std::string& topic) {
  KafkaEventLogOptions options;
  options.brokers = kafka.bootstraps();
  options.topic = topic;
  // The mock cluster does not implement CreateTopics: keep the attempt short.
  options.request_timeout = absl::Seconds(1);
  options.properties = {{"log_level", "0"}};
  return options;
}

std::vector<OutgoingRecord> Records(const std::vector<Event>& events, int32_t partitions) {
  std::vector<OutgoingRecord> out;
  for (const Event& e : events) {
    for (auto& r : ToLogRecords(e, partitions)) out.push_back(std::move(r));
  }
  return out;
}

// Reads until `count` records arrived or the deadline passed.
std::vector<std::tuple<int32_t, int64_t, std::string>> ReadAll(EventLogReader& reader,
                                                               size_t count) {
  std::vector<std::tuple<int32_t, int64_t, std::string>> out;
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (out.size() < count && absl::Now() < deadline) {
    auto n = reader.Poll(count - out.size(), absl::Milliseconds(100), [&](const LogRecordView& r) {
      out.emplace_back(r.partition, r.offset, std::string(r.payload));
    });
    EXPECT_TRUE(n.ok()) << n.status();
    if (!n.ok()) break;
  }
  return out;
}

// For a failure message: per partition, how many records were read, the offsets missing
// among them, and the partition's high watermark as the cluster reports it.
std::string ReadVersusLog(const MockKafka& kafka, const std::string& topic, int32_t partitions,
                          const std::vector<std::tuple<int32_t, int64_t, std::string>>& read) {
  char error[256];
  rd_kafka_conf_t* conf = rd_kafka_conf_new();
  rd_kafka_conf_set(conf, "bootstrap.servers", kafka.bootstraps().c_str(), error, sizeof(error));
  rd_kafka_conf_set(conf, "group.id", "diagnostic", error, sizeof(error));
  rd_kafka_conf_set(conf, "log_level", "0", error, sizeof(error));
  rd_kafka_t* consumer = rd_kafka_new(RD_KAFKA_CONSUMER, conf, error, sizeof(error));
  std::string out;
  for (int32_t p = 0; p < partitions; ++p) {
    std::set<int64_t> offsets;
    for (const auto& [partition, offset, payload] : read) {
      if (partition == p) offsets.insert(offset);
    }
    int64_t low = -1, high = -1;
    const rd_kafka_resp_err_t err =
        rd_kafka_query_watermark_offsets(consumer, topic.c_str(), p, &low, &high, 5000);
    std::string missing;
    for (int64_t o = 0; o < high; ++o) {
      if (!offsets.contains(o)) missing += " " + std::to_string(o);
    }
    out += "partition " + std::to_string(p) + ": read " + std::to_string(offsets.size()) +
           ", high watermark " + std::to_string(high) + " (" + rd_kafka_err2str(err) +
           "), offsets not read:" + (missing.empty() ? " none" : missing) + "\n";
  }
  rd_kafka_destroy(consumer);
  return out;
}

TEST(KafkaEventLogTest, AccountEventsStayInOnePartitionAndWatermarksReachEvery) {
  MockKafka kafka;
  kafka.CreateTopic("delegations", 4);
  auto log = KafkaEventLog::Open(Options(kafka, "delegations"));
  ASSERT_TRUE(log.ok()) << log.status();
  EXPECT_EQ((*log)->partition_count(), 4);
  testing::GeneratorOptions gen;
  gen.slots = 20;
  const auto events = testing::GenerateEvents(gen);
  const auto records = Records(events, 4);
  ASSERT_TRUE((*log)->Append(records).ok());

  auto reader = (*log)->OpenReader();
  ASSERT_TRUE(reader.ok()) << reader.status();
  const auto read = ReadAll(**reader, records.size());
  ASSERT_EQ(read.size(), records.size());
  std::map<Pubkey, int32_t> partition_of;
  std::map<int32_t, std::vector<Slot>> seals;
  std::map<int32_t, int64_t> last_offset;
  for (const auto& [partition, offset, payload] : read) {
    EXPECT_GT(offset, last_offset.count(partition) ? last_offset[partition] : -1);
    last_offset[partition] = offset;
    auto event = DecodeEvent(payload);
    ASSERT_TRUE(event.ok());
    if (const Pubkey* account = AccountOf(*event)) {
      auto [it, inserted] = partition_of.emplace(*account, partition);
      EXPECT_EQ(it->second, partition) << "an account's events split across partitions";
    } else if (const auto* seal = std::get_if<SlotSealedEvent>(&*event)) {
      seals[partition].push_back(seal->slot);
    }
  }
  ASSERT_EQ(seals.size(), 4u);
  for (const auto& [partition, slots] : seals) EXPECT_EQ(slots.size(), gen.slots) << partition;
  std::set<int32_t> used;
  for (const auto& [account, partition] : partition_of) used.insert(partition);
  EXPECT_EQ(used.size(), 4u);
  auto end = (*reader)->EndOffset(0);
  ASSERT_TRUE(end.ok());
  EXPECT_EQ(*end, last_offset[0] + 1);
}

TEST(KafkaEventLogTest, FoldOverPartitionsMatchesTheReferenceAndResumesFromStoredOffsets) {
  MockKafka kafka;
  kafka.CreateTopic("delegations", 3);
  auto log = KafkaEventLog::Open(Options(kafka, "delegations"));
  ASSERT_TRUE(log.ok()) << log.status();
  testing::GeneratorOptions gen;
  gen.slots = 120;
  gen.late_fraction = 0;
  gen.gap_probability = 0.05;
  const auto events = testing::GenerateEvents(gen);
  testing::ReferenceFold reference;
  for (const Event& e : events) reference.Apply(e);
  const size_t half = events.size() / 2;
  ASSERT_TRUE((*log)->Append(Records({events.begin(), events.begin() + half}, 3)).ok());

  testing::TempDir dir;
  SystemClock clock;
  {
    auto store = RocksDbStateStore::Open(dir.Sub("state"));
    auto reader = (*log)->OpenReader();
    ASSERT_TRUE(reader.ok());
    FoldRunner runner(FoldRunnerOptions(), reader->get(), store->get(), nullptr, &clock);
    ASSERT_TRUE(runner.Init().ok());
    ASSERT_TRUE(runner.RunUntilCaughtUp().ok());
    EXPECT_GT(runner.fold().position().applied_slot, 0u);
  }
  ASSERT_TRUE((*log)->Append(Records({events.begin() + half, events.end()}, 3)).ok());
  auto store = RocksDbStateStore::Open(dir.Sub("state"));
  auto reader = (*log)->OpenReader();
  ASSERT_TRUE(reader.ok());
  SnapshotHolder snapshots;
  FoldRunner runner(FoldRunnerOptions(), reader->get(), store->get(), &snapshots, &clock);
  ASSERT_TRUE(runner.Init().ok());
  ASSERT_TRUE(runner.RunUntilCaughtUp().ok());
  EXPECT_EQ(snapshots.Current()->applied_slot(), gen.first_slot + gen.slots - 1);
  EXPECT_EQ(snapshots.Current()->digest(), reference.digest);
  auto sealed = (*store)->SealedDigests();
  ASSERT_TRUE(sealed.ok());
  for (const auto& [slot, digest] : *sealed) EXPECT_EQ(digest, reference.sealed_digests.at(slot));
  auto rows = (*store)->CountHistoryRows();
  ASSERT_TRUE(rows.ok());
  EXPECT_EQ(*rows, reference.account_events) << "events applied twice or lost";
}

// The mock cluster keeps about 5 MiB per partition and drops the oldest record batches past
// that: its retention. Writes `bytes` of records no fold can decode to `partition`.
void FillPastTheMockRetention(EventLog& log, int32_t partition, size_t bytes) {
  const std::string payload(64 << 10, 'x');
  std::vector<OutgoingRecord> padding;
  for (size_t written = 0; written < bytes; written += payload.size()) {
    padding.push_back({"padding", payload, partition});
  }
  ASSERT_TRUE(log.Append(padding).ok());
}

TEST(KafkaEventLogTest, AFoldFromOffsetZeroRefusesATopicWhoseEarlyRecordsAreGone) {
  MockKafka kafka;
  kafka.CreateTopic("retained", 1);
  auto log = KafkaEventLog::Open(Options(kafka, "retained"));
  ASSERT_TRUE(log.ok()) << log.status();
  testing::GeneratorOptions gen;
  gen.slots = 20;
  ASSERT_TRUE((*log)->Append(Records(testing::GenerateEvents(gen), 1)).ok());
  FillPastTheMockRetention(**log, 0, 8 << 20);
  auto reader = (*log)->OpenReader();
  ASSERT_TRUE(reader.ok());
  auto start = (*reader)->StartOffset(0);
  ASSERT_TRUE(start.ok()) << start.status();
  ASSERT_GT(*start, 0) << "the mock cluster kept every record";

  testing::TempDir dir;
  auto store = RocksDbStateStore::Open(dir.Sub("state"));
  SnapshotHolder snapshots;
  SystemClock clock;
  MetricsRegistry registry;
  FoldMetrics metrics(registry);
  FoldRunner runner(FoldRunnerOptions(), reader->get(), store->get(), &snapshots, &clock, &metrics);
  ASSERT_TRUE(runner.Init().ok());
  const absl::Status refused = runner.RunUntilCaughtUp();
  EXPECT_EQ(refused.code(), absl::StatusCode::kFailedPrecondition) << refused;
  EXPECT_NE(
      refused.message().find("log hole: partition 0 starts at offset " + std::to_string(*start)),
      std::string_view::npos)
      << refused;
  EXPECT_EQ(runner.log_hole(), (LogHole{0, 0, *start}));
  EXPECT_EQ(metrics.log_hole.value(), 1);
  EXPECT_EQ(metrics.log_holes.value(), 1u);
  EXPECT_EQ(metrics.records.value(), 0u);
  EXPECT_EQ(snapshots.Current()->applied_slot(), 0u);
}

TEST(KafkaEventLogTest, AReplicaBootstrappedFromASnapshotFoldsOnPastTheRetentionHole) {
  MockKafka kafka;
  kafka.CreateTopic("retained", 1);
  auto log = KafkaEventLog::Open(Options(kafka, "retained"));
  ASSERT_TRUE(log.ok()) << log.status();
  testing::GeneratorOptions gen;
  gen.slots = 40;
  const auto events = testing::GenerateEvents(gen);
  // The first half ends with a seal, so no record of it waits for one behind the padding.
  size_t half = events.size() / 2;
  while (!std::holds_alternative<SlotSealedEvent>(events[half - 1])) --half;
  testing::ReferenceFold reference;
  for (const Event& e : events) reference.Apply(e);
  testing::TempDir dir;
  SystemClock clock;
  auto live = RocksDbStateStore::Open(dir.Sub("live"));
  auto live_reader = (*log)->OpenReader();
  ASSERT_TRUE(live_reader.ok());
  FoldRunner live_runner(FoldRunnerOptions(), live_reader->get(), live->get(), nullptr, &clock);
  ASSERT_TRUE(live_runner.Init().ok());
  // A live replica folds the first half and the padding behind it in step with the log, so
  // it has read every record before the mock's retention drops the early ones.
  ASSERT_TRUE((*log)->Append(Records({events.begin(), events.begin() + half}, 1)).ok());
  ASSERT_TRUE(live_runner.RunUntilCaughtUp().ok());
  for (int chunk = 0; chunk < 8; ++chunk) {
    FillPastTheMockRetention(**log, 0, 1 << 20);
    ASSERT_TRUE(live_runner.RunUntilCaughtUp().ok());
  }
  auto start = (*live_reader)->StartOffset(0);
  ASSERT_TRUE(start.ok()) << start.status();
  ASSERT_GT(*start, 0) << "the mock cluster kept every record";
  // The padding does not decode: quarantined, and the position moves past it.
  auto made = CreateStateSnapshot(**live, dir.Sub("snapshot"));
  ASSERT_TRUE(made.ok()) << made.status();
  ASSERT_GE(made->next_offsets.at(0), *start);

  ASSERT_TRUE((*log)->Append(Records({events.begin() + half, events.end()}, 1)).ok());
  ASSERT_TRUE(live_runner.RunUntilCaughtUp().ok());
  ASSERT_TRUE(RestoreStateSnapshot(dir.Sub("snapshot"), dir.Sub("bootstrapped")).ok());
  auto bootstrapped = RocksDbStateStore::Open(dir.Sub("bootstrapped"));
  auto reader = (*log)->OpenReader();
  ASSERT_TRUE(reader.ok());
  FoldRunner runner(FoldRunnerOptions(), reader->get(), bootstrapped->get(), nullptr, &clock);
  ASSERT_TRUE(runner.Init().ok());
  const absl::Status folded = runner.RunUntilCaughtUp();
  ASSERT_TRUE(folded.ok()) << folded;
  EXPECT_EQ(runner.fold().position().digest, reference.digest);
  EXPECT_EQ(runner.fold().position().digest, live_runner.fold().position().digest);
  EXPECT_EQ(runner.fold().position().applied_slot, live_runner.fold().position().applied_slot);
  EXPECT_EQ(*(*bootstrapped)->SealedDigests(), *(*live)->SealedDigests());
}

TEST(KafkaEventLogTest, RetriedProduceErrorsWriteEachRecordOnce) {
  MockKafka kafka;
  kafka.CreateTopic("delegations", 2);
  auto log = KafkaEventLog::Open(Options(kafka, "delegations"));
  ASSERT_TRUE(log.ok()) << log.status();
  rd_kafka_mock_push_request_errors(
      kafka.cluster(), /*Produce=*/0, 4, RD_KAFKA_RESP_ERR_NOT_LEADER_FOR_PARTITION,
      RD_KAFKA_RESP_ERR_REQUEST_TIMED_OUT, RD_KAFKA_RESP_ERR_NOT_ENOUGH_REPLICAS,
      RD_KAFKA_RESP_ERR_NOT_LEADER_FOR_PARTITION);
  testing::GeneratorOptions gen;
  gen.slots = 10;
  const auto records = Records(testing::GenerateEvents(gen), 2);
  ASSERT_TRUE((*log)->Append(records).ok());
  auto reader = (*log)->OpenReader();
  ASSERT_TRUE(reader.ok());
  auto read = ReadAll(**reader, records.size());
  ASSERT_EQ(read.size(), records.size()) << ReadVersusLog(kafka, "delegations", 2, read);
  // Nothing beyond them: no record was written twice.
  auto more = (*reader)->Poll(10, absl::Seconds(1), [&](const LogRecordView& r) {
    read.emplace_back(r.partition, r.offset, std::string(r.payload));
  });
  ASSERT_TRUE(more.ok());
  EXPECT_EQ(*more, 0u);
  std::multiset<std::string> sent;
  for (const auto& r : records) sent.insert(r.payload);
  std::multiset<std::string> got;
  for (const auto& [p, o, payload] : read) got.insert(payload);
  EXPECT_EQ(got, sent);
}

// A watermark is produced only after the events before it are acknowledged: when those
// events cannot be written, no SlotSealed reaches the log.
TEST(KafkaEventLogTest, AWatermarkNeverGoesOutAheadOfEventsThatFailed) {
  MockKafka kafka;
  kafka.CreateTopic("delegations", 3);
  KafkaEventLogOptions options = Options(kafka, "delegations");
  options.delivery_timeout = absl::Seconds(2);
  auto log = KafkaEventLog::Open(options);
  ASSERT_TRUE(log.ok()) << log.status();
  std::vector<Event> events;
  for (uint8_t a = 1; a <= 24; ++a) events.emplace_back(testing::TestDelegation(a, 7));
  events.emplace_back(SlotSealedEvent{7});
  const auto records = Records(events, 3);
  // Partition p is led by broker p + 1; broker 1 fails every produce request with an error
  // the producer retries until the delivery deadline, the others accept them.
  for (int32_t p = 0; p < 3; ++p) {
    ASSERT_EQ(rd_kafka_mock_partition_set_leader(kafka.cluster(), "delegations", p, p + 1),
              RD_KAFKA_RESP_ERR_NO_ERROR);
  }
  for (int i = 0; i < 200; ++i) {
    rd_kafka_mock_broker_push_request_error_rtts(kafka.cluster(), 1, /*Produce=*/0, 1,
                                                 RD_KAFKA_RESP_ERR_NOT_ENOUGH_REPLICAS, 0);
  }
  const absl::Status appended = (*log)->Append(records);
  EXPECT_FALSE(appended.ok());

  auto reader = (*log)->OpenReader();
  ASSERT_TRUE(reader.ok());
  size_t seals = 0;
  auto read = (*reader)->Poll(1000, absl::Seconds(2), [&](const LogRecordView& r) {
    auto event = DecodeEvent(r.payload);
    if (event.ok() && std::holds_alternative<SlotSealedEvent>(*event)) ++seals;
  });
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(seals, 0u) << "a SlotSealed was written although its events were not";
}

// Brokers that go away and come back, and fetch requests that fail, are not errors for the
// reader: librdkafka reconnects and fetches again from the same position.
TEST(KafkaEventLogTest, ReaderRidesOutBrokersDownAndFetchErrors) {
  MockKafka kafka;
  kafka.CreateTopic("delegations", 3);
  auto log = KafkaEventLog::Open(Options(kafka, "delegations"));
  ASSERT_TRUE(log.ok()) << log.status();
  testing::GeneratorOptions gen;
  gen.slots = 30;
  const auto records = Records(testing::GenerateEvents(gen), 3);
  ASSERT_TRUE((*log)->Append(records).ok());

  auto reader = (*log)->OpenReader();
  ASSERT_TRUE(reader.ok());
  std::vector<std::tuple<int32_t, int64_t, std::string>> read;
  auto poll = [&](absl::Duration timeout) {
    auto n = (*reader)->Poll(50, timeout, [&](const LogRecordView& r) {
      read.emplace_back(r.partition, r.offset, std::string(r.payload));
    });
    EXPECT_TRUE(n.ok()) << n.status();
  };
  poll(absl::Seconds(5));
  ASSERT_GT(read.size(), 0u);
  ASSERT_EQ(rd_kafka_mock_broker_set_down(kafka.cluster(), -1), RD_KAFKA_RESP_ERR_NO_ERROR);
  const absl::Time down_until = absl::Now() + absl::Seconds(2);
  while (absl::Now() < down_until) poll(absl::Milliseconds(100));
  ASSERT_EQ(rd_kafka_mock_broker_set_up(kafka.cluster(), -1), RD_KAFKA_RESP_ERR_NO_ERROR);
  rd_kafka_mock_push_request_errors(
      kafka.cluster(), /*Fetch=*/1, 4, RD_KAFKA_RESP_ERR_NOT_LEADER_FOR_PARTITION,
      RD_KAFKA_RESP_ERR_REQUEST_TIMED_OUT, RD_KAFKA_RESP_ERR_LEADER_NOT_AVAILABLE,
      RD_KAFKA_RESP_ERR_NOT_LEADER_FOR_PARTITION);
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (read.size() < records.size() && absl::Now() < deadline) poll(absl::Milliseconds(100));
  ASSERT_EQ(read.size(), records.size());
  std::map<int32_t, int64_t> next;
  for (const auto& [partition, offset, payload] : read) {
    EXPECT_EQ(offset, next[partition]) << "partition " << partition << " skipped or repeated";
    next[partition] = offset + 1;
  }
}

// Reads the whole topic and checks that it holds `records` exactly once each, every partition
// in the order the records were appended.
void ExpectEachRecordOnceInOrder(EventLog& log, const std::vector<OutgoingRecord>& records,
                                 int32_t partitions) {
  auto reader = log.OpenReader();
  ASSERT_TRUE(reader.ok()) << reader.status();
  int64_t total = 0;
  for (int32_t p = 0; p < partitions; ++p) {
    auto start = (*reader)->StartOffset(p);
    auto end = (*reader)->EndOffset(p);
    ASSERT_TRUE(start.ok() && end.ok());
    ASSERT_EQ(*start, 0);
    total += *end;
  }
  EXPECT_EQ(total, static_cast<int64_t>(records.size())) << "records lost or written twice";
  const auto read = ReadAll(**reader, static_cast<size_t>(total));
  ASSERT_EQ(read.size(), static_cast<size_t>(total));
  std::map<std::string, int> surplus;  // per payload, copies read minus copies appended
  for (const OutgoingRecord& r : records) --surplus[r.payload];
  for (const auto& [partition, offset, payload] : read) ++surplus[payload];
  int lost = 0;
  int repeated = 0;
  for (const auto& [payload, n] : surplus) (n < 0 ? lost : repeated) += std::abs(n);
  EXPECT_EQ(lost, 0) << "records appended but not in the topic";
  EXPECT_EQ(repeated, 0) << "records in the topic more than once";
  // Each record read in a partition comes after the one before it in `records`.
  std::map<int32_t, size_t> next;
  for (const auto& [partition, offset, payload] : read) {
    size_t i = next[partition];
    while (i < records.size() && (records[i].payload != payload ||
                                  records[i].partition.value_or(partition) != partition)) {
      ++i;
    }
    ASSERT_LT(i, records.size()) << "partition " << partition << " offset " << offset
                                 << " is out of the order of the appends";
    next[partition] = i + 1;
  }
}

// Delegations of accounts [first, first + count) at `slot`, then the slot's seal.
std::vector<Event> SealedSlot(uint8_t first, uint8_t count, Slot slot) {
  std::vector<Event> events;
  for (uint8_t a = first; a < first + count; ++a)
    events.emplace_back(testing::TestDelegation(a, slot));
  events.emplace_back(SlotSealedEvent{slot});
  return events;
}

// A fatal error that strikes the idempotent producer between two Appends: the next Append
// replaces the producer and writes its records.
TEST(KafkaEventLogTest, AFatalProducerErrorBetweenAppendsIsRecoveredByTheNextAppend) {
  MockKafka kafka;
  kafka.CreateTopic("delegations", 3);
  MetricsRegistry registry;
  KafkaLogMetrics metrics(registry);
  KafkaEventLogOptions options = Options(kafka, "delegations");
  options.metrics = &metrics;
  auto log = KafkaEventLog::Open(options);
  ASSERT_TRUE(log.ok()) << log.status();
  const auto first = Records(SealedSlot(1, 20, 7), 3);
  const auto second = Records(SealedSlot(21, 20, 8), 3);
  ASSERT_TRUE((*log)->Append(first).ok());
  ASSERT_EQ(rd_kafka_test_fatal_error((*log)->producer_for_testing(),
                                      RD_KAFKA_RESP_ERR_OUT_OF_ORDER_SEQUENCE_NUMBER,
                                      "raised by the test"),
            RD_KAFKA_RESP_ERR_NO_ERROR);
  const absl::Status appended = (*log)->Append(second);
  ASSERT_TRUE(appended.ok()) << appended;
  EXPECT_EQ(metrics.producer_recreations.value(), 1u);
  std::vector<OutgoingRecord> all = first;
  all.insert(all.end(), second.begin(), second.end());
  ExpectEachRecordOnceInOrder(**log, all, 3);
}

// A fatal error in the middle of an Append, with the records of two partitions already in the
// topic but not acknowledged (their answers are late) and those of the third not sent (it has
// no leader). The Append replaces the producer, finds the first ones in the topic and writes
// only the others: a blind resend would write the first ones twice, and trusting the delivery
// reports alone would lose them or the others. The first records are written by the writer
// itself (it knows where each partition ended from their acknowledgements) or by another log
// (it does not, and reads back as many records from the end as it produced).
void ExpectAFatalErrorMidAppendWritesEachRecordOnceInOrder(bool writer_wrote_the_first) {
  MockKafka kafka;
  kafka.CreateTopic("delegations", 3);
  for (int32_t p = 0; p < 3; ++p) {
    ASSERT_EQ(rd_kafka_mock_partition_set_leader(kafka.cluster(), "delegations", p, p + 1),
              RD_KAFKA_RESP_ERR_NO_ERROR);
  }
  MetricsRegistry registry;
  KafkaLogMetrics metrics(registry);
  auto log = KafkaEventLog::Open(Options(kafka, "delegations"));
  ASSERT_TRUE(log.ok()) << log.status();
  KafkaEventLogOptions options = Options(kafka, "delegations");
  options.metrics = &metrics;
  auto writer = KafkaEventLog::Open(options);
  ASSERT_TRUE(writer.ok()) << writer.status();
  const auto first = Records(SealedSlot(1, 20, 7), 3);
  ASSERT_TRUE((writer_wrote_the_first ? *writer : *log)->Append(first).ok());

  const std::vector<Event> events = SealedSlot(21, 24, 8);
  const auto second = Records(events, 3);
  // Where librdkafka's default partitioner (consistent_random: CRC32 of the key) puts each of
  // the slot's delegations: every partition gets some.
  std::map<int32_t, int> delegations;
  for (const OutgoingRecord& r : second) {
    if (r.partition.has_value()) break;
    ++delegations[rd_kafka_msg_partitioner_consistent_random(nullptr, r.key.data(), r.key.size(), 3,
                                                             nullptr, nullptr)];
  }
  ASSERT_EQ(delegations.size(), 3u);
  auto watcher = (*log)->OpenReader();
  ASSERT_TRUE(watcher.ok());
  auto end_of = [&](int32_t p) -> int64_t {
    auto end = (*watcher)->EndOffset(p);
    return end.ok() ? *end : -1;
  };
  const int64_t before[2] = {end_of(0), end_of(1)};
  ASSERT_GT(before[0], 0);
  ASSERT_GT(before[1], 0);
  // Brokers 1 and 2 append the first produce request of the Append at once but answer it 10 s
  // later (and, as Kafka does, read nothing more from that connection meanwhile); partition 2
  // has no leader, so its records wait in the producer.
  for (int32_t broker : {1, 2}) {
    ASSERT_EQ(rd_kafka_mock_broker_push_request_error_rtts(kafka.cluster(), broker, /*Produce=*/0,
                                                           1, RD_KAFKA_RESP_ERR_NO_ERROR, 10000),
              RD_KAFKA_RESP_ERR_NO_ERROR);
  }
  ASSERT_EQ(rd_kafka_mock_partition_set_leader(kafka.cluster(), "delegations", 2, -1),
            RD_KAFKA_RESP_ERR_NO_ERROR);

  absl::Status appended = absl::UnknownError("Append did not return");
  std::thread appender([&] { appended = (*writer)->Append(second); });
  const absl::Time deadline = absl::Now() + absl::Seconds(8);
  while ((end_of(0) <= before[0] || end_of(1) <= before[1]) && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  const int64_t reached[2] = {end_of(0), end_of(1)};
  rd_kafka_test_fatal_error((*writer)->producer_for_testing(),
                            RD_KAFKA_RESP_ERR_OUT_OF_ORDER_SEQUENCE_NUMBER, "raised by the test");
  ASSERT_EQ(rd_kafka_mock_partition_set_leader(kafka.cluster(), "delegations", 2, 3),
            RD_KAFKA_RESP_ERR_NO_ERROR);
  appender.join();
  ASSERT_GT(reached[0], before[0]) << "no delegation reached partition 0 before the error";
  ASSERT_GT(reached[1], before[1]) << "no delegation reached partition 1 before the error";
  ASSERT_TRUE(appended.ok()) << appended;
  EXPECT_EQ(metrics.producer_recreations.value(), 1u);
  std::vector<OutgoingRecord> all = first;
  all.insert(all.end(), second.begin(), second.end());
  ExpectEachRecordOnceInOrder(**log, all, 3);
}

TEST(KafkaEventLogTest, AFatalProducerErrorMidAppendWritesEachRecordOnceInOrder) {
  ExpectAFatalErrorMidAppendWritesEachRecordOnceInOrder(/*writer_wrote_the_first=*/true);
}

TEST(KafkaEventLogTest, AFatalProducerErrorMidAppendOfANewWriterWritesEachRecordOnceInOrder) {
  ExpectAFatalErrorMidAppendWritesEachRecordOnceInOrder(/*writer_wrote_the_first=*/false);
}

// A topic the cluster reports missing (and does not let this client create) is a NotFound
// error that names the topic and the brokers.
TEST(KafkaEventLogTest, MissingTopicThatCannotBeCreatedIsANotFoundErrorNamingIt) {
  MockKafka kafka;
  rd_kafka_mock_topic_set_error(kafka.cluster(), "absent", RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART);
  KafkaEventLogOptions options = Options(kafka, "absent");
  options.partitions = 5;
  auto log = KafkaEventLog::Open(options);
  ASSERT_FALSE(log.ok());
  EXPECT_TRUE(absl::IsNotFound(log.status())) << log.status();
  const std::string message(log.status().message());
  EXPECT_NE(message.find("absent"), std::string::npos) << message;
  EXPECT_NE(message.find(kafka.bootstraps()), std::string::npos) << message;
  EXPECT_NE(message.find("5 partitions"), std::string::npos) << message;
}

TEST(KafkaEventLogTest, MissingTopicOnAnUnreachableBrokerIsAClearError) {
  KafkaEventLogOptions options;
  options.brokers = "127.0.0.1:1";  // nothing listens there
  options.topic = "delegations";
  options.request_timeout = absl::Milliseconds(500);
  options.properties = {{"log_level", "0"}};
  auto log = KafkaEventLog::Open(options);
  ASSERT_FALSE(log.ok());
  EXPECT_NE(std::string(log.status().message()).find("127.0.0.1:1"), std::string::npos)
      << log.status();
}

}  // namespace
}  // namespace switchyard
