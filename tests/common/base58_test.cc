#include "common/base58.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "common/pubkey.h"

namespace switchyard {
namespace {

TEST(Base58Test, SystemProgramIsAllZeroBytes) {
  auto key = Pubkey::FromBase58("11111111111111111111111111111111");
  ASSERT_TRUE(key.ok()) << key.status();
  EXPECT_TRUE(key->IsZero());
  EXPECT_EQ(key->ToBase58(), "11111111111111111111111111111111");
}

TEST(Base58Test, DelegationProgramIdRoundTrips) {
  const std::string text = "DELeGGvXpWV2fqJUhqcF5ZSYMS4JTLjteaAMARRSaeSh";
  auto key = Pubkey::FromBase58(text);
  ASSERT_TRUE(key.ok()) << key.status();
  EXPECT_EQ(key->ToBase58(), text);
  // First and last bytes of the program id, computed independently.
  EXPECT_EQ(key->data()[0], 0xb5);
  EXPECT_EQ(key->data()[31], 0x3e);
}

TEST(Base58Test, KnownSmallVectors) {
  EXPECT_EQ(Base58Encode(std::vector<uint8_t>{}), "");
  EXPECT_EQ(Base58Encode(std::vector<uint8_t>{0}), "1");
  EXPECT_EQ(Base58Encode(std::vector<uint8_t>{0, 0, 1}), "112");
  EXPECT_EQ(Base58Encode(std::vector<uint8_t>{57}), "z");
  EXPECT_EQ(Base58Encode(std::vector<uint8_t>{58}), "21");
  const std::string hello = "Hello World!";
  EXPECT_EQ(Base58Encode(std::vector<uint8_t>(hello.begin(), hello.end())), "2NEpo7TZRRrLZSi2U");
  std::vector<uint8_t> out(12);
  ASSERT_TRUE(Base58DecodeExact("2NEpo7TZRRrLZSi2U", out).ok());
  EXPECT_EQ(std::string(out.begin(), out.end()), hello);
}

TEST(Base58Test, RejectsWrongLength) {
  EXPECT_FALSE(Pubkey::FromBase58("1111111111111111111111111111111").ok());    // 31 zero bytes
  EXPECT_FALSE(Pubkey::FromBase58("111111111111111111111111111111111").ok());  // 33 zero bytes
  EXPECT_FALSE(Pubkey::FromBase58("").ok());
  EXPECT_FALSE(Pubkey::FromBase58("2NEpo7TZRRrLZSi2U").ok());  // 12 bytes
  // 64 bytes of 0xff is a valid signature but too long for a key.
  std::vector<uint8_t> sig(64, 0xff);
  EXPECT_FALSE(Pubkey::FromBase58(Base58Encode(sig)).ok());
  EXPECT_TRUE(Signature::FromBase58(Base58Encode(sig)).ok());
}

TEST(Base58Test, RejectsCharactersOutsideTheAlphabet) {
  for (char bad : {'0', 'O', 'I', 'l', '+', '/', ' ', '\xc3'}) {
    std::string text = "DELeGGvXpWV2fqJUhqcF5ZSYMS4JTLjteaAMARRSaeSh";
    text[5] = bad;
    auto key = Pubkey::FromBase58(text);
    EXPECT_FALSE(key.ok()) << "accepted character " << static_cast<int>(bad);
    EXPECT_NE(std::string(key.status().message()).find("invalid character"), std::string::npos);
  }
}

TEST(Base58Test, RejectsNonCanonicalLeadingZeros) {
  // A key whose first byte is zero must start with '1'. Encoding the same number without
  // that '1' gives 31 bytes, which must not be padded back to 32.
  std::vector<uint8_t> bytes(32, 0x42);
  bytes[0] = 0;
  const std::string canonical = Base58Encode(bytes);
  ASSERT_EQ(canonical[0], '1');
  EXPECT_TRUE(Pubkey::FromBase58(canonical).ok());
  EXPECT_FALSE(Pubkey::FromBase58(canonical.substr(1)).ok());
  // And an extra leading '1' adds a byte.
  EXPECT_FALSE(Pubkey::FromBase58("1" + canonical).ok());
}

TEST(Base58Test, RejectsValuesThatOverflow) {
  EXPECT_FALSE(Pubkey::FromBase58(std::string(45, 'z')).ok());
  EXPECT_FALSE(Pubkey::FromBase58(std::string(200, 'z')).ok());
}

TEST(Base58Test, RandomRoundTrips) {
  std::mt19937_64 rng(7);
  for (int i = 0; i < 2000; ++i) {
    std::array<uint8_t, 64> bytes;
    for (auto& b : bytes) b = static_cast<uint8_t>(rng());
    // Exercise leading zeros too.
    const int zeros = static_cast<int>(rng() % 5);
    for (int z = 0; z < zeros; ++z) bytes[z] = 0;
    const Signature sig(bytes);
    auto back = Signature::FromBase58(sig.ToBase58());
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(*back, sig);
    Pubkey key = Pubkey::FromBytes(bytes.data());
    auto key_back = Pubkey::FromBase58(key.ToBase58());
    ASSERT_TRUE(key_back.ok());
    EXPECT_EQ(*key_back, key);
  }
}

// Public keys and signatures take a fixed-size decoder; whatever the text, it must agree with
// the general one (Base58DecodeBytes) on whether the text is exactly 32 or 64 bytes and on the
// bytes, and say the general decoder's error when it is not.
TEST(Base58Test, FixedSizeDecodingAgreesWithTheGeneralDecoderOnAnyText) {
  constexpr std::string_view kAlphabet =
      "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz";
  std::mt19937_64 rng(58);
  size_t accepted = 0;
  for (size_t bytes : {32u, 64u}) {
    const size_t longest = bytes == 32 ? 44 : 88;
    for (int i = 0; i < 20000; ++i) {
      std::string text;
      const size_t length = 1 + rng() % (longest + 3);
      // Mostly texts the size of a real key (a random value, some with leading ones), then any
      // length; now and then a character outside the alphabet.
      if (i % 2 == 0) {
        std::vector<uint8_t> value(bytes);
        for (auto& b : value) b = static_cast<uint8_t>(rng());
        for (size_t z = 0, n = rng() % 4 == 0 ? rng() % 6 : 0; z < n && z < bytes; ++z) {
          value[z] = 0;
        }
        text = Base58Encode(value);
        if (rng() % 8 == 0) text = "1" + text;
        if (rng() % 8 == 0) text.erase(0, 1);
      } else {
        for (size_t k = 0; k < length; ++k) {
          text.push_back(rng() % 4 == 0 ? '1' : kAlphabet[rng() % kAlphabet.size()]);
        }
      }
      if (!text.empty() && rng() % 16 == 0) text[rng() % text.size()] = "0OIl+/ \xff"[rng() % 8];
      std::vector<uint8_t> out(bytes, 0xab);
      const absl::Status exact = Base58DecodeExact(text, out);
      const absl::StatusOr<std::string> general = Base58DecodeBytes(text, bytes);
      const bool whole = general.ok() && general->size() == bytes;
      ASSERT_EQ(exact.ok(), whole) << text << ": " << exact << " / " << general.status();
      if (whole) {
        ++accepted;
        EXPECT_EQ(std::string(out.begin(), out.end()), *general) << text;
      } else if (!general.ok()) {
        EXPECT_EQ(exact, general.status()) << text;
      }
    }
  }
  EXPECT_GT(accepted, 10000u);  // the well-formed case was exercised
}

}  // namespace
}  // namespace switchyard

namespace switchyard {
namespace {

TEST(Base58BytesTest, DecodesAnyLengthUpToTheBound) {
  for (size_t size : {1u, 2u, 31u, 64u, 200u, 1232u}) {
    std::string bytes(size, '\0');
    for (size_t i = 0; i < size; ++i) bytes[i] = static_cast<char>((i * 37 + size) % 256);
    bytes[0] = 0;  // a leading zero byte is a leading '1'
    const std::string text =
        Base58Encode(std::span(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()));
    EXPECT_EQ(text[0], '1');
    absl::StatusOr<std::string> decoded = Base58DecodeBytes(text, 1232);
    ASSERT_TRUE(decoded.ok()) << size << ": " << decoded.status();
    EXPECT_EQ(*decoded, bytes) << size;
    EXPECT_FALSE(Base58DecodeBytes(text, size - 1).ok()) << size;
  }
  EXPECT_FALSE(Base58DecodeBytes("", 10).ok());
  EXPECT_FALSE(Base58DecodeBytes("0", 10).ok());
  EXPECT_FALSE(Base58DecodeBytes(std::string(5000, 'z'), 1232).ok());
}

}  // namespace
}  // namespace switchyard
