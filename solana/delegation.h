#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "common/pubkey.h"
#include "solana/transaction.h"

namespace switchyard {

// MagicBlock's delegation program. While an account is delegated, the base layer shows this
// program as its owner.
inline constexpr std::string_view kDelegationProgramId =
    "DELeGGvXpWV2fqJUhqcF5ZSYMS4JTLjteaAMARRSaeSh";
Pubkey DelegationProgramId();

// Account discriminators: the first 8 bytes (a little-endian u64) of the program's accounts.
inline constexpr uint64_t kDelegationRecordDiscriminator = 100;
inline constexpr uint64_t kDelegationMetadataDiscriminator = 102;
inline constexpr size_t kDelegationRecordSize = 96;

// The delegation record account (PDA ["delegation", account] of the delegation program):
// which validator (ER) holds the account and on whose behalf. 96 bytes: u64 discriminator
// 100, authority, owner, u64 delegation slot, u64 lamports, u64 commit frequency ms, all
// little-endian. An all-zero authority means "any ER".
struct DelegationRecord {
  Pubkey authority;  // the validator identity
  Pubkey owner;      // the program that owned the account before delegation
  uint64_t delegation_slot = 0;
  uint64_t lamports = 0;
  uint64_t commit_frequency_ms = 0;

  friend bool operator==(const DelegationRecord&, const DelegationRecord&) = default;
};

// Fails with InvalidArgument unless `data` is exactly 96 bytes with discriminator 100.
absl::StatusOr<DelegationRecord> DecodeDelegationRecord(std::span<const uint8_t> data);
std::string EncodeDelegationRecord(const DelegationRecord& record);

// Who asked for the account to be undelegated; stored in the byte that older program
// versions used for the `is_undelegatable` bool (false = kNone, true = kValidator).
enum class UndelegationRequester : uint8_t { kNone = 0, kValidator = 1, kOwnerProgram = 2 };

// The delegation metadata account (PDA ["delegation-metadata", account]): u64 discriminator
// 102, then Borsh: u64 last_commit_id (older versions: last update slot/nonce), u8
// undelegation requester, Vec<Vec<u8>> seeds, rent payer. The layout is the one of
// delegation-program src/state/delegation_metadata.rs.
struct DelegationMetadata {
  uint64_t last_commit_id = 0;
  UndelegationRequester undelegation_requester = UndelegationRequester::kNone;
  std::vector<std::string> seeds;  // the delegated account's PDA seeds, to reopen it
  Pubkey rent_payer;

  friend bool operator==(const DelegationMetadata&, const DelegationMetadata&) = default;
};

// Fails with InvalidArgument on a wrong discriminator, a truncated field, a requester byte
// above 2, or bytes after the rent payer.
absl::StatusOr<DelegationMetadata> DecodeDelegationMetadata(std::span<const uint8_t> data);
std::string EncodeDelegationMetadata(const DelegationMetadata& metadata);

// Instruction discriminators. The program reserves 8 bytes (a little-endian u64, as the SDK
// writes it) and dispatches on the first one.
inline constexpr uint8_t kDelegateDiscriminator = 0;
inline constexpr uint8_t kUndelegateDiscriminator = 3;
inline constexpr uint8_t kDelegateWithAnyValidatorDiscriminator = 19;
inline constexpr size_t kInstructionDiscriminatorSize = 8;

enum class DelegationInstructionKind { kDelegate, kUndelegate, kOther };

// A decoded instruction of the delegation program. A value type.
//
// Delegate (discriminator 0, and 19 "delegate with any validator", which has the same
// accounts and arguments): accounts payer, delegated account, owner program, buffer (PDA
// ["buffer", account] of the owner program), delegation record, delegation metadata, system
// program; data = 8-byte discriminator, then Borsh DelegateArgs {u32 commit_frequency_ms,
// Vec<Vec<u8>> seeds, Option<Pubkey> validator}.
//
// Undelegate (discriminator 3, data = the 8-byte discriminator only): accounts validator,
// delegated account, owner program, undelegate buffer, commit state, commit record,
// delegation record, delegation metadata, rent reimbursement, fees vault, validator fees
// vault, system program.
struct DelegationInstruction {
  DelegationInstructionKind kind = DelegationInstructionKind::kOther;
  uint8_t discriminator = 0;  // first data byte; 0 for kOther with empty data

  // Accounts common to both (filled for kDelegate and kUndelegate).
  Pubkey delegated_account;
  Pubkey owner_program;
  Pubkey buffer;  // Delegate: the delegate buffer; Undelegate: the undelegate buffer
  Pubkey delegation_record;
  Pubkey delegation_metadata;
  // Delegate: the validator named in the arguments (none: the program's default);
  // Undelegate: the validator account that signs.
  std::optional<Pubkey> validator;

  // Delegate only.
  Pubkey payer;
  uint32_t commit_frequency_ms = 0;
  std::vector<std::string> seeds;

  // Undelegate only.
  Pubkey commit_state;
  Pubkey commit_record;
  Pubkey rent_reimbursement;
  Pubkey fees_vault;
  Pubkey validator_fees_vault;

  friend bool operator==(const DelegationInstruction&, const DelegationInstruction&) = default;
};

// Decodes `instruction` against `account_keys`, the transaction's full account list (see
// ResolveAccountKeys). An instruction with fewer than 8 data bytes or an unknown
// discriminator is kOther, not an error. Fails with InvalidArgument when the program id is
// not the delegation program, an index is out of range of `account_keys`, a Delegate or
// Undelegate has too few accounts, or Delegate arguments are malformed (truncated, an
// Option tag other than 0/1, trailing bytes) — the program rejects all of these.
absl::StatusOr<DelegationInstruction> DecodeDelegationInstruction(
    const CompiledInstruction& instruction, const std::vector<Pubkey>& account_keys);

// The Delegate instruction data the SDK's serializeDelegateInstructionData writes.
std::string EncodeDelegateInstructionData(uint32_t commit_frequency_ms,
                                          const std::vector<std::string>& seeds,
                                          const std::optional<Pubkey>& validator);

// PDAs of the delegation program as the ephemeral-rollups SDK derives them. Each is a
// find_program_address over short seeds, which cannot fail except with probability
// 2^-256 (the all-zero key is returned then).
Pubkey DelegationRecordPda(const Pubkey& account);                     // ["delegation", a]
Pubkey DelegationMetadataPda(const Pubkey& account);                   // ["delegation-metadata", a]
Pubkey DelegateBufferPda(const Pubkey& account, const Pubkey& owner);  // ["buffer", a] of owner
Pubkey UndelegateBufferPda(const Pubkey& account);                     // ["undelegate-buffer", a]
Pubkey CommitStatePda(const Pubkey& account);                          // ["state-diff", a]
Pubkey CommitRecordPda(const Pubkey& account);                         // ["commit-state-record", a]
Pubkey FeesVaultPda();                                                 // ["fees-vault"]
Pubkey ValidatorFeesVaultPda(const Pubkey& validator);                 // ["v-fees-vault", v]

}  // namespace switchyard
