// Micro-benchmarks of the router's per-request CPU work: parsing and the routing decision.
// Not a test; run by hand: build/<dir>/tests/api/api_bench
#include <benchmark/benchmark.h>

#include "api/net/http_server.h"
#include "api/jsonrpc/jsonrpc.h"
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

}  // namespace
}  // namespace switchyard
