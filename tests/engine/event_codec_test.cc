#include "engine/event_codec.h"

#include <gtest/gtest.h>

#include "tests/support/event_generator.h"

namespace switchyard {
namespace {

Pubkey Key(uint8_t fill) { return testing::TestKey(fill); }

DelegatedEvent SampleDelegated() {
  DelegatedEvent d;
  d.account = Key(1);
  d.validator = Key(2);
  d.owner_program = Key(3);
  d.slot = 123456789;
  d.lamports = 0xfedcba9876543210ULL;
  d.commit_frequency_ms = 30000;
  std::array<uint8_t, 64> sig;
  for (size_t i = 0; i < sig.size(); ++i) sig[i] = static_cast<uint8_t>(i);
  d.signature = Signature(sig);
  return d;
}

TEST(Crc32cTest, MatchesTheStandardCheckValue) {
  EXPECT_EQ(Crc32c("123456789"), 0xE3069283u);
  EXPECT_EQ(Crc32c(""), 0u);
}

std::string FromHex(std::string_view hex) {
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) {
    out.push_back(static_cast<char>(std::stoi(std::string(hex.substr(i, 2)), nullptr, 16)));
  }
  return out;
}

// The records below were computed independently of the codec (field by field, with a bitwise
// CRC32C), so that a change of the on-log format cannot pass unnoticed.
constexpr char kDelegatedV1[] =
    "010101010101010101010101010101010101010101010101010101010101010101010202020202020202020202"
    "020202020202020202020202020202020202020202030303030303030303030303030303030303030303030303"
    "030303030303030315cd5b07000000001032547698badcfe3075000000000000000102030405060708090a0b0c"
    "0d0e0f101112131415161718191a1b1c1d1e1f202122232425262728292a2b2c2d2e2f30313233343536373839"
    "3a3b3c3d3e3f6830b05e";
constexpr char kDelegatedV2[] =
    "020101010101010101010101010101010101010101010101010101010101010101010202020202020202020202"
    "020202020202020202020202020202020202020202030303030303030303030303030303030303030303030303"
    "030303030303030315cd5b07000000001032547698badcfe3075000000000000000102030405060708090a0b0c"
    "0d0e0f101112131415161718191a1b1c1d1e1f202122232425262728292a2b2c2d2e2f30313233343536373839"
    "3a3b3c3d3e3f000176cf3a7c";
// The same delegation found by a backfill with no signature: flags 1, source 2.
constexpr char kDelegatedV2Unknown[] =
    "020101010101010101010101010101010101010101010101010101010101010101010202020202020202020202"
    "020202020202020202020202020202020202020202030303030303030303030303030303030303030303030303"
    "030303030303030315cd5b07000000001032547698badcfe307500000000000000000000000000000000000000"
    "000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000"
    "0000000000000102b5a96e38";
// Undelegated by a reconciliation (no signature, source 3).
constexpr char kUndelegatedV2[] =
    "020209090909090909090909090909090909090909090909090909090909090909094d00000000000000000000"
    "000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000"
    "000000000000000000000000000000000103f669c904";
constexpr char kUndelegatedV1[] =
    "010209090909090909090909090909090909090909090909090909090909090909094d00000000000000000102"
    "030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f202122232425262728292a2b2c2d2e2f"
    "303132333435363738393a3b3c3d3e3f60cc5360";

TEST(EventCodecTest, Version2EncodingIsPinned) {
  EXPECT_EQ(EncodeEvent(SampleDelegated()), FromHex(kDelegatedV2));
  DelegatedEvent unknown = SampleDelegated();
  unknown.signature.reset();
  unknown.source = EventSource::kBackfill;
  EXPECT_EQ(EncodeEvent(unknown), FromHex(kDelegatedV2Unknown));
  EXPECT_EQ(EncodeEvent(UndelegatedEvent{Key(9), 77, std::nullopt, EventSource::kReconciliation}),
            FromHex(kUndelegatedV2));
  auto decoded = DecodeEvent(FromHex(kDelegatedV2Unknown));
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(*decoded, Event(unknown));
}

TEST(EventCodecTest, Version1RecordsStillDecode) {
  auto delegated = DecodeEvent(FromHex(kDelegatedV1));
  ASSERT_TRUE(delegated.ok()) << delegated.status();
  DelegatedEvent expected = SampleDelegated();
  expected.source = EventSource::kUnrecorded;
  EXPECT_EQ(*delegated, Event(expected));
  auto undelegated = DecodeEvent(FromHex(kUndelegatedV1));
  ASSERT_TRUE(undelegated.ok()) << undelegated.status();
  const auto& u = std::get<UndelegatedEvent>(*undelegated);
  EXPECT_EQ(u.signature, expected.signature);
  EXPECT_EQ(u.source, EventSource::kUnrecorded);
  EXPECT_EQ(u.slot, 77u);
}

TEST(EventCodecTest, AVersion1ZeroSignatureIsUnknown) {
  // Version 1 wrote a zero signature for an event read from the program's accounts.
  std::string record = FromHex(kDelegatedV1).substr(0, 2 + 120);
  record.append(64, '\0');
  const uint32_t crc = Crc32c(record);
  for (int i = 0; i < 4; ++i) record.push_back(static_cast<char>(crc >> (8 * i)));
  auto decoded = DecodeEvent(record);
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_FALSE(std::get<DelegatedEvent>(*decoded).signature.has_value());
}

TEST(EventCodecTest, UnknownFlagsAndSourcesAreRejected) {
  for (auto [at, value] : {std::pair<size_t, char>{186, 2}, {187, 5}}) {
    std::string record = FromHex(kDelegatedV2).substr(0, 188);
    record[at] = value;
    const uint32_t crc = Crc32c(record);
    for (int i = 0; i < 4; ++i) record.push_back(static_cast<char>(crc >> (8 * i)));
    auto decoded = DecodeEvent(record);
    ASSERT_FALSE(decoded.ok()) << at;
    EXPECT_EQ(decoded.status().code(), absl::StatusCode::kDataLoss);
  }
}

TEST(EventCodecTest, EveryKindRoundTrips) {
  const std::vector<Event> events = {
      SampleDelegated(),
      UndelegatedEvent{Key(9), 77, std::nullopt},
      UndelegatedEvent{Key(9), 78, SampleDelegated().signature, EventSource::kRepair},
      SlotSealedEvent{5},
      StreamGapEvent{6},
      ResyncedEvent{7}};
  for (const Event& e : events) {
    const std::string record = EncodeEvent(e);
    auto decoded = DecodeEvent(record);
    ASSERT_TRUE(decoded.ok()) << decoded.status();
    EXPECT_EQ(*decoded, e);
  }
}

TEST(EventCodecTest, LayoutIsVersionKindFieldsCrc) {
  const std::string record = EncodeEvent(SlotSealedEvent{0x0102030405060708ULL});
  ASSERT_EQ(record.size(), 2u + 8 + 4);
  EXPECT_EQ(record[0], 2);                           // version
  EXPECT_EQ(record[1], 3);                           // SlotSealed
  EXPECT_EQ(static_cast<uint8_t>(record[2]), 0x08);  // little-endian
  EXPECT_EQ(static_cast<uint8_t>(record[9]), 0x01);
  EXPECT_EQ(EncodeEvent(SampleDelegated()).size(), 2u + 186 + 4);
  EXPECT_EQ(EncodeEvent(UndelegatedEvent{}).size(), 2u + 106 + 4);
}

TEST(EventCodecTest, AnySingleBitFlipIsDetected) {
  const std::string record = EncodeEvent(SampleDelegated());
  for (size_t i = 0; i < record.size(); ++i) {
    for (int bit = 0; bit < 8; ++bit) {
      std::string corrupt = record;
      corrupt[i] = static_cast<char>(corrupt[i] ^ (1 << bit));
      EXPECT_FALSE(DecodeEvent(corrupt).ok()) << "byte " << i << " bit " << bit;
    }
  }
}

TEST(EventCodecTest, TruncationAndExtensionAreRejected) {
  const std::string record = EncodeEvent(SampleDelegated());
  for (size_t n = 0; n < record.size(); ++n) {
    auto decoded = DecodeEvent(record.substr(0, n));
    EXPECT_FALSE(decoded.ok()) << n;
    EXPECT_EQ(decoded.status().code(), absl::StatusCode::kDataLoss);
  }
  EXPECT_FALSE(DecodeEvent(record + "x").ok());
}

TEST(EventCodecTest, UnknownVersionIsNamed) {
  std::string record = EncodeEvent(SlotSealedEvent{1});
  record[0] = 3;
  auto decoded = DecodeEvent(record);
  ASSERT_FALSE(decoded.ok());
  EXPECT_NE(std::string(decoded.status().message()).find("unknown event format version 3"),
            std::string::npos)
      << decoded.status();
}

TEST(EventCodecTest, ValidChecksumOverAWrongLengthIsRejected) {
  // A well-checksummed record whose payload does not match its kind.
  std::string body = {2, 1, 0, 0, 0, 0, 0, 0, 0, 0};  // Delegated with 8 payload bytes
  std::string record = body;
  const uint32_t crc = Crc32c(body);
  for (int i = 0; i < 4; ++i) record.push_back(static_cast<char>(crc >> (8 * i)));
  auto decoded = DecodeEvent(record);
  ASSERT_FALSE(decoded.ok());
  EXPECT_NE(std::string(decoded.status().message()).find("expected 186"), std::string::npos);
}

TEST(EventCodecTest, GeneratedStreamsRoundTrip) {
  testing::GeneratorOptions options;
  options.gap_probability = 0.1;
  for (const Event& e : testing::GenerateEvents(options)) {
    auto decoded = DecodeEvent(EncodeEvent(e));
    ASSERT_TRUE(decoded.ok());
    EXPECT_EQ(*decoded, e);
  }
}

TEST(EventCodecTest, KeysAreTheAccountOrEmpty) {
  EXPECT_EQ(EventKey(SampleDelegated()), std::string(32, '\x01'));
  EXPECT_EQ(EventKey(SlotSealedEvent{1}), "");
}

}  // namespace
}  // namespace switchyard
