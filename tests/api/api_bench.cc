// Micro-benchmarks of the router's per-request CPU work: parsing, the routing decision, and
// whole requests through the router to fake upstreams.
// Not a test; run by hand: build/<dir>/tests/api/api_bench
#include <benchmark/benchmark.h>
#include <simdjson.h>

#include "api/access/access_control.h"
#include "api/jsonrpc/jsonrpc.h"
#include "api/net/http_server.h"
#include "api/routing/route_decision.h"
#include "api/rpc/router.h"
#include "solana/rpc_methods.h"
#include "tests/api/fake_upstream.h"
#include "tests/api/test_client.h"
#include "tests/api/test_support.h"

// GCC 12 reports a false -Wrestrict on `"literal" + std::string` (GCC bug 105329).
#pragma GCC diagnostic ignored "-Wrestrict"

namespace switchyard {
namespace {

using api_test::Key;

struct Fixture {
  Fixture() {
    api_test::SnapshotBuilder builder;
    for (int i = 0; i < 100'000; ++i) {
      std::array<uint8_t, 32> bytes{};
      std::memcpy(bytes.data(), &i, sizeof(i));
      builder.Delegate(Pubkey(bytes), i % 2 ? Key(0xE1) : Key(0xE2));
    }
    snapshot = builder.Build();
    table.er_by_identity[Key(0xE1)] = "er1";
    table.er_by_identity[Key(0xE2)] = "er2";
    table.er_targets = {"er1", "er2"};
  }
  RpcCall Parse(const std::string& body) { return ParseRpcBody(body, {})->calls[0]; }
  RouteDecision Decide(const RpcCall& call) {
    return DecideRoute(
        call, *snapshot, table, [](const Pubkey&) -> const std::vector<Pubkey>* { return nullptr; },
        [](const Signature&) -> std::optional<std::string> { return std::nullopt; });
  }
  std::shared_ptr<const Snapshot> snapshot;
  RoutingTable table;
};

Fixture& Shared() {
  static Fixture* fixture = new Fixture();
  return *fixture;
}

std::string AccountKey(int i) {
  std::array<uint8_t, 32> bytes{};
  std::memcpy(bytes.data(), &i, sizeof(i));
  return Pubkey(bytes).ToBase58();
}

const std::string kGetAccountInfo =
    R"({"jsonrpc":"2.0","id":1,"method":"getAccountInfo","params":[")" + AccountKey(7) +
    R"(",{"encoding":"base64","commitment":"confirmed"}]})";

void BM_ParseGetAccountInfo(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(ParseRpcBody(kGetAccountInfo, {}));
}
BENCHMARK(BM_ParseGetAccountInfo);

// As the HTTP server hands the body over: with room past its end, so it is parsed in place.
void BM_ParseGetAccountInfoInPlace(benchmark::State& state) {
  std::string body;
  body.reserve(kGetAccountInfo.size() + 64);
  body = kGetAccountInfo;
  for (auto _ : state) {
    benchmark::DoNotOptimize(ParseRpcBody(body, {}, body.capacity()));
  }
}
BENCHMARK(BM_ParseGetAccountInfoInPlace);

// The floor under BM_ParseGetAccountInfoInPlace: simdjson On-Demand's stage 1 and a walk over
// the request's four fields (each key unescaped, each value's raw token taken), with no check of
// what the values hold, no grammar walk inside params and no copy out of the body.
void BM_OnDemandFieldWalkGetAccountInfo(benchmark::State& state) {
  simdjson::ondemand::parser parser;
  std::string body;
  body.reserve(kGetAccountInfo.size() + simdjson::SIMDJSON_PADDING);
  body = kGetAccountInfo;
  benchmark::IterationCount fields = 0;
  for (auto _ : state) {
    simdjson::ondemand::document doc;
    simdjson::ondemand::object object;
    if (parser.iterate(body.data(), body.size(), body.capacity()).get(doc) ||
        doc.get_object().get(object)) {
      return state.SkipWithError("the request does not parse");
    }
    for (auto field : object) {
      std::string_view key;
      simdjson::ondemand::value value;
      if (field.unescaped_key().get(key) || field.value().get(value)) {
        return state.SkipWithError("a field does not parse");
      }
      benchmark::DoNotOptimize(value.raw_json_token());
      ++fields;
    }
  }
  if (fields != 4 * state.iterations()) state.SkipWithError("not four fields a request");
}
BENCHMARK(BM_OnDemandFieldWalkGetAccountInfo);

// A JSON-RPC batch of ten getAccountInfo calls, as the HTTP server hands it over.
void BM_ParseBatch10InPlace(benchmark::State& state) {
  std::string body = "[";
  for (int i = 0; i < 10; ++i) {
    body += (i ? "," : "") + std::string(R"({"jsonrpc":"2.0","id":)") + std::to_string(i) +
            R"(,"method":"getAccountInfo","params":[")" + AccountKey(i) +
            R"(",{"encoding":"base64"}]})";
  }
  body += "]";
  body.reserve(body.size() + 64);
  for (auto _ : state) {
    benchmark::DoNotOptimize(ParseRpcBody(body, {}, body.capacity()));
  }
}
BENCHMARK(BM_ParseBatch10InPlace);

void BM_DecideGetAccountInfo(benchmark::State& state) {
  RpcCall call = Shared().Parse(kGetAccountInfo);
  for (auto _ : state) benchmark::DoNotOptimize(Shared().Decide(call));
}
BENCHMARK(BM_DecideGetAccountInfo);

void BM_DecideGetMultipleAccounts100(benchmark::State& state) {
  std::string list;
  for (int i = 0; i < 100; ++i) list += (i ? ",\"" : "\"") + AccountKey(i * 3) + "\"";
  RpcCall call = Shared().Parse(R"({"jsonrpc":"2.0","id":1,"method":"getMultipleAccounts",)"
                                R"("params":[[)" +
                                list + "]]}");
  for (auto _ : state) benchmark::DoNotOptimize(Shared().Decide(call));
}
BENCHMARK(BM_DecideGetMultipleAccounts100);

void BM_DecideSendTransaction(benchmark::State& state) {
  Transaction tx = api_test::MakeTransaction(Key(1), {Key(2), Key(3)}, Key(30));
  RpcCall call =
      Shared().Parse(R"({"jsonrpc":"2.0","id":1,"method":"sendTransaction","params":[")" +
                     api_test::TransactionBase64(tx) + R"(",{"encoding":"base64"}]})");
  for (auto _ : state) benchmark::DoNotOptimize(Shared().Decide(call));
}
BENCHMARK(BM_DecideSendTransaction);

// The router's per-call metrics work: the method and target ids from their names (as the
// router looks them up per call), then the counter and the latency histogram.
void BM_RecordCallMetrics(benchmark::State& state) {
  MetricsRegistry registry;
  std::vector<std::string> methods;
  for (const RpcMethod& method : KnownMethods()) methods.emplace_back(method.name);
  RpcCallMetrics calls(&registry, methods, {"base", "er1", "er2", "indexer"});
  const std::string method = "getAccountInfo";
  const std::string target = "er1";
  for (auto _ : state) {
    calls.Record(calls.MethodId(method), CallOutcome{calls.TargetId(target), RpcOutcome::kOk},
                 absl::Microseconds(250));
  }
}
BENCHMARK(BM_RecordCallMetrics);

// The access check of one getAccountInfo request with keys and limits on and every request
// allowed: arg 1 with its key in x-api-key (key lookup, method check, the key's bucket and
// the address's), arg 0 anonymous (the address's bucket only).
void BM_AdmitGetAccountInfo(benchmark::State& state) {
  MetricsRegistry registry;
  SystemClock clock;
  AccessOptions options;
  options.address_requests = RateLimit{1e9, 1e9};
  ApiKeyOptions key;
  key.name = "bench";
  key.key = "bench-key-0123456789abcdef";
  key.requests = RateLimit{1e9, 1e9};
  key.denied_methods = {"sendTransaction"};
  options.keys.push_back(key);
  absl::StatusOr<std::unique_ptr<AccessControl>> access =
      AccessControl::Create(options, &clock, &registry);
  if (!access.ok()) {
    state.SkipWithError(std::string(access.status().message()).c_str());
    return;
  }
  AccessControl::View view(access->get());
  absl::StatusOr<RpcBody> body = ParseRpcBody(kGetAccountInfo, RpcCodecOptions{});
  const boost::asio::ip::address peer = boost::asio::ip::make_address("10.1.2.3");
  const std::optional<std::string_view> header =
      state.range(0) != 0 ? std::optional<std::string_view>(key.key) : std::nullopt;
  for (auto _ : state) {
    AccessControl::Admission admission = view.AdmitHttp("/", header, peer, &body->calls);
    benchmark::DoNotOptimize(admission);
  }
}
BENCHMARK(BM_AdmitGetAccountInfo)->ArgName("with_key")->Arg(1)->Arg(0);

// One take from a token bucket shared by `threads` threads (the per-key limit's hot path).
void BM_TokenBucketTake(benchmark::State& state) {
  static TokenBucket bucket(RateLimit{1e9, 1e9});
  int64_t now = 0;
  for (auto _ : state) {
    now += 10;
    benchmark::DoNotOptimize(bucket.Take(now, 1));
  }
}
BENCHMARK(BM_TokenBucketTake)->Threads(1)->Threads(2);

const std::string kGetSlot = R"({"jsonrpc":"2.0","id":1,"method":"getSlot"})";

// The baseline for BM_GetSlotThroughRouter: the same request straight to the fake upstream.
void BM_GetSlotDirect(benchmark::State& state) {
  api_test::FakeUpstream upstream("base");
  const std::string url = upstream.url();
  api_test::TestClient client(static_cast<uint16_t>(std::stoi(url.substr(url.rfind(':') + 1))));
  for (auto _ : state) benchmark::DoNotOptimize(client.Post(kGetSlot));
}
BENCHMARK(BM_GetSlotDirect)->UseRealTime();

// One keep-alive client through the router (1 worker) to the same fake upstream.
void BM_GetSlotThroughRouter(benchmark::State& state) {
  api_test::FakeUpstream upstream("base");
  SnapshotHolder snapshots;
  snapshots.Publish(api_test::SnapshotBuilder().Build(1));
  MetricsRegistry registry;
  ApiMetrics metrics(registry);
  SystemClock clock;
  RouterOptions options;
  options.upstreams = {{"base", {{upstream.url(), 1}}}};
  auto context = RouterContext::Create(std::move(options), &snapshots, &clock, &metrics);
  HttpServerOptions server_options;
  server_options.threads = 1;
  HttpServer server(server_options, (*context)->HandlerFactory(), &metrics);
  if (!server.Start().ok()) return state.SkipWithError("no server");
  api_test::TestClient client(server.port());
  for (auto _ : state) benchmark::DoNotOptimize(client.Post(kGetSlot));
  server.Stop();
}
BENCHMARK(BM_GetSlotThroughRouter)->UseRealTime();

// The router (1 worker) in front of a fake base and a fake ER, with Key(1) to Key(10)
// delegated to the ER, and one keep-alive client.
class RouterStack {
 public:
  explicit RouterStack(bool verify_owner) : base_("base"), er_("er1") {
    api_test::SnapshotBuilder builder;
    for (uint8_t i = 1; i <= 10; ++i) builder.Delegate(Key(i), Key(0xE1));
    snapshots_.Publish(builder.Build(1));
    RouterOptions options;
    options.upstreams = {{"base", {{base_.url(), 1}}}, {"er1", {{er_.url(), 1}}}};
    options.ers = {{Key(0xE1), "er1", "https://er1.example", 0, 50, "DE"}};
    options.verify_owner = verify_owner;
    auto context = RouterContext::Create(std::move(options), &snapshots_, &clock_, &metrics_);
    if (!context.ok()) return;
    context_ = *std::move(context);
    HttpServerOptions server_options;
    server_options.threads = 1;
    server_ = std::make_unique<HttpServer>(server_options, context_->HandlerFactory(), &metrics_);
    if (!server_->Start().ok()) {
      server_.reset();
      return;
    }
    client_ = std::make_unique<api_test::TestClient>(server_->port());
  }
  ~RouterStack() {
    client_.reset();
    if (server_) server_->Stop();
  }
  api_test::TestClient* client() { return client_.get(); }
  // Whether `body` is answered 200 without any error.
  bool AnswersCleanly(const std::string& body) {
    api_test::ClientResponse response = client_->Post(body);
    return response.status == 200 && response.body.find("error") == std::string::npos;
  }
  const ApiMetrics& metrics() const { return metrics_; }

 private:
  api_test::FakeUpstream base_;
  api_test::FakeUpstream er_;
  SnapshotHolder snapshots_;
  MetricsRegistry registry_;
  ApiMetrics metrics_{registry_};
  SystemClock clock_;
  std::unique_ptr<RouterContext> context_;
  std::unique_ptr<HttpServer> server_;
  std::unique_ptr<api_test::TestClient> client_;
};

std::string Quoted(const Pubkey& key) { return "\"" + key.ToBase58() + "\""; }

std::string BenchCall(int id, const std::string& method, const std::string& params) {
  return R"({"jsonrpc":"2.0","id":)" + std::to_string(id) + R"(,"method":")" + method +
         R"(","params":)" + params + "}";
}

// bench/run's batch_10: getAccountInfo of 3 delegated and 3 undelegated accounts, getBalance of
// one of each, getSlot and getLatestBlockhash. Arg: owner verification of the single-account
// reads (on by default, as in bench/run) or off.
void BM_Batch10ThroughRouter(benchmark::State& state) {
  RouterStack stack(state.range(0) != 0);
  if (stack.client() == nullptr) return state.SkipWithError("no server");
  const std::string b64 = R"(,{"encoding":"base64"}])";
  const std::vector<std::string> calls = {
      BenchCall(1, "getAccountInfo", "[" + Quoted(Key(1)) + b64),
      BenchCall(2, "getAccountInfo", "[" + Quoted(Key(21)) + b64),
      BenchCall(3, "getAccountInfo", "[" + Quoted(Key(2)) + b64),
      BenchCall(4, "getAccountInfo", "[" + Quoted(Key(22)) + b64),
      BenchCall(5, "getAccountInfo", "[" + Quoted(Key(3)) + b64),
      BenchCall(6, "getAccountInfo", "[" + Quoted(Key(23)) + b64),
      BenchCall(7, "getBalance", "[" + Quoted(Key(4)) + "]"),
      BenchCall(8, "getBalance", "[" + Quoted(Key(24)) + "]"),
      BenchCall(9, "getSlot", "[]"),
      BenchCall(10, "getLatestBlockhash", "[]"),
  };
  std::string body = "[";
  for (size_t i = 0; i < calls.size(); ++i) body += (i ? "," : "") + calls[i];
  body += "]";
  if (!stack.AnswersCleanly(body)) return state.SkipWithError("the batch is answered with errors");
  const uint64_t before = stack.metrics().upstream_requests.value();
  for (auto _ : state) benchmark::DoNotOptimize(stack.client()->Post(body));
  state.counters["upstream_requests_per_batch"] =
      static_cast<double>(stack.metrics().upstream_requests.value() - before) /
      static_cast<double>(state.iterations());
}
BENCHMARK(BM_Batch10ThroughRouter)->ArgName("verify_owner")->Arg(1)->Arg(0)->UseRealTime();

// bench/run's multiple_accounts_20: 10 delegated and 10 undelegated keys, split over base and
// the ER and merged.
void BM_MultipleAccounts20ThroughRouter(benchmark::State& state) {
  RouterStack stack(true);
  if (stack.client() == nullptr) return state.SkipWithError("no server");
  std::string list;
  for (uint8_t i = 1; i <= 10; ++i) {
    list += (list.empty() ? "" : ",") + Quoted(Key(i)) + "," + Quoted(Key(i + 20));
  }
  const std::string body =
      BenchCall(1, "getMultipleAccounts", "[[" + list + R"(],{"encoding":"base64"}])");
  if (!stack.AnswersCleanly(body)) return state.SkipWithError("the call is answered with an error");
  for (auto _ : state) benchmark::DoNotOptimize(stack.client()->Post(body));
}
BENCHMARK(BM_MultipleAccounts20ThroughRouter)->UseRealTime();

}  // namespace
}  // namespace switchyard
