#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

namespace switchyard::testing {

struct CommandResult {
  int exit_code = -1;
  std::string out;
  std::string err;
  int64_t max_rss_kb = -1;  // the child's peak resident set (getrusage of the waited child)
};

// Runs `argv` to completion and captures its output.
CommandResult RunCommand(const std::vector<std::string>& argv);

// Starts `argv` with stdout and stderr sent to /dev/null; returns its pid.
pid_t StartProcess(const std::vector<std::string>& argv);
// Waits for `pid`; returns its exit code, or 128 + signal when a signal ended it.
int WaitProcess(pid_t pid);

}  // namespace switchyard::testing
