#include "localnet/localnet.h"

#include <algorithm>
#include <fstream>
#include <random>
#include <vector>

#include "common/cpu.h"
#include "common/status.h"
#include "fmt/format.h"
#include "localnet/wire.h"
#include "spdlog/spdlog.h"

namespace switchyard::localnet {

Localnet::Localnet(LocalnetOptions options, const Clock* clock)
    : options_(std::move(options)), clock_(clock) {
  BankOptions bank_options;
  bank_options.fee_lamports_per_signature = options_.fee_lamports_per_signature;
  bank_options.max_pending_transactions = options_.max_pending_transactions;
  bank_options.max_transaction_history = options_.max_transaction_history;
  bank_options.max_transaction_history_slots = options_.max_transaction_history_slots;
  bank_options.er_mode = options_.er_mode;
  bank_options.blockhash_validity = options_.blockhash_validity_blocks;
  // Each chain has blockhashes of its own: an ER's are unknown to the base and the reverse.
  bank_options.chain_seed =
      options_.er_mode ? "er/" + options_.identity.ToBase58() : std::string("base");
  bank_ = std::make_unique<Bank>(bank_options, clock_);
  if (options_.er_mode) {
    cloner_ = std::make_unique<BaseCloner>(options_.base_url, options_.identity, bank_.get(),
                                           options_.base_timeout);
  }
  if (!options_.er_mode) registry_ = std::make_unique<LocalErRegistry>(bank_.get());
  runtime_faults_ = std::make_unique<RuntimeFaults>(options_.faults);
  rpc_ = std::make_unique<RpcService>(options_, bank_.get(), cloner_.get(), clock_,
                                      runtime_faults_.get());
  hub_ = std::make_unique<PubSubHub>(bank_.get(), options_.faults);
  if (options_.scenario.enabled) {
    scenario_ = std::make_unique<ScenarioDriver>(options_.scenario, bank_.get());
  }
  const int threads =
      options_.io_threads > 0 ? options_.io_threads : static_cast<int>(UsableCpuCount());
  pool_ = std::make_unique<IoPool>(threads);
  faults_ = std::make_unique<HttpFaultInjector>(options_.faults);
  http_ = std::make_unique<Listener>(pool_.get(), Listener::Protocol::kHttp, rpc_.get(), hub_.get(),
                                     Limits());
  ws_ = std::make_unique<Listener>(pool_.get(), Listener::Protocol::kWebSocket, rpc_.get(),
                                   hub_.get(), Limits());
}

ServerLimits Localnet::Limits() {
  ServerLimits limits;
  limits.max_body_bytes = options_.max_body_bytes;
  limits.max_ws_queue = options_.max_ws_queue;
  limits.idle_timeout = options_.idle_timeout;
  limits.request_timeout = options_.request_timeout;
  limits.ws_ping_interval = options_.ws_ping_interval;
  limits.faults = faults_->enabled() ? faults_.get() : nullptr;
  limits.no_pipelining = options_.faults.no_pipelining;
  limits.gzip_min_bytes = options_.gzip_min_bytes;
  limits.gzip_counters = &gzip_counters_;
  limits.registry = registry_.get();
  limits.runtime_faults = runtime_faults_.get();
  return limits;
}

Localnet::~Localnet() { Stop(); }

namespace {

// Ports to try for the HTTP listener when any will do: 40 random ones below the kernel's
// ephemeral range (when it leaves room above 10000), then 0 (the kernel's choice) 20 times.
std::vector<uint16_t> PortPairCandidates() {
  std::vector<uint16_t> ports;
  int low = 32768;
  std::ifstream range("/proc/sys/net/ipv4/ip_local_port_range");
  range >> low;
  if (low > 11000) {
    std::mt19937 random(std::random_device{}());
    std::uniform_int_distribution<int> pick(10000, low - 2);
    for (int i = 0; i < 40; ++i) ports.push_back(static_cast<uint16_t>(pick(random)));
  }
  ports.insert(ports.end(), 20, 0);
  return ports;
}

}  // namespace

absl::Status Localnet::Start() {
  if (options_.slot_interval < absl::Milliseconds(1)) {
    return absl::InvalidArgumentError("the slot interval must be at least 1 ms");
  }
  if (options_.blockhash_validity_blocks < 1) {
    return absl::InvalidArgumentError("a blockhash must be valid for at least 1 block");
  }
  RETURN_IF_ERROR(ValidateHttpFaults(options_.faults));
  if (!options_.er_mode) {
    bank_->SetAccount(FaucetPubkey(),
                      Account{500'000'000'000'000'000ull, SystemProgramId(), "", false});
  }
  for (const auto& [key, lamports] : options_.genesis_accounts) {
    bank_->SetAccount(key, Account{lamports, SystemProgramId(), "", false});
  }
  if (registry_ != nullptr) {
    for (const ErRecord& record : options_.registry_records) registry_->SetAtGenesis(record);
  }
  if (scenario_ != nullptr) RETURN_IF_ERROR(scenario_->Start());
  if (cloner_ != nullptr) RETURN_IF_ERROR(cloner_->Start());
  // Pubsub listens on the HTTP port + 1, as Solana clients expect. With port 0, try free
  // pairs until both fit: first below the kernel's ephemeral range, where no outgoing
  // connection (nor its TIME-WAIT remains, thousands of them after a load test) holds the
  // second port, then wherever the kernel puts the first.
  const std::vector<uint16_t> candidates =
      options_.port != 0 ? std::vector<uint16_t>{options_.port} : PortPairCandidates();
  absl::Status status;
  for (const uint16_t port : candidates) {
    status = http_->Start(options_.bind_address, port);
    if (status.ok()) {
      status = ws_->Start(options_.bind_address, static_cast<uint16_t>(http_->port() + 1));
    }
    if (status.ok() || options_.port != 0) break;
    // Neither listener accepts yet, so both can simply be replaced.
    http_ = std::make_unique<Listener>(pool_.get(), Listener::Protocol::kHttp, rpc_.get(),
                                       hub_.get(), Limits());
    ws_ = std::make_unique<Listener>(pool_.get(), Listener::Protocol::kWebSocket, rpc_.get(),
                                     hub_.get(), Limits());
  }
  if (!status.ok()) return status;
  http_->Run();
  ws_->Run();
  pool_->Start();
  started_ = true;
  slot_thread_ = std::thread([this] { SlotLoop(); });
  return absl::OkStatus();
}

void Localnet::Stop() {
  if (!started_) return;
  started_ = false;
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  if (slot_thread_.joinable()) slot_thread_.join();
  http_->Stop();
  ws_->Stop();
  hub_->CloseAll();
  if (cloner_ != nullptr) cloner_->Stop();
  pool_->Stop();
  if (scenario_ != nullptr) scenario_->Stop();
}

void Localnet::Tick() {
  if (scenario_ != nullptr) scenario_->BeforeSlot();
  SlotEffects effects = bank_->AdvanceSlot();
  if (scenario_ != nullptr) scenario_->AfterSlot(effects);
  hub_->Publish(effects);
}

void Localnet::SlotLoop() {
  absl::Duration next = clock_->Monotonic() + options_.slot_interval;
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      const absl::Duration wait = next - clock_->Monotonic();
      if (wait > absl::ZeroDuration()) {
        auto stopping = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_; };
        mu_.AwaitWithTimeout(absl::Condition(&stopping), wait);
      }
      if (stopping_) return;
    }
    Tick();
    next += options_.slot_interval;
    // After a stall, do not burst to catch up.
    const absl::Duration now = clock_->Monotonic();
    if (next < now) next = now + options_.slot_interval;
  }
}

}  // namespace switchyard::localnet
