#pragma once

// A redis-server process of a test's own. A test target that includes this defines
// SWITCHYARD_REDIS_SERVER (the binary) and links hiredis, absl::strings and the subprocess
// helper.

#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <sstream>
#include <string>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "fmt/format.h"
#include "hiredis/hiredis.h"
#include "tests/support/free_port.h"
#include "tests/support/subprocess.h"

namespace switchyard::testing {

// A redis-server of the test's own, on a port of its own, without persistence.
class RedisServer {
 public:
  explicit RedisServer(int port) : port_(port) {}
  ~RedisServer() {
    if (pid_ > 0) Kill();
  }

  // Starts it and waits until it answers PING.
  bool Start() {
    pid_ = StartProcess({SWITCHYARD_REDIS_SERVER, "--port", std::to_string(port_), "--bind",
                         "127.0.0.1", "--save", "", "--appendonly", "no"});
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (std::chrono::steady_clock::now() < deadline) {
      if (Command("PING") == "PONG") return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return false;
  }
  void Kill() {
    kill(pid_, SIGCONT);
    kill(pid_, SIGKILL);
    WaitProcess(pid_);
    pid_ = -1;
  }
  void Pause() { kill(pid_, SIGSTOP); }
  void Resume() { kill(pid_, SIGCONT); }

  // One command on a connection of its own; its status or string reply, "" on failure.
  std::string Command(const std::string& command) {
    timeval timeout{0, 200000};
    redisContext* c = redisConnectWithTimeout("127.0.0.1", port_, timeout);
    std::string out;
    if (c != nullptr && c->err == 0) {
      redisSetTimeout(c, timeout);
      auto* reply = static_cast<redisReply*>(redisCommand(c, command.c_str()));
      if (reply != nullptr &&
          (reply->type == REDIS_REPLY_STRING || reply->type == REDIS_REPLY_STATUS)) {
        out.assign(reply->str, reply->len);
      }
      if (reply != nullptr) freeReplyObject(reply);
    }
    if (c != nullptr) redisFree(c);
    return out;
  }

  // The calls of `command` since the last CONFIG RESETSTAT (INFO commandstats).
  int Calls(const std::string& command) {
    std::istringstream info(Command("INFO commandstats"));
    const std::string prefix = absl::StrCat("cmdstat_", command, ":calls=");
    for (std::string line; std::getline(info, line);) {
      if (line.rfind(prefix, 0) != 0) continue;
      int calls = 0;
      if (absl::SimpleAtoi(line.substr(prefix.size(), line.find(',') - prefix.size()), &calls)) {
        return calls;
      }
    }
    return 0;
  }

  int port() const { return port_; }
  std::string url() const { return fmt::format("redis://127.0.0.1:{}", port_); }

 private:
  int port_;
  pid_t pid_ = -1;
};

}  // namespace switchyard::testing
