#include "hpod/base/base64.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace hpod {
namespace {

using ::testing::HasSubstr;

constexpr Base64Options kStandardPadded{};
constexpr Base64Options kStandardUnpadded{.pad = false};
constexpr Base64Options kUrlPadded{.alphabet = Base64Alphabet::kUrl};
constexpr Base64Options kUrlUnpadded{.alphabet = Base64Alphabet::kUrl, .pad = false};

// RFC 4648 §10.
struct Vector {
  std::string plain;
  std::string padded;
};
const std::vector<Vector> kRfc4648 = {
    {"", ""},
    {"f", "Zg=="},
    {"fo", "Zm8="},
    {"foo", "Zm9v"},
    {"foob", "Zm9vYg=="},
    {"fooba", "Zm9vYmE="},
    {"foobar", "Zm9vYmFy"},
};

std::string Unpadded(std::string s) { return s.substr(0, s.find('=')); }

TEST(Base64Test, Rfc4648VectorsStandardPadded) {
  for (const auto& [plain, padded] : kRfc4648) {
    EXPECT_EQ(Base64Encode(plain, kStandardPadded), padded);
    StatusOr<std::string> back = Base64Decode(padded, kStandardPadded);
    ASSERT_TRUE(back.ok()) << padded << ": " << back.status().ToString();
    EXPECT_EQ(*back, plain);
  }
}

TEST(Base64Test, Rfc4648VectorsUnpadded) {
  for (const auto& [plain, padded] : kRfc4648) {
    for (const Base64Options& o : {kStandardUnpadded, kUrlUnpadded}) {
      EXPECT_EQ(Base64Encode(plain, o), Unpadded(padded));
      StatusOr<std::string> back = Base64Decode(Unpadded(padded), o);
      ASSERT_TRUE(back.ok()) << padded << ": " << back.status().ToString();
      EXPECT_EQ(*back, plain);
    }
  }
}

TEST(Base64Test, Rfc4648VectorsUrlPadded) {
  // The letters and digits of the vectors are the same in both alphabets.
  for (const auto& [plain, padded] : kRfc4648) {
    EXPECT_EQ(Base64Encode(plain, kUrlPadded), padded);
    EXPECT_EQ(*Base64Decode(padded, kUrlPadded), plain);
  }
}

TEST(Base64Test, AlphabetsDifferInTheLastTwoSymbols) {
  const std::string bytes("\xfb\xff\xbf", 3);  // 111110 111111 111110 111111
  EXPECT_EQ(Base64Encode(bytes, kStandardPadded), "+/+/");
  EXPECT_EQ(Base64Encode(bytes, kUrlUnpadded), "-_-_");
  EXPECT_EQ(*Base64Decode("+/+/", kStandardPadded), bytes);
  EXPECT_EQ(*Base64Decode("-_-_", kUrlUnpadded), bytes);
  // Each alphabet refuses the other's symbols, naming the character and where.
  StatusOr<std::string> url_in_standard = Base64Decode("-_-_", kStandardPadded);
  EXPECT_EQ(url_in_standard.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(url_in_standard.status().message(),
            "invalid base64: character '-' at offset 0 is not in the standard alphabet");
  EXPECT_THAT(Base64Decode("ab+/", kUrlUnpadded).status().message(),
              HasSubstr("character '+' at offset 2 is not in the url alphabet"));
}

TEST(Base64Test, RoundTripsEveryByteValue) {
  std::string all;
  for (int c = 0; c < 256; ++c) all.push_back(static_cast<char>(c));
  for (size_t n = 0; n <= 5; ++n) {
    const std::string bytes = all.substr(n);
    for (const Base64Options& o : {kStandardPadded, kStandardUnpadded, kUrlPadded, kUrlUnpadded}) {
      StatusOr<std::string> back = Base64Decode(Base64Encode(bytes, o), o);
      ASSERT_TRUE(back.ok()) << back.status().ToString();
      EXPECT_EQ(*back, bytes);
    }
  }
}

TEST(Base64Test, PaddedDecodeRefusesBadInput) {
  for (const char* bad : {"Zg", "Zg=", "Zm9", "Z", "Zg===", "Zg==Zg==", "Zm9v!"}) {
    StatusOr<std::string> r = Base64Decode(bad, kStandardPadded);
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << bad;
  }
  EXPECT_THAT(Base64Decode("Zg==Zg==").status().message(),
              HasSubstr("data after padding at offset 4"));
  EXPECT_THAT(Base64Decode("Zg").status().message(),
              HasSubstr("2 symbols and 0 '=' do not fill whole 4-character groups"));
  EXPECT_THAT(Base64Decode("Zm9vY").status().message(), HasSubstr("leave one over"));
  EXPECT_THAT(Base64Decode(std::string("Zm9v\n", 5)).status().message(),
              HasSubstr("character 0x0a at offset 4"));
}

TEST(Base64Test, UnpaddedDecodeRefusesPaddingAndBadLengths) {
  EXPECT_THAT(Base64Decode("Zg==", kUrlUnpadded).status().message(),
              HasSubstr("character '=' at offset 2 is not in the url alphabet"));
  EXPECT_FALSE(Base64Decode("a", kUrlUnpadded).ok());
  EXPECT_FALSE(Base64Decode("abcde", kStandardUnpadded).ok());
  EXPECT_FALSE(Base64Decode("ab$d", kUrlUnpadded).ok());
}

TEST(Base64Test, SkipUnknownDiscardsStrayCharactersLikePython) {
  // base64.b64decode("Zm9v\nYmFy") == b"foobar"; the padding rules still hold.
  Base64Options lenient{.skip_unknown = true};
  EXPECT_EQ(*Base64Decode("Zm9v\nYm Fy", lenient), "foobar");
  EXPECT_EQ(*Base64Decode("Zg==\n", lenient), "f");
  EXPECT_FALSE(Base64Decode("Zg", lenient).ok());
  EXPECT_FALSE(Base64Decode("Zg==Zg==", lenient).ok());
  EXPECT_FALSE(Base64Decode("abc", lenient).ok());
}

TEST(Base64Test, UrlShorthands) {
  EXPECT_EQ(Base64UrlEncode("hello"), "aGVsbG8");
  EXPECT_EQ(*Base64UrlDecode("aGVsbG8"), "hello");
  for (const std::string& s :
       std::vector<std::string>{"", "a", "ab", "abc", "abcd", std::string("\xff\xfe\x00\x01", 4)}) {
    std::string enc = Base64UrlEncode(s);
    EXPECT_EQ(enc.find('='), std::string::npos);
    EXPECT_EQ(*Base64UrlDecode(enc), s) << enc;
  }
  EXPECT_FALSE(Base64UrlDecode("a").ok());
  EXPECT_FALSE(Base64UrlDecode("ab$d").ok());
}

}  // namespace
}  // namespace hpod
