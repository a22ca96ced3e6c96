#include "tests/support/kafka_mock_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <thread>

namespace switchyard::testing {

std::unique_ptr<KafkaMockProcess> KafkaMockProcess::Start(const std::string& binary,
                                                          const std::string& dir, int brokers,
                                                          const std::vector<std::string>& topics) {
  const std::string bootstrap_file = dir + "/kafka-mock.bootstrap";
  const std::string log_file = dir + "/kafka-mock.log";
  std::vector<std::string> argv = {binary, "--brokers", std::to_string(brokers), "--bootstrap-file",
                                   bootstrap_file};
  for (const std::string& topic : topics) {
    argv.push_back("--topic");
    argv.push_back(topic);
  }
  int to_child[2];
  int from_child[2];
  if (pipe2(to_child, O_CLOEXEC) != 0) return nullptr;
  if (pipe2(from_child, O_CLOEXEC) != 0) {
    close(to_child[0]);
    close(to_child[1]);
    return nullptr;
  }
  std::vector<char*> args;
  for (auto& a : argv) args.push_back(a.data());
  args.push_back(nullptr);
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);
    dup2(to_child[0], 0);
    dup2(from_child[1], 1);
    const int err = open(log_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (err >= 0) dup2(err, 2);
    execv(args[0], args.data());
    _exit(127);
  }
  close(to_child[0]);
  close(from_child[1]);
  if (pid < 0) {
    close(to_child[1]);
    close(from_child[0]);
    return nullptr;
  }
  std::unique_ptr<KafkaMockProcess> process(new KafkaMockProcess(pid, to_child[1], from_child[0]));
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (!std::filesystem::exists(bootstrap_file) && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  std::ifstream in(bootstrap_file);
  std::getline(in, process->bootstraps_);
  if (process->bootstraps_.empty()) return nullptr;
  return process;
}

KafkaMockProcess::~KafkaMockProcess() {
  close(to_child_);
  close(from_child_);
  kill(pid_, SIGTERM);
  int status = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (waitpid(pid_, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      kill(pid_, SIGKILL);
      waitpid(pid_, &status, 0);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

std::string KafkaMockProcess::Command(const std::string& line, std::chrono::milliseconds timeout) {
  const std::string out = line + "\n";
  if (write(to_child_, out.data(), out.size()) != static_cast<ssize_t>(out.size())) {
    return "error: cannot write the command";
  }
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    if (const size_t eol = buffered_.find('\n'); eol != std::string::npos) {
      std::string answer = buffered_.substr(0, eol);
      buffered_.erase(0, eol + 1);
      return answer;
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return "error: no answer";
    pollfd fd = {from_child_, POLLIN, 0};
    if (poll(&fd, 1, static_cast<int>(left.count())) <= 0) continue;
    char buffer[1024];
    const ssize_t got = read(from_child_, buffer, sizeof(buffer));
    if (got <= 0) return "error: the mock broker is gone";
    buffered_.append(buffer, static_cast<size_t>(got));
  }
}

}  // namespace switchyard::testing
