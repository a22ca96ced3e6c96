#pragma once

#include <deque>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/pubkey.h"
#include "localnet/bank.h"
#include "localnet/rpc_service.h"

namespace switchyard::localnet {

// ER mode: clones accounts from the base layer on first read. For each account it also reads
// the delegation record; an account delegated to this ER's identity (or to any ER) becomes
// writable here, with its original owner as on a MagicBlock ER. Runs its own threads with
// blocking HTTP under a timeout, so I/O threads never wait. Owned by Localnet.
class BaseCloner : public AccountSource {
 public:
  BaseCloner(std::string base_url, Pubkey identity, Bank* bank, absl::Duration timeout,
             size_t max_queue = 4096, int threads = 2);
  ~BaseCloner() override;

  absl::Status Start();
  void Stop();
  void Ensure(std::vector<Pubkey> keys, std::function<void()> done) override;

  // Fetches and applies `keys` now, on the calling thread.
  absl::Status CloneNow(const std::vector<Pubkey>& keys);

 private:
  struct Job {
    std::vector<Pubkey> keys;
    std::function<void()> done;
  };
  void Run();
  absl::StatusOr<std::string> Post(const std::string& body);

  const std::string base_url_;
  std::string host_;
  std::string port_;
  std::string target_;
  const Pubkey identity_;
  Bank* const bank_;
  const absl::Duration timeout_;
  const size_t max_queue_;
  const int thread_count_;

  absl::Mutex mu_;
  std::deque<Job> queue_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_;
};

}  // namespace switchyard::localnet
