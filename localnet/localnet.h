#pragma once

#include <memory>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "common/clock.h"
#include "localnet/bank.h"
#include "localnet/base_cloner.h"
#include "localnet/er_registry.h"
#include "localnet/http_faults.h"
#include "localnet/options.h"
#include "localnet/pubsub.h"
#include "localnet/rpc_service.h"
#include "localnet/scenario.h"
#include "localnet/server.h"

namespace switchyard::localnet {

// A local Solana base layer, or an ER (options.er_mode), on loopback: JSON-RPC over HTTP on
// http_port(), pubsub over WebSocket on ws_port() (= http_port() + 1), slots on a timer.
// Start() and Stop() from one controlling thread; everything else is internal.
class Localnet {
 public:
  Localnet(LocalnetOptions options, const Clock* clock);
  ~Localnet();

  absl::Status Start();
  void Stop();

  uint16_t http_port() const { return http_->port(); }
  uint16_t ws_port() const { return ws_->port(); }
  Bank& bank() { return *bank_; }
  size_t subscription_count() const { return hub_->subscription_count(); }
  const Pubkey& identity() const { return rpc_->identity(); }
  ScenarioDriver* scenario() { return scenario_.get(); }
  const GzipCounters& gzip_counters() const { return gzip_counters_; }
  // The faults POST /faults changes, for a test to change them in-process.
  RuntimeFaults& runtime_faults() { return *runtime_faults_; }

 private:
  void SlotLoop();
  void Tick();
  ServerLimits Limits();

  const LocalnetOptions options_;
  const Clock* const clock_;
  std::unique_ptr<Bank> bank_;
  std::unique_ptr<LocalErRegistry> registry_;  // base mode: the ER registry's records
  std::unique_ptr<BaseCloner> cloner_;
  std::unique_ptr<RpcService> rpc_;
  std::unique_ptr<PubSubHub> hub_;
  std::unique_ptr<ScenarioDriver> scenario_;
  std::unique_ptr<HttpFaultInjector> faults_;
  std::unique_ptr<RuntimeFaults> runtime_faults_;
  GzipCounters gzip_counters_;
  std::unique_ptr<IoPool> pool_;
  std::unique_ptr<Listener> http_;
  std::unique_ptr<Listener> ws_;
  std::thread slot_thread_;
  absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool started_ = false;
};

}  // namespace switchyard::localnet
