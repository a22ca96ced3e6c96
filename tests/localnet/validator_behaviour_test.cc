// switchyard-localnet behaves as a real validator and the infrastructure in front of it do:
// idle connections closed, WebSockets pinged, recent blockhashes checked per chain, and the
// fault switches that client tests use.
#include "tests/localnet/localnet_fixture.h"

namespace switchyard::localnet {
namespace {

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

}  // namespace
}  // namespace switchyard::localnet
