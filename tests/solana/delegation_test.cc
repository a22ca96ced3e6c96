#include "solana/delegation.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/endian.h"
#include "solana/base64.h"
#include "tests/solana/golden.h"

namespace switchyard {
namespace {

using ::testing::ElementsAreArray;

std::span<const uint8_t> Bytes(const std::string& s) {
  return std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(s.data()), s.size());
}

std::string Message(const absl::Status& status) { return std::string(status.message()); }

Pubkey TestKey(uint8_t seed) {
  std::array<uint8_t, 32> bytes{};
  bytes.fill(seed);
  return Pubkey(std::span<const uint8_t, 32>(bytes));
}

std::vector<std::string> DecodeSeeds(const std::vector<std::string>& seeds_base64) {
  std::vector<std::string> seeds;
  for (const std::string& s : seeds_base64) seeds.push_back(golden::Base64(s));
  return seeds;
}

// Account keys 0..11 are TestKey(10..21); key 12 is the delegation program.
std::vector<Pubkey> Keys() {
  std::vector<Pubkey> keys;
  for (uint8_t i = 0; i < 12; ++i) keys.push_back(TestKey(10 + i));
  keys.push_back(DelegationProgramId());
  return keys;
}

CompiledInstruction DelegateIx(std::string data) {
  return {12, {0, 1, 2, 3, 4, 5, 6}, std::move(data)};
}

TEST(DelegationProgramTest, IdMatchesTheSdk) {
  EXPECT_EQ(DelegationProgramId().ToBase58(), golden::Load().delegation_program_id);
  EXPECT_EQ(DelegationProgramId().ToBase58(), kDelegationProgramId);
}

TEST(DelegationRecordTest, DecodesTheGoldenRecord) {
  const auto& v = golden::Load().record;
  const std::string bytes = golden::Base64(v.base64);
  auto record = DecodeDelegationRecord(Bytes(bytes));
  ASSERT_TRUE(record.ok()) << record.status();
  EXPECT_EQ(record->authority.ToBase58(), v.authority);
  EXPECT_EQ(record->owner.ToBase58(), v.owner);
  EXPECT_EQ(record->delegation_slot, v.delegation_slot);
  EXPECT_EQ(record->lamports, v.lamports);
  EXPECT_EQ(record->commit_frequency_ms, v.commit_frequency_ms);
  EXPECT_EQ(EncodeDelegationRecord(*record), bytes);
}

TEST(DelegationRecordTest, RoundTripsExtremeValues) {
  for (const DelegationRecord& record :
       {DelegationRecord{},
        DelegationRecord{TestKey(0xff), TestKey(0x01), UINT64_MAX, 1, UINT64_MAX - 1}}) {
    const std::string bytes = EncodeDelegationRecord(record);
    ASSERT_EQ(bytes.size(), kDelegationRecordSize);
    EXPECT_EQ(LoadU64LE(AsBytes(bytes.data())), 100u);
    auto decoded = DecodeDelegationRecord(Bytes(bytes));
    ASSERT_TRUE(decoded.ok()) << decoded.status();
    EXPECT_EQ(*decoded, record);
  }
}

TEST(DelegationRecordTest, AllZeroAuthorityMeansAnyValidator) {
  auto decoded =
      DecodeDelegationRecord(Bytes(EncodeDelegationRecord({Pubkey(), TestKey(3), 5, 6, 7})));
  ASSERT_TRUE(decoded.ok());
  EXPECT_TRUE(decoded->authority.IsZero());
}

TEST(DelegationRecordTest, RejectsWrongSizeOrDiscriminator) {
  const std::string bytes = EncodeDelegationRecord({TestKey(1), TestKey(2), 3, 4, 5});
  EXPECT_EQ(Message(DecodeDelegationRecord(Bytes(bytes.substr(0, 95))).status()),
            "delegation record is 95 bytes, expected 96");
  EXPECT_EQ(Message(DecodeDelegationRecord(Bytes(bytes + "x")).status()),
            "delegation record is 97 bytes, expected 96");
  EXPECT_EQ(Message(DecodeDelegationRecord({}).status()),
            "delegation record is 0 bytes, expected 96");
  std::string metadata_tag = bytes;
  metadata_tag[0] = 102;
  EXPECT_EQ(Message(DecodeDelegationRecord(Bytes(metadata_tag)).status()),
            "delegation record: discriminator 102, expected 100");
  std::string high_byte = bytes;
  high_byte[7] = 1;
  EXPECT_FALSE(DecodeDelegationRecord(Bytes(high_byte)).ok());
}

TEST(DelegationMetadataTest, DecodesTheGoldenMetadata) {
  const auto& v = golden::Load().metadata;
  const std::string bytes = golden::Base64(v.base64);
  auto metadata = DecodeDelegationMetadata(Bytes(bytes));
  ASSERT_TRUE(metadata.ok()) << metadata.status();
  EXPECT_EQ(metadata->last_commit_id, v.last_commit_id);
  EXPECT_EQ(static_cast<int>(metadata->undelegation_requester), v.undelegation_requester);
  EXPECT_THAT(metadata->seeds, ElementsAreArray(DecodeSeeds(v.seeds_base64)));
  EXPECT_EQ(metadata->rent_payer.ToBase58(), v.rent_payer);
  EXPECT_EQ(EncodeDelegationMetadata(*metadata), bytes);
}

TEST(DelegationMetadataTest, RoundTripsEmptyAndManySeeds) {
  DelegationMetadata metadata{UINT64_MAX, UndelegationRequester::kOwnerProgram, {}, TestKey(4)};
  for (int n : {0, 1, 8}) {
    metadata.seeds.assign(n, std::string(n * 4, 's'));
    if (n > 0) metadata.seeds[0].clear();
    auto decoded = DecodeDelegationMetadata(Bytes(EncodeDelegationMetadata(metadata)));
    ASSERT_TRUE(decoded.ok()) << decoded.status();
    EXPECT_EQ(*decoded, metadata);
  }
}

TEST(DelegationMetadataTest, RejectsMalformedData) {
  const DelegationMetadata metadata{1, UndelegationRequester::kNone, {"seed"}, TestKey(4)};
  const std::string bytes = EncodeDelegationMetadata(metadata);
  EXPECT_EQ(Message(DecodeDelegationMetadata(Bytes(bytes + "!")).status()),
            "delegation metadata: 1 trailing bytes at byte 61");
  EXPECT_EQ(Message(DecodeDelegationMetadata(Bytes(bytes.substr(0, 60))).status()),
            "delegation metadata: truncated rent payer at byte 29: needs 32 bytes, 31 left");
  std::string requester = bytes;
  requester[16] = 3;
  EXPECT_EQ(Message(DecodeDelegationMetadata(Bytes(requester)).status()),
            "delegation metadata: undelegation requester 3 is not 0, 1 or 2");
  std::string many_seeds = bytes;
  many_seeds[17] = static_cast<char>(0xff);
  many_seeds[20] = static_cast<char>(0x7f);
  EXPECT_EQ(Message(DecodeDelegationMetadata(Bytes(many_seeds)).status()),
            "delegation metadata: 2130706687 seeds cannot fit in the 40 bytes left at byte 21");
  std::string record_tag = bytes;
  record_tag[0] = 100;
  EXPECT_EQ(Message(DecodeDelegationMetadata(Bytes(record_tag)).status()),
            "delegation metadata: discriminator 100, expected 102");
}

void ExpectMatches(const golden::Delegation& want, const DelegationInstruction& got) {
  EXPECT_EQ(got.discriminator, want.discriminator);
  if (want.kind == "other") {
    EXPECT_EQ(got.kind, DelegationInstructionKind::kOther);
    return;
  }
  EXPECT_EQ(got.delegated_account.ToBase58(), want.delegated_account);
  EXPECT_EQ(got.owner_program.ToBase58(), want.owner_program);
  EXPECT_EQ(got.delegation_record.ToBase58(), want.delegation_record);
  EXPECT_EQ(got.delegation_metadata.ToBase58(), want.delegation_metadata);
  ASSERT_TRUE(got.validator.has_value());
  EXPECT_EQ(got.validator->ToBase58(), want.validator);
  // The PDAs in the instruction are the ones this module derives.
  const Pubkey account = golden::Key(want.delegated_account);
  EXPECT_EQ(got.delegation_record, DelegationRecordPda(account));
  EXPECT_EQ(got.delegation_metadata, DelegationMetadataPda(account));
  if (want.kind == "delegate") {
    EXPECT_EQ(got.kind, DelegationInstructionKind::kDelegate);
    EXPECT_EQ(got.payer.ToBase58(), want.payer);
    EXPECT_EQ(got.buffer.ToBase58(), want.buffer);
    EXPECT_EQ(got.buffer, DelegateBufferPda(account, got.owner_program));
    EXPECT_EQ(got.commit_frequency_ms, want.commit_frequency_ms);
    EXPECT_THAT(got.seeds, ElementsAreArray(DecodeSeeds(want.seeds_base64)));
  } else {
    ASSERT_EQ(want.kind, "undelegate");
    EXPECT_EQ(got.kind, DelegationInstructionKind::kUndelegate);
    EXPECT_EQ(got.buffer.ToBase58(), want.undelegate_buffer);
    EXPECT_EQ(got.commit_state.ToBase58(), want.commit_state);
    EXPECT_EQ(got.commit_record.ToBase58(), want.commit_record);
    EXPECT_EQ(got.rent_reimbursement.ToBase58(), want.rent_reimbursement);
    EXPECT_EQ(got.fees_vault.ToBase58(), want.fees_vault);
    EXPECT_EQ(got.validator_fees_vault.ToBase58(), want.validator_fees_vault);
    EXPECT_EQ(got.buffer, UndelegateBufferPda(account));
    EXPECT_EQ(got.fees_vault, FeesVaultPda());
    EXPECT_EQ(got.validator_fees_vault, ValidatorFeesVaultPda(*got.validator));
  }
}

TEST(DelegationInstructionTest, DecodesEveryGoldenDelegationInstruction) {
  int checked = 0;
  for (const auto& v : golden::Load().transactions) {
    if (v.delegation.empty()) continue;
    SCOPED_TRACE(v.name);
    auto tx = DecodeTransactionText(v.base64, TransactionEncoding::kBase64);
    ASSERT_TRUE(tx.ok()) << tx.status();
    std::vector<Pubkey> keys;
    for (const auto& k : v.resolved_keys) keys.push_back(golden::Key(k.key));
    size_t next = 0;
    for (const CompiledInstruction& ix : tx->instructions) {
      if (keys[ix.program_id_index] != DelegationProgramId()) continue;
      ASSERT_LT(next, v.delegation.size());
      auto decoded = DecodeDelegationInstruction(ix, keys);
      ASSERT_TRUE(decoded.ok()) << decoded.status();
      ExpectMatches(v.delegation[next++], *decoded);
      ++checked;
    }
    EXPECT_EQ(next, v.delegation.size());
  }
  EXPECT_GE(checked, 5);
}

TEST(DelegationInstructionTest, SdkWritesAnEightByteDiscriminator) {
  const auto& v = golden::TransactionNamed("legacy_delegate_defaults");
  const std::string data = golden::Base64(v.instructions.at(0).data_base64);
  // 8-byte discriminator 0, u32 0xffffffff, no seeds, Some(default validator).
  ASSERT_EQ(data.size(), 8u + 4 + 4 + 1 + 32);
  EXPECT_EQ(data.substr(0, 8), std::string(8, '\0'));
  EXPECT_EQ(data, EncodeDelegateInstructionData(
                      0xffffffff, {}, golden::Key("MAS1Dt9qreoRMQ14YQuhg8UTZMMzDdKhmkZMECCzk57")));
}

TEST(DelegationInstructionTest, EncodeMatchesTheSdkBytes) {
  const auto& v = golden::TransactionNamed("legacy_delegate");
  const auto& want = v.delegation.at(0);
  std::string data;
  for (const auto& ix : v.instructions) {
    if (v.static_keys[ix.program_id_index] == golden::Load().delegation_program_id) {
      data = golden::Base64(ix.data_base64);
    }
  }
  EXPECT_EQ(EncodeDelegateInstructionData(want.commit_frequency_ms, DecodeSeeds(want.seeds_base64),
                                          golden::Key(want.validator)),
            data);
}

TEST(DelegationInstructionTest, DelegateWithoutValidator) {
  auto decoded = DecodeDelegationInstruction(
      DelegateIx(EncodeDelegateInstructionData(1000, {"a", ""}, std::nullopt)), Keys());
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(decoded->kind, DelegationInstructionKind::kDelegate);
  EXPECT_EQ(decoded->commit_frequency_ms, 1000u);
  EXPECT_THAT(decoded->seeds, ElementsAreArray({"a", ""}));
  EXPECT_FALSE(decoded->validator.has_value());
  EXPECT_EQ(decoded->payer, TestKey(10));
  EXPECT_EQ(decoded->delegation_metadata, TestKey(15));
}

TEST(DelegationInstructionTest, DelegateWithAnyValidatorIsADelegate) {
  std::string data = EncodeDelegateInstructionData(5, {}, TestKey(1));
  data[0] = kDelegateWithAnyValidatorDiscriminator;
  auto decoded = DecodeDelegationInstruction(DelegateIx(data), Keys());
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(decoded->kind, DelegationInstructionKind::kDelegate);
  EXPECT_EQ(decoded->discriminator, 19);
  EXPECT_EQ(decoded->validator, TestKey(1));
}

TEST(DelegationInstructionTest, UnknownDiscriminatorsAndShortDataAreOther) {
  for (const std::string& data :
       {std::string(), std::string("\x00", 1), std::string("\x03\x00\x00", 3),
        std::string("\x01\x00\x00\x00\x00\x00\x00\x00", 8), std::string(40, '\x63')}) {
    auto decoded = DecodeDelegationInstruction({12, {}, data}, Keys());
    ASSERT_TRUE(decoded.ok()) << decoded.status();
    EXPECT_EQ(decoded->kind, DelegationInstructionKind::kOther);
    EXPECT_EQ(decoded->discriminator, data.empty() ? 0 : static_cast<uint8_t>(data[0]));
  }
}

TEST(DelegationInstructionTest, RejectsMalformedDelegateArguments) {
  const std::string good = EncodeDelegateInstructionData(1, {"seed"}, TestKey(2));
  EXPECT_EQ(Message(DecodeDelegationInstruction(DelegateIx(good + "x"), Keys()).status()),
            "Delegate arguments: 1 trailing bytes at byte 49");
  EXPECT_EQ(Message(DecodeDelegationInstruction(DelegateIx(good.substr(0, 30)), Keys()).status()),
            "Delegate arguments: truncated validator at byte 17: needs 32 bytes, 5 left");
  std::string bad_option = good;
  bad_option[8 + 4 + 4 + 4 + 4] = 2;
  EXPECT_EQ(Message(DecodeDelegationInstruction(DelegateIx(bad_option), Keys()).status()),
            "Delegate arguments: validator option tag 2 is not 0 or 1");
  std::string long_seed = good;
  long_seed[8 + 4 + 4] = 100;
  EXPECT_EQ(Message(DecodeDelegationInstruction(DelegateIx(long_seed), Keys()).status()),
            "Delegate arguments: truncated seed at byte 12: needs 100 bytes, 37 left");
  EXPECT_EQ(Message(DecodeDelegationInstruction(DelegateIx(std::string(8, '\0')), Keys()).status()),
            "Delegate arguments: truncated commit frequency at byte 0: needs 4 bytes, 0 left");
}

TEST(DelegationInstructionTest, RejectsMissingOrOutOfRangeAccounts) {
  const std::string data = EncodeDelegateInstructionData(1, {}, std::nullopt);
  EXPECT_EQ(Message(DecodeDelegationInstruction({12, {0, 1, 2}, data}, Keys()).status()),
            "Delegate instruction has 3 accounts, needs 7");
  EXPECT_EQ(
      Message(DecodeDelegationInstruction({12, {0, 1, 2, 3, 4, 5, 40}, data}, Keys()).status()),
      "Delegate instruction: account 6 has index 40, out of range (13 account keys)");
  EXPECT_EQ(
      Message(DecodeDelegationInstruction({12, {0}, std::string("\x03\0\0\0\0\0\0\0", 8)}, Keys())
                  .status()),
      "Undelegate instruction has 1 accounts, needs 12");
}

TEST(DelegationInstructionTest, RejectsOtherPrograms) {
  const std::string data = EncodeDelegateInstructionData(1, {}, std::nullopt);
  EXPECT_EQ(Message(DecodeDelegationInstruction({0, {}, data}, Keys()).status()),
            "instruction calls " + TestKey(10).ToBase58() + ", not the delegation program");
  EXPECT_EQ(Message(DecodeDelegationInstruction({13, {}, data}, Keys()).status()),
            "program id index 13 out of range (13 account keys)");
}

}  // namespace
}  // namespace switchyard
