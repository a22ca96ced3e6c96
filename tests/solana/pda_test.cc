#include "solana/pda.h"

#include <gtest/gtest.h>
#include <openssl/sha.h>
#include <sodium.h>

#include <string>
#include <vector>

#include "solana/delegation.h"
#include "tests/solana/golden.h"

namespace switchyard {
namespace {

std::vector<std::string> DecodeSeeds(const std::vector<std::string>& seeds_base64) {
  std::vector<std::string> seeds;
  for (const std::string& s : seeds_base64) seeds.push_back(golden::Base64(s));
  return seeds;
}

std::vector<std::string_view> Views(const std::vector<std::string>& seeds) {
  return std::vector<std::string_view>(seeds.begin(), seeds.end());
}

TEST(PdaTest, FindProgramAddressMatchesWeb3) {
  const auto& vectors = golden::Load().find_program_address;
  ASSERT_GE(vectors.size(), 20u);
  for (const auto& v : vectors) {
    const std::vector<std::string> seeds = DecodeSeeds(v.seeds_base64);
    const std::vector<std::string_view> views = Views(seeds);
    auto found = FindProgramAddress(views, golden::Key(v.program));
    ASSERT_TRUE(found.ok()) << found.status();
    EXPECT_EQ(found->first.ToBase58(), v.address);
    EXPECT_EQ(found->second, v.bump) << v.address;
  }
}

TEST(PdaTest, CreateProgramAddressMatchesWeb3ForEveryBump) {
  int on_curve = 0;
  for (const auto& v : golden::Load().create_program_address) {
    const std::vector<std::string> seeds = DecodeSeeds(v.seeds_base64);
    const std::vector<std::string_view> views = Views(seeds);
    auto address =
        CreateProgramAddress(views, static_cast<uint8_t>(v.bump), golden::Key(v.program));
    if (v.address.has_value()) {
      ASSERT_TRUE(address.ok()) << "bump " << v.bump << ": " << address.status();
      EXPECT_EQ(address->ToBase58(), *v.address);
    } else {
      ++on_curve;
      EXPECT_TRUE(absl::IsNotFound(address.status())) << "bump " << v.bump;
    }
  }
  // The vectors must exercise both outcomes.
  EXPECT_GT(on_curve, 0);
}

TEST(PdaTest, IsOnCurveMatchesWeb3) {
  int on = 0, off = 0;
  for (const auto& v : golden::Load().on_curve) {
    EXPECT_EQ(IsOnCurve(golden::Key(v.key)), v.on_curve) << v.key;
    (v.on_curve ? on : off) += 1;
  }
  EXPECT_GT(on, 10);
  EXPECT_GT(off, 10);
}

// Regression: libsodium's crypto_core_ed25519_is_valid_point also rejects points outside the
// prime-order subgroup, which Solana's runtime counts as on the curve. Using it would call
// most curve points "off curve" and derive addresses that do not exist.
TEST(PdaTest, IsValidPointIsNotTheSolanaCurveCheck) {
  int disagreements = 0;
  for (const auto& v : golden::Load().on_curve) {
    const Pubkey key = golden::Key(v.key);
    const bool strict = crypto_core_ed25519_is_valid_point(key.data()) == 1;
    if (strict != v.on_curve) ++disagreements;
    EXPECT_EQ(IsOnCurve(key), v.on_curve);
  }
  EXPECT_GT(disagreements, 0);
}

TEST(PdaTest, SmallOrderPointsAreOnTheCurve) {
  // The identity (y = 1) and the point of order 2 (y = -1): both decompress.
  std::array<uint8_t, 32> identity{};
  identity[0] = 1;
  EXPECT_TRUE(IsOnCurve(Pubkey(std::span<const uint8_t, 32>(identity))));
  std::array<uint8_t, 32> minus_one{};
  minus_one.fill(0xff);
  minus_one[0] = 0xec;
  minus_one[31] = 0x7f;
  EXPECT_TRUE(IsOnCurve(Pubkey(std::span<const uint8_t, 32>(minus_one))));
  // y = 2 has no x: (y^2 - 1) / (d y^2 + 1) is not a square.
  std::array<uint8_t, 32> two{};
  two[0] = 2;
  EXPECT_FALSE(IsOnCurve(Pubkey(std::span<const uint8_t, 32>(two))));
}

// Where the runtime (curve25519-dalek's decompress) and web3.js (@noble/curves, strict)
// differ, this follows the runtime: a y coordinate written as y + p, and x = 0 with the sign
// bit set, both decompress. SHA-256 produces such encodings with probability about 2^-250.
TEST(PdaTest, NonCanonicalEncodingsAreOnTheCurveAsInTheRuntime) {
  std::array<uint8_t, 32> one_plus_p{};  // 2^255 - 18 = p + 1, i.e. y = 1
  one_plus_p.fill(0xff);
  one_plus_p[0] = 0xee;
  one_plus_p[31] = 0x7f;
  EXPECT_TRUE(IsOnCurve(Pubkey(std::span<const uint8_t, 32>(one_plus_p))));
  std::array<uint8_t, 32> negative_zero_x{};  // y = 1, sign bit set
  negative_zero_x[0] = 1;
  negative_zero_x[31] = 0x80;
  EXPECT_TRUE(IsOnCurve(Pubkey(std::span<const uint8_t, 32>(negative_zero_x))));
  std::array<uint8_t, 32> two_plus_p = one_plus_p;  // y = 2: no x
  two_plus_p[0] = 0xef;
  EXPECT_FALSE(IsOnCurve(Pubkey(std::span<const uint8_t, 32>(two_plus_p))));
}

TEST(PdaTest, AddressIsSha256OfSeedsBumpProgramAndMarker) {
  const auto& v = golden::Load().find_program_address.at(2);
  const std::vector<std::string> seeds = DecodeSeeds(v.seeds_base64);
  std::string preimage;
  for (const std::string& seed : seeds) preimage += seed;
  preimage.push_back(static_cast<char>(v.bump));
  const Pubkey program = golden::Key(v.program);
  preimage.append(reinterpret_cast<const char*>(program.data()), 32);
  preimage += "ProgramDerivedAddress";
  uint8_t digest[32];
  SHA256(reinterpret_cast<const uint8_t*>(preimage.data()), preimage.size(), digest);
  EXPECT_EQ(Pubkey::FromBytes(digest).ToBase58(), v.address);
}

TEST(PdaTest, RejectsSeedsOverTheLimits) {
  const Pubkey program = DelegationProgramId();
  const std::string long_seed(33, 'x');
  const std::vector<std::string_view> too_long = {"ok", long_seed};
  EXPECT_EQ(std::string(FindProgramAddress(too_long, program).status().message()),
            "seed 1 is 33 bytes, more than 32");
  const std::vector<std::string_view> sixteen(16, "s");
  EXPECT_EQ(std::string(FindProgramAddress(sixteen, program).status().message()),
            "16 seeds plus the bump is more than 16 seeds");
  EXPECT_EQ(std::string(CreateProgramAddress(sixteen, 1, program).status().message()),
            "16 seeds plus the bump is more than 16 seeds");
  const std::vector<std::string_view> fifteen(15, std::string_view(long_seed).substr(0, 32));
  EXPECT_TRUE(FindProgramAddress(fifteen, program).ok());
}

TEST(DelegationPdaTest, MatchesTheSdk) {
  const auto& vectors = golden::Load();
  ASSERT_GE(vectors.delegation_pdas.size(), 3u);
  for (const auto& p : vectors.delegation_pdas) {
    const Pubkey account = golden::Key(p.account);
    EXPECT_EQ(DelegationRecordPda(account).ToBase58(), p.delegation_record) << p.account;
    EXPECT_EQ(DelegationMetadataPda(account).ToBase58(), p.delegation_metadata) << p.account;
    EXPECT_EQ(DelegateBufferPda(account, golden::Key(p.owner_program)).ToBase58(),
              p.delegate_buffer)
        << p.account;
    EXPECT_EQ(UndelegateBufferPda(account).ToBase58(), p.undelegate_buffer) << p.account;
    EXPECT_EQ(CommitStatePda(account).ToBase58(), p.commit_state) << p.account;
    EXPECT_EQ(CommitRecordPda(account).ToBase58(), p.commit_record) << p.account;
  }
  EXPECT_EQ(FeesVaultPda().ToBase58(), vectors.fees_vault);
  EXPECT_EQ(ValidatorFeesVaultPda(golden::Key(vectors.validator)).ToBase58(),
            vectors.validator_fees_vault);
}

// The delegation program's own test (src/pda.rs, test_known_delegation_record).
TEST(DelegationPdaTest, KnownRecordFromTheProgramTests) {
  const Pubkey account = golden::Key("8k2V7EzQtNg38Gi9HK5ZtQYp1YpGKNGrMcuGa737gZX4");
  EXPECT_EQ(DelegationRecordPda(account).ToBase58(),
            "CkieZJmrj6dLhwteG69LSutpWwRHiDJY9S8ua7xJ7CRW");
  EXPECT_EQ(CommitStatePda(account).ToBase58(), "BUrsNkRnqoWUJdGotRt1odFp2NH5b9tcciXzXNbNwBHr");
  EXPECT_EQ(CommitRecordPda(account).ToBase58(), "GiDjQqUKeKJwLH5kdbnCgFS2XPGAVjXo73JMoeVn3UZL");
}

}  // namespace
}  // namespace switchyard
