#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "common/slot.h"
#include "engine/state_store.h"
#include "tests/support/kafka_mock_process.h"
#include "tests/support/temp_dir.h"

namespace switchyard::testing {

// What a replica says on GET /status.
struct ReplicaStatus {
  Slot applied_slot = 0;
  std::string digest;  // hex
};

// A `switchyard serve` replica started by a KafkaStack.
struct Replica {
  std::string name;
  pid_t pid = 0;
  uint16_t admin_port = 0;  // 0: it did not become ready
  std::string data_dir;
};

// Everything one of these tests runs, as processes on loopback: switchyard-kafka-mock with
// one topic, a localnet base with the scenario driver, `switchyard ingest` and `switchyard
// serve` replicas on the topic. Each process writes its output to NAME.log in the stack's
// directory; every process still running is SIGKILLed on destruction. Used by one thread.
class KafkaStack {
 public:
  static constexpr char kTopic[] = "switchyard.delegations";

  // Starts the mock cluster with `brokers` brokers and the topic with `partitions`.
  KafkaStack(int brokers, int partitions);
  ~KafkaStack();

  bool ok() const { return mock_ != nullptr; }
  KafkaMockProcess& mock() { return *mock_; }
  const std::string& log_url() const { return log_url_; }
  std::string Path(const std::string& name) const { return dir_.Sub(name); }
  std::string truth_path() const { return dir_.Sub("truth.jsonl"); }

  // Starts the localnet base with `scenario` flags and the ground truth in truth_path();
  // returns its HTTP port, 0 when it did not start.
  uint16_t StartLocalnet(const std::vector<std::string>& scenario);
  // Starts `switchyard ingest` against the localnet on the stack's log.
  pid_t StartIngest();
  // Starts `switchyard serve` on the stack's log with its own data directory (kept across
  // restarts of the same name) and, with `wait`, waits up to 30 s for its ready file.
  Replica StartReplica(const std::string& name, bool wait = true);
  // The replica's admin port from its ready file, once written; 0 before.
  uint16_t ReadyAdminPort(const std::string& name) const;

  // Sends `signal` and waits up to `deadline` for the exit code (128 + signal when a signal
  // ended it); -1 when it did not exit in time.
  int Stop(pid_t pid, int signal, std::chrono::milliseconds deadline);
  // Whether `pid` is still running.
  bool Running(pid_t pid);

  // The text of a process's log, for failure messages.
  std::string LogOf(const std::string& name) const;
  // The last lines of every process's log.
  std::string LogTails() const;

 private:
  pid_t StartLogged(const std::string& name, std::vector<std::string> argv);

  TempDir dir_;
  std::unique_ptr<KafkaMockProcess> mock_;
  std::string log_url_;
  uint16_t localnet_port_ = 0;
  std::vector<std::pair<pid_t, std::string>> processes_;
};

// A GET on loopback: the status code and the body; nullopt when nothing answers.
std::optional<std::pair<int, std::string>> HttpGet(uint16_t port, const std::string& target);
// GET /status from a replica's admin port; nullopt when it does not answer.
std::optional<ReplicaStatus> GetReplicaStatus(uint16_t admin_port);

// The records of every partition of a topic, read from offset 0 to the end.
struct TopicContents {
  std::vector<std::vector<std::string>> partitions;  // payloads by offset
};
std::optional<TopicContents> ReadTopic(const std::string& brokers, const std::string& topic);

// Account events at offsets below each cursor's next_offset: what a fold at `cursors` has
// read and must have folded once each.
uint64_t AccountEventsBefore(const TopicContents& topic,
                             const std::vector<PartitionCursor>& cursors);
// Account events that appear more than once, as (kind, account, slot), across the topic.
size_t DuplicateAccountEvents(const TopicContents& topic);
// The account events of `account` in the topic, one line each (partition, offset, kind,
// slot), for failure messages.
std::string AccountEventsText(const TopicContents& topic, const Pubkey& account);

// Waits until `condition` holds or `deadline` passes; returns whether it held.
template <typename Condition>
bool WaitUntil(Condition condition, std::chrono::milliseconds deadline) {
  const auto end = std::chrono::steady_clock::now() + deadline;
  while (std::chrono::steady_clock::now() < end) {
    if (condition()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return condition();
}

}  // namespace switchyard::testing
