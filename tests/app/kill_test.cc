// `switchyard serve` SIGKILLed under HTTP load and started again over the same data directory:
// it answers again within a second, with the same state digest, and its clients see errors
// only while it is down. The state holds SWITCHYARD_KILL_ACCOUNTS delegated accounts (default
// 50 000; the `slow` variant 1 000 000). The restart times go to the test's XML report and its
// output.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "engine/event_codec.h"
#include "fmt/format.h"
#include "simdjson.h"
#include "storage/embedded_event_log.h"
#include "tests/app/process_test.h"
#include "tests/support/event_generator.h"
#include "tests/support/free_port.h"
#include "tests/support/sanitizer.h"
#include "tests/support/subprocess.h"

namespace switchyard {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using testing::FreePort;
using testing::HttpGet;
using testing::JsonInt;
using testing::Request;
using testing::RunCommand;
using testing::WaitFor;

constexpr uint64_t kFunds = 5'000'000'000;
constexpr size_t kAccountsPerSlot = 10'000;

size_t AccountCount() {
  const char* env = std::getenv("SWITCHYARD_KILL_ACCOUNTS");
  return env != nullptr ? std::strtoull(env, nullptr, 10) : 50'000;
}

std::string StatusDigest(const std::string& status) {
  const size_t at = status.find("\"digest\":\"");
  if (at == std::string::npos) return "";
  return status.substr(at + 10, 32);
}

// One request of the load and what makes its answer correct.
struct LoadCall {
  std::string body;
  std::function<bool(simdjson::dom::element)> correct;
};

struct Outcome {
  Clock::time_point at;
  bool answered = false;  // an HTTP 200 with a JSON-RPC result
  bool correct = false;
};

class KillTest : public testing::ProcessTest {};

TEST_F(KillTest, SigkillUnderLoadServesAgainWithinASecondWithTheSameDigest) {
  const size_t accounts = AccountCount();
  const std::string data = dir_.Sub("data");
  testing::GeneratorOptions keys;
  keys.accounts = accounts;
  keys.account_seed = 99;
  const std::vector<Pubkey> delegated = testing::GeneratedAccounts(keys);
  std::vector<Pubkey> validators;
  for (uint8_t v = 1; v <= 4; ++v) validators.push_back(testing::TestKey(0xC0 + v));
  {
    EmbeddedEventLogOptions options;
    options.sync_appends = false;
    auto log = EmbeddedEventLog::Open(data + "/log", options);
    ASSERT_TRUE(log.ok()) << log.status();
    std::vector<OutgoingRecord> records;
    Slot slot = 1;
    for (size_t i = 0; i < accounts; ++i) {
      DelegatedEvent d;
      d.account = delegated[i];
      d.validator = validators[i % validators.size()];
      d.owner_program = testing::TestKey(0xAA);
      d.slot = slot;
      d.lamports = 1'000'000 + i;
      const Event event(d);
      records.push_back({EventKey(event), EncodeEvent(event), {}});
      if ((i + 1) % kAccountsPerSlot == 0 || i + 1 == accounts) {
        const Event seal(SlotSealedEvent{slot++});
        records.push_back({EventKey(seal), EncodeEvent(seal), {}});
        ASSERT_TRUE((*log)->Append(records).ok());
        records.clear();
      }
    }
  }
  const auto fold_started = Clock::now();
  testing::CommandResult fold = RunCommand({SWITCHYARD_BINARY, "fold", "--data-dir", data});
  ASSERT_EQ(fold.exit_code, 0) << fold.err;
  RecordProperty("fold_ms", std::to_string((Clock::now() - fold_started) / 1ms));

  const Pubkey funded = testing::TestKey(0x51);
  const uint16_t base = StartLocalnet(
      "base", {"--slot-ms", "50", "--fund", fmt::format("{}={}", funded.ToBase58(), kFunds)});
  ASSERT_GT(base, 0);
  const std::string ready_file = dir_.Sub("serve.ready");
  const std::string config = dir_.Sub("serve.toml");
  const std::vector<std::string> serve_argv = {
      SWITCHYARD_BINARY, "serve", "--config",     config,
      "--data-dir",      data,    "--ready-file", ready_file};
  // The API keeps its port across the restart, so the test picks one; another test may take
  // it first, and then serve exits (the port is in use) and another is tried.
  uint16_t api = 0;
  pid_t serve = -1;
  for (int attempt = 0; attempt < 5 && serve < 0; ++attempt) {
    api = FreePort();
    std::ofstream(config) << fmt::format(
        "[api]\nlisten = \"127.0.0.1:{}\"\n"
        "[admin]\nlisten = \"127.0.0.1:0\"\n"
        "[upstreams.base]\nendpoints = [{{url = \"http://127.0.0.1:{}\"}}]\n",
        api, base);
    const pid_t started = Start(serve_argv);
    ASSERT_GT(started, 0);
    int wait_status = 0;
    bool exited = false;
    WaitFor(
        [&] {
          exited = waitpid(started, &wait_status, WNOHANG) == started;
          auto text = testing::ReadFile(ready_file);
          return exited || (text && text->find('}') != std::string::npos);
        },
        60s);
    if (exited) {
      std::erase(processes_, started);
    } else {
      serve = started;
    }
  }
  ASSERT_GT(serve, 0) << "serve did not start on any of five ports";
  uint16_t admin = static_cast<uint16_t>(JsonInt(WaitForReadyFile(ready_file), "admin"));
  ASSERT_GT(admin, 0);
  auto status = HttpGet(admin, "/status");
  ASSERT_TRUE(status.has_value());
  const std::string digest = StatusDigest(status->body);
  ASSERT_EQ(digest.size(), 32u) << status->body;
  ASSERT_EQ(JsonInt(status->body, "delegated_accounts"), static_cast<int64_t>(accounts))
      << status->body;

  // The load: getAccountInfo and getMultipleAccounts of a funded account (base), and
  // getDelegationStatus of delegated accounts (the state), each answer checked.
  std::vector<LoadCall> calls;
  calls.push_back({Request("getAccountInfo", fmt::format(R"(["{}"])", funded.ToBase58())),
                   [](simdjson::dom::element result) {
                     uint64_t lamports = 0;
                     return result["value"]["lamports"].get_uint64().get(lamports) ==
                                simdjson::SUCCESS &&
                            lamports == kFunds;
                   }});
  calls.push_back({Request("getMultipleAccounts", fmt::format(R"([["{}","{}"]])", funded.ToBase58(),
                                                              testing::TestKey(0x52).ToBase58())),
                   [](simdjson::dom::element result) {
                     uint64_t lamports = 0;
                     return result["value"].at(0)["lamports"].get_uint64().get(lamports) ==
                                simdjson::SUCCESS &&
                            lamports == kFunds && result["value"].at(1).is_null();
                   }});
  std::mt19937_64 rng(5);
  for (int k = 0; k < 64; ++k) {
    const size_t i = rng() % accounts;
    const std::string authority = validators[i % validators.size()].ToBase58();
    calls.push_back(
        {Request("getDelegationStatus", fmt::format(R"(["{}"])", delegated[i].ToBase58())),
         [authority](simdjson::dom::element result) {
           std::string_view got;
           return result["isDelegated"].is_bool() && result["isDelegated"].get_bool().value() &&
                  result["delegationRecord"]["authority"].get_string().get(got) ==
                      simdjson::SUCCESS &&
                  got == authority;
         }});
  }
  std::atomic<bool> stop{false};
  std::mutex outcomes_mu;
  std::vector<Outcome> outcomes;
  std::thread client([&] {
    simdjson::dom::parser parser;
    size_t next = 0;
    while (!stop.load()) {
      testing::HttpClient connection(api, std::chrono::seconds(2));
      if (!connection.connected()) {
        std::lock_guard lock(outcomes_mu);
        outcomes.push_back({Clock::now(), false, false});
        std::this_thread::sleep_for(1ms);
        continue;
      }
      while (!stop.load()) {
        const LoadCall& call = calls[next++ % calls.size()];
        auto response = connection.Post("/", call.body);
        Outcome outcome{Clock::now(), false, false};
        simdjson::dom::element root;
        if (response.result_int() == 200 &&
            parser.parse(response.body()).get(root) == simdjson::SUCCESS &&
            root["result"].error() == simdjson::SUCCESS) {
          outcome.answered = true;
          outcome.correct = call.correct(root["result"].value());
        }
        {
          std::lock_guard lock(outcomes_mu);
          outcomes.push_back(outcome);
        }
        if (response.result_int() == 0) break;  // the connection is gone: connect again
      }
    }
  });
  auto count_since = [&](Clock::time_point from, bool correct_only) {
    std::lock_guard lock(outcomes_mu);
    size_t n = 0;
    for (const Outcome& o : outcomes) n += o.at >= from && (!correct_only || o.correct);
    return n;
  };
  const auto load_started = Clock::now();
  ASSERT_TRUE(WaitFor([&] { return count_since(load_started, true) >= 200; }, 10s));

  const auto killed_at = Clock::now();
  ASSERT_EQ(kill(serve, SIGKILL), 0);
  ASSERT_EQ(testing::WaitProcess(serve), 128 + SIGKILL);
  std::erase(processes_, serve);
  std::filesystem::remove(ready_file);
  const auto started_at = Clock::now();
  serve = Start(serve_argv);
  ASSERT_GT(serve, 0);
  ASSERT_TRUE(WaitFor([&] { return count_since(started_at, true) > 0; }, 30s));
  Clock::time_point first_correct;
  {
    std::lock_guard lock(outcomes_mu);
    for (const Outcome& o : outcomes) {
      if (o.at >= started_at && o.correct) {
        first_correct = o.at;
        break;
      }
    }
  }
  const auto after_restart = Clock::now();
  ASSERT_TRUE(WaitFor([&] { return count_since(after_restart, true) >= 200; }, 10s));
  stop = true;
  client.join();

  const double kill_to_answer_ms =
      std::chrono::duration<double, std::milli>(first_correct - killed_at).count();
  const double start_to_answer_ms =
      std::chrono::duration<double, std::milli>(first_correct - started_at).count();
  RecordProperty("accounts", std::to_string(accounts));
  RecordProperty("kill_to_first_correct_answer_ms", fmt::format("{:.1f}", kill_to_answer_ms));
  RecordProperty("start_to_first_correct_answer_ms", fmt::format("{:.1f}", start_to_answer_ms));
  // A latency bound: a sanitized serve restarts at the sanitizer's speed, not the product's.
  if (!testing::kSanitized) {
    EXPECT_LT(kill_to_answer_ms, 1000.0);
  }

  // Every answer was correct, and the only failures fell while serve was down.
  size_t failed_while_up = 0;
  size_t failed_while_down = 0;
  size_t wrong = 0;
  for (const Outcome& o : outcomes) {
    if (o.answered && !o.correct) ++wrong;
    if (o.answered) continue;
    if (o.at >= killed_at && o.at < first_correct) {
      ++failed_while_down;
    } else {
      ++failed_while_up;
    }
  }
  EXPECT_EQ(wrong, 0u);
  EXPECT_EQ(failed_while_up, 0u);
  EXPECT_GT(failed_while_down, 0u) << "no request fell in the outage: the kill was not seen";

  // The same state after the restart.
  admin = static_cast<uint16_t>(JsonInt(WaitForReadyFile(ready_file), "admin"));
  status = HttpGet(admin, "/status");
  ASSERT_TRUE(status.has_value());
  EXPECT_EQ(StatusDigest(status->body), digest) << status->body;
  EXPECT_EQ(JsonInt(status->body, "delegated_accounts"), static_cast<int64_t>(accounts));
  EXPECT_EQ(Terminate(serve, 15s), 0);
}

}  // namespace
}  // namespace switchyard
