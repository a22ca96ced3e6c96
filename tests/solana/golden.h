#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/pubkey.h"

namespace switchyard::golden {

// tests/golden/vectors.json, as written by tests/golden/generate.mjs from @solana/web3.js and
// @magicblock-labs/ephemeral-rollups-sdk. Loaded once; read-only afterwards.

struct ResolvedKey {
  std::string key;
  bool signer = false;
  bool writable = false;
};

struct Instruction {
  int program_id_index = 0;
  std::vector<int> accounts;
  std::string data_base64;
};

struct Lookup {
  std::string table;
  std::vector<int> writable_indexes;
  std::vector<int> readonly_indexes;
};

struct Table {
  std::string key;
  std::vector<std::string> addresses;
};

// The expected decoding of one delegation-program instruction; empty strings for accounts
// that the kind does not have.
struct Delegation {
  std::string kind;
  int discriminator = 0;
  std::string payer, delegated_account, owner_program, buffer, delegation_record,
      delegation_metadata, system_program;
  uint32_t commit_frequency_ms = 0;
  std::vector<std::string> seeds_base64;
  std::string validator;
  std::string undelegate_buffer, commit_state, commit_record, rent_reimbursement, fees_vault,
      validator_fees_vault;
};

struct TransactionVector {
  std::string name;
  bool versioned = false;
  std::optional<int> version;
  size_t wire_size = 0;
  std::string base64, base58, id;
  std::vector<std::string> signatures;
  std::string message_base64;
  int num_required_signatures = 0, num_readonly_signed = 0, num_readonly_unsigned = 0;
  std::vector<std::string> static_keys;
  std::string recent_blockhash;
  std::vector<Instruction> instructions;
  std::vector<Lookup> lookups;
  std::vector<ResolvedKey> resolved_keys;
  std::vector<Table> tables;
  std::vector<Delegation> delegation;
};

struct DelegationPdas {
  std::string account, owner_program, delegation_record, delegation_metadata, delegate_buffer,
      undelegate_buffer, commit_state, commit_record;
};

struct FindProgramAddressVector {
  std::vector<std::string> seeds_base64;
  std::string program, address;
  int bump = 0;
};

struct CreateProgramAddressVector {
  std::vector<std::string> seeds_base64;
  int bump = 0;
  std::string program;
  std::optional<std::string> address;  // none: the hash is on the curve
};

struct OnCurveVector {
  std::string key;
  bool on_curve = false;
};

struct RecordVector {
  std::string authority, owner;
  uint64_t delegation_slot = 0, lamports = 0, commit_frequency_ms = 0;
  std::string base64;
};

struct MetadataVector {
  uint64_t last_commit_id = 0;
  int undelegation_requester = 0;
  std::vector<std::string> seeds_base64;
  std::string rent_payer;
  std::string base64;
};

struct Vectors {
  std::string web3_version, sdk_version;
  std::string delegation_program_id;
  std::vector<TransactionVector> transactions;
  std::vector<DelegationPdas> delegation_pdas;
  std::string fees_vault;
  std::string validator, validator_fees_vault;
  std::vector<FindProgramAddressVector> find_program_address;
  std::vector<CreateProgramAddressVector> create_program_address;
  std::vector<OnCurveVector> on_curve;
  RecordVector record;
  MetadataVector metadata;
};

// Parses the vectors on first use; aborts the test binary if the file is missing or
// malformed (a broken fixture, not a behaviour under test).
const Vectors& Load();

const TransactionVector& TransactionNamed(const std::string& name);

Pubkey Key(const std::string& base58);
std::string Base64(const std::string& text);  // decodes; aborts on bad fixture text

}  // namespace switchyard::golden
