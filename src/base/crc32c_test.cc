#include "hpod/base/crc32c.h"

#include <gtest/gtest.h>

#include <string>

namespace hpod {
namespace {

TEST(Crc32cTest, CheckValue) {
  // The standard check value of CRC-32C (RFC 3720, appendix B.4).
  EXPECT_EQ(Crc32c("123456789"), 0xE3069283u);
  EXPECT_EQ(Crc32c(""), 0u);
}

TEST(Crc32cTest, IscsiVectors) {
  std::string zeros(32, '\0');
  EXPECT_EQ(Crc32c(zeros), 0x8A9136AAu);
  std::string ones(32, '\xff');
  EXPECT_EQ(Crc32c(ones), 0x62A8AB43u);
}

TEST(Crc32cTest, ExtendEqualsWhole) {
  std::string s(1000, 'x');
  for (size_t i = 0; i < s.size(); ++i) s[i] = static_cast<char>(i * 7);
  uint32_t whole = Crc32c(s);
  for (size_t cut : {0u, 1u, 7u, 8u, 9u, 500u, 999u}) {
    uint32_t part = Crc32cExtend(Crc32c(s.data(), cut), s.data() + cut, s.size() - cut);
    EXPECT_EQ(part, whole) << cut;
  }
}

TEST(Crc32cTest, Mask) {
  // tensorflow/core/lib/hash/crc32c.h: Mask(crc) rotates right by 15 and adds.
  EXPECT_EQ(MaskCrc32c(0), 0xa282ead8u);
  EXPECT_EQ(MaskCrc32c(0xE3069283u), ((0xE3069283u >> 15) | (0xE3069283u << 17)) + 0xa282ead8u);
}

}  // namespace
}  // namespace hpod
