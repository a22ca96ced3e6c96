#include "engine/audit_digest.h"

#include <openssl/evp.h>

#include <memory>
#include <string_view>

#include "absl/strings/escaping.h"
#include "common/endian.h"

namespace switchyard {
namespace {

struct DigestContextDeleter {
  void operator()(EVP_MD_CTX* ctx) const { EVP_MD_CTX_free(ctx); }
};

}  // namespace

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
  std::unique_ptr<EVP_MD_CTX, DigestContextDeleter> ctx(EVP_MD_CTX_new());
  if (ctx == nullptr || EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr) != 1) {
    return absl::InternalError("OpenSSL: cannot initialise SHA-256");
  }
  bool ok = true;
  AuditDigest digest;
  digest.slot = slot_;
  Produce([&](std::string_view piece) {
    ok = ok && EVP_DigestUpdate(ctx.get(), piece.data(), piece.size()) == 1;
  });
  for (const auto& [account, state] : accounts_) digest.accounts += state.delegated ? 1 : 0;
  unsigned int size = 0;
  if (!ok || EVP_DigestFinal_ex(ctx.get(), digest.sha256.data(), &size) != 1 ||
      size != digest.sha256.size()) {
    return absl::InternalError("OpenSSL: SHA-256 failed");
  }
  return digest;
}

}  // namespace switchyard
