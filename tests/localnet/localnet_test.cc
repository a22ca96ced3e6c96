#include "localnet/localnet.h"

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
#include "simdjson.h"
#include "solana/base64.h"
#include "solana/delegation.h"
#include "solana/transaction.h"
#include "tests/localnet/test_clients.h"
#include "tests/support/test_transactions.h"
#include "zstd.h"

namespace switchyard::localnet {
namespace {

using namespace std::chrono_literals;
using testing::HttpAnswer;
using testing::HttpClient;
using testing::WsClient;

using ::switchyard::testing::BuildTransaction;
using ::switchyard::testing::Keypair;
using ::switchyard::testing::MakeKeypair;

std::string TransferData(uint64_t lamports) {
  std::string data;
  AppendU32LE(&data, 2);
  AppendU64LE(&data, lamports);
  return data;
}

std::string Request(std::string_view method, std::string_view params) {
  return fmt::format("{{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"{}\",\"params\":{}}}", method,
                     params);
}

// Parsed JSON kept alive with its parser.
struct Json {
  simdjson::dom::parser parser;
  simdjson::dom::element root;
};
std::unique_ptr<Json> Parse(const std::optional<std::string>& text) {
  auto json = std::make_unique<Json>();
  EXPECT_TRUE(text.has_value());
  if (!text.has_value()) return json;
  EXPECT_EQ(json->parser.parse(*text).get(json->root), simdjson::SUCCESS) << *text;
  return json;
}

bool WaitFor(const std::function<bool()>& condition, std::chrono::milliseconds deadline = 10s) {
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

TEST_F(LocalnetTest, GetAccountInfoHasTheValidatorShape) {
  StartBase();
  auto json = Call("getAccountInfo",
                   fmt::format("[\"{}\",{{\"encoding\":\"base64\"}}]", alice_.pubkey.ToBase58()));
  simdjson::dom::element result = json->root["result"];
  EXPECT_EQ(json->root["jsonrpc"].get_string().value(), "2.0");
  EXPECT_EQ(json->root["id"].get_uint64().value(), 7u);
  EXPECT_TRUE(result["context"]["slot"].is_uint64() || result["context"]["slot"].is_int64());
  simdjson::dom::element value = result["value"];
  EXPECT_EQ(value["lamports"].get_uint64().value(), 10'000'000'000u);
  EXPECT_EQ(value["owner"].get_string().value(), "11111111111111111111111111111111");
  EXPECT_EQ(value["data"].at(0).get_string().value(), "");
  EXPECT_EQ(value["data"].at(1).get_string().value(), "base64");
  EXPECT_EQ(value["space"].get_uint64().value(), 0u);
  EXPECT_FALSE(value["executable"].get_bool().value());
}

TEST_F(LocalnetTest, GetAccountInfoOfUnknownAccountIsNull) {
  StartBase();
  auto json = Call("getAccountInfo", fmt::format("[\"{}\"]", bob_.pubkey.ToBase58()));
  EXPECT_TRUE(json->root["result"]["value"].is_null());
}

TEST_F(LocalnetTest, UnsupportedEncodingIsAClearError) {
  StartBase();
  auto json = Call("getAccountInfo", fmt::format("[\"{}\",{{\"encoding\":\"jsonParsed\"}}]",
                                                 alice_.pubkey.ToBase58()));
  EXPECT_EQ(json->root["error"]["code"].get_int64().value(), -32602);
  EXPECT_NE(std::string(json->root["error"]["message"].get_string().value())
                .find("unsupported encoding: jsonParsed"),
            std::string::npos);
}

// The MagicBlock ephemeral validator asks for every account of its base in base64+zstd.
TEST_F(LocalnetTest, Base64ZstdDataDecompressesToTheBase64Data) {
  StartBase();
  const std::string clock = "SysvarC1ock11111111111111111111111111111111";
  auto plain = Call("getAccountInfo", fmt::format("[\"{}\",{{\"encoding\":\"base64\"}}]", clock));
  auto packed = Call("getMultipleAccounts",
                     fmt::format("[[\"{}\"],{{\"encoding\":\"base64+zstd\"}}]", clock));
  simdjson::dom::element data = packed->root["result"]["value"].at(0)["data"];
  ASSERT_EQ(data.at(1).get_string().value(), "base64+zstd");
  const std::string frame = Base64Decode(data.at(0).get_string().value()).value();
  std::string raw(ZSTD_getFrameContentSize(frame.data(), frame.size()), '\0');
  ASSERT_EQ(raw.size(), 40u);
  ASSERT_EQ(ZSTD_decompress(raw.data(), raw.size(), frame.data(), frame.size()), raw.size());
  const std::string expected =
      Base64Decode(plain->root["result"]["value"]["data"].at(0).get_string().value()).value();
  // A slot may pass between the two reads: compare all but the slot and the unix time.
  EXPECT_EQ(raw.substr(8, 24), expected.substr(8, 24));
}

// The ER follows its base's slot through an accountSubscribe of the Clock sysvar.
TEST_F(LocalnetTest, ClockSysvarHoldsTheSlotAndNotifiesEverySlot) {
  StartBase();
  const std::string clock = "SysvarC1ock11111111111111111111111111111111";
  auto json = Call("getAccountInfo", fmt::format("[\"{}\",{{\"encoding\":\"base64\"}}]", clock));
  simdjson::dom::element result = json->root["result"];
  EXPECT_EQ(result["value"]["owner"].get_string().value(),
            "Sysvar1111111111111111111111111111111111111");
  const std::string data = Base64Decode(result["value"]["data"].at(0).get_string().value()).value();
  ASSERT_EQ(data.size(), 40u);
  EXPECT_EQ(LoadU64LE(AsBytes(data.data())), result["context"]["slot"].get_uint64().value());

  WsClient ws(base_->ws_port());
  ASSERT_TRUE(ws.ok());
  ASSERT_TRUE(ws.Send(Request("accountSubscribe",
                              fmt::format("[\"{}\",{{\"encoding\":\"base64+zstd\"}}]", clock))));
  Parse(ws.Read(5s));
  std::vector<uint64_t> slots;
  WaitFor([&] {
    auto message = ws.Read(100ms);
    if (!message) return false;
    auto note = Parse(message);
    simdjson::dom::element value = note->root["params"]["result"]["value"];
    const std::string frame = Base64Decode(value["data"].at(0).get_string().value()).value();
    std::string raw(40, '\0');
    if (ZSTD_decompress(raw.data(), raw.size(), frame.data(), frame.size()) != 40) return false;
    slots.push_back(LoadU64LE(AsBytes(raw.data())));
    EXPECT_EQ(slots.back(), note->root["params"]["result"]["context"]["slot"].get_uint64().value());
    return slots.size() >= 3;
  });
  ASSERT_GE(slots.size(), 3u);
  EXPECT_EQ(slots[1], slots[0] + 1);
  EXPECT_EQ(slots[2], slots[1] + 1);
}

// The ER walks its base's blocks one by one with getBlock (full transactions, json).
TEST_F(LocalnetTest, GetBlockListsTheTransactionsOfItsSlotAndChainsBlockhashes) {
  StartBase();
  const std::string signature =
      ResultString(SendTransfer(alice_, bob_.pubkey, 1000, nullptr, LatestBlockhash()));
  ASSERT_FALSE(signature.empty());
  ASSERT_EQ(WaitForSignature(signature), "null");
  auto tx = Call("getTransaction", fmt::format("[\"{}\"]", signature));
  const uint64_t slot = tx->root["result"]["slot"].get_uint64().value();
  const std::string config =
      "{\"encoding\":\"json\",\"maxSupportedTransactionVersion\":255,\"rewards\":false,"
      "\"transactionDetails\":\"full\",\"commitment\":\"confirmed\"}";
  auto block = Call("getBlock", fmt::format("[{},{}]", slot, config));
  simdjson::dom::element result = block->root["result"];
  EXPECT_EQ(result["parentSlot"].get_uint64().value(), slot - 1);
  EXPECT_EQ(result["blockHeight"].get_uint64().value(), slot);
  EXPECT_TRUE(result["rewards"].error() == simdjson::NO_SUCH_FIELD);
  simdjson::dom::element entry = result["transactions"].at(0);
  EXPECT_EQ(entry["transaction"]["signatures"].at(0).get_string().value(), signature);
  EXPECT_EQ(entry["meta"]["fee"].get_uint64().value(), 5000u);
  EXPECT_EQ(entry["version"].get_string().value(), "legacy");
  EXPECT_TRUE(entry["slot"].error() == simdjson::NO_SUCH_FIELD);
  auto parent = Call("getBlock", fmt::format("[{},{}]", slot - 1, config));
  EXPECT_EQ(result["previousBlockhash"].get_string().value(),
            parent->root["result"]["blockhash"].get_string().value());

  auto signatures =
      Call("getBlock", fmt::format("[{},{{\"transactionDetails\":\"signatures\"}}]", slot));
  EXPECT_EQ(signatures->root["result"]["signatures"].at(0).get_string().value(), signature);
  EXPECT_EQ(signatures->root["result"]["rewards"].get_array().size(), 0u);
  auto future = Call("getBlock", fmt::format("[{}]", slot + 1'000'000));
  EXPECT_EQ(future->root["error"]["code"].get_int64().value(), -32004);
}

TEST_F(LocalnetTest, GetMultipleAccountsRejectsMoreThan100Keys) {
  StartBase();
  std::string keys;
  for (int i = 0; i < 101; ++i)
    keys += fmt::format("{}\"{}\"", i ? "," : "", alice_.pubkey.ToBase58());
  auto json = Call("getMultipleAccounts", fmt::format("[[{}]]", keys));
  EXPECT_EQ(json->root["error"]["code"].get_int64().value(), -32602);
}

TEST_F(LocalnetTest, UnknownMethodIsMethodNotFound) {
  StartBase();
  auto json = Call("getNothing", "[]");
  EXPECT_EQ(json->root["error"]["code"].get_int64().value(), -32601);
}

TEST_F(LocalnetTest, TransferAppliesAtTheNextSlotAndChargesTheFee) {
  StartBase();
  const std::string response =
      SendTransfer(alice_, bob_.pubkey, 1'000'000, nullptr, LatestBlockhash());
  const std::string signature = ResultString(response);
  ASSERT_FALSE(signature.empty()) << response;
  EXPECT_EQ(WaitForSignature(signature), "null");
  EXPECT_EQ(Balance(bob_.pubkey), 1'000'000u);
  EXPECT_EQ(Balance(alice_.pubkey), 10'000'000'000u - 1'000'000u - 5000u);
  auto tx = Call("getTransaction", fmt::format("[\"{}\",{{\"encoding\":\"json\"}}]", signature));
  simdjson::dom::element result = tx->root["result"];
  EXPECT_EQ(result["meta"]["fee"].get_uint64().value(), 5000u);
  EXPECT_EQ(result["transaction"]["signatures"].at(0).get_string().value(), signature);
  EXPECT_EQ(result["transaction"]["message"]["accountKeys"].at(1).get_string().value(),
            bob_.pubkey.ToBase58());
  auto sigs = Call("getSignaturesForAddress", fmt::format("[\"{}\"]", bob_.pubkey.ToBase58()));
  EXPECT_EQ(sigs->root["result"].at(0)["signature"].get_string().value(), signature);
}

TEST_F(LocalnetTest, TransferWithoutEnoughLamportsFailsPreflight) {
  StartBase();
  const std::string response =
      SendTransfer(alice_, bob_.pubkey, 20'000'000'000, nullptr, LatestBlockhash());
  auto json = Parse(response);
  EXPECT_EQ(json->root["error"]["code"].get_int64().value(), -32002);
  EXPECT_EQ(simdjson::minify(json->root["error"]["data"]["err"].value()),
            "{\"InstructionError\":[0,{\"Custom\":1}]}");
}

TEST_F(LocalnetTest, FeePayerMustExist) {
  StartBase();
  auto json = Parse(SendTransfer(bob_, alice_.pubkey, 1, nullptr, LatestBlockhash()));
  EXPECT_EQ(json->root["error"]["code"].get_int64().value(), -32002);
  EXPECT_EQ(json->root["error"]["data"]["err"].get_string().value(), "AccountNotFound");
}

TEST_F(LocalnetTest, VerifySignaturesRejectsABadSignature) {
  LocalnetOptions options;
  options.verify_signatures = true;
  StartBase(options);
  const std::string tx = BuildTransaction(
      {&alice_}, {alice_.pubkey, bob_.pubkey, Pubkey()}, MessageHeader{1, 0, 1}, LatestBlockhash(),
      {CompiledInstruction{2, {0, 1}, TransferData(5)}}, /*corrupt_signature=*/true);
  auto json = Parse(client_->Post(
      Request("sendTransaction", fmt::format("[\"{}\",{{\"encoding\":\"base64\"}}]", tx))));
  EXPECT_EQ(json->root["error"]["code"].get_int64().value(), -32003);
  // A good signature passes.
  EXPECT_FALSE(
      ResultString(SendTransfer(alice_, bob_.pubkey, 5, nullptr, LatestBlockhash())).empty());
}

TEST_F(LocalnetTest, DelegateAndUndelegateMoveOwnerRecordAndMetadata) {
  StartBase();
  const Pubkey owner_program = MakeKeypair(9).pubkey;
  const Keypair validator = MakeKeypair(7);
  const Pubkey account = MakeKeypair(3).pubkey;
  base_->bank().SetAccount(account, Account{2'000'000, owner_program, std::string(8, 'x'), false});
  base_->bank().SetAccount(validator.pubkey, Account{1'000'000'000, Pubkey(), "", false});

  const std::string signature =
      ResultString(SendDelegate(alice_, account, owner_program, validator.pubkey));
  ASSERT_FALSE(signature.empty());
  EXPECT_EQ(WaitForSignature(signature), "null");
  auto tx = Call("getTransaction", fmt::format("[\"{}\"]", signature));
  const Slot slot = tx->root["result"]["slot"].get_uint64().value();

  AccountRef delegated = base_->bank().GetAccount(account);
  ASSERT_NE(delegated, nullptr);
  EXPECT_EQ(delegated->owner, DelegationProgramId());
  AccountRef record_account = base_->bank().GetAccount(DelegationRecordPda(account));
  ASSERT_NE(record_account, nullptr);
  EXPECT_EQ(record_account->owner, DelegationProgramId());
  auto record = DecodeDelegationRecord(
      {reinterpret_cast<const uint8_t*>(record_account->data.data()), record_account->data.size()});
  ASSERT_TRUE(record.ok());
  EXPECT_EQ(record->authority, validator.pubkey);
  EXPECT_EQ(record->owner, owner_program);
  EXPECT_EQ(record->delegation_slot, slot);
  EXPECT_EQ(record->lamports, 2'000'000u);
  EXPECT_EQ(record->commit_frequency_ms, 1000u);
  EXPECT_NE(base_->bank().GetAccount(DelegationMetadataPda(account)), nullptr);
  // Logs mention the delegation program.
  std::string logs = simdjson::minify(tx->root["result"]["meta"]["logMessages"].value());
  EXPECT_NE(logs.find(fmt::format("Program {} invoke [1]", DelegationProgramId().ToBase58())),
            std::string::npos);
  // getProgramAccounts of the delegation program, with context and a dataSize filter, finds it.
  auto gpa = Call("getProgramAccounts",
                  fmt::format("[\"{}\",{{\"encoding\":\"base64\",\"withContext\":true,"
                              "\"filters\":[{{\"dataSize\":96}}]}}]",
                              DelegationProgramId().ToBase58()));
  EXPECT_GE(gpa->root["result"]["context"]["slot"].get_uint64().value(), slot);
  simdjson::dom::array list = gpa->root["result"]["value"].get_array().value();
  ASSERT_EQ(list.size(), 1u);
  EXPECT_EQ(list.at(0)["pubkey"].get_string().value(), DelegationRecordPda(account).ToBase58());

  const std::string undelegate = ResultString(SendUndelegate(validator, account, owner_program));
  ASSERT_FALSE(undelegate.empty());
  EXPECT_EQ(WaitForSignature(undelegate), "null");
  EXPECT_EQ(base_->bank().GetAccount(account)->owner, owner_program);
  EXPECT_EQ(base_->bank().GetAccount(DelegationRecordPda(account)), nullptr);
  EXPECT_EQ(base_->bank().GetAccount(DelegationMetadataPda(account)), nullptr);
}

TEST_F(LocalnetTest, GetProgramAccountsAppliesMemcmp) {
  StartBase();
  const Pubkey program = MakeKeypair(9).pubkey;
  base_->bank().SetAccount(MakeKeypair(3).pubkey, Account{1, program, "abcd", false});
  base_->bank().SetAccount(MakeKeypair(4).pubkey, Account{1, program, "abzz", false});
  auto json = Call("getProgramAccounts",
                   fmt::format("[\"{}\",{{\"encoding\":\"base64\",\"filters\":[{{\"memcmp\":"
                               "{{\"offset\":2,\"bytes\":\"{}\",\"encoding\":\"base64\"}}}}]}}]",
                               program.ToBase58(), Base64Encode(std::string_view("cd"))));
  simdjson::dom::array list = json->root["result"].get_array().value();
  ASSERT_EQ(list.size(), 1u);
  EXPECT_EQ(list.at(0)["pubkey"].get_string().value(), MakeKeypair(3).pubkey.ToBase58());
}

TEST_F(LocalnetTest, PubsubNotifiesAccountSignatureLogsAndSlot) {
  StartBase();
  WsClient ws(base_->ws_port());
  ASSERT_TRUE(ws.ok());
  ASSERT_TRUE(
      ws.Send(Request("accountSubscribe", fmt::format("[\"{}\",{{\"encoding\":\"base64\"}}]",
                                                      bob_.pubkey.ToBase58()))));
  auto sub = Parse(ws.Read(5s));
  const uint64_t account_sub = sub->root["result"].get_uint64().value();
  ASSERT_TRUE(ws.Send(Request("logsSubscribe",
                              fmt::format("[{{\"mentions\":[\"{}\"]}}]", bob_.pubkey.ToBase58()))));
  const uint64_t logs_sub = Parse(ws.Read(5s))->root["result"].get_uint64().value();

  const Hash blockhash = LatestBlockhash();
  Transaction probe;  // the signature is known before sending: subscribe to it first
  const std::string tx =
      BuildTransaction({&alice_}, {alice_.pubkey, bob_.pubkey, Pubkey()}, MessageHeader{1, 0, 1},
                       blockhash, {CompiledInstruction{2, {0, 1}, TransferData(777)}});
  const Transaction decoded = DecodeTransactionText(tx, TransactionEncoding::kBase64).value();
  ASSERT_TRUE(
      ws.Send(Request("signatureSubscribe", fmt::format("[\"{}\",{{\"commitment\":\"confirmed\"}}]",
                                                        decoded.id().ToBase58()))));
  const uint64_t sig_sub = Parse(ws.Read(5s))->root["result"].get_uint64().value();
  ASSERT_FALSE(
      ResultString(*client_->Post(Request("sendTransaction",
                                          fmt::format("[\"{}\",{{\"encoding\":\"base64\"}}]", tx))))
          .empty());

  bool saw_account = false, saw_logs = false, saw_signature = false;
  WaitFor([&] {
    auto message = ws.Read(100ms);
    if (!message) return saw_account && saw_logs && saw_signature;
    auto json = Parse(message);
    std::string_view method = json->root["method"].get_string().value();
    simdjson::dom::element params = json->root["params"];
    const uint64_t id = params["subscription"].get_uint64().value();
    if (method == "accountNotification") {
      EXPECT_EQ(id, account_sub);
      EXPECT_EQ(params["result"]["value"]["lamports"].get_uint64().value(), 777u);
      EXPECT_GT(params["result"]["context"]["slot"].get_uint64().value(), 0u);
      saw_account = true;
    } else if (method == "logsNotification") {
      EXPECT_EQ(id, logs_sub);
      EXPECT_EQ(params["result"]["value"]["signature"].get_string().value(),
                decoded.id().ToBase58());
      EXPECT_TRUE(params["result"]["value"]["err"].is_null());
      saw_logs = true;
    } else if (method == "signatureNotification") {
      EXPECT_EQ(id, sig_sub);
      EXPECT_TRUE(params["result"]["value"]["err"].is_null());
      saw_signature = true;
    }
    return saw_account && saw_logs && saw_signature;
  });
  EXPECT_TRUE(saw_account);
  EXPECT_TRUE(saw_logs);
  EXPECT_TRUE(saw_signature);

  ASSERT_TRUE(ws.Send(Request("slotSubscribe", "[]")));
  bool saw_slot = WaitFor([&] {
    auto message = ws.Read(100ms);
    if (!message) return false;
    auto json = Parse(message);
    if (json->root["method"].get_string().value_unsafe() != "slotNotification") return false;
    simdjson::dom::element result = json->root["params"]["result"];
    EXPECT_EQ(result["parent"].get_uint64().value() + 1, result["slot"].get_uint64().value());
    return true;
  });
  EXPECT_TRUE(saw_slot);
  ASSERT_TRUE(ws.Send(Request("accountUnsubscribe", fmt::format("[{}]", account_sub))));
}

TEST_F(LocalnetTest, DropWebsocketsAtSlotClosesConnections) {
  LocalnetOptions options;
  // Slot 100 at 10 ms slots: a second away, time enough to subscribe first.
  options.slot_interval = absl::Milliseconds(10);
  options.faults.drop_websockets_at_slot = 100;
  StartBase(options);
  WsClient ws(base_->ws_port());
  ASSERT_TRUE(ws.ok());
  ASSERT_TRUE(ws.Send(Request("slotSubscribe", "[]")));
  Slot last = 0;
  EXPECT_TRUE(WaitFor([&] {
    auto message = ws.Read(100ms);
    if (message) {
      auto json = Parse(message);
      uint64_t slot = 0;
      if (json->root["params"]["result"]["slot"].get_uint64().get(slot) == simdjson::SUCCESS) {
        last = slot;
      }
    }
    return ws.closed();
  }));
  EXPECT_EQ(last, 100u);
}

TEST_F(LocalnetTest, ErAcceptsDelegatedTransferAndRejectsUndelegatedFeePayer) {
  StartBase();
  const Keypair identity = MakeKeypair(42);
  const Keypair carol = MakeKeypair(5);
  base_->bank().SetAccount(bob_.pubkey, Account{3'000'000'000, Pubkey(), "", false});
  base_->bank().SetAccount(carol.pubkey, Account{1'000'000'000, Pubkey(), "", false});
  // Delegate alice and bob (system accounts) to the ER identity.
  for (const Pubkey& account : {alice_.pubkey, bob_.pubkey}) {
    const std::string response = SendDelegate(carol, account, Pubkey(), identity.pubkey);
    const std::string sig = ResultString(response);
    ASSERT_FALSE(sig.empty()) << response;
    EXPECT_EQ(WaitForSignature(sig), "null");
  }

  er_ = StartEr(identity.pubkey);
  HttpClient er_client(er_->http_port());

  // The ER clones bob on first read, with his original owner.
  auto info =
      Call("getAccountInfo",
           fmt::format("[\"{}\",{{\"encoding\":\"base64\"}}]", bob_.pubkey.ToBase58()), &er_client);
  EXPECT_EQ(info->root["result"]["value"]["owner"].get_string().value(),
            "11111111111111111111111111111111");
  EXPECT_EQ(info->root["result"]["value"]["lamports"].get_uint64().value(), 3'000'000'000u);

  const std::string ok = SendTransfer(bob_, alice_.pubkey, 1000, &er_client);
  const std::string sig = ResultString(ok);
  ASSERT_FALSE(sig.empty()) << ok;
  EXPECT_EQ(WaitForSignature(sig, &er_client), "null");
  EXPECT_EQ(Balance(bob_.pubkey, &er_client), 3'000'000'000u - 1000u);

  // carol is not delegated: she cannot pay fees on the ER.
  auto rejected = Parse(SendTransfer(carol, alice_.pubkey, 1000, &er_client));
  EXPECT_EQ(rejected->root["error"]["data"]["err"].get_string().value(), "InvalidAccountForFee");
  EXPECT_NE(std::string(rejected->root["error"]["message"].get_string().value())
                .find("This account may not be used to pay transaction fees"),
            std::string::npos);
  // bob may pay, but carol's account is not writable here.
  auto not_writable = Parse(SendTransfer(bob_, carol.pubkey, 1000, &er_client));
  EXPECT_EQ(not_writable->root["error"]["data"]["err"].get_string().value(),
            "InvalidWritableAccount");
  EXPECT_NE(std::string(not_writable->root["error"]["message"].get_string().value())
                .find("Transaction loads a writable account that cannot be written"),
            std::string::npos);
}

TEST_F(LocalnetTest, ClusterInfoMethodsHaveTheValidatorShapes) {
  StartBase();
  EXPECT_EQ(Call("getHealth", "[]")->root["result"].get_string().value(), "ok");
  EXPECT_TRUE(Call("getVersion", "[]")->root["result"]["solana-core"].is_string());
  EXPECT_TRUE(
      Pubkey::FromBase58(Call("getIdentity", "[]")->root["result"]["identity"].get_string().value())
          .ok());
  EXPECT_TRUE(
      Hash::FromBase58(Call("getGenesisHash", "[]")->root["result"].get_string().value()).ok());
  ASSERT_TRUE(
      WaitFor([&] { return Call("getSlot", "[]")->root["result"].get_uint64().value() > 2; }));
  EXPECT_GT(Call("getBlockHeight", "[]")->root["result"].get_uint64().value(), 0u);
  auto blockhash = Call("getLatestBlockhash", "[]");
  EXPECT_GT(blockhash->root["result"]["value"]["lastValidBlockHeight"].get_uint64().value(), 150u);
  auto min_slot = Call("getBalance", fmt::format("[\"{}\",{{\"minContextSlot\":999999999}}]",
                                                 alice_.pubkey.ToBase58()));
  EXPECT_EQ(min_slot->root["error"]["code"].get_int64().value(), -32016);
}

TEST_F(LocalnetTest, GetTokenAccountBalanceReadsAmountAndMintDecimals) {
  StartBase();
  const Pubkey mint = MakeKeypair(20).pubkey;
  const Pubkey token_account = MakeKeypair(21).pubkey;
  std::string mint_data(82, '\0');
  mint_data[44] = 6;  // decimals
  base_->bank().SetAccount(mint, Account{1, TokenProgramId(), mint_data, false});
  std::string data(165, '\0');
  std::memcpy(data.data(), mint.data(), 32);
  std::string amount;
  AppendU64LE(&amount, 1'500'000);
  data.replace(64, 8, amount);
  base_->bank().SetAccount(token_account, Account{1, TokenProgramId(), data, false});
  auto json = Call("getTokenAccountBalance", fmt::format("[\"{}\"]", token_account.ToBase58()));
  simdjson::dom::element value = json->root["result"]["value"];
  EXPECT_EQ(value["amount"].get_string().value(), "1500000");
  EXPECT_EQ(value["decimals"].get_uint64().value(), 6u);
  EXPECT_EQ(value["uiAmountString"].get_string().value(), "1.5");
  EXPECT_DOUBLE_EQ(value["uiAmount"].get_double().value(), 1.5);
}

TEST_F(LocalnetTest, ProgramSubscribeOfTheDelegationProgramSeesADelegation) {
  StartBase();
  const Pubkey owner_program = MakeKeypair(9).pubkey;
  const Pubkey account = MakeKeypair(3).pubkey;
  base_->bank().SetAccount(account, Account{2'000'000, owner_program, "data", false});
  WsClient ws(base_->ws_port());
  ASSERT_TRUE(ws.ok());
  ASSERT_TRUE(
      ws.Send(Request("programSubscribe", fmt::format("[\"{}\",{{\"encoding\":\"base64\"}}]",
                                                      DelegationProgramId().ToBase58()))));
  const uint64_t sub = Parse(ws.Read(5s))->root["result"].get_uint64().value();
  ASSERT_FALSE(ResultString(SendDelegate(alice_, account, owner_program, bob_.pubkey)).empty());
  std::set<std::string> seen;
  EXPECT_TRUE(WaitFor([&] {
    auto message = ws.Read(100ms);
    if (message) {
      auto json = Parse(message);
      simdjson::dom::element params = json->root["params"];
      EXPECT_EQ(json->root["method"].get_string().value(), "programNotification");
      EXPECT_EQ(params["subscription"].get_uint64().value(), sub);
      EXPECT_EQ(params["result"]["value"]["account"]["owner"].get_string().value(),
                DelegationProgramId().ToBase58());
      seen.insert(std::string(params["result"]["value"]["pubkey"].get_string().value()));
    }
    return seen.size() == 3;
  }));
  EXPECT_TRUE(seen.contains(account.ToBase58()));
  EXPECT_TRUE(seen.contains(DelegationRecordPda(account).ToBase58()));
  EXPECT_TRUE(seen.contains(DelegationMetadataPda(account).ToBase58()));
}

TEST_F(LocalnetTest, DropNotificationRateOneDropsEveryNotification) {
  LocalnetOptions options;
  options.faults.drop_notification_rate = 1.0;
  StartBase(options);
  WsClient ws(base_->ws_port());
  ASSERT_TRUE(ws.ok());
  ASSERT_TRUE(ws.Send(Request("slotSubscribe", "[]")));
  EXPECT_TRUE(Parse(ws.Read(5s))->root["result"].is_uint64());
  const Slot start = base_->bank().slot();
  ASSERT_TRUE(WaitFor([&] { return base_->bank().slot() > start + 10; }));
  EXPECT_FALSE(ws.Read(50ms).has_value());
}

// The data of a validator's preflight failure for an unknown or expired blockhash.
constexpr std::string_view kBlockhashNotFoundData =
    R"({"accounts":null,"err":"BlockhashNotFound","innerInstructions":null,"logs":[],)"
    R"("replacementBlockhash":null,"returnData":null,"unitsConsumed":0})";

TEST_F(LocalnetTest, DefaultsAreThoseOfAValidatorAndItsHttpServer) {
  const LocalnetOptions options;
  EXPECT_EQ(options.idle_timeout, absl::Seconds(5));
  EXPECT_EQ(options.blockhash_validity_blocks, 150u);
  EXPECT_GT(options.ws_ping_interval, absl::ZeroDuration());
}

TEST_F(LocalnetTest, IdleKeepAliveConnectionIsClosedAfterTheIdleTimeout) {
  LocalnetOptions options;
  options.idle_timeout = absl::Milliseconds(300);
  StartBase(options);
  ASSERT_TRUE(client_->Post(Request("getSlot", "[]")).has_value());
  const auto closed_after = client_->WaitForClose(5s);
  ASSERT_TRUE(closed_after.has_value()) << "the idle connection was not closed";
  // Kept until the timeout (the server's wait began a little before the client's).
  EXPECT_GE(*closed_after, 200ms);
  // The client's next request needs a new connection.
  EXPECT_TRUE(client_->Post(Request("getSlot", "[]")).has_value());
  EXPECT_EQ(client_->connections(), 2);
}

TEST_F(LocalnetTest, ConnectionInUseIsNotClosedByTheIdleTimeout) {
  LocalnetOptions options;
  options.idle_timeout = absl::Milliseconds(300);
  StartBase(options);
  // Requests 50 ms apart for three idle timeouts: never idle long enough to be closed.
  const auto end = std::chrono::steady_clock::now() + 900ms;
  while (std::chrono::steady_clock::now() < end) {
    HttpAnswer answer;
    ASSERT_FALSE(client_->ExchangeOnce(Request("getSlot", "[]"), 5s, &answer));
    std::this_thread::sleep_for(50ms);
  }
  EXPECT_EQ(client_->connections(), 1);
}

TEST_F(LocalnetTest, IdleTimeoutZeroNeverClosesAConnection) {
  LocalnetOptions options;
  options.idle_timeout = absl::ZeroDuration();
  StartBase(options);
  ASSERT_TRUE(client_->Post(Request("getSlot", "[]")).has_value());
  EXPECT_FALSE(client_->WaitForClose(700ms).has_value());
  HttpAnswer answer;
  EXPECT_FALSE(client_->ExchangeOnce(Request("getSlot", "[]"), 5s, &answer));
  EXPECT_EQ(client_->connections(), 1);
}

TEST_F(LocalnetTest, WebSocketThatAnswersNoPingsIsClosed) {
  LocalnetOptions options;
  options.ws_ping_interval = absl::Milliseconds(100);
  StartBase(options);
  WsClient ws(base_->ws_port());
  ASSERT_TRUE(ws.ok());
  ASSERT_TRUE(
      ws.Send(Request("accountSubscribe", fmt::format("[\"{}\"]", bob_.pubkey.ToBase58()))));
  ASSERT_TRUE(Parse(ws.Read(5s))->root["result"].is_uint64());
  const auto start = std::chrono::steady_clock::now();
  ASSERT_EQ(base_->subscription_count(), 1u);
  // From now on the client reads nothing, so it answers no ping.
  EXPECT_TRUE(WaitFor([&] { return base_->subscription_count() == 0; }, 5s));
  EXPECT_GE(std::chrono::steady_clock::now() - start, 100ms);
  EXPECT_FALSE(ws.Read(2s).has_value());
  EXPECT_TRUE(ws.closed());
}

TEST_F(LocalnetTest, WebSocketThatAnswersPingsStaysOpen) {
  LocalnetOptions options;
  options.ws_ping_interval = absl::Milliseconds(100);
  StartBase(options);
  WsClient ws(base_->ws_port());
  ASSERT_TRUE(ws.ok());
  ASSERT_TRUE(
      ws.Send(Request("accountSubscribe", fmt::format("[\"{}\"]", bob_.pubkey.ToBase58()))));
  ASSERT_TRUE(Parse(ws.Read(5s))->root["result"].is_uint64());
  // Reading answers the pings; four of them span two intervals of silence from the client.
  EXPECT_TRUE(WaitFor(
      [&] {
        ws.Read(20ms);
        return ws.pings() >= 4 || ws.closed();
      },
      5s));
  EXPECT_GE(ws.pings(), 4);
  EXPECT_FALSE(ws.closed());
  EXPECT_EQ(base_->subscription_count(), 1u);
}

TEST_F(LocalnetTest, UnknownBlockhashFailsPreflightWithBlockhashNotFound) {
  StartBase();
  for (const Hash& blockhash : {Hash(), Hash(MakeKeypair(77).pubkey)}) {
    auto json = Parse(SendTransfer(alice_, bob_.pubkey, 1, nullptr, blockhash));
    EXPECT_EQ(json->root["error"]["code"].get_int64().value(), -32002);
    EXPECT_EQ(json->root["error"]["message"].get_string().value(),
              "Transaction simulation failed: Blockhash not found");
    EXPECT_EQ(simdjson::minify(json->root["error"]["data"].value()), kBlockhashNotFoundData);
  }
}

TEST_F(LocalnetTest, BlockhashIsValidUpToItsLastValidBlockHeightAndNotAfter) {
  LocalnetOptions options;
  options.slot_interval = absl::Hours(1);  // the test advances the slots
  StartBase(options);
  auto latest = Call("getLatestBlockhash", "[]");
  const Hash blockhash =
      Hash::FromBase58(latest->root["result"]["value"]["blockhash"].get_string().value()).value();
  const uint64_t last_valid =
      latest->root["result"]["value"]["lastValidBlockHeight"].get_uint64().value();
  EXPECT_EQ(last_valid, base_->bank().block_height() + 150);
  auto is_valid = [&] {
    return Call("isBlockhashValid", fmt::format("[\"{}\"]", blockhash.ToBase58()))
        ->root["result"]["value"]
        .get_bool()
        .value();
  };
  // The next block is the last one that may hold it.
  while (base_->bank().block_height() + 1 < last_valid) base_->bank().AdvanceSlot();
  EXPECT_TRUE(is_valid());
  const std::string signature =
      ResultString(SendTransfer(alice_, bob_.pubkey, 1, nullptr, blockhash));
  ASSERT_FALSE(signature.empty());
  base_->bank().AdvanceSlot();
  EXPECT_EQ(base_->bank().block_height(), last_valid);
  EXPECT_EQ(WaitForSignature(signature), "null");

  // One block later it has expired.
  EXPECT_FALSE(is_valid());
  auto expired = Parse(SendTransfer(alice_, bob_.pubkey, 2, nullptr, blockhash));
  EXPECT_EQ(expired->root["error"]["code"].get_int64().value(), -32002);
  EXPECT_EQ(expired->root["error"]["message"].get_string().value(),
            "Transaction simulation failed: Blockhash not found");
  EXPECT_EQ(simdjson::minify(expired->root["error"]["data"].value()), kBlockhashNotFoundData);
  EXPECT_EQ(base_->bank().dropped_count(), 0u);
}

TEST_F(LocalnetTest, SkipPreflightAcceptsAnUnknownBlockhashThenDropsIt) {
  StartBase();
  const std::string dropped =
      SendTransfer(alice_, bob_.pubkey, 1'000, nullptr, Hash(), /*skip_preflight=*/true);
  const std::string dropped_signature = ResultString(dropped);
  ASSERT_FALSE(dropped_signature.empty()) << dropped;
  // Sent after it, so applied in the same block or a later one.
  const std::string landed = ResultString(
      SendTransfer(alice_, bob_.pubkey, 20'000, nullptr, std::nullopt, /*skip_preflight=*/true));
  ASSERT_FALSE(landed.empty());
  EXPECT_EQ(WaitForSignature(landed), "null");

  auto status = Call("getSignatureStatuses", fmt::format("[[\"{}\"]]", dropped_signature));
  EXPECT_TRUE(status->root["result"]["value"].at(0).is_null());
  EXPECT_TRUE(
      Call("getTransaction", fmt::format("[\"{}\"]", dropped_signature))->root["result"].is_null());
  EXPECT_EQ(Balance(bob_.pubkey), 20'000u);
  EXPECT_EQ(base_->bank().dropped_count(), 1u);
}

TEST_F(LocalnetTest, SimulateReportsBlockhashNotFoundUnlessTheBlockhashIsReplaced) {
  StartBase();
  const std::string tx =
      BuildTransaction({&alice_}, {alice_.pubkey, bob_.pubkey, Pubkey()}, MessageHeader{1, 0, 1},
                       Hash(), {CompiledInstruction{2, {0, 1}, TransferData(5)}});
  auto plain = Call("simulateTransaction", fmt::format("[\"{}\",{{\"encoding\":\"base64\"}}]", tx));
  EXPECT_EQ(plain->root["result"]["value"]["err"].get_string().value(), "BlockhashNotFound");
  auto replaced = Call("simulateTransaction",
                       fmt::format("[\"{}\",{{\"encoding\":\"base64\",\"replaceRecentBlockhash\":"
                                   "true}}]",
                                   tx));
  simdjson::dom::element value = replaced->root["result"]["value"];
  EXPECT_TRUE(value["err"].is_null());
  EXPECT_TRUE(
      Hash::FromBase58(value["replacementBlockhash"]["blockhash"].get_string().value()).ok());
  EXPECT_GE(value["replacementBlockhash"]["lastValidBlockHeight"].get_uint64().value(), 150u);
  auto both = Call("simulateTransaction",
                   fmt::format("[\"{}\",{{\"encoding\":\"base64\",\"replaceRecentBlockhash\":true,"
                               "\"sigVerify\":true}}]",
                               tx));
  EXPECT_EQ(both->root["error"]["code"].get_int64().value(), -32602);
}

TEST_F(LocalnetTest, ErAndBaseBlockhashesAreDisjoint) {
  StartBase();
  const Keypair identity = MakeKeypair(42);
  const Keypair carol = MakeKeypair(5);
  base_->bank().SetAccount(bob_.pubkey, Account{3'000'000'000, Pubkey(), "", false});
  base_->bank().SetAccount(carol.pubkey, Account{1'000'000'000, Pubkey(), "", false});
  for (const Pubkey& account : {alice_.pubkey, bob_.pubkey}) {
    const std::string sig = ResultString(SendDelegate(carol, account, Pubkey(), identity.pubkey));
    ASSERT_FALSE(sig.empty());
    EXPECT_EQ(WaitForSignature(sig), "null");
  }
  er_ = StartEr(identity.pubkey);
  HttpClient er_client(er_->http_port());
  EXPECT_NE(Call("getGenesisHash", "[]")->root["result"].get_string().value(),
            Call("getGenesisHash", "[]", &er_client)->root["result"].get_string().value());
  const Hash base_hash = LatestBlockhash();
  const Hash er_hash = LatestBlockhash(&er_client);
  auto is_valid = [&](const Hash& hash, HttpClient* client) {
    return Call("isBlockhashValid", fmt::format("[\"{}\"]", hash.ToBase58()), client)
        ->root["result"]["value"]
        .get_bool()
        .value();
  };
  EXPECT_TRUE(is_valid(base_hash, client_.get()));
  EXPECT_FALSE(is_valid(base_hash, &er_client));
  EXPECT_TRUE(is_valid(er_hash, &er_client));
  EXPECT_FALSE(is_valid(er_hash, client_.get()));

  // On the ER, bob's transfer needs the ER's blockhash.
  auto with_base_hash = Parse(SendTransfer(bob_, alice_.pubkey, 1000, &er_client, base_hash));
  EXPECT_EQ(with_base_hash->root["error"]["message"].get_string().value(),
            "Transaction simulation failed: Blockhash not found");
  EXPECT_EQ(with_base_hash->root["error"]["data"]["err"].get_string().value(), "BlockhashNotFound");
  const std::string on_er = ResultString(SendTransfer(bob_, alice_.pubkey, 1000, &er_client));
  ASSERT_FALSE(on_er.empty());
  EXPECT_EQ(WaitForSignature(on_er, &er_client), "null");
  // On the base, carol's transfer needs the base's blockhash.
  auto with_er_hash = Parse(SendTransfer(carol, bob_.pubkey, 1000, nullptr, er_hash));
  EXPECT_EQ(with_er_hash->root["error"]["data"]["err"].get_string().value(), "BlockhashNotFound");
  EXPECT_FALSE(ResultString(SendTransfer(carol, bob_.pubkey, 1000)).empty());
}

TEST_F(LocalnetTest, Fault429AnswersTooManyRequestsWithRetryAfter) {
  LocalnetOptions options;
  options.faults.http_429_rate = 1;
  options.faults.retry_after_seconds = 7;
  StartBase(options);
  for (int i = 0; i < 2; ++i) {
    HttpAnswer answer;
    ASSERT_FALSE(client_->ExchangeOnce(Request("getSlot", "[]"), 5s, &answer));
    EXPECT_EQ(answer.status, 429u);
    EXPECT_EQ(answer.retry_after, "7");
  }
  EXPECT_EQ(client_->connections(), 1);  // the connection is kept
}

TEST_F(LocalnetTest, Fault5xxAnswersTheConfiguredStatus) {
  LocalnetOptions options;
  options.faults.http_5xx_rate = 1;
  options.faults.server_error_status = 502;
  StartBase(options);
  HttpAnswer answer;
  ASSERT_FALSE(client_->ExchangeOnce(Request("getSlot", "[]"), 5s, &answer));
  EXPECT_EQ(answer.status, 502u);
}

TEST_F(LocalnetTest, FaultResetCutsTheConnectionBeforeAnyByteOfTheAnswer) {
  LocalnetOptions options;
  options.faults.reset_rate = 1;
  StartBase(options);
  HttpAnswer answer;
  const boost::system::error_code ec = client_->ExchangeOnce(Request("getSlot", "[]"), 5s, &answer);
  EXPECT_EQ(ec, boost::asio::error::connection_reset) << ec.message();
  EXPECT_EQ(answer.status, 0u);
}

TEST_F(LocalnetTest, FaultDelayDelaysTheAnswerAndTheIdleTimeoutDoesNotCutIt) {
  LocalnetOptions options;
  options.faults.delay_rate = 1;
  options.faults.delay = absl::Milliseconds(500);
  options.idle_timeout = absl::Milliseconds(200);
  StartBase(options);
  const auto start = std::chrono::steady_clock::now();
  HttpAnswer answer;
  ASSERT_FALSE(client_->ExchangeOnce(Request("getSlot", "[]"), 5s, &answer));
  EXPECT_GE(std::chrono::steady_clock::now() - start, 500ms);
  EXPECT_EQ(answer.status, 200u);
  auto json = Parse(answer.body);
  EXPECT_TRUE(json->root["result"].is_uint64());
}

TEST_F(LocalnetTest, FaultsAreDrawnFromTheSeed) {
  auto statuses = [this](uint64_t seed) {
    LocalnetOptions options;
    options.port = 0;
    options.io_threads = 1;
    options.faults.seed = seed;
    options.faults.http_429_rate = 0.3;
    options.faults.http_5xx_rate = 0.2;
    Localnet net(options, &clock_);
    EXPECT_TRUE(net.Start().ok());
    HttpClient client(net.http_port());
    std::string out;
    for (int i = 0; i < 60; ++i) {
      HttpAnswer answer;
      EXPECT_FALSE(client.ExchangeOnce(Request("getSlot", "[]"), 5s, &answer));
      out += answer.status == 200 ? '.' : answer.status == 429 ? 'R' : 'E';
    }
    net.Stop();
    return out;
  };
  const std::string first = statuses(3);
  EXPECT_EQ(first, statuses(3));
  EXPECT_NE(first, statuses(4));
  const auto count = [&](char c) { return std::count(first.begin(), first.end(), c); };
  EXPECT_GT(count('R'), 5);
  EXPECT_GT(count('E'), 2);
  EXPECT_GT(count('.'), 15);
}

TEST_F(LocalnetTest, HttpFaultRatesAboveOneInTotalAreRejected) {
  LocalnetOptions options;
  options.port = 0;
  options.faults.http_429_rate = 0.7;
  options.faults.reset_rate = 0.6;
  Localnet net(options, &clock_);
  EXPECT_EQ(net.Start().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(LocalnetTest, SlotLagReportsSlotsBehind) {
  LocalnetOptions options;
  options.slot_interval = absl::Hours(1);  // the test advances the slots
  options.faults.slot_lag = 5;
  StartBase(options);
  for (int i = 0; i < 20; ++i) base_->bank().AdvanceSlot();
  const Slot slot = base_->bank().slot();
  ASSERT_EQ(slot, 20u);
  EXPECT_EQ(Call("getSlot", "[]")->root["result"].get_uint64().value(), slot - 5);
  EXPECT_EQ(Call("getBlockHeight", "[]")->root["result"].get_uint64().value(),
            base_->bank().block_height() - 5);
  auto balance = Call("getBalance", fmt::format("[\"{}\"]", alice_.pubkey.ToBase58()));
  EXPECT_EQ(balance->root["result"]["context"]["slot"].get_uint64().value(), slot - 5);
  auto accounts = Call("getMultipleAccounts", fmt::format("[[\"{}\"]]", alice_.pubkey.ToBase58()));
  EXPECT_EQ(accounts->root["result"]["context"]["slot"].get_uint64().value(), slot - 5);
  auto min_slot = Call("getAccountInfo", fmt::format("[\"{}\",{{\"minContextSlot\":{}}}]",
                                                     alice_.pubkey.ToBase58(), slot));
  EXPECT_EQ(min_slot->root["error"]["code"].get_int64().value(), -32016);
  EXPECT_EQ(min_slot->root["error"]["data"]["contextSlot"].get_uint64().value(), slot - 5);
}

TEST(ScenarioTest, SameSeedGivesTheSameDelegatedSetAndMatchesTheLedger) {
  auto run = [](uint64_t seed) {
    SystemClock clock;
    Bank bank(BankOptions{}, &clock);
    ScenarioOptions options;
    options.enabled = true;
    options.seed = seed;
    options.accounts = 30;
    options.delegate_rate = 1.5;
    options.undelegate_rate = 0.7;
    ScenarioDriver driver(options, &bank);
    EXPECT_TRUE(driver.Start().ok());
    for (int i = 0; i < 60; ++i) {
      driver.BeforeSlot();
      driver.AfterSlot(bank.AdvanceSlot());
    }
    // The driver signs with recent blockhashes: the bank dropped none of its transactions.
    EXPECT_EQ(bank.dropped_count(), 0u);
    // The driver's truth is the ledger's state.
    for (const Pubkey& account : driver.accounts()) {
      AccountRef a = bank.GetAccount(account);
      EXPECT_NE(a, nullptr);
      const bool delegated = a->owner == DelegationProgramId();
      EXPECT_EQ(delegated, driver.delegated().contains(account));
      if (delegated) {
        AccountRef r = bank.GetAccount(DelegationRecordPda(account));
        EXPECT_NE(r, nullptr);
        auto record = DecodeDelegationRecord(
            {reinterpret_cast<const uint8_t*>(r->data.data()), r->data.size()});
        EXPECT_TRUE(record.ok());
        EXPECT_EQ(record->authority, driver.delegated().at(account));
      }
    }
    return driver.delegated();
  };
  const auto first = run(11);
  EXPECT_FALSE(first.empty());
  EXPECT_EQ(first, run(11));
  EXPECT_NE(first, run(12));
}

TEST(ScenarioTest, GroundTruthFileHoldsTheDelegatedSetPerSlot) {
  const std::string path =
      fmt::format("{}/ground_truth_{}.jsonl", ::testing::TempDir(), ::getpid());
  SystemClock clock;
  Bank bank(BankOptions{}, &clock);
  ScenarioOptions options;
  options.enabled = true;
  options.seed = 5;
  options.accounts = 20;
  options.delegate_rate = 2;
  options.undelegate_rate = 1;
  options.ground_truth_path = path;
  ScenarioDriver driver(options, &bank);
  ASSERT_TRUE(driver.Start().ok());
  for (int i = 0; i < 30; ++i) {
    driver.BeforeSlot();
    driver.AfterSlot(bank.AdvanceSlot());
  }
  driver.Stop();
  std::ifstream in(path);
  std::string line;
  std::string last;
  while (std::getline(in, line)) last = line;
  std::remove(path.c_str());
  simdjson::dom::parser parser;
  simdjson::dom::element doc = parser.parse(last).value();
  EXPECT_LE(doc["slot"].get_uint64().value(), bank.slot());
  simdjson::dom::object delegated = doc["delegated"].get_object().value();
  EXPECT_EQ(delegated.size(), driver.delegated().size());
  for (const auto& [account, authority] : driver.delegated()) {
    EXPECT_EQ(delegated[account.ToBase58()].get_string().value(), authority.ToBase58());
  }
}

}  // namespace
}  // namespace switchyard::localnet
