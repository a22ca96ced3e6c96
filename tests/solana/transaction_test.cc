#include "solana/transaction.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sodium.h>

#include <map>
#include <string>
#include <vector>

#include "fmt/format.h"
#include "solana/base64.h"
#include "tests/solana/golden.h"

namespace switchyard {
namespace {

using ::testing::ElementsAreArray;
using ::testing::HasSubstr;

std::span<const uint8_t> Bytes(const std::string& s) {
  return std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(s.data()), s.size());
}

Pubkey TestKey(uint8_t seed) {
  std::array<uint8_t, 32> bytes{};
  bytes.fill(seed);
  return Pubkey(std::span<const uint8_t, 32>(bytes));
}

// Payer (writable signer), recipient (writable), program (read-only); one instruction.
Transaction MakeLegacy() {
  Transaction tx;
  tx.signatures.resize(1);
  tx.header = {1, 0, 1};
  tx.static_keys = {TestKey(1), TestKey(2), TestKey(3)};
  tx.recent_blockhash = TestKey(9);
  tx.instructions.push_back({2, {0, 1}, "data"});
  return tx;
}

Transaction MakeV0() {
  Transaction tx = MakeLegacy();
  tx.versioned = true;
  tx.lookups.push_back({TestKey(7), {0}, {1}});
  tx.instructions[0].accounts = {0, 1, 3, 4};
  return tx;
}

std::string Encode(const Transaction& tx) {
  auto wire = EncodeTransaction(tx);
  EXPECT_TRUE(wire.ok()) << wire.status();
  return wire.ok() ? *wire : std::string();
}

absl::Status DecodeStatus(const std::string& wire) {
  return DecodeTransaction(Bytes(wire)).status();
}

std::string Message(const absl::Status& status) { return std::string(status.message()); }

// Checks every field of `tx` against the golden vector `v`.
void ExpectMatches(const golden::TransactionVector& v, const Transaction& tx) {
  SCOPED_TRACE(v.name);
  EXPECT_EQ(tx.versioned, v.versioned);
  if (v.version.has_value()) {
    EXPECT_EQ(tx.version, *v.version);
  }
  ASSERT_EQ(tx.signatures.size(), v.signatures.size());
  for (size_t i = 0; i < v.signatures.size(); ++i) {
    EXPECT_EQ(tx.signatures[i].ToBase58(), v.signatures[i]);
  }
  EXPECT_EQ(tx.id().ToBase58(), v.id);
  EXPECT_EQ(tx.header.num_required_signatures, v.num_required_signatures);
  EXPECT_EQ(tx.header.num_readonly_signed, v.num_readonly_signed);
  EXPECT_EQ(tx.header.num_readonly_unsigned, v.num_readonly_unsigned);
  ASSERT_EQ(tx.static_keys.size(), v.static_keys.size());
  for (size_t i = 0; i < v.static_keys.size(); ++i) {
    EXPECT_EQ(tx.static_keys[i].ToBase58(), v.static_keys[i]) << "static key " << i;
  }
  EXPECT_EQ(tx.recent_blockhash.ToBase58(), v.recent_blockhash);
  ASSERT_EQ(tx.instructions.size(), v.instructions.size());
  for (size_t i = 0; i < v.instructions.size(); ++i) {
    const CompiledInstruction& ix = tx.instructions[i];
    EXPECT_EQ(ix.program_id_index, v.instructions[i].program_id_index);
    EXPECT_THAT(std::vector<int>(ix.accounts.begin(), ix.accounts.end()),
                ElementsAreArray(v.instructions[i].accounts));
    EXPECT_EQ(ix.data, golden::Base64(v.instructions[i].data_base64)) << "instruction " << i;
  }
  ASSERT_EQ(tx.lookups.size(), v.lookups.size());
  for (size_t i = 0; i < v.lookups.size(); ++i) {
    EXPECT_EQ(tx.lookups[i].table.ToBase58(), v.lookups[i].table);
    EXPECT_THAT(std::vector<int>(tx.lookups[i].writable_indexes.begin(),
                                 tx.lookups[i].writable_indexes.end()),
                ElementsAreArray(v.lookups[i].writable_indexes));
    EXPECT_THAT(std::vector<int>(tx.lookups[i].readonly_indexes.begin(),
                                 tx.lookups[i].readonly_indexes.end()),
                ElementsAreArray(v.lookups[i].readonly_indexes));
  }
  EXPECT_EQ(tx.message_bytes, golden::Base64(v.message_base64));
}

absl::StatusOr<std::vector<AccountMeta>> ResolveWithTables(const Transaction& tx,
                                                           const golden::TransactionVector& v) {
  std::map<Pubkey, std::vector<Pubkey>> tables;
  for (const golden::Table& table : v.tables) {
    auto& addresses = tables[golden::Key(table.key)];
    for (const std::string& a : table.addresses) addresses.push_back(golden::Key(a));
  }
  return ResolveAccountKeys(tx, [&](const Pubkey& key) -> const std::vector<Pubkey>* {
    auto it = tables.find(key);
    return it == tables.end() ? nullptr : &it->second;
  });
}

TEST(GoldenTransactionTest, VectorsCoverLegacyV0AndLookups) {
  const auto& vectors = golden::Load();
  EXPECT_EQ(vectors.web3_version, "1.98.0");
  EXPECT_EQ(vectors.sdk_version, "0.8.8");
  int legacy = 0, v0 = 0, with_lookups = 0;
  for (const auto& v : vectors.transactions) {
    (v.versioned ? v0 : legacy) += 1;
    if (!v.lookups.empty()) ++with_lookups;
  }
  EXPECT_GE(legacy, 5);
  EXPECT_GE(v0, 3);
  EXPECT_GE(with_lookups, 3);
}

TEST(GoldenTransactionTest, DecodesEveryVectorFromBase64) {
  for (const auto& v : golden::Load().transactions) {
    auto tx = DecodeTransactionText(v.base64, TransactionEncoding::kBase64);
    ASSERT_TRUE(tx.ok()) << v.name << ": " << tx.status();
    ExpectMatches(v, *tx);
  }
}

TEST(GoldenTransactionTest, DecodesEveryVectorFromBase58) {
  for (const auto& v : golden::Load().transactions) {
    auto tx = DecodeTransactionText(v.base58, TransactionEncoding::kBase58);
    ASSERT_TRUE(tx.ok()) << v.name << ": " << tx.status();
    ExpectMatches(v, *tx);
  }
}

TEST(GoldenTransactionTest, DecodesEveryVectorFromWireBytes) {
  for (const auto& v : golden::Load().transactions) {
    const std::string wire = golden::Base64(v.base64);
    EXPECT_EQ(wire.size(), v.wire_size);
    auto tx = DecodeTransaction(Bytes(wire));
    ASSERT_TRUE(tx.ok()) << v.name << ": " << tx.status();
    ExpectMatches(v, *tx);
  }
}

TEST(GoldenTransactionTest, SignaturesVerifyOverMessageBytes) {
  for (const auto& v : golden::Load().transactions) {
    auto tx = DecodeTransactionText(v.base64, TransactionEncoding::kBase64);
    ASSERT_TRUE(tx.ok()) << tx.status();
    for (size_t i = 0; i < tx->signatures.size(); ++i) {
      EXPECT_EQ(crypto_sign_verify_detached(
                    tx->signatures[i].data(),
                    reinterpret_cast<const unsigned char*>(tx->message_bytes.data()),
                    tx->message_bytes.size(), tx->static_keys[i].data()),
                0)
          << v.name << " signature " << i;
    }
  }
}

TEST(GoldenTransactionTest, SignerAndWritableFlagsMatchWeb3) {
  for (const auto& v : golden::Load().transactions) {
    auto tx = DecodeTransactionText(v.base64, TransactionEncoding::kBase64);
    ASSERT_TRUE(tx.ok()) << tx.status();
    for (size_t i = 0; i < tx->static_keys.size(); ++i) {
      EXPECT_EQ(tx->IsSigner(i), v.resolved_keys[i].signer) << v.name << " key " << i;
      EXPECT_EQ(tx->IsStaticWritable(i), v.resolved_keys[i].writable) << v.name << " key " << i;
    }
    std::vector<std::string> expected_writable;
    for (size_t i = 0; i < tx->static_keys.size(); ++i) {
      if (v.resolved_keys[i].writable) expected_writable.push_back(v.resolved_keys[i].key);
    }
    std::vector<std::string> writable;
    for (const Pubkey& key : StaticWritableKeys(*tx)) writable.push_back(key.ToBase58());
    EXPECT_EQ(writable, expected_writable) << v.name;
  }
}

TEST(GoldenTransactionTest, ResolvedAccountKeysMatchWeb3) {
  for (const auto& v : golden::Load().transactions) {
    auto tx = DecodeTransactionText(v.base64, TransactionEncoding::kBase64);
    ASSERT_TRUE(tx.ok()) << tx.status();
    auto accounts = ResolveWithTables(*tx, v);
    ASSERT_TRUE(accounts.ok()) << v.name << ": " << accounts.status();
    ASSERT_EQ(accounts->size(), v.resolved_keys.size()) << v.name;
    for (size_t i = 0; i < accounts->size(); ++i) {
      SCOPED_TRACE(v.name + " account " + std::to_string(i));
      EXPECT_EQ((*accounts)[i].key.ToBase58(), v.resolved_keys[i].key);
      EXPECT_EQ((*accounts)[i].signer, v.resolved_keys[i].signer);
      EXPECT_EQ((*accounts)[i].writable, v.resolved_keys[i].writable);
    }
  }
}

TEST(GoldenTransactionTest, EncodeReproducesTheWireBytes) {
  for (const auto& v : golden::Load().transactions) {
    const std::string wire = golden::Base64(v.base64);
    auto tx = DecodeTransaction(Bytes(wire));
    ASSERT_TRUE(tx.ok()) << tx.status();
    EXPECT_EQ(Encode(*tx), wire) << v.name;
    auto message = EncodeMessage(*tx);
    ASSERT_TRUE(message.ok());
    EXPECT_EQ(*message, tx->message_bytes) << v.name;
  }
}

TEST(GoldenTransactionTest, EveryStrictPrefixIsRejectedAsTruncated) {
  for (const auto& v : golden::Load().transactions) {
    const std::string wire = golden::Base64(v.base64);
    for (size_t n = 0; n < wire.size(); ++n) {
      const absl::Status status = DecodeStatus(wire.substr(0, n));
      ASSERT_FALSE(status.ok()) << v.name << " prefix " << n;
      const std::string message = Message(status);
      EXPECT_TRUE(message.find("truncated") != std::string::npos ||
                  message.find("too many signatures") != std::string::npos)
          << v.name << " prefix " << n << ": " << message;
    }
  }
}

TEST(ResolveAccountKeysTest, UnknownTableIsNotFound) {
  const Transaction tx = MakeV0();
  auto accounts =
      ResolveAccountKeys(tx, [](const Pubkey&) -> const std::vector<Pubkey>* { return nullptr; });
  EXPECT_TRUE(absl::IsNotFound(accounts.status()));
  EXPECT_EQ(Message(accounts.status()),
            "address lookup table " + TestKey(7).ToBase58() + " not found");
}

TEST(ResolveAccountKeysTest, LookupIndexPastTheTableIsRejected) {
  const Transaction tx = MakeV0();
  const std::vector<Pubkey> table = {TestKey(20)};  // index 1 is missing
  auto accounts = ResolveAccountKeys(tx, [&](const Pubkey&) { return &table; });
  EXPECT_TRUE(absl::IsInvalidArgument(accounts.status()));
  EXPECT_EQ(Message(accounts.status()), "lookup index 1 out of range for address lookup table " +
                                            TestKey(7).ToBase58() + " with 1 addresses");
}

TEST(ResolveAccountKeysTest, LoadedKeyEqualToAStaticKeyIsRejected) {
  const Transaction tx = MakeV0();
  const std::vector<Pubkey> table = {TestKey(20), TestKey(2)};
  auto accounts = ResolveAccountKeys(tx, [&](const Pubkey&) { return &table; });
  EXPECT_EQ(Message(accounts.status()),
            "account key " + TestKey(2).ToBase58() + " appears twice in the resolved account keys");
}

TEST(ResolveAccountKeysTest, OrdersStaticThenAllWritableThenAllReadonly) {
  Transaction tx = MakeV0();
  tx.lookups = {{TestKey(7), {1}, {0}}, {TestKey(8), {0}, {1}}};
  tx.instructions[0].accounts = {0};
  const std::vector<Pubkey> first = {TestKey(20), TestKey(21)};
  const std::vector<Pubkey> second = {TestKey(30), TestKey(31)};
  auto accounts = ResolveAccountKeys(
      tx, [&](const Pubkey& table) { return table == TestKey(7) ? &first : &second; });
  ASSERT_TRUE(accounts.ok()) << accounts.status();
  const std::vector<AccountMeta> expected = {
      {TestKey(1), true, true},    {TestKey(2), false, true},  {TestKey(3), false, false},
      {TestKey(21), false, true},  {TestKey(30), false, true}, {TestKey(20), false, false},
      {TestKey(31), false, false},
  };
  EXPECT_EQ(*accounts, expected);
}

TEST(TransactionFlagsTest, HeaderRulesWithReadonlySigners) {
  Transaction tx;
  tx.header = {3, 1, 2};
  for (uint8_t i = 0; i < 7; ++i) tx.static_keys.push_back(TestKey(i + 1));
  const bool signer[] = {true, true, true, false, false, false, false};
  const bool writable[] = {true, true, false, true, true, false, false};
  for (size_t i = 0; i < 7; ++i) {
    EXPECT_EQ(tx.IsSigner(i), signer[i]) << i;
    EXPECT_EQ(tx.IsStaticWritable(i), writable[i]) << i;
  }
  EXPECT_FALSE(tx.IsSigner(7));
  EXPECT_FALSE(tx.IsStaticWritable(7));
  EXPECT_EQ(StaticWritableKeys(tx),
            (std::vector<Pubkey>{TestKey(1), TestKey(2), TestKey(4), TestKey(5)}));
}

TEST(TransactionFlagsTest, IdOfATransactionWithoutSignaturesIsZero) {
  Transaction tx;
  EXPECT_TRUE(tx.id().IsZero());
}

TEST(MalformedTransactionTest, SyntheticTransactionsDecode) {
  for (const Transaction& tx : {MakeLegacy(), MakeV0()}) {
    const std::string wire = Encode(tx);
    auto decoded = DecodeTransaction(Bytes(wire));
    ASSERT_TRUE(decoded.ok()) << decoded.status();
    Transaction expected = tx;
    expected.message_bytes = wire.substr(1 + 64);
    EXPECT_EQ(*decoded, expected);
  }
}

TEST(MalformedTransactionTest, MoreThan1232Bytes) {
  Transaction tx = MakeLegacy();
  tx.instructions[0].data = std::string(1029, 'x');
  const std::string wire = Encode(tx);
  ASSERT_EQ(wire.size(), 1233u);
  EXPECT_EQ(Message(DecodeStatus(wire)),
            "transaction is 1233 bytes, more than the 1232-byte limit");
  tx.instructions[0].data.pop_back();
  EXPECT_TRUE(DecodeStatus(Encode(tx)).ok());
}

TEST(MalformedTransactionTest, EmptyInputIsATruncatedCompactU16) {
  EXPECT_EQ(Message(DecodeStatus("")), "truncated compact-u16 for signature count at byte 0");
}

TEST(MalformedTransactionTest, TruncatedCompactU16) {
  EXPECT_EQ(Message(DecodeStatus("\x80")), "truncated compact-u16 for signature count at byte 0");
  EXPECT_EQ(Message(DecodeStatus("\xff\xff")),
            "truncated compact-u16 for signature count at byte 0");
  // The key count of a message cut inside its second compact-u16 byte.
  std::string wire = Encode(MakeLegacy()).substr(0, 1 + 64 + 3);
  wire.push_back('\x80');
  EXPECT_EQ(Message(DecodeStatus(wire)), "truncated compact-u16 for account key count at byte 68");
}

TEST(MalformedTransactionTest, NonCanonicalCompactU16) {
  EXPECT_EQ(Message(DecodeStatus(std::string("\x81\x00", 2))),
            "non-canonical compact-u16 for signature count at byte 0");
  EXPECT_EQ(Message(DecodeStatus(std::string("\x80\x80\x00", 3))),
            "non-canonical compact-u16 for signature count at byte 0");
}

TEST(MalformedTransactionTest, CompactU16LongerThanThreeBytesOrOverflowing) {
  EXPECT_EQ(Message(DecodeStatus("\x80\x80\x80\x01")),
            "compact-u16 for signature count at byte 0 is longer than 3 bytes");
  EXPECT_EQ(Message(DecodeStatus("\xff\xff\x04")),
            "compact-u16 for signature count at byte 0 overflows 16 bits");
}

TEST(MalformedTransactionTest, TooManySignatures) {
  // 65535 signatures: the largest count a compact-u16 holds.
  EXPECT_EQ(Message(DecodeStatus("\xff\xff\x03")),
            "too many signatures: 65535 signatures need 4194240 bytes, 0 left");
  EXPECT_EQ(Message(DecodeStatus(std::string("\x02", 1) + std::string(100, 'x'))),
            "too many signatures: 2 signatures need 128 bytes, 100 left");
}

TEST(MalformedTransactionTest, SignatureCountDifferentFromHeader) {
  Transaction tx = MakeLegacy();
  tx.header.num_required_signatures = 2;
  EXPECT_EQ(Message(DecodeStatus(Encode(tx))),
            "header requires 2 signatures but the transaction has 1");
  tx.signatures.clear();
  tx.header.num_required_signatures = 0;
  EXPECT_EQ(Message(DecodeStatus(Encode(tx))),
            "no writable fee payer: 0 read-only signers of 0 required signatures");
}

TEST(MalformedTransactionTest, TrailingBytes) {
  const std::string wire = Encode(MakeLegacy());
  EXPECT_EQ(Message(DecodeStatus(wire + "ab")),
            fmt::format("2 trailing bytes after the message at byte {}", wire.size()));
  const std::string v0 = Encode(MakeV0());
  EXPECT_EQ(Message(DecodeStatus(v0 + "z")),
            fmt::format("1 trailing bytes after the message at byte {}", v0.size()));
}

TEST(MalformedTransactionTest, TruncatedFields) {
  const std::string wire = Encode(MakeLegacy());
  EXPECT_EQ(
      Message(DecodeStatus(wire.substr(0, wire.size() - 1))),
      fmt::format("truncated instruction data at byte {}: needs 4 bytes, 3 left", wire.size() - 4));
  EXPECT_EQ(Message(DecodeStatus(wire.substr(0, 1 + 64 + 3 + 1 + 40))),
            "truncated account keys at byte 69: 3 keys need 96 bytes, 40 left");
}

TEST(MalformedTransactionTest, AccountIndexOutOfRange) {
  Transaction tx = MakeLegacy();
  tx.instructions[0].accounts = {0, 3};
  EXPECT_EQ(Message(DecodeStatus(Encode(tx))),
            "instruction 0: account index 3 out of range (3 account keys)");
  Transaction v0 = MakeV0();
  v0.instructions[0].accounts = {5};
  EXPECT_EQ(Message(DecodeStatus(Encode(v0))),
            "instruction 0: account index 5 out of range (5 account keys)");
}

TEST(MalformedTransactionTest, ProgramIdIndexOutOfRangeOrPayer) {
  Transaction tx = MakeLegacy();
  tx.instructions[0].program_id_index = 3;
  EXPECT_EQ(Message(DecodeStatus(Encode(tx))),
            "instruction 0: program id index 3 out of range (3 static keys)");
  tx.instructions[0].program_id_index = 0;
  EXPECT_EQ(Message(DecodeStatus(Encode(tx))),
            "instruction 0: program id index 0 is the fee payer");
  // A v0 program id may not come from a lookup table.
  Transaction v0 = MakeV0();
  v0.instructions[0].program_id_index = 3;
  EXPECT_EQ(Message(DecodeStatus(Encode(v0))),
            "instruction 0: program id index 3 out of range (3 static keys)");
}

TEST(MalformedTransactionTest, HeaderInconsistentWithKeys) {
  Transaction tx = MakeLegacy();
  tx.header.num_readonly_unsigned = 3;
  EXPECT_EQ(
      Message(DecodeStatus(Encode(tx))),
      "header counts 1 signers and 3 read-only unsigned accounts but there are 3 static keys");
  tx = MakeLegacy();
  tx.header.num_readonly_signed = 1;
  EXPECT_EQ(Message(DecodeStatus(Encode(tx))),
            "no writable fee payer: 1 read-only signers of 1 required signatures");
}

TEST(MalformedTransactionTest, DuplicateStaticKey) {
  Transaction tx = MakeLegacy();
  tx.static_keys[1] = tx.static_keys[0];
  EXPECT_EQ(Message(DecodeStatus(Encode(tx))),
            "account key " + TestKey(1).ToBase58() + " appears twice in the static keys");
}

TEST(MalformedTransactionTest, UnsupportedVersion) {
  std::string wire = Encode(MakeV0());
  wire[65] = static_cast<char>(0x81);
  EXPECT_EQ(Message(DecodeStatus(wire)), "unsupported transaction version 1 at byte 65");
}

TEST(MalformedTransactionTest, LookupThatLoadsNothing) {
  Transaction tx = MakeV0();
  tx.lookups.push_back({TestKey(8), {}, {}});
  EXPECT_EQ(Message(DecodeStatus(Encode(tx))),
            "address table lookup 1 (" + TestKey(8).ToBase58() + ") loads no accounts");
}

TEST(MalformedTransactionTest, MoreThan256AccountKeys) {
  Transaction tx = MakeV0();
  tx.lookups[0].writable_indexes.assign(252, 0);
  EXPECT_TRUE(DecodeStatus(Encode(tx)).ok()) << "256 keys are allowed";
  tx.lookups[0].writable_indexes.push_back(0);
  EXPECT_EQ(Message(DecodeStatus(Encode(tx))),
            "257 account keys (3 static, 254 looked up), more than 256");
}

TEST(TransactionTextTest, RejectsOversizedText) {
  EXPECT_EQ(
      Message(DecodeTransactionText(std::string(1645, 'A'), TransactionEncoding::kBase64).status()),
      "base64 transaction is 1645 characters, more than 1644");
  EXPECT_EQ(
      Message(DecodeTransactionText(std::string(1684, 'z'), TransactionEncoding::kBase58).status()),
      "base58 transaction is 1684 characters, more than 1683");
}

TEST(TransactionTextTest, Base58ThatDecodesPast1232BytesIsRejected) {
  EXPECT_EQ(
      Message(DecodeTransactionText(std::string(1683, 'z'), TransactionEncoding::kBase58).status()),
      "transaction text: base58: decodes to more than 1232 bytes");
}

TEST(TransactionTextTest, RejectsInvalidCharacters) {
  EXPECT_EQ(Message(DecodeTransactionText("AQ0l", TransactionEncoding::kBase58).status()),
            "transaction text: base58: invalid character 0x30 at position 2");
  EXPECT_EQ(Message(DecodeTransactionText("AQ*=", TransactionEncoding::kBase64).status()),
            "transaction text: base64: invalid character 0x2a at position 2");
  EXPECT_EQ(Message(DecodeTransactionText("", TransactionEncoding::kBase58).status()),
            "transaction text: base58: empty string");
}

TEST(TransactionTextTest, Base58LeadingOnesAreZeroBytes) {
  // "1" decodes to one zero byte: a transaction with 0 signatures and nothing else.
  EXPECT_EQ(Message(DecodeTransactionText("1", TransactionEncoding::kBase58).status()),
            "truncated message header at byte 1: needs 1 bytes, 0 left");
}

TEST(EncodeTransactionTest, RejectsListsLongerThanACompactU16) {
  Transaction tx = MakeLegacy();
  tx.instructions[0].data.assign(70000, 'x');
  EXPECT_EQ(Message(EncodeTransaction(tx).status()),
            "instruction data has 70000 entries, more than a compact-u16 can count");
}

}  // namespace
}  // namespace switchyard
