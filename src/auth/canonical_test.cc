#include "hpod/auth/canonical.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "hpod/base/crypto.h"

namespace hpod::auth::internal {
namespace {

TEST(UriEncodeTest, KeepsOnlyUnreservedAndOptionallySlash) {
  EXPECT_EQ(UriEncode("AZaz09-_.~", false), "AZaz09-_.~");
  EXPECT_EQ(UriEncode("a b/c+d=e&f%", false), "a%20b%2Fc%2Bd%3De%26f%25");
  EXPECT_EQ(UriEncode("a b/c", true), "a%20b/c");
  EXPECT_EQ(UriEncode("\xe1\x88\xb4", false), "%E1%88%B4");
  EXPECT_EQ(UriEncode(std::string("\0\xff", 2), false), "%00%FF");
}

TEST(PercentDecodeTest, DecodesValidEscapesOnly) {
  EXPECT_EQ(PercentDecode("a%20b%2fc%2F"), "a b/c/");
  EXPECT_EQ(PercentDecode("a+b"), "a+b");  // '+' is not a space in SigV4
  EXPECT_EQ(PercentDecode("%"), "%");
  EXPECT_EQ(PercentDecode("%4"), "%4");
  EXPECT_EQ(PercentDecode("%zz%41"), "%zzA");
  EXPECT_EQ(PercentDecode("100%"), "100%");
}

TEST(TrimAllTest, TrimsAndCollapsesWhitespace) {
  EXPECT_EQ(TrimAll("  value1 "), "value1");
  EXPECT_EQ(TrimAll(" \"a   b   c\" "), "\"a b c\"");
  EXPECT_EQ(TrimAll("\t spaced \t\r\n out\v\f"), "spaced out");
  EXPECT_EQ(TrimAll("   "), "");
  EXPECT_EQ(TrimAll(""), "");
}

TEST(CanonicalPathTest, NormalizesThenEncodesTheWirePathAgain) {
  EXPECT_EQ(CanonicalPath(""), "/");
  EXPECT_EQ(CanonicalPath("/"), "/");
  EXPECT_EQ(CanonicalPath("//example//"), "/example/");
  EXPECT_EQ(CanonicalPath("/./"), "/");
  EXPECT_EQ(CanonicalPath("/example1/example2/../.."), "/");
  EXPECT_EQ(CanonicalPath("/example/.."), "/");
  EXPECT_EQ(CanonicalPath("/../../a"), "/a");
  EXPECT_EQ(CanonicalPath("/a/./b/../c/"), "/a/c/");
  EXPECT_EQ(CanonicalPath("/example space/"), "/example%20space/");
  // Non-S3 services encode the already-encoded wire path once more.
  EXPECT_EQ(CanonicalPath("/clusters/my%3Acluster"), "/clusters/my%253Acluster");
  EXPECT_EQ(CanonicalPath("/a%2Fb"), "/a%252Fb");
  EXPECT_EQ(CanonicalPath("/\xe1\x88\xb4"), "/%E1%88%B4");
}

TEST(CanonicalQueryTest, DecodesReencodesAndSorts) {
  EXPECT_EQ(CanonicalQuery(ParseQuery("")), "");
  EXPECT_EQ(CanonicalQuery(ParseQuery("Param2=value2&Param1=value1")),
            "Param1=value1&Param2=value2");
  EXPECT_EQ(CanonicalQuery(ParseQuery("b=2&a=x%20y&a=first&Empty=&flag")),
            "Empty=&a=first&a=x%20y&b=2&flag=");
  EXPECT_EQ(CanonicalQuery(ParseQuery("k=a+b&s=%2f&u=%e1%88%b4")), "k=a%2Bb&s=%2F&u=%E1%88%B4");
  EXPECT_EQ(CanonicalQuery(ParseQuery("a=1&&b=2&")), "a=1&b=2");
  EXPECT_EQ(CanonicalQuery(ParseQuery("x==y")), "x=%3Dy");
  EXPECT_EQ(CanonicalQuery(ParseQuery("X-Amz-Signature=abc&X-Amz-Date=1"), "X-Amz-Signature"),
            "X-Amz-Date=1");
}

TEST(CanonicalHeadersTest, LowercasesTrimsAndJoinsRepeats) {
  const HeaderList headers = {
      {"Host", "example.com"}, {"My-Header", " a  b "}, {"my-header", "c"}, {"Other", "ignored"}};
  EXPECT_EQ(CanonicalHeaders(headers, {"host", "my-header"}),
            "host:example.com\nmy-header:a b,c\n");
  EXPECT_EQ(CanonicalHeaders(headers, {"absent"}), "absent:\n");
  EXPECT_EQ(JoinSignedHeaders({"host", "my-header", "x-amz-date"}), "host;my-header;x-amz-date");
}

// The "get-vanilla" case of the AWS SigV4 test suite, step by step.
TEST(CanonicalRequestTest, GetVanillaIntermediateValues) {
  const HeaderList headers = {{"Host", "example.amazonaws.com"},
                              {"X-Amz-Date", "20150830T123600Z"}};
  const std::string canonical =
      CanonicalRequest("GET", "/", "", headers, {"host", "x-amz-date"},
                       "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(canonical,
            "GET\n/\n\nhost:example.amazonaws.com\nx-amz-date:20150830T123600Z\n\nhost;x-amz-date\n"
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  const std::string sts = StringToSign(
      "20150830T123600Z", CredentialScope("20150830", "us-east-1", "service"), canonical);
  EXPECT_EQ(sts,
            "AWS4-HMAC-SHA256\n20150830T123600Z\n20150830/us-east-1/service/aws4_request\n"
            "bb579772317eb040ac9ed261061d46c1f17a8133879d6129b6e1c25292927e63");
  EXPECT_EQ(Signature("wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", "20150830", "us-east-1",
                      "service", sts),
            "5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31");
}

// AWS General Reference, "Examples of how to derive a signing key for Signature
// Version 4" (IAM, 2012-02-15).
TEST(SigningKeyTest, DocumentedExample) {
  EXPECT_EQ(HexEncode(SigningKey("wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", "20120215",
                                 "us-east-1", "iam")),
            "f4780e2d9f65fa895f9c67b32ce1baf0b0d8a43505a000a1a9e090d414db404d");
}

TEST(AmzDateTest, FormatsAndParsesUtc) {
  EXPECT_EQ(FormatAmzDate(0), "19700101T000000Z");
  EXPECT_EQ(FormatAmzDate(1440938160), "20150830T123600Z");
  EXPECT_EQ(FormatAmzDate(1709251199), "20240229T235959Z");
  EXPECT_EQ(FormatAmzDate(-1), "19691231T235959Z");
  EXPECT_EQ(FormatAmzDate(253402300799), "99991231T235959Z");
  EXPECT_EQ(ParseAmzDate("20150830T123600Z"), 1440938160);
  EXPECT_EQ(ParseAmzDate("20240229T235959Z"), 1709251199);
  EXPECT_EQ(ParseAmzDate("19700101T000000Z"), 0);
  EXPECT_EQ(ParseAmzDate("99991231T235959Z"), 253402300799);
  EXPECT_EQ(ParseAmzDate("00000101T000000Z"), -62167219200);
  for (int64_t t : {int64_t{0}, int64_t{951782400}, int64_t{4102444800}, int64_t{1700000000}}) {
    EXPECT_EQ(ParseAmzDate(FormatAmzDate(t)), t) << t;
  }
  // Formatting never fails, whatever the instant.
  EXPECT_FALSE(FormatAmzDate(INT64_MIN).empty());
  EXPECT_FALSE(FormatAmzDate(INT64_MAX).empty());
}

TEST(AmzDateTest, RejectsAnythingButTheBasicFormat) {
  for (const char* bad :
       {"", "20150830", "20150830T123600", "20150830T123600z", "2015-08-30T12:36:00Z",
        "20150830 123600Z", "20230229T000000Z", "21000229T000000Z", "20231301T000000Z",
        "20231100T000000Z", "20231131T000000Z", "20231126T240000Z", "20231126T006000Z",
        "20231126T000060Z", "2023112aT000000Z", "+0231126T000000Z", "20231126T000000ZZ",
        "\xff\xff\xff\xff\xff\xff\xff\xffT000000Z"}) {
    EXPECT_FALSE(ParseAmzDate(bad).has_value()) << bad;
  }
  EXPECT_TRUE(ParseAmzDate("20000229T000000Z").has_value());
}

}  // namespace
}  // namespace hpod::auth::internal
