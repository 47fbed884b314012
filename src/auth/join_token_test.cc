#include "hpod/auth/join_token.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

namespace hpod::auth {
namespace {

const std::string kPin(64, 'a');
const std::string kId = "0123abcd";
const std::string kSecret = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcd01";

std::string Token(const std::string& pin, const std::string& id, const std::string& secret) {
  return "hpodjoin1." + pin + "." + id + "." + secret;
}

// The message of a refused token: kInvalidArgument, one line, never the secret.
std::string Refusal(const std::string& text) {
  auto r = ParseJoinToken(text);
  EXPECT_FALSE(r.ok()) << text;
  if (r.ok()) return "";
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status().message().find('\n'), std::string::npos);
  EXPECT_EQ(r.status().message().find(kSecret), std::string::npos);
  return r.status().message();
}

TEST(JoinTokenTest, ParsesAWellFormedToken) {
  auto t = ParseJoinToken(Token(kPin, kId, kSecret));
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->ca_pin, kPin);
  EXPECT_EQ(t->id, kId);
  EXPECT_EQ(t->secret, kSecret);
}

TEST(JoinTokenTest, IgnoresSurroundingWhitespaceAndLowersThePin) {
  auto t = ParseJoinToken("  " + Token(std::string(64, 'F'), kId, kSecret) + "\n");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->ca_pin, std::string(64, 'f'));
}

TEST(JoinTokenTest, RefusesEachWayItCanBeWrong) {
  EXPECT_NE(Refusal("").find("does not start with hpodjoin1"), std::string::npos);
  EXPECT_NE(Refusal("K10abc::sha256:xyz").find("does not start with hpodjoin1"), std::string::npos);
  EXPECT_NE(
      Refusal("hpodjoin2." + kPin + "." + kId + "." + kSecret).find("version '2' is not supported"),
      std::string::npos);
  EXPECT_NE(Refusal("hpodjoin1." + kPin + "." + kId).find("3 dot-separated parts"),
            std::string::npos);
  EXPECT_NE(Refusal(Token(kPin, kId, kSecret) + ".x").find("5 dot-separated parts"),
            std::string::npos);
  EXPECT_NE(Refusal(Token(std::string(63, 'a'), kId, kSecret)).find("63 characters, not 64"),
            std::string::npos);
  EXPECT_NE(Refusal(Token(std::string(63, 'a') + "g", kId, kSecret)).find("not hexadecimal"),
            std::string::npos);
  EXPECT_NE(Refusal(Token(kPin, "0123abc", kSecret)).find("id is not 8"), std::string::npos);
  EXPECT_NE(Refusal(Token(kPin, "0123ABCD", kSecret)).find("id is not 8"), std::string::npos);
  EXPECT_NE(Refusal(Token(kPin, "0123abcg", kSecret)).find("id is not 8"), std::string::npos);
  EXPECT_NE(Refusal(Token(kPin, kId, kSecret.substr(1))).find("secret is not 32"),
            std::string::npos);
  EXPECT_NE(Refusal(Token(kPin, kId, kSecret.substr(1) + "-")).find("secret is not 32"),
            std::string::npos);
  EXPECT_NE(Refusal(Token(kPin, kId, kSecret + "x")).find("secret is not 32"), std::string::npos);
}

TEST(JoinTokenTest, NewTokensRoundTripAndDiffer) {
  std::set<std::string> seen;
  for (int i = 0; i < 50; ++i) {
    JoinToken t = NewJoinToken(kPin);
    const std::string text = FormatJoinToken(t);
    auto back = ParseJoinToken(text);
    ASSERT_TRUE(back.ok()) << back.status().ToString();
    EXPECT_EQ(back->ca_pin, kPin);
    EXPECT_EQ(back->id, t.id);
    EXPECT_EQ(back->secret, t.secret);
    EXPECT_EQ(FormatJoinToken(*back), text);
    EXPECT_TRUE(seen.insert(t.secret).second);
  }
}

TEST(JoinTokenTest, SecretHashIsSha256HexAndMatchesOnlyItsSecret) {
  // SHA-256("abc"), FIPS 180-2.
  EXPECT_EQ(HashJoinSecret("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  const std::string hash = HashJoinSecret(kSecret);
  EXPECT_TRUE(JoinSecretMatches(kSecret, hash));
  EXPECT_FALSE(JoinSecretMatches(kSecret.substr(1) + "2", hash));
  EXPECT_FALSE(JoinSecretMatches(kSecret, ""));
}

}  // namespace
}  // namespace hpod::auth
