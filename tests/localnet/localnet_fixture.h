#pragma once

// The in-process localnet fixture of the localnet tests: a base (and an ER when asked) on
// free ports, a keep-alive client, two funded keypairs, and JSON helpers.
#include <sodium.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "common/endian.h"
#include "fmt/format.h"
#include "gtest/gtest.h"
#include "localnet/localnet.h"
#include "simdjson.h"
#include "solana/base64.h"
#include "solana/delegation.h"
#include "solana/transaction.h"
#include "tests/localnet/test_clients.h"
#include "tests/support/test_transactions.h"
#include "zstd.h"

namespace switchyard::localnet {

using namespace std::chrono_literals;
using testing::HttpAnswer;
using testing::HttpClient;
using testing::WsClient;

using ::switchyard::testing::BuildTransaction;
using ::switchyard::testing::Keypair;
using ::switchyard::testing::MakeKeypair;

inline std::string TransferData(uint64_t lamports) {
  std::string data;
  AppendU32LE(&data, 2);
  AppendU64LE(&data, lamports);
  return data;
}

inline std::string Request(std::string_view method, std::string_view params) {
  return fmt::format("{{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"{}\",\"params\":{}}}", method,
                     params);
}

// Parsed JSON kept alive with its parser.
struct Json {
  simdjson::dom::parser parser;
  simdjson::dom::element root;
};
inline std::unique_ptr<Json> Parse(const std::optional<std::string>& text) {
  auto json = std::make_unique<Json>();
  EXPECT_TRUE(text.has_value());
  if (!text.has_value()) return json;
  EXPECT_EQ(json->parser.parse(*text).get(json->root), simdjson::SUCCESS) << *text;
  return json;
}

inline bool WaitFor(const std::function<bool()>& condition,
                    std::chrono::milliseconds deadline = 10s) {
  const auto end = std::chrono::steady_clock::now() + deadline;
  while (std::chrono::steady_clock::now() < end) {
    if (condition()) return true;
    std::this_thread::sleep_for(2ms);
  }
  return condition();
}

class LocalnetTest : public ::testing::Test {
 protected:
  void StartBase(LocalnetOptions options = {}) {
    options.port = 0;
    options.io_threads = 2;
    if (options.slot_interval == absl::Milliseconds(400))
      options.slot_interval = absl::Milliseconds(5);
    options.genesis_accounts.emplace_back(alice_.pubkey, 10'000'000'000);
    base_ = std::make_unique<Localnet>(options, &clock_);
    ASSERT_TRUE(base_->Start().ok());
    client_ = std::make_unique<HttpClient>(base_->http_port());
  }

  std::unique_ptr<Json> Call(std::string_view method, std::string_view params,
                             HttpClient* client = nullptr) {
    return Parse((client ? client : client_.get())->Post(Request(method, params)));
  }

  Hash LatestBlockhash(HttpClient* client = nullptr) {
    auto json = Call("getLatestBlockhash", "[]", client);
    std::string_view text = json->root["result"]["value"]["blockhash"].get_string().value();
    return Hash::FromBase58(text).value();
  }

  // Waits until `signature` is finalized and returns its err (as JSON).
  std::string WaitForSignature(std::string_view signature, HttpClient* client = nullptr) {
    std::string err;
    EXPECT_TRUE(WaitFor([&] {
      auto json = Call("getSignatureStatuses", fmt::format("[[\"{}\"]]", signature), client);
      simdjson::dom::element status = json->root["result"]["value"].at(0).value();
      if (status.is_null()) return false;
      EXPECT_EQ(status["confirmationStatus"].get_string().value(), "finalized");
      err = simdjson::minify(status["err"].value());
      return true;
    }));
    return err;
  }

  uint64_t Balance(const Pubkey& key, HttpClient* client = nullptr) {
    auto json = Call("getBalance", fmt::format("[\"{}\"]", key.ToBase58()), client);
    return json->root["result"]["value"].get_uint64().value();
  }

  // Sends a transfer with `blockhash`, by default the latest of the chain it is sent to.
  std::string SendTransfer(const Keypair& from, const Pubkey& to, uint64_t lamports,
                           HttpClient* client = nullptr, std::optional<Hash> blockhash = {},
                           bool skip_preflight = false) {
    const std::string tx =
        BuildTransaction({&from}, {from.pubkey, to, Pubkey()}, MessageHeader{1, 0, 1},
                         blockhash.has_value() ? *blockhash : LatestBlockhash(client),
                         {CompiledInstruction{2, {0, 1}, TransferData(lamports)}});
    auto response =
        (client ? client : client_.get())
            ->Post(Request("sendTransaction",
                           fmt::format("[\"{}\",{{\"encoding\":\"base64\",\"skipPreflight\":{}}}]",
                                       tx, skip_preflight)));
    return response.value_or("");
  }

  // Starts an ER localnet in front of the base, with 5 ms slots.
  std::unique_ptr<Localnet> StartEr(const Pubkey& identity, LocalnetOptions er_options = {}) {
    er_options.er_mode = true;
    er_options.identity = identity;
    er_options.base_url = fmt::format("http://127.0.0.1:{}", base_->http_port());
    er_options.fee_lamports_per_signature = 0;
    er_options.port = 0;
    er_options.io_threads = 1;
    er_options.slot_interval = absl::Milliseconds(5);
    auto er = std::make_unique<Localnet>(er_options, &clock_);
    EXPECT_TRUE(er->Start().ok());
    return er;
  }

  // Sends a Delegate of `account` (owned by `owner_program`) to `validator`, signed by payer.
  std::string SendDelegate(const Keypair& payer, const Pubkey& account, const Pubkey& owner_program,
                           const Pubkey& validator) {
    std::vector<Pubkey> keys = {payer.pubkey,
                                account,
                                DelegateBufferPda(account, owner_program),
                                DelegationRecordPda(account),
                                DelegationMetadataPda(account),
                                owner_program,
                                Pubkey(),
                                DelegationProgramId()};
    std::vector<uint8_t> accounts = {0, 1, 5, 2, 3, 4, 6};
    uint8_t program_index = 7;
    MessageHeader header{1, 0, 3};
    if (owner_program == Pubkey()) {
      // A system-owned account: the owner program is the system program, listed once.
      keys.erase(keys.begin() + 5);
      accounts = {0, 1, 5, 2, 3, 4, 5};
      program_index = 6;
      header = MessageHeader{1, 0, 2};
    }
    const std::string tx =
        BuildTransaction({&payer}, keys, header, LatestBlockhash(),
                         {CompiledInstruction{program_index, accounts,
                                              EncodeDelegateInstructionData(1000, {}, validator)}});
    return client_
        ->Post(Request("sendTransaction", fmt::format("[\"{}\",{{\"encoding\":\"base64\"}}]", tx)))
        .value_or("");
  }

  std::string SendUndelegate(const Keypair& validator, const Pubkey& account,
                             const Pubkey& owner_program) {
    std::vector<Pubkey> keys = {validator.pubkey,
                                account,
                                UndelegateBufferPda(account),
                                CommitStatePda(account),
                                CommitRecordPda(account),
                                DelegationRecordPda(account),
                                DelegationMetadataPda(account),
                                FeesVaultPda(),
                                ValidatorFeesVaultPda(validator.pubkey),
                                owner_program,
                                Pubkey(),
                                DelegationProgramId()};
    std::string data(8, '\0');
    data[0] = 3;
    const std::string tx =
        BuildTransaction({&validator}, keys, MessageHeader{1, 0, 3}, LatestBlockhash(),
                         {CompiledInstruction{11, {0, 1, 9, 2, 3, 4, 5, 6, 0, 7, 8, 10}, data}});
    return client_
        ->Post(Request("sendTransaction", fmt::format("[\"{}\",{{\"encoding\":\"base64\"}}]", tx)))
        .value_or("");
  }

  static std::string ResultString(const std::string& response) {
    simdjson::dom::parser parser;
    std::string_view text;
    if (parser.parse(response)["result"].get_string().get(text) != simdjson::SUCCESS) return "";
    return std::string(text);
  }

  void TearDown() override {
    if (er_) er_->Stop();
    if (base_) base_->Stop();
  }

  SystemClock clock_;
  Keypair alice_ = MakeKeypair(1);
  Keypair bob_ = MakeKeypair(2);
  std::unique_ptr<Localnet> base_;
  std::unique_ptr<Localnet> er_;
  std::unique_ptr<HttpClient> client_;
};

}  // namespace switchyard::localnet
