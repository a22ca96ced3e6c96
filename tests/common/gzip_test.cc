#include "common/gzip.h"

#include <gtest/gtest.h>

#include <string>

namespace switchyard {
namespace {

std::string Compress(const std::string& text, int level = 1) {
  std::string out;
  GzipCompress(text, level, &out);
  return out;
}

TEST(GzipTest, RoundTripsAtEveryLevelWithTheSlackAsked) {
  std::string text;
  for (int i = 0; i < 5000; ++i) text += "{\"lamports\":" + std::to_string(i * 7) + "},";
  for (int level = 1; level <= 9; ++level) {
    const std::string gzip = Compress(text, level);
    EXPECT_LT(gzip.size(), text.size() / 3) << level;
    ASSERT_GE(gzip.size(), 2u);
    EXPECT_EQ(static_cast<unsigned char>(gzip[0]), 0x1f);  // the gzip magic
    EXPECT_EQ(static_cast<unsigned char>(gzip[1]), 0x8b);
    std::string out;
    ASSERT_TRUE(GzipInflate(gzip, text.size(), &out, 64).ok()) << level;
    EXPECT_EQ(out, text);
    EXPECT_GE(out.capacity(), out.size() + 64);
  }
  std::string empty;
  ASSERT_TRUE(GzipInflate(Compress(""), 10, &empty).ok());
  EXPECT_EQ(empty, "");
}

TEST(GzipTest, InflatingStopsAtTheLimit) {
  const std::string bomb = Compress(std::string(100 << 20, 'a'));
  ASSERT_LT(bomb.size(), 1u << 20);
  std::string out;
  const absl::Status status = GzipInflate(bomb, 1 << 20, &out);
  EXPECT_TRUE(absl::IsResourceExhausted(status)) << status;
  EXPECT_TRUE(out.empty());
  EXPECT_LE(out.capacity(), (2u << 20) + 64);
  // Exactly the limit is within it.
  ASSERT_TRUE(GzipInflate(Compress(std::string(1000, 'b')), 1000, &out).ok());
  EXPECT_EQ(out.size(), 1000u);
  EXPECT_TRUE(absl::IsResourceExhausted(GzipInflate(Compress(std::string(1001, 'b')), 1000, &out)));
}

TEST(GzipTest, RejectsWhatIsNotWholeGzip) {
  std::string out;
  const std::string gzip = Compress(std::string(5000, 'c') + "tail");
  EXPECT_TRUE(absl::IsInvalidArgument(GzipInflate("not gzip at all", 1000, &out)));
  EXPECT_TRUE(absl::IsInvalidArgument(GzipInflate("", 1000, &out)));
  EXPECT_TRUE(absl::IsInvalidArgument(GzipInflate(gzip.substr(0, gzip.size() / 2), 10000, &out)));
  EXPECT_TRUE(absl::IsInvalidArgument(GzipInflate(gzip.substr(0, gzip.size() - 4), 10000, &out)));
  EXPECT_TRUE(absl::IsInvalidArgument(GzipInflate(gzip + "xyz", 10000, &out)));
  std::string corrupt = gzip;
  corrupt[corrupt.size() - 6] ^= 0x55;  // the CRC
  EXPECT_TRUE(absl::IsInvalidArgument(GzipInflate(corrupt, 10000, &out)));
  // The inflater is reused per thread: a failure leaves nothing behind for the next call.
  ASSERT_TRUE(GzipInflate(gzip, 10000, &out).ok());
  EXPECT_EQ(out, std::string(5000, 'c') + "tail");
}

TEST(GzipTest, AcceptEncodingIsReadAsRfc9110Says) {
  EXPECT_TRUE(AcceptsGzip("gzip"));
  EXPECT_TRUE(AcceptsGzip("deflate, gzip;q=1.0, br"));
  EXPECT_TRUE(AcceptsGzip(" GZIP "));
  EXPECT_TRUE(AcceptsGzip("x-gzip"));
  EXPECT_TRUE(AcceptsGzip("*"));
  EXPECT_TRUE(AcceptsGzip("gzip;q=0.5"));
  EXPECT_FALSE(AcceptsGzip(""));
  EXPECT_FALSE(AcceptsGzip("identity"));
  EXPECT_FALSE(AcceptsGzip("br, deflate"));
  EXPECT_FALSE(AcceptsGzip("gzip;q=0"));
  EXPECT_FALSE(AcceptsGzip("gzip; q=0.000, br"));
  EXPECT_FALSE(AcceptsGzip("gzipx"));
}

}  // namespace
}  // namespace switchyard
