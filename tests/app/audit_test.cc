// Audits against a localnet scenario with ground truth, through `switchyard serve` with ingest:
// every delegation in the history carries the signature of the scenario's Delegate
// transaction (seen live, or found by the backfill), a pruned base-layer history gives
// `unknown`, `history diff` equals the ground truth's difference, the JSON and CSV forms parse
// with Python's json and csv modules, the router's history methods answer what `audit` and
// `state get` print, and all of it works while serve holds the data directory.
#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "fmt/format.h"
#include "simdjson.h"
#include "tests/app/process_test.h"
#include "tests/localnet/test_clients.h"
#include "tests/support/subprocess.h"

namespace switchyard {
namespace {

using namespace std::chrono_literals;
using localnet::testing::HttpClient;
using testing::CommandResult;
using testing::HttpGet;
using testing::JsonInt;
using testing::MetricValue;
using testing::Request;
using testing::RunCommand;
using testing::WaitFor;

// One line of the localnet's ground truth: the delegated set after `slot` (account ->
// authority) and the Delegate transaction of each delegation.
struct TruthLine {
  uint64_t slot = 0;
  std::map<std::string, std::string> delegated;
  std::map<std::string, std::string> signatures;
};

std::vector<TruthLine> ReadTruth(const std::string& path) {
  std::vector<TruthLine> out;
  std::ifstream in(path);
  simdjson::dom::parser parser;
  for (std::string line; std::getline(in, line);) {
    simdjson::dom::element doc;
    if (parser.parse(line).get(doc) != simdjson::SUCCESS) continue;  // a line being written
    TruthLine truth;
    truth.slot = doc["slot"].get_uint64().value();
    simdjson::dom::object delegated;
    simdjson::dom::object signatures;
    if (doc["delegated"].get_object().get(delegated) != simdjson::SUCCESS ||
        doc["signatures"].get_object().get(signatures) != simdjson::SUCCESS) {
      continue;
    }
    for (auto [account, authority] : delegated) {
      truth.delegated[std::string(account)] = std::string(authority.get_string().value());
    }
    for (auto [account, signature] : signatures) {
      truth.signatures[std::string(account)] = std::string(signature.get_string().value());
    }
    out.push_back(std::move(truth));
  }
  return out;
}

// The ground truth at the end of `slot`: the last line at or below it.
const TruthLine* TruthAt(const std::vector<TruthLine>& truth, uint64_t slot) {
  const TruthLine* at = nullptr;
  for (const TruthLine& line : truth) {
    if (line.slot > slot) break;
    at = &line;
  }
  return at;
}

// A history row as the audit's JSON shows it.
struct Row {
  uint64_t slot = 0;
  std::string kind;
  std::string validator;
  std::string signature;
  std::string source;
  bool ignored = false;
  std::string json;  // minified
};

std::vector<Row> ParseRows(simdjson::dom::array rows) {
  std::vector<Row> out;
  for (simdjson::dom::element e : rows) {
    Row row;
    row.slot = e["slot"].get_uint64().value();
    row.kind = std::string(e["kind"].get_string().value());
    std::string_view text;
    if (e["validator"].get_string().get(text) == simdjson::SUCCESS) row.validator = text;
    if (e["signature"].get_string().get(text) == simdjson::SUCCESS) row.signature = text;
    if (e["source"].get_string().get(text) == simdjson::SUCCESS) row.source = text;
    row.ignored = e["ignored"].get_bool().value();
    row.json = simdjson::minify(e);
    out.push_back(std::move(row));
  }
  return out;
}

class AuditTest : public testing::ProcessTest {
 protected:
  // A base layer whose scenario delegates and undelegates over two ER identities from
  // `start_slot` to `stop_slot` (10 ms slots), writing its ground truth.
  void StartScenario(uint64_t start_slot, uint64_t stop_slot, std::vector<std::string> extra = {}) {
    truth_path_ = dir_.Sub("truth.jsonl");
    std::vector<std::string> args = {"--slot-ms",
                                     "10",
                                     "--seed",
                                     "21",
                                     "--accounts",
                                     "30",
                                     "--delegate-rate",
                                     "0.6",
                                     "--undelegate-rate",
                                     "0.3",
                                     "--scenario-er-count",
                                     "2",
                                     "--ground-truth",
                                     truth_path_,
                                     "--scenario-start-slot",
                                     std::to_string(start_slot),
                                     "--scenario-stop-slot",
                                     std::to_string(stop_slot)};
    args.insert(args.end(), extra.begin(), extra.end());
    base_port_ = StartLocalnet("base", args);
    ASSERT_GT(base_port_, 0);
  }

  uint64_t BaseSlot() {
    HttpClient client(base_port_);
    std::optional<std::string> answer = client.Post(Request("getSlot", "[]"));
    return answer ? static_cast<uint64_t>(std::max<int64_t>(JsonInt(*answer, "result"), 0)) : 0;
  }

  // `switchyard serve` with ingest from the base layer, its API and admin on free ports.
  void StartServe() {
    const std::string url = fmt::format("http://127.0.0.1:{}", base_port_);
    const std::string config =
        WriteFile("serve.toml", fmt::format("[api]\nlisten = \"127.0.0.1:0\"\nthreads = 1\n"
                                            "[admin]\nlisten = \"127.0.0.1:0\"\n"
                                            "[upstreams.base]\nendpoints = [{{url = \"{}\"}}]\n"
                                            "[ingest]\nbase_url = \"{}\"\n",
                                            url, url));
    const std::string ready = dir_.Sub("serve.ready");
    serve_ = Start({SWITCHYARD_BINARY, "serve", "--config", config, "--data-dir", data_dir(),
                    "--ready-file", ready});
    const std::string ports = WaitForReadyFile(ready);
    api_port_ = static_cast<uint16_t>(JsonInt(ports, "api"));
    admin_port_ = static_cast<uint16_t>(JsonInt(ports, "admin"));
    ASSERT_GT(api_port_, 0);
    ASSERT_GT(admin_port_, 0);
  }

  int64_t AppliedSlot() {
    auto status = HttpGet(admin_port_, "/status");
    return status ? JsonInt(status->body, "applied_slot") : -1;
  }

  // Waits until serve has applied `slot` and the ground truth has reached it.
  void WaitApplied(uint64_t slot) {
    ASSERT_TRUE(WaitFor([&] { return AppliedSlot() >= static_cast<int64_t>(slot); }, 60s))
        << "applied slot " << AppliedSlot();
    truth_ = ReadTruth(truth_path_);
    ASSERT_FALSE(truth_.empty());
  }

  std::string data_dir() const { return dir_.Sub("data"); }

  CommandResult Cli(std::vector<std::string> args) {
    args.insert(args.begin(), SWITCHYARD_BINARY);
    args.push_back("--data-dir");
    args.push_back(data_dir());
    return RunCommand(args);
  }

  // Every account the scenario ever delegated.
  std::set<std::string> DelegatedAccounts() const {
    std::set<std::string> out;
    for (const TruthLine& line : truth_) {
      for (const auto& [account, authority] : line.delegated) out.insert(account);
    }
    return out;
  }

  // `switchyard audit ACCOUNT --format json`, parsed.
  std::vector<Row> Audit(const std::string& account, std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {"audit", account, "--format", "json"};
    args.insert(args.end(), extra.begin(), extra.end());
    CommandResult r = Cli(args);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    simdjson::dom::parser parser;
    simdjson::dom::array rows;
    EXPECT_EQ(parser.parse(r.out).get_array().get(rows), simdjson::SUCCESS) << r.out;
    return r.exit_code == 0 ? ParseRows(rows) : std::vector<Row>();
  }

  // Checks every delegated row of every audited account against the ground truth: the
  // signature of the Delegate applied at the row's slot, or `unknown` when `pruned`. Returns
  // the number of rows checked per source.
  std::map<std::string, int> CheckDelegatedRows(bool pruned) {
    std::map<std::string, int> by_source;
    for (const std::string& account : DelegatedAccounts()) {
      for (const Row& row : Audit(account)) {
        if (row.kind != "delegated" || row.ignored) continue;
        const TruthLine* at = TruthAt(truth_, row.slot);
        if (at == nullptr || at->slot != row.slot) {
          ADD_FAILURE() << "no ground truth at the delegation slot: " << row.json;
          continue;
        }
        auto authority = at->delegated.find(account);
        EXPECT_TRUE(authority != at->delegated.end() && authority->second == row.validator)
            << row.json;
        if (pruned) {
          EXPECT_EQ(row.signature, "unknown") << row.json;
        } else {
          auto signature = at->signatures.find(account);
          EXPECT_TRUE(signature != at->signatures.end() && row.signature == signature->second)
              << row.json;
        }
        ++by_source[row.source];
      }
    }
    return by_source;
  }

  std::string truth_path_;
  std::vector<TruthLine> truth_;
  uint16_t base_port_ = 0;
  uint16_t api_port_ = 0;
  uint16_t admin_port_ = 0;
  pid_t serve_ = 0;
};

constexpr uint64_t kStart = 300;
constexpr uint64_t kStop = 420;

// Serve follows the base layer from before the scenario's first transaction: the delegations
// are seen live, each with its Delegate transaction; `audit` reads them while serve runs.
TEST_F(AuditTest, LiveDelegationsCarryTheSignatureOfTheirDelegateTransaction) {
  StartScenario(kStart, kStop);
  StartServe();
  WaitApplied(kStop + 20);
  const std::map<std::string, int> by_source = CheckDelegatedRows(/*pruned=*/false);
  EXPECT_GT(by_source.count("live") ? by_source.at("live") : 0, 10);
  for (const auto& [source, count] : by_source) {
    EXPECT_TRUE(source == "live" || source == "backfill") << source << " " << count;
  }
}

// Serve starts after the scenario has ended: the backfill finds each delegation's transaction
// with getSignaturesForAddress of its record.
TEST_F(AuditTest, BackfilledDelegationsCarryTheSignatureFoundForTheirRecord) {
  StartScenario(1, 40);
  ASSERT_TRUE(WaitFor([&] { return BaseSlot() > 60; }, 30s));
  StartServe();
  WaitApplied(70);
  const std::map<std::string, int> by_source = CheckDelegatedRows(/*pruned=*/false);
  ASSERT_EQ(by_source.size(), 1u);
  EXPECT_GT(by_source.at("backfill"), 3);
}

// The base layer keeps 20 slots of transactions: by the time serve backfills, the Delegate
// transactions are gone, and the audit says `unknown`.
TEST_F(AuditTest, PrunedBaseHistoryGivesUnknownSignatures) {
  StartScenario(1, 40, {"--transaction-history-slots", "20"});
  ASSERT_TRUE(WaitFor([&] { return BaseSlot() > 90; }, 30s));
  StartServe();
  WaitApplied(100);
  const std::map<std::string, int> by_source = CheckDelegatedRows(/*pruned=*/true);
  ASSERT_EQ(by_source.size(), 1u);
  EXPECT_GT(by_source.at("backfill"), 3);
  auto metrics = HttpGet(admin_port_, "/metrics");
  ASSERT_TRUE(metrics.has_value());
  EXPECT_EQ(
      MetricValue(metrics->body, "switchyard_ingest_signature_lookups_total{outcome=\"unknown\"}"),
      by_source.at("backfill"));
}

// `history diff` between random slot pairs lists exactly the accounts whose delegation the
// ground truth shows changed (delegated, undelegated, moved), each explained by its events.
TEST_F(AuditTest, HistoryDiffEqualsTheGroundTruthDifference) {
  StartScenario(kStart, kStop);
  StartServe();
  WaitApplied(kStop + 20);
  std::mt19937_64 rng(21);
  std::uniform_int_distribution<uint64_t> slots(kStart - 5, kStop + 10);
  int changes = 0;
  for (int round = 0; round < 12; ++round) {
    const uint64_t a = slots(rng);
    const uint64_t b = slots(rng);
    CommandResult r = Cli({"history", "diff", "--at", std::to_string(a), "--at", std::to_string(b),
                           "--format", "json"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    simdjson::dom::parser parser;
    simdjson::dom::array listed;
    ASSERT_EQ(parser.parse(r.out).get_array().get(listed), simdjson::SUCCESS) << r.out;
    std::map<std::string, std::string> got;
    for (simdjson::dom::element e : listed) {
      const std::string account(e["account"].get_string().value());
      const std::string change(e["change"].get_string().value());
      simdjson::dom::array events;
      ASSERT_EQ(e["events"].get_array().get(events), simdjson::SUCCESS);
      EXPECT_GT(events.size(), 0u) << simdjson::minify(e);
      if (change != "redelegated") got[account] = change;
    }
    const TruthLine* at_a = TruthAt(truth_, a);
    const TruthLine* at_b = TruthAt(truth_, b);
    const std::map<std::string, std::string> none;
    const auto& before = at_a ? at_a->delegated : none;
    const auto& after = at_b ? at_b->delegated : none;
    std::map<std::string, std::string> expected;
    for (const auto& [account, authority] : before) {
      auto it = after.find(account);
      if (it == after.end()) {
        expected[account] = "undelegated";
      } else if (it->second != authority) {
        expected[account] = "moved";
      }
    }
    for (const auto& [account, authority] : after) {
      if (!before.contains(account)) expected[account] = "delegated";
    }
    EXPECT_EQ(got, expected) << "--at " << a << " --at " << b;
    changes += static_cast<int>(expected.size());
  }
  EXPECT_GT(changes, 10);
}

// The JSON and CSV forms of `audit` and `history export` parse with Python's standard json
// and csv modules, and hold the rows the C++ side reads.
TEST_F(AuditTest, JsonAndCsvOutputsParseWithPythonsStandardModules) {
  StartScenario(kStart, kStop);
  StartServe();
  WaitApplied(kStop + 20);
  const std::string account = *DelegatedAccounts().begin();
  const std::vector<Row> rows = Audit(account);
  ASSERT_FALSE(rows.empty());
  const std::string json_path = dir_.Sub("audit.json");
  const std::string csv_path = dir_.Sub("audit.csv");
  std::ofstream(json_path) << Cli({"audit", account, "--format", "json"}).out;
  std::ofstream(csv_path) << Cli({"audit", account, "--format", "csv"}).out;
  const std::string export_jsonl = dir_.Sub("export.jsonl");
  const std::string export_csv = dir_.Sub("export.csv");
  ASSERT_EQ(Cli({"history", "export", "--format", "jsonl", "--out", export_jsonl}).exit_code, 0);
  ASSERT_EQ(Cli({"history", "export", "--format", "csv", "--out", export_csv}).exit_code, 0);
  const std::string script = WriteFile("check.py", R"(import csv, json, sys
audit = json.load(open(sys.argv[1]))
with open(sys.argv[2], newline="") as f:
    audit_csv = list(csv.DictReader(f))
assert [r["signature"] for r in audit] == [r["signature"] for r in audit_csv]
assert [str(r["slot"]) for r in audit] == [r["slot"] for r in audit_csv]
export = [json.loads(line) for line in open(sys.argv[3])]
with open(sys.argv[4], newline="") as f:
    export_csv = list(csv.DictReader(f))
assert [r["seq"] for r in export] == [int(r["seq"]) for r in export_csv]
slots = [r["slot"] for r in export]
assert slots == sorted(slots)
print(len(audit), len(export), audit[0]["signature"])
)");
  CommandResult py =
      RunCommand({"/usr/bin/python3", script, json_path, csv_path, export_jsonl, export_csv});
  ASSERT_EQ(py.exit_code, 0) << py.err;
  uint64_t history_rows = 0;
  for (const std::string& a : DelegatedAccounts()) history_rows += Audit(a).size();
  EXPECT_EQ(py.out, fmt::format("{} {} {}\n", rows.size(), history_rows, rows[0].signature));
}

// getDelegationHistory answers the rows `switchyard audit` prints, and getDelegationStatus at a
// slot the delegation `state get --at-slot` shows, with its transaction; both while serve runs.
TEST_F(AuditTest, AuditOverRpcEqualsTheCommandLine) {
  StartScenario(kStart, kStop);
  StartServe();
  WaitApplied(kStop + 20);
  HttpClient router(api_port_);
  simdjson::dom::parser parser;
  int compared = 0;
  for (const std::string& account : DelegatedAccounts()) {
    const std::vector<Row> cli = Audit(account, {"--from-slot", "320", "--to-slot", "400"});
    std::optional<std::string> answer = router.Post(
        Request("getDelegationHistory",
                fmt::format(R"(["{}",{{"fromSlot":320,"toSlot":400,"limit":1000}}])", account)));
    ASSERT_TRUE(answer.has_value());
    simdjson::dom::array value;
    ASSERT_EQ(parser.parse(*answer)["result"]["value"].get_array().get(value), simdjson::SUCCESS)
        << *answer;
    const std::vector<Row> rpc = ParseRows(value);
    ASSERT_EQ(rpc.size(), cli.size()) << *answer;
    for (size_t i = 0; i < rpc.size(); ++i) EXPECT_EQ(rpc[i].json, cli[i].json);
    for (const Row& row : cli) {
      if (row.kind != "delegated" || row.ignored) continue;
      CommandResult state = Cli({"state", "get", account, "--at-slot", std::to_string(row.slot)});
      ASSERT_EQ(state.exit_code, 0) << state.err;
      std::optional<std::string> status = router.Post(Request(
          "getDelegationStatus", fmt::format(R"(["{}",{{"slot":{}}}])", account, row.slot)));
      ASSERT_TRUE(status.has_value());
      simdjson::dom::element result = parser.parse(*status)["result"];
      const std::string_view authority =
          result["delegationRecord"]["authority"].get_string().value();
      const std::string_view signature = result["delegationSignature"].get_string().value();
      EXPECT_TRUE(result["isDelegated"].get_bool().value());
      EXPECT_EQ(authority, row.validator);
      EXPECT_EQ(signature, row.signature);
      EXPECT_NE(state.out.find(fmt::format("validator={}", authority)), std::string::npos)
          << state.out;
      EXPECT_NE(state.out.find(fmt::format("delegated_by={}", signature)), std::string::npos)
          << state.out;
      ++compared;
    }
  }
  EXPECT_GT(compared, 5);
  // A slot the fold has not applied yet cannot be answered yet.
  std::optional<std::string> future = router.Post(
      Request("getDelegationStatus",
              fmt::format(R"(["{}",{{"slot":{}}}])", *DelegatedAccounts().begin(), 1'000'000'000)));
  ASSERT_TRUE(future.has_value());
  EXPECT_NE(future->find("-32016"), std::string::npos) << *future;
}

// While serve holds the data directory, `state get` sees the folded state: every account the
// base layer has delegated is delegated, to the same validator.
TEST_F(AuditTest, StateGetSeesTheFoldedStateWhileServeRuns) {
  StartScenario(kStart, kStop);
  StartServe();
  WaitApplied(kStop + 20);
  const TruthLine* last = TruthAt(truth_, kStop + 20);
  ASSERT_NE(last, nullptr);
  ASSERT_FALSE(last->delegated.empty());
  for (const auto& [account, authority] : last->delegated) {
    CommandResult state = Cli({"state", "get", account});
    ASSERT_EQ(state.exit_code, 0) << state.err;
    EXPECT_NE(state.out.find("status=delegated validator=" + authority), std::string::npos)
        << state.out;
  }
  EXPECT_EQ(Terminate(serve_, 15s), 0);
}

}  // namespace
}  // namespace switchyard
