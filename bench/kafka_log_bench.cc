// The Kafka event log end to end, against switchyard-kafka-mock (librdkafka's mock cluster in
// a process of its own, over loopback), with the embedded log measured in the same run as the
// baseline:
//   produce  Append per slot (its events, then SlotSealed to every partition), back to back,
//            as ingest writes: events/s, slots/s and Append latency;
//   backfill a backfill of 1 M delegations appended as ingest writes one (10,000 records to
//            an Append, then the seal): events/s;
//   fold     a fresh RocksDB state folded from offset 0 by the FoldRunner (as a replica
//            catching up): events/s, for the per-slot topic and, at scale, for 300 k events
//            written in large record batches over 12 partitions;
//   lag      slots appended at a fixed pace while a FoldRunner follows on its own thread:
//            time from the start of a slot's Append to the publication of a snapshot at or
//            above that slot, median / p90 / p99 / max.
// Prints a table and writes the figures as JSON.
//
//   switchyard_kafka_bench MOCK_BINARY [--slots N] [--events-per-slot N] [--partitions N]
//       [--lag-slot-ms N] [--lag-slots N] [--fetch-wait-ms N] [--linger-ms N]
//       [--backfill-events N] [--scale-events N] [--scale-partitions N] [--json FILE]
//       [--property KEY=VALUE]...   (librdkafka properties for both clients)
#include <fmt/format.h>
#include <librdkafka/rdkafka.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <fstream>
#include <iostream>
#include <map>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "engine/fold_runner.h"
#include "storage/embedded_event_log.h"
#include "storage/kafka_event_log.h"
#include "storage/rocksdb_state_store.h"
#include "tests/support/event_generator.h"
#include "tests/support/kafka_mock_process.h"
#include "tests/support/temp_dir.h"

namespace switchyard {
namespace {

using SteadyClock = std::chrono::steady_clock;

double Seconds(SteadyClock::duration d) { return std::chrono::duration<double>(d).count(); }

double Percentile(std::vector<double> values, double p) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const size_t index = std::min(values.size() - 1, static_cast<size_t>(p * (values.size() - 1)));
  return values[index];
}

struct Flags {
  std::string mock_binary;
  size_t slots = 2000;
  size_t events_per_slot = 10;
  int partitions = 4;
  int lag_slot_ms = 20;
  size_t lag_slots = 300;
  int fetch_wait_ms = 10;
  int linger_ms = -1;  // -1: the log's own setting
  // A backfill: this many Delegated events (one per account, at one slot), appended as ingest
  // writes a backfill: kBackfillAppend records per Append, then the slot's seal.
  size_t backfill_events = 1'000'000;
  // The fold at scale: this many account events, written in large record batches to a topic
  // of `scale_partitions` partitions and to the embedded log, then folded from offset 0.
  size_t scale_events = 300'000;
  int scale_partitions = 12;
  std::string json = "kafka_log_bench.json";
  std::vector<std::pair<std::string, std::string>> properties;  // --property KEY=VALUE
};

// The log records of each slot, as the watcher appends them: the slot's account events,
// then its SlotSealed.
std::vector<std::vector<OutgoingRecord>> SlotBatches(const std::vector<Event>& events,
                                                     int32_t partitions, size_t* account_events) {
  std::vector<std::vector<OutgoingRecord>> batches(1);
  for (const Event& e : events) {
    if (AccountOf(e) != nullptr) ++*account_events;
    for (auto& r : ToLogRecords(e, partitions)) batches.back().push_back(std::move(r));
    if (std::holds_alternative<SlotSealedEvent>(e)) batches.emplace_back();
  }
  if (batches.back().empty()) batches.pop_back();
  return batches;
}

// Writes `batches` to `topic` with a plain librdkafka producer that batches freely (no
// per-slot acknowledgement): a topic of large record batches, for the fold's read path.
void ProduceInLargeBatches(const std::string& brokers, const std::string& topic,
                           const std::vector<std::vector<OutgoingRecord>>& batches) {
  char error[512];
  rd_kafka_conf_t* conf = rd_kafka_conf_new();
  rd_kafka_conf_set(conf, "bootstrap.servers", brokers.c_str(), error, sizeof(error));
  rd_kafka_conf_set(conf, "linger.ms", "50", error, sizeof(error));
  rd_kafka_conf_set(conf, "batch.num.messages", "10000", error, sizeof(error));
  rd_kafka_conf_set(conf, "enable.idempotence", "true", error, sizeof(error));
  rd_kafka_conf_set(conf, "log_level", "3", error, sizeof(error));
  rd_kafka_t* producer = rd_kafka_new(RD_KAFKA_PRODUCER, conf, error, sizeof(error));
  if (producer == nullptr) std::exit(1);
  for (const auto& batch : batches) {
    for (const OutgoingRecord& r : batch) {
      while (
          rd_kafka_producev(producer, RD_KAFKA_V_TOPIC(topic.c_str()),
                            RD_KAFKA_V_PARTITION(r.partition.value_or(RD_KAFKA_PARTITION_UA)),
                            RD_KAFKA_V_KEY(r.key.data(), r.key.size()),
                            RD_KAFKA_V_VALUE(const_cast<char*>(r.payload.data()), r.payload.size()),
                            RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
                            RD_KAFKA_V_END) == RD_KAFKA_RESP_ERR__QUEUE_FULL) {
        rd_kafka_poll(producer, 10);
      }
    }
  }
  if (rd_kafka_flush(producer, 60'000) != RD_KAFKA_RESP_ERR_NO_ERROR) std::exit(1);
  rd_kafka_destroy(producer);
}

// Records per Append in a backfill: the watcher flushes when it holds this many
// (ingest/watcher.cc, kMaxUnflushedRecords).
constexpr size_t kBackfillAppend = 10'000;

// A backfill of `events` delegations at slot 1000 (distinct accounts), as the watcher appends
// it: kBackfillAppend account records to an Append, then SlotSealed and Resynced.
std::vector<std::vector<OutgoingRecord>> BackfillBatches(size_t events, int32_t partitions) {
  std::vector<std::vector<OutgoingRecord>> batches(1);
  std::mt19937_64 rng(17);
  auto key = [&rng] {
    std::array<uint8_t, 32> b;
    for (size_t i = 0; i < 32; i += 8) {
      const uint64_t v = rng();
      std::memcpy(b.data() + i, &v, 8);
    }
    return Pubkey(b);
  };
  const Pubkey validator = key();
  const Pubkey owner = key();
  for (size_t i = 0; i < events; ++i) {
    DelegatedEvent d;
    d.account = key();
    d.validator = validator;
    d.owner_program = owner;
    d.slot = 1000;
    d.lamports = rng() % 1'000'000'000;
    d.commit_frequency_ms = 30'000;
    d.source = EventSource::kBackfill;
    if (batches.back().size() >= kBackfillAppend) batches.emplace_back();
    for (auto& r : ToLogRecords(d, partitions)) batches.back().push_back(std::move(r));
  }
  std::vector<OutgoingRecord>& last = batches.emplace_back();
  for (const Event& marker : {Event(SlotSealedEvent{1000}), Event(ResyncedEvent{1000})}) {
    for (auto& r : ToLogRecords(marker, partitions)) last.push_back(std::move(r));
  }
  return batches;
}

struct ProduceFigures {
  double seconds = 0;
  double append_p50_ms = 0;
  double append_p99_ms = 0;
};

ProduceFigures Produce(EventLogWriter& log,
                       const std::vector<std::vector<OutgoingRecord>>& batches) {
  std::vector<double> latencies;
  const auto start = SteadyClock::now();
  for (const auto& batch : batches) {
    const auto t0 = SteadyClock::now();
    if (absl::Status s = log.Append(batch); !s.ok()) {
      std::cerr << "append failed: " << s << "\n";
      std::exit(1);
    }
    latencies.push_back(Seconds(SteadyClock::now() - t0) * 1000);
  }
  ProduceFigures f;
  f.seconds = Seconds(SteadyClock::now() - start);
  f.append_p50_ms = Percentile(latencies, 0.5);
  f.append_p99_ms = Percentile(latencies, 0.99);
  return f;
}

// Folds `reader` from offset 0 into a fresh state under `dir` until caught up; returns seconds.
double FoldAll(EventLogReader& reader, const std::string& dir, Slot expected_slot) {
  SystemClock clock;
  auto store = RocksDbStateStore::Open(dir);
  if (!store.ok()) {
    std::cerr << store.status() << "\n";
    std::exit(1);
  }
  FoldRunnerOptions options;
  options.poll_timeout = absl::Milliseconds(100);
  FoldRunner runner(options, &reader, store->get(), nullptr, &clock);
  const auto start = SteadyClock::now();
  if (absl::Status s = runner.Init(); !s.ok()) {
    std::cerr << s << "\n";
    std::exit(1);
  }
  if (absl::Status s = runner.RunUntilCaughtUp(); !s.ok()) {
    std::cerr << s << "\n";
    std::exit(1);
  }
  const double seconds = Seconds(SteadyClock::now() - start);
  if (runner.fold().position().applied_slot != expected_slot) {
    std::cerr << "folded to slot " << runner.fold().position().applied_slot << ", expected "
              << expected_slot << "\n";
    std::exit(1);
  }
  return seconds;
}

struct LagFigures {
  std::vector<double> from_append_start_ms;
  std::vector<double> from_append_end_ms;
};

// Appends `batches` at one slot per `slot_ms` while a FoldRunner follows the log.
LagFigures MeasureLag(EventLog& log, const std::vector<std::vector<OutgoingRecord>>& batches,
                      const std::vector<Slot>& slots, int slot_ms, const std::string& dir) {
  SystemClock clock;
  auto store = RocksDbStateStore::Open(dir);
  auto reader = log.OpenReader();
  if (!store.ok() || !reader.ok()) std::exit(1);
  SnapshotHolder snapshots;
  absl::Mutex mu;
  std::map<Slot, SteadyClock::time_point> published;  // first publication at or above a slot
  snapshots.AddListener([&](const std::shared_ptr<const Snapshot>& s) {
    const auto now = SteadyClock::now();
    absl::MutexLock lock(&mu);
    published.emplace(s->applied_slot(), now);
  });
  FoldRunner runner(FoldRunnerOptions(), reader->get(), store->get(), &snapshots, &clock);
  if (!runner.Init().ok()) std::exit(1);
  runner.Start();
  std::vector<SteadyClock::time_point> started(batches.size());
  std::vector<SteadyClock::time_point> appended(batches.size());
  auto next = SteadyClock::now();
  for (size_t i = 0; i < batches.size(); ++i) {
    std::this_thread::sleep_until(next);
    next += std::chrono::milliseconds(slot_ms);
    started[i] = SteadyClock::now();
    if (!log.Append(batches[i]).ok()) std::exit(1);
    appended[i] = SteadyClock::now();
  }
  const auto deadline = SteadyClock::now() + std::chrono::seconds(30);
  while (SteadyClock::now() < deadline) {
    auto s = snapshots.Current();
    if (s && s->applied_slot() >= slots.back()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  runner.Stop();
  LagFigures f;
  absl::MutexLock lock(&mu);
  for (size_t i = 0; i < slots.size(); ++i) {
    auto it = published.lower_bound(slots[i]);
    if (it == published.end()) continue;
    f.from_append_start_ms.push_back(Seconds(it->second - started[i]) * 1000);
    f.from_append_end_ms.push_back(Seconds(it->second - appended[i]) * 1000);
  }
  return f;
}

int Main(int argc, char** argv) {
  if (argc < 2) {
    std::cerr << "usage: switchyard_kafka_bench MOCK_BINARY [--slots N] [--events-per-slot N] "
                 "[--partitions N] [--lag-slot-ms N] [--lag-slots N] [--fetch-wait-ms N] "
                 "[--linger-ms N] [--backfill-events N] [--scale-events N] [--scale-partitions N] "
                 "[--json FILE] [--property KEY=VALUE]...\n";
    return 2;
  }
  Flags flags;
  flags.mock_binary = argv[1];
  for (int i = 2; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    const std::string value = argv[i + 1];
    if (flag == "--slots") flags.slots = std::stoul(value);
    if (flag == "--events-per-slot") flags.events_per_slot = std::stoul(value);
    if (flag == "--partitions") flags.partitions = std::stoi(value);
    if (flag == "--lag-slot-ms") flags.lag_slot_ms = std::stoi(value);
    if (flag == "--lag-slots") flags.lag_slots = std::stoul(value);
    if (flag == "--fetch-wait-ms") flags.fetch_wait_ms = std::stoi(value);
    if (flag == "--linger-ms") flags.linger_ms = std::stoi(value);
    if (flag == "--json") flags.json = value;
    if (flag == "--backfill-events") flags.backfill_events = std::stoul(value);
    if (flag == "--scale-events") flags.scale_events = std::stoul(value);
    if (flag == "--scale-partitions") flags.scale_partitions = std::stoi(value);
    if (flag == "--property" && value.find('=') != std::string::npos) {
      flags.properties.emplace_back(value.substr(0, value.find('=')),
                                    value.substr(value.find('=') + 1));
    }
  }
  testing::TempDir dir;
  const std::string topic = "bench";
  auto mock = testing::KafkaMockProcess::Start(
      flags.mock_binary, dir.path().string(), 3,
      {fmt::format("{}:{}", topic, flags.partitions), fmt::format("lag:{}", flags.partitions),
       fmt::format("bulk:{}", flags.partitions), fmt::format("batched:{}", flags.partitions),
       fmt::format("backfill:{}", flags.partitions),
       fmt::format("scale:{}", flags.scale_partitions)});
  if (!mock) {
    std::cerr << "switchyard-kafka-mock did not start\n";
    return 1;
  }
  auto kafka_options = [&](const std::string& name) {
    KafkaEventLogOptions options;
    options.brokers = mock->bootstraps();
    options.topic = name;
    options.properties = {{"log_level", "3"},
                          {"fetch.wait.max.ms", std::to_string(flags.fetch_wait_ms)}};
    if (flags.linger_ms >= 0)
      options.properties.emplace_back("linger.ms", std::to_string(flags.linger_ms));
    options.properties.insert(options.properties.end(), flags.properties.begin(),
                              flags.properties.end());
    return options;
  };
  auto kafka = KafkaEventLog::Open(kafka_options(topic));
  // Neither side fsyncs each Append: the mock cluster keeps its log in memory.
  EmbeddedEventLogOptions embedded_options;
  embedded_options.sync_appends = false;
  auto embedded = EmbeddedEventLog::Open(dir.Sub("embedded-log"), embedded_options);
  if (!kafka.ok() || !embedded.ok()) {
    std::cerr << "cannot open the logs\n";
    return 1;
  }

  testing::GeneratorOptions gen;
  gen.accounts = 5000;
  gen.slots = flags.slots;
  gen.events_per_slot = flags.events_per_slot;
  gen.late_fraction = 0;
  const std::vector<Event> generated = testing::GenerateEvents(gen);
  const Slot last_slot = gen.first_slot + gen.slots - 1;
  size_t account_events = 0;
  const auto kafka_batches = SlotBatches(generated, (*kafka)->partition_count(), &account_events);
  account_events = 0;
  const auto embedded_batches = SlotBatches(generated, 1, &account_events);

  const ProduceFigures embedded_produce = Produce(**embedded, embedded_batches);
  const ProduceFigures kafka_produce = Produce(**kafka, kafka_batches);

  // The producer's own ceiling: account events only, 1000 to an Append, no watermark waits.
  std::vector<std::vector<OutgoingRecord>> bulk(1);
  for (const Event& e : generated) {
    if (AccountOf(e) == nullptr) continue;
    if (bulk.back().size() == 1000) bulk.emplace_back();
    for (auto& r : ToLogRecords(e, (*kafka)->partition_count())) bulk.back().push_back(r);
  }
  auto bulk_log = KafkaEventLog::Open(kafka_options("bulk"));
  auto bulk_embedded = EmbeddedEventLog::Open(dir.Sub("bulk-log"), embedded_options);
  if (!bulk_log.ok() || !bulk_embedded.ok()) return 1;
  const ProduceFigures kafka_bulk = Produce(**bulk_log, bulk);
  const ProduceFigures embedded_bulk = Produce(**bulk_embedded, bulk);

  // A backfill of `backfill_events` delegations, as ingest appends it. The mock cluster keeps
  // only the last 5 MiB of a partition: this measures the producer, not what stays.
  const auto backfill_kafka = BackfillBatches(flags.backfill_events, flags.partitions);
  const auto backfill_embedded = BackfillBatches(flags.backfill_events, 1);
  auto backfill_log = KafkaEventLog::Open(kafka_options("backfill"));
  auto backfill_embedded_log = EmbeddedEventLog::Open(dir.Sub("backfill-log"), embedded_options);
  if (!backfill_log.ok() || !backfill_embedded_log.ok()) return 1;
  const ProduceFigures kafka_backfill = Produce(**backfill_log, backfill_kafka);
  const ProduceFigures embedded_backfill = Produce(**backfill_embedded_log, backfill_embedded);

  // The fold at scale: `scale_events` account events in large record batches.
  testing::GeneratorOptions scale_gen;
  scale_gen.seed = 3;
  scale_gen.accounts = std::max<size_t>(1, flags.scale_events / 10);
  scale_gen.events_per_slot = 1000;
  scale_gen.slots = std::max<size_t>(1, flags.scale_events / scale_gen.events_per_slot);
  scale_gen.late_fraction = 0;
  const std::vector<Event> scale_generated = testing::GenerateEvents(scale_gen);
  const Slot scale_last_slot = scale_gen.first_slot + scale_gen.slots - 1;
  size_t scale_events = 0;
  ProduceInLargeBatches(mock->bootstraps(), "scale",
                        SlotBatches(scale_generated, flags.scale_partitions, &scale_events));
  scale_events = 0;
  auto scale_embedded = EmbeddedEventLog::Open(dir.Sub("scale-log"), embedded_options);
  if (!scale_embedded.ok()) return 1;
  for (const auto& batch : SlotBatches(scale_generated, 1, &scale_events)) {
    if (!(*scale_embedded)->Append(batch).ok()) return 1;
  }
  auto scale_log = KafkaEventLog::Open(kafka_options("scale"));
  if (!scale_log.ok()) return 1;
  auto scale_reader = (*scale_log)->OpenReader();
  if (!scale_reader.ok()) return 1;
  const double kafka_scale_fold =
      FoldAll(**scale_reader, dir.Sub("scale-kafka-state"), scale_last_slot);
  auto scale_embedded_reader = (*scale_embedded)->NewReader();
  const double embedded_scale_fold =
      FoldAll(*scale_embedded_reader, dir.Sub("scale-embedded-state"), scale_last_slot);

  auto embedded_reader = (*embedded)->NewReader();
  const double embedded_fold = FoldAll(*embedded_reader, dir.Sub("embedded-state"), last_slot);
  auto kafka_reader = (*kafka)->OpenReader();
  if (!kafka_reader.ok()) return 1;
  const double kafka_fold = FoldAll(**kafka_reader, dir.Sub("kafka-state"), last_slot);
  // The mock cluster answers a fetch with one record batch per partition: a topic of
  // per-slot batches is read a few records at a time. The same records in large batches:
  ProduceInLargeBatches(mock->bootstraps(), "batched", kafka_batches);
  auto batched_log = KafkaEventLog::Open(kafka_options("batched"));
  if (!batched_log.ok()) return 1;
  auto batched_reader = (*batched_log)->OpenReader();
  if (!batched_reader.ok()) return 1;
  const double kafka_fold_batched = FoldAll(**batched_reader, dir.Sub("batched-state"), last_slot);

  testing::GeneratorOptions lag_gen = gen;
  lag_gen.seed = 2;
  lag_gen.slots = flags.lag_slots;
  std::vector<Slot> lag_slots;
  for (Slot s = lag_gen.first_slot; s < lag_gen.first_slot + lag_gen.slots; ++s) {
    lag_slots.push_back(s);
  }
  auto lag_log = KafkaEventLog::Open(kafka_options("lag"));
  if (!lag_log.ok()) return 1;
  size_t lag_events = 0;
  const auto lag_batches =
      SlotBatches(testing::GenerateEvents(lag_gen), (*lag_log)->partition_count(), &lag_events);
  const LagFigures lag =
      MeasureLag(**lag_log, lag_batches, lag_slots, flags.lag_slot_ms, dir.Sub("lag-state"));

  const double events = static_cast<double>(account_events);
  const double slots = static_cast<double>(flags.slots);
  std::cout << fmt::format(
      "Kafka log (switchyard-kafka-mock, 3 brokers, {} partitions) vs the embedded log\n"
      "{} slots x {} account events, 1 Append per slot (events, then SlotSealed)\n\n",
      flags.partitions, flags.slots, flags.events_per_slot);
  std::cout << fmt::format("{:<34}{:>14}{:>14}{:>10}\n", "", "kafka", "embedded", "ratio");
  auto row = [](const std::string& name, double kafka_value, double embedded_value,
                const char* unit) {
    std::cout << fmt::format("{:<34}{:>14.0f}{:>14.0f}{:>9.2f}x  {}\n", name, kafka_value,
                             embedded_value, kafka_value / embedded_value, unit);
  };
  row("produce (ingest's Appends)", events / kafka_produce.seconds,
      events / embedded_produce.seconds, "events/s");
  row("produce", slots / kafka_produce.seconds, slots / embedded_produce.seconds, "slots/s");
  row("produce, 1000 events per Append", events / kafka_bulk.seconds,
      events / embedded_bulk.seconds, "events/s");
  std::cout << fmt::format("{:<34}{:>14.2f}{:>14.2f}{:>10}  ms\n", "Append latency p50",
                           kafka_produce.append_p50_ms, embedded_produce.append_p50_ms, "");
  std::cout << fmt::format("{:<34}{:>14.2f}{:>14.2f}{:>10}  ms\n", "Append latency p99",
                           kafka_produce.append_p99_ms, embedded_produce.append_p99_ms, "");
  row(fmt::format("backfill, {} per Append", kBackfillAppend),
      flags.backfill_events / kafka_backfill.seconds,
      flags.backfill_events / embedded_backfill.seconds, "events/s");
  row("fold from offset 0", events / kafka_fold, events / embedded_fold, "events/s");
  row("fold, topic in large batches", events / kafka_fold_batched, events / embedded_fold,
      "events/s");
  std::cout << fmt::format(
      "{:<34}{:>14.0f}{:>14.0f}{:>9.2f}x  events/s\n",
      fmt::format("fold, {} k events, {} partitions", scale_events / 1000, flags.scale_partitions),
      scale_events / kafka_scale_fold, scale_events / embedded_scale_fold,
      embedded_scale_fold / kafka_scale_fold);
  std::cout << fmt::format(
      "\nlag, produce -> applied slot on a folding replica ({} slots, one every {} ms, "
      "fetch.wait.max.ms={}):\n",
      lag_slots.size(), flags.lag_slot_ms, flags.fetch_wait_ms);
  std::cout << fmt::format(
      "  from Append start: median {:.2f} ms  p90 {:.2f} ms  p99 {:.2f} ms  max {:.2f} ms "
      "(n={})\n",
      Percentile(lag.from_append_start_ms, 0.5), Percentile(lag.from_append_start_ms, 0.9),
      Percentile(lag.from_append_start_ms, 0.99), Percentile(lag.from_append_start_ms, 1.0),
      lag.from_append_start_ms.size());
  std::cout << fmt::format("  from Append return (acknowledged): median {:.2f} ms  p99 {:.2f} ms\n",
                           Percentile(lag.from_append_end_ms, 0.5),
                           Percentile(lag.from_append_end_ms, 0.99));

  std::ofstream json(flags.json);
  json << fmt::format(
      "{{\"partitions\":{},\"slots\":{},\"events_per_slot\":{},"
      "\"produce_events_per_s\":{{\"kafka\":{:.0f},\"embedded\":{:.0f}}},"
      "\"produce_bulk_events_per_s\":{{\"kafka\":{:.0f},\"embedded\":{:.0f}}},"
      "\"backfill_events_per_s\":{{\"kafka\":{:.0f},\"embedded\":{:.0f},\"events\":{}}},"
      "\"scale_fold_events_per_s\":{{\"kafka\":{:.0f},\"embedded\":{:.0f},\"events\":{},"
      "\"partitions\":{}}},"
      "\"append_ms\":{{\"kafka_p50\":{:.3f},\"kafka_p99\":{:.3f},\"embedded_p50\":{:.3f},"
      "\"embedded_p99\":{:.3f}}},"
      "\"fold_events_per_s\":{{\"kafka\":{:.0f},\"kafka_large_batches\":{:.0f},"
      "\"embedded\":{:.0f}}},"
      "\"lag_ms\":{{\"slot_ms\":{},\"fetch_wait_ms\":{},\"median\":{:.3f},\"p90\":{:.3f},"
      "\"p99\":{:.3f},\"max\":{:.3f},\"samples\":{}}}}}\n",
      flags.partitions, flags.slots, flags.events_per_slot, events / kafka_produce.seconds,
      events / embedded_produce.seconds, events / kafka_bulk.seconds,
      events / embedded_bulk.seconds, flags.backfill_events / kafka_backfill.seconds,
      flags.backfill_events / embedded_backfill.seconds, flags.backfill_events,
      scale_events / kafka_scale_fold, scale_events / embedded_scale_fold, scale_events,
      flags.scale_partitions, kafka_produce.append_p50_ms, kafka_produce.append_p99_ms,
      embedded_produce.append_p50_ms, embedded_produce.append_p99_ms, events / kafka_fold,
      events / kafka_fold_batched, events / embedded_fold, flags.lag_slot_ms, flags.fetch_wait_ms,
      Percentile(lag.from_append_start_ms, 0.5), Percentile(lag.from_append_start_ms, 0.9),
      Percentile(lag.from_append_start_ms, 0.99), Percentile(lag.from_append_start_ms, 1.0),
      lag.from_append_start_ms.size());
  std::cout << "\nwrote " << flags.json << "\n";
  return 0;
}

}  // namespace
}  // namespace switchyard

int main(int argc, char** argv) { return switchyard::Main(argc, argv); }
