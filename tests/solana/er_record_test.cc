#include "solana/er_record.h"

#include <gtest/gtest.h>

#include <string>

#include "fmt/format.h"
#include "solana/pda.h"

namespace switchyard {
namespace {

Pubkey Key(uint8_t fill) {
  std::array<uint8_t, 32> bytes;
  bytes.fill(fill);
  return Pubkey::FromBytes(bytes.data());
}

// A V0 record written field by field as the program's Borsh derive lays out
// `ErRecord::V0(RecordV0 { identity, status, block_time_ms, base_fee, features, load_average,
// country_code, addr })`: the enum's variant index as a u8, then each field in declaration
// order, integers little-endian, a String as a u32 length and its bytes.
std::string V0Bytes(const Pubkey& identity, uint8_t status, const std::string& addr) {
  std::string out;
  out.push_back('\x00');                                           // ErRecord::V0
  out.append(reinterpret_cast<const char*>(identity.data()), 32);  // identity
  out.push_back(static_cast<char>(status));                        // ErStatus
  out.append("\x32\x00", 2);                                       // block_time_ms = 50
  out.append("\xe8\x03", 2);                                       // base_fee = 1000
  std::string features(32, '\0');
  features[0] = '\x03';  // Randomness (bit 0) and HighResClock (bit 1)
  out += features;
  out.append("\x40\x42\x0f\x00", 4);  // load_average = 1'000'000
  out.append("083", 3);               // country_code
  const uint32_t n = static_cast<uint32_t>(addr.size());
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>(n >> (8 * i)));
  out += addr;
  return out;
}

TEST(ErRecordTest, DecodesVersion0AsTheProgramLaysItOut) {
  const std::string bytes = V0Bytes(Key(7), 1, "https://241.132.2.41:9324/");
  ASSERT_EQ(bytes.size(), kErRecordV0FixedSize + 26);
  absl::StatusOr<ErRecord> record = DecodeErRecord(bytes);
  ASSERT_TRUE(record.ok()) << record.status();
  EXPECT_EQ(record->version, 0);
  EXPECT_EQ(record->identity, Key(7));
  EXPECT_EQ(record->status, ErStatus::kDraining);
  EXPECT_EQ(record->block_time_ms, 50);
  EXPECT_EQ(record->base_fee, 1000);
  EXPECT_EQ(record->features[0], 0x03);
  EXPECT_EQ(record->features[1], 0);
  EXPECT_EQ(record->load_average, 1'000'000u);
  EXPECT_EQ(record->country_code, "083");
  EXPECT_EQ(record->addr, "https://241.132.2.41:9324/");
}

TEST(ErRecordTest, EachStatusDecodesToItsName) {
  EXPECT_EQ(DecodeErRecord(V0Bytes(Key(1), 0, "a"))->status, ErStatus::kActive);
  EXPECT_EQ(DecodeErRecord(V0Bytes(Key(1), 1, "a"))->status, ErStatus::kDraining);
  EXPECT_EQ(DecodeErRecord(V0Bytes(Key(1), 2, "a"))->status, ErStatus::kOffline);
  EXPECT_EQ(ErStatusName(ErStatus::kDraining), "draining");
}

TEST(ErRecordTest, EncodeWritesTheProgramsBytes) {
  ErRecord record;
  record.identity = Key(9);
  record.status = ErStatus::kOffline;
  record.block_time_ms = 50;
  record.base_fee = 1000;
  record.features[0] = 0x03;
  record.load_average = 1'000'000;
  record.country_code = "083";
  record.addr = "devnet-eu.magicblock.app";
  EXPECT_EQ(EncodeErRecord(record), V0Bytes(Key(9), 2, "devnet-eu.magicblock.app"));
  EXPECT_EQ(*DecodeErRecord(EncodeErRecord(record)), record);
}

TEST(ErRecordTest, AnUnknownVersionIsUnimplementedAndNamesTheVersion) {
  for (uint8_t version : {1, 2, 255}) {
    std::string bytes = V0Bytes(Key(3), 0, "x");
    bytes[0] = static_cast<char>(version);
    absl::StatusOr<ErRecord> record = DecodeErRecord(bytes);
    ASSERT_FALSE(record.ok());
    EXPECT_EQ(record.status().code(), absl::StatusCode::kUnimplemented);
    EXPECT_NE(record.status().message().find(fmt::format("unknown version {}", version)),
              std::string::npos)
        << record.status();
  }
}

TEST(ErRecordTest, EveryTruncationIsInvalidArgumentNamingTheField) {
  const std::string bytes = V0Bytes(Key(4), 0, "https://er.example");
  for (size_t size = 0; size < bytes.size(); ++size) {
    absl::StatusOr<ErRecord> record = DecodeErRecord(std::string_view(bytes).substr(0, size));
    ASSERT_FALSE(record.ok()) << size;
    EXPECT_EQ(record.status().code(), absl::StatusCode::kInvalidArgument) << size;
    EXPECT_NE(record.status().message().find("truncated"), std::string::npos) << record.status();
  }
  EXPECT_NE(DecodeErRecord(std::string_view(bytes).substr(0, 33))
                .status()
                .message()
                .find("truncated status"),
            std::string::npos);
}

TEST(ErRecordTest, TrailingBytesAnUnknownStatusAndAnOversizedAddrAreInvalid) {
  std::string trailing = V0Bytes(Key(5), 0, "x") + "z";
  EXPECT_EQ(DecodeErRecord(trailing).status().code(), absl::StatusCode::kInvalidArgument);
  std::string status = V0Bytes(Key(5), 3, "x");
  EXPECT_NE(DecodeErRecord(status).status().message().find("unknown status 3"), std::string::npos);
  std::string oversized = V0Bytes(Key(5), 0, "x");
  oversized[kErRecordV0FixedSize - 1] = '\x7f';  // the addr's length claims 2 GiB
  EXPECT_EQ(DecodeErRecord(oversized).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(ErRecordTest, TheRecordPdaIsTheProgramAddressOfErRecordAndTheIdentity) {
  const Pubkey identity = *Pubkey::FromBase58("MEUGGrYPxKk17hCr7wpT6s8dtNokZj5U2L57vjYMS8e");
  const std::string_view seeds[] = {
      "er-record", std::string_view(reinterpret_cast<const char*>(identity.data()), 32)};
  auto expected = FindProgramAddress(
      seeds, *Pubkey::FromBase58("DmnRGfyyftzacFb1XadYhWF6vWqXwtQk5tbr6XgR3BA1"));
  ASSERT_TRUE(expected.ok());
  EXPECT_EQ(ErRecordPda(identity), expected->first);
  EXPECT_NE(ErRecordPda(identity), ErRecordPda(Key(1)));
}

}  // namespace
}  // namespace switchyard
