#include "solana/base64.h"

#include <gtest/gtest.h>

#include <string>

namespace switchyard {
namespace {

std::string Error(std::string_view text) {
  return std::string(Base64Decode(text).status().message());
}

TEST(Base64Test, Rfc4648Vectors) {
  const std::pair<std::string, std::string> vectors[] = {
      {"", ""},
      {"f", "Zg=="},
      {"fo", "Zm8="},
      {"foo", "Zm9v"},
      {"foob", "Zm9vYg=="},
      {"fooba", "Zm9vYmE="},
      {"foobar", "Zm9vYmFy"},
  };
  for (const auto& [plain, encoded] : vectors) {
    EXPECT_EQ(Base64Encode(plain), encoded);
    auto decoded = Base64Decode(encoded);
    ASSERT_TRUE(decoded.ok()) << encoded << ": " << decoded.status();
    EXPECT_EQ(*decoded, plain);
  }
}

TEST(Base64Test, RoundTripsEveryByteValueAndLength) {
  std::string bytes;
  for (int i = 0; i < 300; ++i) {
    bytes.push_back(static_cast<char>(i * 7));
    auto decoded = Base64Decode(Base64Encode(bytes));
    ASSERT_TRUE(decoded.ok());
    EXPECT_EQ(*decoded, bytes);
  }
}

TEST(Base64Test, RejectsLengthNotAMultipleOfFour) {
  EXPECT_EQ(Error("Zm9"), "base64: length 3 is not a multiple of 4");
  EXPECT_EQ(Error("Zg"), "base64: length 2 is not a multiple of 4");
}

TEST(Base64Test, RejectsCharactersOutsideTheAlphabet) {
  EXPECT_EQ(Error("Zm9v Zg=="), "base64: length 9 is not a multiple of 4");
  EXPECT_EQ(Error("Zm 9"), "base64: invalid character 0x20 at position 2");
  EXPECT_EQ(Error("Zm-9"), "base64: invalid character 0x2d at position 2");
  EXPECT_EQ(Error("Zm9\n"), "base64: invalid character 0x0a at position 3");
  EXPECT_EQ(Error(std::string("Zm\0v", 4)), "base64: invalid character 0x00 at position 2");
}

TEST(Base64Test, RejectsMisplacedPadding) {
  EXPECT_EQ(Error("Z=9v"), "base64: invalid character 0x3d at position 1");
  EXPECT_EQ(Error("Zg==Zm9v"), "base64: invalid character 0x3d at position 2");
  EXPECT_EQ(Error("Z==="), "base64: invalid character 0x3d at position 1");
  EXPECT_EQ(Error("===="), "base64: invalid character 0x3d at position 0");
}

TEST(Base64Test, RejectsNonZeroUnusedBits) {
  EXPECT_EQ(Error("Zh=="), "base64: non-zero unused bits in the character at position 1");
  EXPECT_EQ(Error("Zm9="), "base64: non-zero unused bits in the character at position 2");
}

}  // namespace
}  // namespace switchyard
