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

TEST(EventCodecTest, EveryKindRoundTrips) {
  const std::vector<Event> events = {SampleDelegated(), UndelegatedEvent{Key(9), 77, Signature()},
                                     SlotSealedEvent{5}, StreamGapEvent{6}, ResyncedEvent{7}};
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
  EXPECT_EQ(record[0], 1);                           // version
  EXPECT_EQ(record[1], 3);                           // SlotSealed
  EXPECT_EQ(static_cast<uint8_t>(record[2]), 0x08);  // little-endian
  EXPECT_EQ(static_cast<uint8_t>(record[9]), 0x01);
  EXPECT_EQ(EncodeEvent(SampleDelegated()).size(), 2u + 184 + 4);
  EXPECT_EQ(EncodeEvent(UndelegatedEvent{}).size(), 2u + 104 + 4);
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
  record[0] = 2;
  auto decoded = DecodeEvent(record);
  ASSERT_FALSE(decoded.ok());
  EXPECT_NE(std::string(decoded.status().message()).find("unknown event format version 2"),
            std::string::npos)
      << decoded.status();
}

TEST(EventCodecTest, ValidChecksumOverAWrongLengthIsRejected) {
  // A well-checksummed record whose payload does not match its kind.
  std::string body = {1, 1, 0, 0, 0, 0, 0, 0, 0, 0};  // Delegated with 8 payload bytes
  std::string record = body;
  const uint32_t crc = Crc32c(body);
  for (int i = 0; i < 4; ++i) record.push_back(static_cast<char>(crc >> (8 * i)));
  auto decoded = DecodeEvent(record);
  ASSERT_FALSE(decoded.ok());
  EXPECT_NE(std::string(decoded.status().message()).find("expected 184"), std::string::npos);
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
