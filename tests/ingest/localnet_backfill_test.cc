// Ingest's view of a real base layer: switchyard-localnet runs its scenario driver (real
// Delegate and Undelegate transactions over several ER identities); the delegations read
// back through getProgramAccounts and the delegation instructions read back through
// getTransaction must match the ground truth the localnet wrote.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <simdjson.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <thread>

#include "ingest/chain_view.h"
#include "ingest/transaction_view.h"
#include "tests/localnet/test_clients.h"
#include "tests/support/localnet_process.h"
#include "tests/support/subprocess.h"
#include "tests/support/temp_dir.h"

namespace switchyard {
namespace {

using testing::GroundTruthAt;

std::string Request(const std::string& method, const std::string& params) {
  return fmt::format(R"({{"jsonrpc":"2.0","id":1,"method":"{}","params":{}}})", method, params);
}

TEST(LocalnetBackfillTest, ProgramAccountsAndTransactionsMatchTheGroundTruth) {
  testing::TempDir dir;
  const std::string truth = dir.Sub("truth.jsonl");
  const testing::LocalnetProcess net = testing::StartLocalnetProcess(
      SWITCHYARD_LOCALNET_BINARY, dir.Sub("ready.json"),
      {"--slot-ms", "10", "--seed", "7", "--accounts", "60", "--delegate-rate", "2",
       "--undelegate-rate", "1", "--scenario-er-count", "3", "--ground-truth", truth});
  ASSERT_NE(net.http_port, 0) << "localnet did not start";
  const pid_t pid = net.pid;
  const uint16_t port = net.http_port;
  simdjson::dom::parser parser;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  localnet::testing::HttpClient client(port);

  // Let the scenario run a while, then read the program's accounts at one context slot.
  Slot slot = 0;
  while (slot < 150 && std::chrono::steady_clock::now() < deadline) {
    auto body = client.Post(Request("getSlot", "[]"));
    ASSERT_TRUE(body.has_value());
    slot = parser.parse(*body)["result"].get_uint64().value();
  }
  ASSERT_GE(slot, 150u);
  auto body = client.Post(Request(
      "getProgramAccounts",
      R"(["DELeGGvXpWV2fqJUhqcF5ZSYMS4JTLjteaAMARRSaeSh",{"encoding":"base64","withContext":true}])"));
  ASSERT_TRUE(body.has_value());
  auto snapshot = ParseProgramAccountsResponse(*body);
  ASSERT_TRUE(snapshot.ok()) << snapshot.status();
  ChainViewCounters counters;
  const std::vector<DelegatedEvent> delegations = DelegationsOf(*snapshot, &counters);

  // Transactions of the delegation program, newest first.
  auto signatures =
      client.Post(Request("getSignaturesForAddress",
                          R"(["DELeGGvXpWV2fqJUhqcF5ZSYMS4JTLjteaAMARRSaeSh",{"limit":20}])"));
  ASSERT_TRUE(signatures.has_value());
  std::vector<std::string> sigs;
  simdjson::dom::array entries = parser.parse(*signatures)["result"].get_array().value();
  for (auto entry : entries) {
    sigs.emplace_back(entry["signature"].get_string().value());
  }
  ASSERT_FALSE(sigs.empty());
  size_t delegates = 0;
  size_t undelegates = 0;
  size_t delegates_matched = 0;
  for (const std::string& sig : sigs) {
    auto tx = client.Post(Request(
        "getTransaction",
        fmt::format(R"(["{}",{{"encoding":"base64","maxSupportedTransactionVersion":0}}])", sig)));
    ASSERT_TRUE(tx.has_value());
    auto parsed = ParseTransactionResponse(*tx);
    ASSERT_TRUE(parsed.ok()) << parsed.status() << "\n" << *tx;
    EXPECT_EQ(parsed->signature.ToBase58(), sig);
    EXPECT_FALSE(parsed->failed);
    ASSERT_FALSE(parsed->instructions.empty());
    EXPECT_EQ(parsed->post_balances.size(), parsed->account_keys.size());
    for (const DelegationInstruction& ix : parsed->instructions) {
      if (ix.kind == DelegationInstructionKind::kUndelegate) ++undelegates;
      if (ix.kind != DelegationInstructionKind::kDelegate) continue;
      ++delegates;
      // What the transaction says of a delegation equals the record it made (the watcher
      // writes it from the transaction when the record has changed since).
      ASSERT_TRUE(parsed->PostBalanceOf(ix.delegated_account).has_value());
      for (const DelegatedEvent& d : delegations) {
        if (d.account != ix.delegated_account || d.slot != parsed->slot) continue;
        ++delegates_matched;
        EXPECT_EQ(d.validator, ix.validator.value_or(Pubkey()));
        EXPECT_EQ(d.owner_program, ix.owner_program);
        EXPECT_EQ(d.lamports, *parsed->PostBalanceOf(ix.delegated_account));
        EXPECT_EQ(d.commit_frequency_ms, ix.commit_frequency_ms);
      }
    }
  }
  ASSERT_EQ(kill(pid, SIGTERM), 0);
  EXPECT_EQ(testing::WaitProcess(pid), 0);

  const std::map<Pubkey, Pubkey> expected = GroundTruthAt(truth, snapshot->context_slot);
  ASSERT_FALSE(expected.empty());
  ASSERT_EQ(delegations.size(), expected.size()) << "at slot " << snapshot->context_slot;
  for (const DelegatedEvent& d : delegations) {
    auto it = expected.find(d.account);
    ASSERT_NE(it, expected.end()) << d.account.ToBase58();
    EXPECT_EQ(d.validator, it->second);
    EXPECT_LE(d.slot, snapshot->context_slot);
  }
  EXPECT_EQ(counters.records_malformed, 0u);
  EXPECT_GT(delegates, 0u);
  EXPECT_GT(undelegates, 0u);
  EXPECT_GT(delegates_matched, 0u);
}

}  // namespace
}  // namespace switchyard
