#pragma once

#include "engine/state_store.h"

namespace switchyard::testing {

// A StateStore that passes every call to another store, for tests and benchmarks that change
// one behaviour and keep the rest. Stage is not passed on: it is StateStore's default, which
// commits at once through Commit, unless a subclass overrides it.
class ForwardingStateStore : public StateStore {
 public:
  explicit ForwardingStateStore(StateStore* store) : store_(store) {}

  absl::StatusOr<LoadedState> Load() override { return store_->Load(); }
  absl::Status Commit(const FoldBatch& batch) override { return store_->Commit(batch); }
  absl::StatusOr<FoldPosition> Position() override { return store_->Position(); }
  absl::StatusOr<std::optional<AccountState>> GetAccount(const Pubkey& a) override {
    return store_->GetAccount(a);
  }
  absl::StatusOr<std::optional<AccountState>> GetAccountAt(const Pubkey& a, Slot s) override {
    return store_->GetAccountAt(a, s);
  }
  absl::StatusOr<std::vector<HistoryEntry>> History(const Pubkey& a) override {
    return store_->History(a);
  }
  absl::StatusOr<std::vector<HistoryEntry>> HistoryBetween(const Pubkey& a, Slot from, Slot to,
                                                           size_t limit) override {
    return store_->HistoryBetween(a, from, to, limit);
  }
  absl::StatusOr<std::optional<StateDigest>> SealedDigest(Slot s) override {
    return store_->SealedDigest(s);
  }
  absl::StatusOr<std::vector<SealedDigestAt>> LastSealedDigests(Slot at_or_below,
                                                                size_t count) override {
    return store_->LastSealedDigests(at_or_below, count);
  }
  absl::StatusOr<std::vector<std::pair<Slot, StateDigest>>> SealedDigests() override {
    return store_->SealedDigests();
  }
  absl::StatusOr<std::vector<QuarantineEntry>> Quarantine() override {
    return store_->Quarantine();
  }

 protected:
  StateStore* store() const { return store_; }

 private:
  StateStore* store_;
};

}  // namespace switchyard::testing
