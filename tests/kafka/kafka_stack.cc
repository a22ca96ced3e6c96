#include "tests/kafka/kafka_stack.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <signal.h>
#include <simdjson.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>
#include <tuple>

#include "engine/event_codec.h"
#include "storage/kafka_event_log.h"

namespace switchyard::testing {
namespace {

std::optional<std::string> ReadWholeFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The value of a small JSON file's integer field once the file is complete.
std::optional<uint64_t> WaitForJsonField(const std::string& path, const char* field,
                                         std::chrono::milliseconds deadline) {
  std::optional<uint64_t> value;
  WaitUntil(
      [&] {
        const auto text = ReadWholeFile(path);
        if (!text || text->find('}') == std::string::npos) return false;
        simdjson::dom::parser parser;
        uint64_t v = 0;
        if (parser.parse(*text)[field].get_uint64().get(v) != simdjson::SUCCESS) return false;
        value = v;
        return true;
      },
      deadline);
  return value;
}

}  // namespace

KafkaStack::KafkaStack(int brokers, int partitions) {
  mock_ = KafkaMockProcess::Start(SWITCHYARD_KAFKA_MOCK_BINARY, dir_.path().string(), brokers,
                                  {fmt::format("{}:{}", kTopic, partitions)});
  if (mock_) log_url_ = fmt::format("kafka://{}/{}", mock_->bootstraps(), kTopic);
}

KafkaStack::~KafkaStack() {
  for (const auto& [pid, name] : processes_) {
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
  }
}

pid_t KafkaStack::StartLogged(const std::string& name, std::vector<std::string> argv) {
  const std::string log = dir_.Sub(name + ".log");
  std::vector<char*> args;
  for (auto& a : argv) args.push_back(a.data());
  args.push_back(nullptr);
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);
    const int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd >= 0) {
      dup2(fd, 1);
      dup2(fd, 2);
    }
    execv(args[0], args.data());
    _exit(127);
  }
  if (pid > 0) processes_.emplace_back(pid, name);
  return pid;
}

int KafkaStack::Stop(pid_t pid, int signal, std::chrono::milliseconds deadline) {
  kill(pid, signal);
  int status = 0;
  const bool exited = WaitUntil([&] { return waitpid(pid, &status, WNOHANG) == pid; }, deadline);
  if (!exited) return -1;
  std::erase_if(processes_, [pid](const auto& p) { return p.first == pid; });
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  return 128 + WTERMSIG(status);
}

bool KafkaStack::Running(pid_t pid) {
  int status = 0;
  if (waitpid(pid, &status, WNOHANG) != pid) return true;
  std::erase_if(processes_, [pid](const auto& p) { return p.first == pid; });
  return false;
}

uint16_t KafkaStack::StartLocalnet(const std::vector<std::string>& scenario) {
  const std::string ready = dir_.Sub("localnet.ready");
  std::vector<std::string> argv = {
      SWITCHYARD_LOCALNET_BINARY, "--port",    "0", "--threads", "1", "--ready-file", ready,
      "--ground-truth",           truth_path()};
  argv.insert(argv.end(), scenario.begin(), scenario.end());
  StartLogged("localnet", argv);
  localnet_port_ =
      static_cast<uint16_t>(WaitForJsonField(ready, "http", std::chrono::seconds(20)).value_or(0));
  return localnet_port_;
}

pid_t KafkaStack::StartIngest() {
  return StartLogged(
      "ingest",
      {SWITCHYARD_BINARY, "ingest", "--base", fmt::format("http://127.0.0.1:{}", localnet_port_),
       "--log", log_url_, "--data-dir", dir_.Sub("ingest-data"), "--reconcile-interval-ms", "300"});
}

Replica KafkaStack::StartReplica(const std::string& name, bool wait) {
  Replica replica;
  replica.name = name;
  replica.data_dir = dir_.Sub(name + "-data");
  const std::string config = dir_.Sub(name + ".toml");
  std::ofstream(config) << fmt::format(
      "[storage]\nsync = false\n"
      // The mock cluster answers an empty fetch only after the fetch's whole wait (a real
      // broker answers as soon as a record arrives): keep that wait short.
      "[log]\nkafka_properties = {{\"fetch.wait.max.ms\" = \"10\"}}\n"
      "[fold]\npublish_interval_ms = 20\n"
      "[api]\nlisten = \"127.0.0.1:0\"\n"
      "[admin]\nlisten = \"127.0.0.1:0\"\nrefresh_interval_ms = 200\n"
      "[upstreams.base]\nendpoints = [{{url = \"http://127.0.0.1:{}\"}}]\n",
      localnet_port_);
  const std::string ready = dir_.Sub(name + ".ready");
  std::filesystem::remove(ready);
  replica.pid = StartLogged(name, {SWITCHYARD_BINARY, "serve", "--config", config, "--data-dir",
                                   replica.data_dir, "--log", log_url_, "--ready-file", ready});
  if (wait) {
    replica.admin_port = static_cast<uint16_t>(
        WaitForJsonField(ready, "admin", std::chrono::seconds(30)).value_or(0));
  }
  return replica;
}

uint16_t KafkaStack::ReadyAdminPort(const std::string& name) const {
  return static_cast<uint16_t>(
      WaitForJsonField(dir_.Sub(name + ".ready"), "admin", std::chrono::milliseconds(0))
          .value_or(0));
}

std::string KafkaStack::LogOf(const std::string& name) const {
  return ReadWholeFile(dir_.Sub(name + ".log")).value_or("");
}

std::string KafkaStack::LogTails() const {
  std::string out;
  for (const auto& entry : std::filesystem::directory_iterator(dir_.path())) {
    if (entry.path().extension() != ".log") continue;
    const std::string text = ReadWholeFile(entry.path().string()).value_or("");
    const size_t keep = 3000;
    out += fmt::format("---- {} (last {} bytes)\n{}\n", entry.path().filename().string(),
                       std::min(keep, text.size()),
                       text.size() > keep ? text.substr(text.size() - keep) : text);
  }
  return out;
}

std::optional<std::pair<int, std::string>> HttpGet(uint16_t port, const std::string& target) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return std::nullopt;
  timeval timeout = {2, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof(timeout));
  sockaddr_in address = {};
  address.sin_family = AF_INET;
  address.sin_port = htons(port);
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::string response;
  if (connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0) {
    const std::string request =
        fmt::format("GET {} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n", target);
    if (send(fd, request.data(), request.size(), MSG_NOSIGNAL) ==
        static_cast<ssize_t>(request.size())) {
      char buffer[8192];
      for (ssize_t got; (got = recv(fd, buffer, sizeof(buffer), 0)) > 0;) {
        response.append(buffer, static_cast<size_t>(got));
      }
    }
  }
  close(fd);
  const size_t body = response.find("\r\n\r\n");
  if (response.rfind("HTTP/1.1 ", 0) != 0 || body == std::string::npos || response.size() < 12) {
    return std::nullopt;
  }
  return std::make_pair(std::atoi(response.substr(9, 3).c_str()), response.substr(body + 4));
}

std::optional<ReplicaStatus> GetReplicaStatus(uint16_t admin_port) {
  const auto answer = HttpGet(admin_port, "/status");
  if (!answer || answer->first != 200) return std::nullopt;
  simdjson::dom::parser parser;
  simdjson::dom::element root;
  if (parser.parse(answer->second).get(root) != simdjson::SUCCESS) return std::nullopt;
  ReplicaStatus status;
  std::string_view digest;
  if (root["applied_slot"].get_uint64().get(status.applied_slot) != simdjson::SUCCESS ||
      root["digest"].get_string().get(digest) != simdjson::SUCCESS) {
    return std::nullopt;
  }
  status.digest = std::string(digest);
  return status;
}

std::optional<TopicContents> ReadTopic(const std::string& brokers, const std::string& topic) {
  KafkaEventLogOptions options;
  options.brokers = brokers;
  options.topic = topic;
  options.properties = {{"log_level", "0"}};
  auto log = KafkaEventLog::Open(options);
  if (!log.ok()) return std::nullopt;
  auto reader = (*log)->OpenReader();
  if (!reader.ok()) return std::nullopt;
  TopicContents contents;
  contents.partitions.resize(static_cast<size_t>((*log)->partition_count()));
  std::vector<int64_t> ends(contents.partitions.size());
  for (size_t p = 0; p < ends.size(); ++p) {
    auto end = (*reader)->EndOffset(static_cast<int32_t>(p));
    if (!end.ok()) return std::nullopt;
    ends[p] = *end;
  }
  auto complete = [&] {
    for (size_t p = 0; p < ends.size(); ++p) {
      if (static_cast<int64_t>(contents.partitions[p].size()) < ends[p]) return false;
    }
    return true;
  };
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!complete()) {
    if (std::chrono::steady_clock::now() > deadline) return std::nullopt;
    auto n = (*reader)->Poll(10'000, absl::Milliseconds(100), [&](const LogRecordView& r) {
      auto& records = contents.partitions[static_cast<size_t>(r.partition)];
      if (r.offset == static_cast<int64_t>(records.size())) records.emplace_back(r.payload);
    });
    if (!n.ok()) return std::nullopt;
  }
  return contents;
}

uint64_t AccountEventsBefore(const TopicContents& topic,
                             const std::vector<PartitionCursor>& cursors) {
  uint64_t count = 0;
  for (size_t p = 0; p < topic.partitions.size() && p < cursors.size(); ++p) {
    const auto& records = topic.partitions[p];
    const auto end =
        std::min(static_cast<size_t>(std::max<int64_t>(cursors[p].next_offset, 0)), records.size());
    for (size_t i = 0; i < end; ++i) {
      auto event = DecodeEvent(records[i]);
      if (event.ok() && AccountOf(*event) != nullptr) ++count;
    }
  }
  return count;
}

size_t DuplicateAccountEvents(const TopicContents& topic) {
  std::set<std::tuple<int, Pubkey, Slot>> seen;
  size_t duplicates = 0;
  for (const auto& records : topic.partitions) {
    for (const std::string& payload : records) {
      auto event = DecodeEvent(payload);
      if (!event.ok() || AccountOf(*event) == nullptr) continue;
      if (!seen.emplace(static_cast<int>(KindOf(*event)), *AccountOf(*event), SlotOf(*event))
               .second) {
        ++duplicates;
      }
    }
  }
  return duplicates;
}

std::string AccountEventsText(const TopicContents& topic, const Pubkey& account) {
  std::string out;
  for (size_t p = 0; p < topic.partitions.size(); ++p) {
    const auto& records = topic.partitions[p];
    for (size_t i = 0; i < records.size(); ++i) {
      auto event = DecodeEvent(records[i]);
      if (!event.ok() || AccountOf(*event) == nullptr || *AccountOf(*event) != account) continue;
      out += fmt::format("  partition {} offset {}: kind {} slot {}\n", p, i,
                         static_cast<int>(KindOf(*event)), SlotOf(*event));
    }
  }
  return out;
}

}  // namespace switchyard::testing
