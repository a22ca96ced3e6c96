#include "engine/audit_digest.h"

#include <algorithm>
#include <memory>
#include <string_view>

#include "absl/strings/escaping.h"
#include "common/endian.h"
#include "common/sha256.h"

namespace switchyard {

std::string AuditDigest::ToHex() const {
  return absl::BytesToHexString(
      absl::string_view(reinterpret_cast<const char*>(sha256.data()), sha256.size()));
}

void AuditDigestBuilder::AddHistoryRow(const HistoryEntry& row) {
  if (row.ignored || row.slot > slot_) return;
  const Pubkey* account = AccountOf(row.event);
  if (account == nullptr) return;
  auto it = accounts_.find(*account);
  const AccountState* current = it == accounts_.end() ? nullptr : &it->second;
  AccountState next = ApplyAccountEvent(current, row.event).next;
  accounts_.insert_or_assign(*account, next);
}

template <typename Write>
void AuditDigestBuilder::Produce(Write write) const {
  uint64_t count = 0;
  for (const auto& [account, state] : accounts_) count += state.delegated ? 1 : 0;
  std::string head(kAuditDigestTag, kAuditDigestTagSize);
  AppendU64LE(&head, slot_);
  AppendU64LE(&head, count);
  write(head);
  std::string record;
  record.reserve(kAuditRecordSize);
  for (const auto& [account, state] : accounts_) {
    if (!state.delegated) continue;
    record.assign(reinterpret_cast<const char*>(account.data()), Pubkey::kSize);
    record.append(reinterpret_cast<const char*>(state.validator.data()), Pubkey::kSize);
    record.append(reinterpret_cast<const char*>(state.owner_program.data()), Pubkey::kSize);
    AppendU64LE(&record, state.delegation_slot);
    AppendU64LE(&record, state.lamports);
    AppendU64LE(&record, state.commit_frequency_ms);
    write(record);
  }
}

std::string AuditDigestBuilder::Message() const {
  std::string out;
  Produce([&out](std::string_view piece) { out.append(piece); });
  return out;
}

absl::StatusOr<AuditDigest> AuditDigestBuilder::Finish() const {
  Sha256 hash;
  AuditDigest digest;
  digest.slot = slot_;
  Produce([&](std::string_view piece) { hash.Update(piece); });
  for (const auto& [account, state] : accounts_) digest.accounts += state.delegated ? 1 : 0;
  absl::StatusOr<Sha256::Digest> sha256 = hash.Finish();
  if (!sha256.ok()) return sha256.status();
  std::copy(sha256->begin(), sha256->end(), digest.sha256.begin());
  return digest;
}

}  // namespace switchyard
