// switchyard-localnet in process: the validator's answer shapes, execution, the delegation
// program, pubsub and ER mode. Connections, blockhashes and faults are in
// validator_behaviour_test.cc.
#include "tests/localnet/localnet_fixture.h"

namespace switchyard::localnet {
namespace {

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
