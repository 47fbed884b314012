// Signing and verification against the published AWS SigV4 test suite.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "hpod/auth/sigv4.h"
#include "hpod/auth/sigv4_test_util.h"

namespace hpod::auth {
namespace {

using namespace ::hpod::auth::test;  // NOLINT: shared test helpers

// The published AWS SigV4 test suite (aws-sig-v4-test-suite): AKIDEXAMPLE,
// 2015-08-30T12:36:00Z, us-east-1, service "service". gen_botocore_vectors.py
// re-checks every signature below against botocore before it writes its vectors.

struct SuiteCase {
  const char* name;
  const char* method;
  const char* target;
  std::vector<std::pair<std::string, std::string>> extra_headers;
  const char* body;
  const char* signed_headers;
  const char* signature;
};

const std::vector<SuiteCase>& Suite() {
  static const auto* cases = new std::vector<SuiteCase>{
      {"get-vanilla",
       "GET",
       "/",
       {},
       "",
       "host;x-amz-date",
       "5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31"},
      {"get-vanilla-query-order-key-case",
       "GET",
       "/?Param2=value2&Param1=value1",
       {},
       "",
       "host;x-amz-date",
       "b97d918cfa904a5beff61c982a1b6f458b799221646efd99d3219ec94cdf2500"},
      {"get-vanilla-empty-query-key",
       "GET",
       "/?Param1=value1",
       {},
       "",
       "host;x-amz-date",
       "a67d582fa61cc504c4bae71f336f98b97f1ea3c7a6bfe1b6e45aec72011b9aeb"},
      {"get-vanilla-query-unreserved",
       "GET",
       "/?-._~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz="
       "-._~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz",
       {},
       "",
       "host;x-amz-date",
       "9c3e54bfcdf0b19771a7f523ee5669cdf59bc7cc0884027167c21bb143a40197"},
      // The suite's request line carries the key as raw UTF-8.
      {"get-vanilla-utf8-query",
       "GET",
       "/?\xe1\x88\xb4=bar",
       {},
       "",
       "host;x-amz-date",
       "2cdec8eed098649ff3a119c94853b13c643bcf08f8b0a1d91e12c9027818dd04"},
      {"get-utf8",
       "GET",
       "/\xe1\x88\xb4",
       {},
       "",
       "host;x-amz-date",
       "8318018e0b0f223aa2bbf98705b62bb787dc9c0e678f255a891fd03141be5d85"},
      {"get-space",
       "GET",
       "/example space/",
       {},
       "",
       "host;x-amz-date",
       "652487583200325589f1fba4c7e578f72c47cb61beeca81406b39ddec1366741"},
      {"get-relative-relative",
       "GET",
       "/example1/example2/../..",
       {},
       "",
       "host;x-amz-date",
       "5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31"},
      {"get-slash-dot-slash",
       "GET",
       "/./",
       {},
       "",
       "host;x-amz-date",
       "5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31"},
      {"get-slashes",
       "GET",
       "//example//",
       {},
       "",
       "host;x-amz-date",
       "9a624bd73a37c9a373b5312afbebe7a714a789de108f0bdfe846570885f57e84"},
      {"get-header-value-trim",
       "GET",
       "/",
       {{"My-Header1", " value1"}, {"My-Header2", " \"a   b   c\""}},
       "",
       "host;my-header1;my-header2;x-amz-date",
       "acc3ed3afb60bb290fc8d2dd0098b9911fcaa05412b367055dee359757a9c736"},
      {"post-vanilla",
       "POST",
       "/",
       {},
       "",
       "host;x-amz-date",
       "5da7c1a2acd57cee7505fc6676e4e544621c30862966e37dddb68e92efbe5d6b"},
      {"post-vanilla-query",
       "POST",
       "/?Param1=value1",
       {},
       "",
       "host;x-amz-date",
       "28038455d6de14eafc1f9222cf5aa6f1a96197d7deb8263271d420d138af7f11"},
      {"post-header-key-sort",
       "POST",
       "/",
       {{"My-Header1", "value1"}},
       "",
       "host;my-header1;x-amz-date",
       "c5410059b04c1ee005303aed430f6e6645f61f4dc9e1461ec8f8916fdf18852c"},
      {"post-header-value-case",
       "POST",
       "/",
       {{"My-Header1", "VALUE1"}},
       "",
       "host;my-header1;x-amz-date",
       "cdbc9802e29d2942e5e10b5bccfdd67c5f22c7c4e8ae67b53629efa58b974b7d"},
      {"post-x-www-form-urlencoded",
       "POST",
       "/",
       {{"Content-Type", "application/x-www-form-urlencoded"}},
       "Param1=value1",
       "content-type;host;x-amz-date",
       "ff11897932ad3f4e8b18135d722051e5ac45fc38421b1da7b9d196a0fe09473a"},
  };
  return *cases;
}

constexpr int64_t kSuiteTime = 1440938160;  // 2015-08-30T12:36:00Z

TEST(SigV4SuiteTest, SignsLikeThePublishedSuite) {
  const Credentials credentials{"AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", ""};
  for (const SuiteCase& c : Suite()) {
    SCOPED_TRACE(c.name);
    SignableRequest request{c.method, c.target, {{"Host", "example.amazonaws.com"}}, c.body};
    for (const auto& header : c.extra_headers) request.headers.push_back(header);
    ASSERT_TRUE(SignRequest(request, credentials, "us-east-1", "service", At(kSuiteTime)).ok());
    EXPECT_EQ(HeaderValue(request, "X-Amz-Date"), "20150830T123600Z");
    EXPECT_EQ(HeaderValue(request, "Authorization"),
              std::string("AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/"
                          "aws4_request, SignedHeaders=") +
                  c.signed_headers + ", Signature=" + c.signature);
  }
}

TEST(SigV4SuiteTest, VerifiesThePublishedSuite) {
  InMemorySecretLookup secrets(
      InMemorySecretLookup::SecretMap{{"AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"}});
  VerifyOptions options;
  options.service = "service";
  options.region = "us-east-1";
  for (const SuiteCase& c : Suite()) {
    SCOPED_TRACE(c.name);
    // The request exactly as the suite's .sreq files give it.
    SignableRequest request{c.method,
                            c.target,
                            {{"Host", "example.amazonaws.com"}, {"X-Amz-Date", "20150830T123600Z"}},
                            c.body};
    for (const auto& header : c.extra_headers) request.headers.push_back(header);
    request.headers.emplace_back(
        "Authorization",
        std::string("AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/"
                    "aws4_request, SignedHeaders=") +
            c.signed_headers + ", Signature=" + c.signature);
    StatusOr<VerifiedCaller> caller = VerifyRequest(request, secrets, options, At(kSuiteTime));
    ASSERT_TRUE(caller.ok()) << caller.status().ToString();
    EXPECT_EQ(caller->access_key_id, "AKIDEXAMPLE");
    EXPECT_EQ(caller->region, "us-east-1");
    EXPECT_EQ(caller->session_token, "");
  }
}

}  // namespace
}  // namespace hpod::auth
