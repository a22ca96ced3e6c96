#include "tests/support/subprocess.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace switchyard::testing {
namespace {

std::vector<char*> ToArgv(const std::vector<std::string>& argv) {
  std::vector<char*> out;
  for (const auto& a : argv) out.push_back(const_cast<char*>(a.c_str()));
  out.push_back(nullptr);
  return out;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

pid_t Spawn(const std::vector<std::string>& argv, const std::string& out_path,
            const std::string& err_path) {
  const pid_t pid = fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid == 0) {
    const int out = open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int err = open(err_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    dup2(out, 1);
    dup2(err, 2);
    auto args = ToArgv(argv);
    execv(args[0], args.data());
    _exit(127);
  }
  return pid;
}

}  // namespace

namespace {

int WaitWithUsage(pid_t pid, int64_t* max_rss_kb) {
  int status = 0;
  struct rusage usage {};
  while (wait4(pid, &status, 0, &usage) < 0) {
  }
  if (max_rss_kb != nullptr) *max_rss_kb = usage.ru_maxrss;
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return -1;
}

}  // namespace

int WaitProcess(pid_t pid) { return WaitWithUsage(pid, nullptr); }

CommandResult RunCommand(const std::vector<std::string>& argv) {
  char out_template[] = "/tmp/switchyard-out-XXXXXX";
  char err_template[] = "/tmp/switchyard-err-XXXXXX";
  close(mkstemp(out_template));
  close(mkstemp(err_template));
  CommandResult result;
  result.exit_code = WaitWithUsage(Spawn(argv, out_template, err_template), &result.max_rss_kb);
  result.out = ReadFile(out_template);
  result.err = ReadFile(err_template);
  unlink(out_template);
  unlink(err_template);
  return result;
}

pid_t StartProcess(const std::vector<std::string>& argv) {
  // SWITCHYARD_TEST_CHILD_LOG=FILE appends every started child's stderr to FILE (debugging).
  const char* log = std::getenv("SWITCHYARD_TEST_CHILD_LOG");
  return Spawn(argv, "/dev/null", log != nullptr && *log != '\0' ? log : "/dev/null");
}

}  // namespace switchyard::testing
