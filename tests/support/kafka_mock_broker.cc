// switchyard-kafka-mock: librdkafka's mock Kafka cluster as a process of its own, for tests
// that run Switchyard's processes against Kafka over real sockets. It listens on loopback
// with N brokers, writes the bootstrap list to a file once they accept connections, and takes
// fault commands on stdin, one per line, answering each with one line on stdout: "ok[ DATA]"
// or "error: WHY". It runs until SIGTERM or SIGINT; the end of stdin ends the commands only.
//
// The mock keeps everything in memory and drops a partition's oldest data past 5 MiB: keep
// test scenarios small. Commands (BROKER is a broker id from 1, or "all"; API is produce,
// fetch, list-offsets, metadata or a Kafka ApiKey number; ERROR is a librdkafka error name
// such as NOT_LEADER_FOR_PARTITION, or its number):
//
//   ping                                   ok
//   bootstrap                              ok HOST:PORT,HOST:PORT,...
//   broker-down BROKER | broker-up BROKER  disconnect and refuse connections / accept again
//   rtt BROKER MS                          add MS of round-trip latency to every response
//   request-errors API COUNT ERROR         the next COUNT requests of API, on any broker, fail
//   broker-errors BROKER API COUNT ERROR [RTT_MS]   the same, on one broker
//   clear-errors API                       drop the cluster-wide errors not yet used
//   create-topic TOPIC PARTITIONS [REPLICATION]
//   topic-error TOPIC ERROR                metadata reports ERROR for TOPIC (NO_ERROR clears)
//   leader TOPIC PARTITION BROKER          move a partition's leadership
#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>
#include <poll.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace {

std::optional<int32_t> ParseInt(const std::string& text) {
  try {
    size_t used = 0;
    const long value = std::stol(text, &used);
    if (used != text.size()) return std::nullopt;
    return static_cast<int32_t>(value);
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

std::optional<int32_t> ParseBroker(const std::string& text) {
  if (text == "all") return -1;
  return ParseInt(text);
}

std::optional<int16_t> ParseApi(const std::string& text) {
  if (text == "produce") return 0;
  if (text == "fetch") return 1;
  if (text == "list-offsets") return 2;
  if (text == "metadata") return 3;
  if (auto n = ParseInt(text)) return static_cast<int16_t>(*n);
  return std::nullopt;
}

std::optional<rd_kafka_resp_err_t> ParseError(const std::string& text) {
  if (auto n = ParseInt(text)) return static_cast<rd_kafka_resp_err_t>(*n);
  const rd_kafka_err_desc* descs = nullptr;
  size_t count = 0;
  rd_kafka_get_err_descs(&descs, &count);
  for (size_t i = 0; i < count; ++i) {
    if (descs[i].name != nullptr && text == descs[i].name) return descs[i].code;
  }
  return std::nullopt;
}

std::string Reply(rd_kafka_resp_err_t err) {
  if (err == RD_KAFKA_RESP_ERR_NO_ERROR) return "ok";
  return std::string("error: ") + rd_kafka_err2str(err);
}

// Runs one command line against the cluster and returns the reply line.
std::string Execute(rd_kafka_mock_cluster_t* cluster, const std::string& line) {
  std::istringstream in(line);
  std::vector<std::string> words;
  for (std::string w; in >> w;) words.push_back(w);
  if (words.empty()) return "error: empty command";
  const std::string& verb = words[0];
  const size_t n = words.size();
  constexpr const char* kBadArguments = "error: bad arguments; see the usage in --help";
  if (verb == "ping" && n == 1) return "ok";
  if (verb == "bootstrap" && n == 1) {
    return std::string("ok ") + rd_kafka_mock_cluster_bootstraps(cluster);
  }
  if ((verb == "broker-down" || verb == "broker-up") && n == 2) {
    const auto broker = ParseBroker(words[1]);
    if (!broker) return kBadArguments;
    return Reply(verb == "broker-down" ? rd_kafka_mock_broker_set_down(cluster, *broker)
                                       : rd_kafka_mock_broker_set_up(cluster, *broker));
  }
  if (verb == "rtt" && n == 3) {
    const auto broker = ParseBroker(words[1]);
    const auto ms = ParseInt(words[2]);
    if (!broker || !ms || *ms < 0) return kBadArguments;
    return Reply(rd_kafka_mock_broker_set_rtt(cluster, *broker, *ms));
  }
  if (verb == "request-errors" && n == 4) {
    const auto api = ParseApi(words[1]);
    const auto count = ParseInt(words[2]);
    const auto error = ParseError(words[3]);
    if (!api || !count || *count < 0 || !error) return kBadArguments;
    const std::vector<rd_kafka_resp_err_t> errors(static_cast<size_t>(*count), *error);
    rd_kafka_mock_push_request_errors_array(cluster, *api, errors.size(), errors.data());
    return "ok";
  }
  if (verb == "broker-errors" && (n == 5 || n == 6)) {
    const auto broker = ParseInt(words[1]);
    const auto api = ParseApi(words[2]);
    const auto count = ParseInt(words[3]);
    const auto error = ParseError(words[4]);
    const auto rtt = n == 6 ? ParseInt(words[5]) : std::optional<int32_t>(0);
    if (!broker || !api || !count || *count < 0 || !error || !rtt) return kBadArguments;
    for (int32_t i = 0; i < *count; ++i) {
      const rd_kafka_resp_err_t err =
          rd_kafka_mock_broker_push_request_error_rtts(cluster, *broker, *api, 1, *error, *rtt);
      if (err != RD_KAFKA_RESP_ERR_NO_ERROR) return Reply(err);
    }
    return "ok";
  }
  if (verb == "clear-errors" && n == 2) {
    const auto api = ParseApi(words[1]);
    if (!api) return kBadArguments;
    rd_kafka_mock_clear_request_errors(cluster, *api);
    return "ok";
  }
  if (verb == "create-topic" && (n == 3 || n == 4)) {
    const auto partitions = ParseInt(words[2]);
    const auto replication = n == 4 ? ParseInt(words[3]) : std::optional<int32_t>(1);
    if (!partitions || *partitions <= 0 || !replication || *replication <= 0) {
      return kBadArguments;
    }
    return Reply(rd_kafka_mock_topic_create(cluster, words[1].c_str(), *partitions, *replication));
  }
  if (verb == "topic-error" && n == 3) {
    const auto error = ParseError(words[2]);
    if (!error) return kBadArguments;
    rd_kafka_mock_topic_set_error(cluster, words[1].c_str(), *error);
    return "ok";
  }
  if (verb == "leader" && n == 4) {
    const auto partition = ParseInt(words[2]);
    const auto broker = ParseInt(words[3]);
    if (!partition || !broker) return kBadArguments;
    return Reply(
        rd_kafka_mock_partition_set_leader(cluster, words[1].c_str(), *partition, *broker));
  }
  static const std::set<std::string> kVerbs = {
      "ping",          "bootstrap",    "broker-down",  "broker-up",   "rtt",   "request-errors",
      "broker-errors", "clear-errors", "create-topic", "topic-error", "leader"};
  if (kVerbs.count(verb) > 0) return kBadArguments;
  return "error: unknown command '" + verb + "'";
}

bool WriteAtomically(const std::string& path, const std::string& text) {
  const std::string temp = path + ".tmp";
  {
    std::ofstream out(temp, std::ios::trunc);
    out << text << "\n";
    if (!out) return false;
  }
  std::error_code ec;
  std::filesystem::rename(temp, path, ec);
  return !ec;
}

int Run(int argc, char** argv) {
  CLI::App app{"librdkafka's mock Kafka cluster on loopback, with fault commands on stdin"};
  int brokers = 3;
  std::string bootstrap_file;
  std::vector<std::string> topics;
  app.add_option("--brokers", brokers, "Number of brokers")->check(CLI::Range(1, 16));
  app.add_option("--bootstrap-file", bootstrap_file,
                 "Write HOST:PORT,... here once the brokers listen")
      ->required();
  app.add_option("--topic", topics, "NAME:PARTITIONS, a topic to create at start (repeatable)");
  CLI11_PARSE(app, argc, argv);

  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  sigprocmask(SIG_BLOCK, &stop_signals, nullptr);
  signal(SIGPIPE, SIG_IGN);
  const int signal_fd = signalfd(-1, &stop_signals, SFD_CLOEXEC);
  if (signal_fd < 0) {
    std::perror("signalfd");
    return 1;
  }

  char error[512];
  rd_kafka_conf_t* conf = rd_kafka_conf_new();
  rd_kafka_conf_set(conf, "log_level", "3", error, sizeof(error));
  // The brokers' sockets take this from the cluster's handle. Real brokers disable Nagle's
  // algorithm too; with it, a response written in two parts waits for a delayed ACK (~40 ms).
  rd_kafka_conf_set(conf, "socket.nagle.disable", "true", error, sizeof(error));
  rd_kafka_t* host = rd_kafka_new(RD_KAFKA_PRODUCER, conf, error, sizeof(error));
  if (host == nullptr) {
    std::cerr << "switchyard-kafka-mock: " << error << "\n";
    return 1;
  }
  rd_kafka_mock_cluster_t* cluster = rd_kafka_mock_cluster_new(host, brokers);
  if (cluster == nullptr) {
    std::cerr << "switchyard-kafka-mock: cannot create the mock cluster\n";
    rd_kafka_destroy(host);
    return 1;
  }
  int exit_code = 0;
  for (const std::string& topic : topics) {
    const size_t colon = topic.rfind(':');
    const auto partitions =
        colon == std::string::npos ? std::nullopt : ParseInt(topic.substr(colon + 1));
    if (!partitions || *partitions <= 0 ||
        rd_kafka_mock_topic_create(cluster, topic.substr(0, colon).c_str(), *partitions, 1) !=
            RD_KAFKA_RESP_ERR_NO_ERROR) {
      std::cerr << "switchyard-kafka-mock: bad --topic '" << topic << "' (NAME:PARTITIONS)\n";
      exit_code = 2;
    }
  }
  const std::string bootstraps = rd_kafka_mock_cluster_bootstraps(cluster);
  if (exit_code == 0 && !WriteAtomically(bootstrap_file, bootstraps)) {
    std::cerr << "switchyard-kafka-mock: cannot write " << bootstrap_file << "\n";
    exit_code = 1;
  }
  if (exit_code == 0) std::cerr << "switchyard-kafka-mock: brokers " << bootstraps << "\n";

  std::string pending;
  bool stdin_open = true;
  while (exit_code == 0) {
    pollfd fds[2] = {{signal_fd, POLLIN, 0}, {STDIN_FILENO, POLLIN, 0}};
    if (poll(fds, stdin_open ? 2 : 1, -1) < 0) {
      if (errno == EINTR) continue;
      std::perror("poll");
      exit_code = 1;
      break;
    }
    if (fds[0].revents & POLLIN) break;  // SIGTERM or SIGINT
    if (!stdin_open || fds[1].revents == 0) continue;
    char buffer[4096];
    const ssize_t got = read(STDIN_FILENO, buffer, sizeof(buffer));
    if (got <= 0) {
      stdin_open = false;
      continue;
    }
    pending.append(buffer, static_cast<size_t>(got));
    for (size_t eol; (eol = pending.find('\n')) != std::string::npos;) {
      const std::string line = pending.substr(0, eol);
      pending.erase(0, eol + 1);
      std::cout << Execute(cluster, line) << std::endl;
    }
  }
  rd_kafka_mock_cluster_destroy(cluster);
  rd_kafka_destroy(host);
  close(signal_fd);
  return exit_code;
}

}  // namespace

int main(int argc, char** argv) { return Run(argc, argv); }
