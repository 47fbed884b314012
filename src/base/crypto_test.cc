#include "hpod/base/crypto.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <set>
#include <vector>

namespace hpod {
namespace {

TEST(CryptoTest, Sha256KnownVectors) {
  EXPECT_EQ(HexEncode(Sha256("")),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(HexEncode(Sha256("abc")),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(CryptoTest, Sha256FileHexReadsInChunks) {
  const std::string path = ::testing::TempDir() + "/sha256_file";
  std::string data(3 << 20, 'x');  // more than one chunk
  data += "tail";
  {
    std::FILE* f = std::fopen(path.c_str(), "wb");
    ASSERT_NE(f, nullptr);
    std::fwrite(data.data(), 1, data.size(), f);
    std::fclose(f);
  }
  auto hex = Sha256FileHex(path);
  ASSERT_TRUE(hex.ok()) << hex.status().ToString();
  EXPECT_EQ(*hex, HexEncode(Sha256(data)));
  std::remove(path.c_str());
  EXPECT_EQ(Sha256FileHex(path).status().code(), StatusCode::kNotFound);
}

TEST(CryptoTest, HmacRfc4231Case2) {
  EXPECT_EQ(HexEncode(HmacSha256("Jefe", "what do ya want for nothing?")),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
}

TEST(CryptoTest, HexRoundTripAndErrors) {
  EXPECT_EQ(*HexDecode("00ff10"), std::string("\x00\xff\x10", 3));
  EXPECT_FALSE(HexDecode("abc").ok());
  EXPECT_FALSE(HexDecode("zz").ok());
}

TEST(CryptoTest, ConstantTimeEquals) {
  EXPECT_TRUE(ConstantTimeEquals("abc", "abc"));
  EXPECT_FALSE(ConstantTimeEquals("abc", "abd"));
  EXPECT_FALSE(ConstantTimeEquals("abc", "ab"));
}

TEST(CryptoTest, RandomStringUsesAlphabetOnly) {
  std::set<char> seen;
  for (int i = 0; i < 50; ++i) {
    std::string s = RandomString(12, "abc");
    ASSERT_EQ(s.size(), 12u);
    for (char c : s) {
      ASSERT_TRUE(c == 'a' || c == 'b' || c == 'c');
      seen.insert(c);
    }
  }
  EXPECT_EQ(seen.size(), 3u);
}

}  // namespace
}  // namespace hpod
