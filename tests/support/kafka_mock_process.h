#pragma once

#include <sys/types.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

namespace switchyard::testing {

// A switchyard-kafka-mock process started by a test or a benchmark, with its command channel
// (the process's stdin and stdout). The process dies with the thread that started it. Used
// by one thread.
class KafkaMockProcess {
 public:
  // Starts `binary --brokers N --bootstrap-file DIR/kafka-mock.bootstrap [--topic T]...` with
  // its stderr in DIR/kafka-mock.log and waits up to 20 s for the bootstrap list; null when it
  // did not come.
  static std::unique_ptr<KafkaMockProcess> Start(const std::string& binary, const std::string& dir,
                                                 int brokers,
                                                 const std::vector<std::string>& topics);
  // SIGTERM, then waits for the exit.
  ~KafkaMockProcess();

  const std::string& bootstraps() const { return bootstraps_; }
  pid_t pid() const { return pid_; }

  // Sends one command line and returns the answer line ("ok ..." or "error: ..."), or
  // "error: no answer" when none came within `timeout`.
  std::string Command(const std::string& line,
                      std::chrono::milliseconds timeout = std::chrono::seconds(10));

 private:
  KafkaMockProcess(pid_t pid, int to_child, int from_child)
      : pid_(pid), to_child_(to_child), from_child_(from_child) {}

  pid_t pid_;
  int to_child_;
  int from_child_;
  std::string bootstraps_;
  std::string buffered_;  // read from the child, not yet returned
};

}  // namespace switchyard::testing
