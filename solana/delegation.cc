#include "solana/delegation.h"

#include <array>
#include <utility>

#include "absl/status/status.h"
#include "common/endian.h"
#include "common/status.h"
#include "fmt/format.h"
#include "solana/internal/borsh_reader.h"
#include "solana/pda.h"

namespace switchyard {
namespace {

using solana_internal::BorshReader;

constexpr size_t kDelegateAccounts = 7;
constexpr size_t kUndelegateAccounts = 12;

absl::Status Invalid(std::string message) { return absl::InvalidArgumentError(std::move(message)); }

void AppendKey(std::string* out, const Pubkey& key) {
  out->append(reinterpret_cast<const char*>(key.data()), Pubkey::kSize);
}

void AppendSeeds(std::string* out, const std::vector<std::string>& seeds) {
  AppendU32LE(out, static_cast<uint32_t>(seeds.size()));
  for (const std::string& seed : seeds) {
    AppendU32LE(out, static_cast<uint32_t>(seed.size()));
    out->append(seed);
  }
}

absl::Status CheckDiscriminator(BorshReader& r, uint64_t expected, std::string_view what) {
  ASSIGN_OR_RETURN(const uint64_t discriminator, r.U64("discriminator"));
  if (discriminator != expected) {
    return Invalid(fmt::format("{}: discriminator {}, expected {}", what, discriminator, expected));
  }
  return absl::OkStatus();
}

Pubkey Pda(std::initializer_list<std::string_view> seeds, const Pubkey& program) {
  absl::StatusOr<std::pair<Pubkey, uint8_t>> found =
      FindProgramAddress(std::span<const std::string_view>(seeds.begin(), seeds.size()), program);
  return found.ok() ? found->first : Pubkey();
}

std::string_view KeyBytes(const Pubkey& key) {
  return std::string_view(reinterpret_cast<const char*>(key.data()), Pubkey::kSize);
}

}  // namespace

Pubkey DelegationProgramId() {
  static const Pubkey kId = *Pubkey::FromBase58(kDelegationProgramId);
  return kId;
}

absl::StatusOr<DelegationRecord> DecodeDelegationRecord(std::span<const uint8_t> data) {
  if (data.size() != kDelegationRecordSize) {
    return Invalid(fmt::format("delegation record is {} bytes, expected {}", data.size(),
                               kDelegationRecordSize));
  }
  BorshReader r(data, "delegation record");
  RETURN_IF_ERROR(CheckDiscriminator(r, kDelegationRecordDiscriminator, "delegation record"));
  DelegationRecord record;
  ASSIGN_OR_RETURN(record.authority, r.Key("authority"));
  ASSIGN_OR_RETURN(record.owner, r.Key("owner"));
  ASSIGN_OR_RETURN(record.delegation_slot, r.U64("delegation slot"));
  ASSIGN_OR_RETURN(record.lamports, r.U64("lamports"));
  ASSIGN_OR_RETURN(record.commit_frequency_ms, r.U64("commit frequency"));
  return record;
}

std::string EncodeDelegationRecord(const DelegationRecord& record) {
  std::string out;
  out.reserve(kDelegationRecordSize);
  AppendU64LE(&out, kDelegationRecordDiscriminator);
  AppendKey(&out, record.authority);
  AppendKey(&out, record.owner);
  AppendU64LE(&out, record.delegation_slot);
  AppendU64LE(&out, record.lamports);
  AppendU64LE(&out, record.commit_frequency_ms);
  return out;
}

absl::StatusOr<DelegationMetadata> DecodeDelegationMetadata(std::span<const uint8_t> data) {
  BorshReader r(data, "delegation metadata");
  RETURN_IF_ERROR(CheckDiscriminator(r, kDelegationMetadataDiscriminator, "delegation metadata"));
  DelegationMetadata metadata;
  ASSIGN_OR_RETURN(metadata.last_commit_id, r.U64("last commit id"));
  ASSIGN_OR_RETURN(const uint8_t requester, r.U8("undelegation requester"));
  if (requester > 2) {
    return Invalid(
        fmt::format("delegation metadata: undelegation requester {} is not 0, 1 or 2", requester));
  }
  metadata.undelegation_requester = static_cast<UndelegationRequester>(requester);
  ASSIGN_OR_RETURN(metadata.seeds, r.Seeds());
  ASSIGN_OR_RETURN(metadata.rent_payer, r.Key("rent payer"));
  RETURN_IF_ERROR(r.End());
  return metadata;
}

std::string EncodeDelegationMetadata(const DelegationMetadata& metadata) {
  std::string out;
  AppendU64LE(&out, kDelegationMetadataDiscriminator);
  AppendU64LE(&out, metadata.last_commit_id);
  out.push_back(static_cast<char>(metadata.undelegation_requester));
  AppendSeeds(&out, metadata.seeds);
  AppendKey(&out, metadata.rent_payer);
  return out;
}

absl::StatusOr<DelegationInstruction> DecodeDelegationInstruction(
    const CompiledInstruction& instruction, const std::vector<Pubkey>& account_keys) {
  if (instruction.program_id_index >= account_keys.size()) {
    return Invalid(fmt::format("program id index {} out of range ({} account keys)",
                               instruction.program_id_index, account_keys.size()));
  }
  const Pubkey& program = account_keys[instruction.program_id_index];
  if (program != DelegationProgramId()) {
    return Invalid(
        fmt::format("instruction calls {}, not the delegation program", program.ToBase58()));
  }
  DelegationInstruction out;
  const std::string& data = instruction.data;
  if (!data.empty()) out.discriminator = static_cast<uint8_t>(data[0]);
  if (data.size() < kInstructionDiscriminatorSize) return out;

  size_t needed = 0;
  std::string_view name;
  switch (out.discriminator) {
    case kDelegateDiscriminator:
    case kDelegateWithAnyValidatorDiscriminator:
      out.kind = DelegationInstructionKind::kDelegate;
      needed = kDelegateAccounts;
      name = "Delegate";
      break;
    case kUndelegateDiscriminator:
      out.kind = DelegationInstructionKind::kUndelegate;
      needed = kUndelegateAccounts;
      name = "Undelegate";
      break;
    default:
      return out;
  }
  if (instruction.accounts.size() < needed) {
    return Invalid(fmt::format("{} instruction has {} accounts, needs {}", name,
                               instruction.accounts.size(), needed));
  }
  std::array<Pubkey, kUndelegateAccounts> keys;
  for (size_t i = 0; i < needed; ++i) {
    const uint8_t index = instruction.accounts[i];
    if (index >= account_keys.size()) {
      return Invalid(
          fmt::format("{} instruction: account {} has index {}, out of range ({} "
                      "account keys)",
                      name, i, index, account_keys.size()));
    }
    keys[i] = account_keys[index];
  }

  if (out.kind == DelegationInstructionKind::kUndelegate) {
    out.validator = keys[0];
    out.delegated_account = keys[1];
    out.owner_program = keys[2];
    out.buffer = keys[3];
    out.commit_state = keys[4];
    out.commit_record = keys[5];
    out.delegation_record = keys[6];
    out.delegation_metadata = keys[7];
    out.rent_reimbursement = keys[8];
    out.fees_vault = keys[9];
    out.validator_fees_vault = keys[10];
    return out;
  }

  out.payer = keys[0];
  out.delegated_account = keys[1];
  out.owner_program = keys[2];
  out.buffer = keys[3];
  out.delegation_record = keys[4];
  out.delegation_metadata = keys[5];
  BorshReader r(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(data.data()), data.size())
                    .subspan(kInstructionDiscriminatorSize),
                "Delegate arguments");
  ASSIGN_OR_RETURN(out.commit_frequency_ms, r.U32("commit frequency"));
  ASSIGN_OR_RETURN(out.seeds, r.Seeds());
  ASSIGN_OR_RETURN(const uint8_t has_validator, r.U8("validator option"));
  if (has_validator == 1) {
    ASSIGN_OR_RETURN(out.validator, r.Key("validator"));
  } else if (has_validator != 0) {
    return Invalid(
        fmt::format("Delegate arguments: validator option tag {} is not 0 or 1", has_validator));
  }
  RETURN_IF_ERROR(r.End());
  return out;
}

std::string EncodeDelegateInstructionData(uint32_t commit_frequency_ms,
                                          const std::vector<std::string>& seeds,
                                          const std::optional<Pubkey>& validator) {
  std::string out;
  AppendU64LE(&out, kDelegateDiscriminator);
  AppendU32LE(&out, commit_frequency_ms);
  AppendSeeds(&out, seeds);
  out.push_back(validator.has_value() ? 1 : 0);
  if (validator.has_value()) AppendKey(&out, *validator);
  return out;
}

Pubkey DelegationRecordPda(const Pubkey& account) {
  return Pda({"delegation", KeyBytes(account)}, DelegationProgramId());
}
Pubkey DelegationMetadataPda(const Pubkey& account) {
  return Pda({"delegation-metadata", KeyBytes(account)}, DelegationProgramId());
}
Pubkey DelegateBufferPda(const Pubkey& account, const Pubkey& owner) {
  return Pda({"buffer", KeyBytes(account)}, owner);
}
Pubkey UndelegateBufferPda(const Pubkey& account) {
  return Pda({"undelegate-buffer", KeyBytes(account)}, DelegationProgramId());
}
Pubkey CommitStatePda(const Pubkey& account) {
  return Pda({"state-diff", KeyBytes(account)}, DelegationProgramId());
}
Pubkey CommitRecordPda(const Pubkey& account) {
  return Pda({"commit-state-record", KeyBytes(account)}, DelegationProgramId());
}
Pubkey FeesVaultPda() { return Pda({"fees-vault"}, DelegationProgramId()); }
Pubkey ValidatorFeesVaultPda(const Pubkey& validator) {
  return Pda({"v-fees-vault", KeyBytes(validator)}, DelegationProgramId());
}

}  // namespace switchyard
