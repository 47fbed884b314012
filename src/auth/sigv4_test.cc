// Header-form signing and verification: round trips and every refusal.

#include "hpod/auth/sigv4.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cctype>
#include <string>
#include <vector>

#include "hpod/auth/canonical.h"
#include "hpod/auth/signing_key_cache.h"
#include "hpod/auth/sigv4_test_util.h"
#include "hpod/base/crypto.h"

namespace hpod::auth {
namespace {

using namespace ::hpod::auth::test;  // NOLINT: shared test helpers

TEST_F(SigV4Test, RoundTrip) {
  SignableRequest request = Signed();
  EXPECT_EQ(HeaderValue(request, "X-Amz-Date"), "20231126T002500Z");
  EXPECT_THAT(HeaderValue(request, "Authorization"),
              HasSubstr("SignedHeaders=content-type;host;x-amz-date;x-amz-target, Signature="));
  StatusOr<VerifiedCaller> caller = Verify(request);
  ASSERT_TRUE(caller.ok()) << caller.status().ToString();
  EXPECT_EQ(caller->access_key_id, kKey);
  EXPECT_EQ(caller->region, "us-west-2");
}

// Kept signing keys give the same answers as derived ones: a key is found again
// for its own secret and scope only, so a rotated secret is refused at once.
TEST_F(SigV4Test, KeptSigningKeysAreFoundOnlyForTheirSecretAndScope) {
  SigningKeyCache keys;
  options_.signing_keys = &keys;
  ASSERT_TRUE(Verify(Signed()).ok());
  ASSERT_TRUE(Verify(Signed()).ok());
  EXPECT_EQ(keys.size(), 1u);
  EXPECT_EQ(keys.Get(kSecret, "20231126", "us-west-2", "sagemaker"),
            internal::SigningKey(kSecret, "20231126", "us-west-2", "sagemaker"));

  // The same key id, its secret rotated: the old signature no longer verifies.
  InMemorySecretLookup rotated(InMemorySecretLookup::SecretMap{{kKey, "a-new-secret"}});
  ExpectAuthError(VerifyRequest(Signed(), rotated, options_, At(kNow)), "InvalidSignatureException",
                  kMismatch);
  // Another day's scope is another key.
  SignableRequest next_day = Unsigned();
  ASSERT_TRUE(
      SignRequest(next_day, {kKey, kSecret, ""}, "us-west-2", "sagemaker", At(kNow + 86400)).ok());
  ASSERT_TRUE(Verify(next_day, kNow + 86400).ok());
  EXPECT_EQ(keys.size(), 3u);  // the first day's, the rotated secret's, the next day's
}

TEST_F(SigV4Test, AnyRegionWhenOptionsLeaveItOpen) {
  options_.region = "";
  StatusOr<VerifiedCaller> caller = Verify(Signed({kKey, kSecret, ""}, "sagemaker", "eu-west-1"));
  ASSERT_TRUE(caller.ok()) << caller.status().ToString();
  EXPECT_EQ(caller->region, "eu-west-1");
}

TEST_F(SigV4Test, SessionTokenIsSignedAndReported) {
  SignableRequest request = Signed({kKey, kSecret, "token/with+odd=chars"});
  EXPECT_EQ(HeaderValue(request, "X-Amz-Security-Token"), "token/with+odd=chars");
  StatusOr<VerifiedCaller> caller = Verify(request);
  ASSERT_TRUE(caller.ok()) << caller.status().ToString();
  EXPECT_EQ(caller->session_token, "token/with+odd=chars");

  SetHeader(request, "X-Amz-Security-Token", "another-token");
  ExpectAuthError(Verify(request), "InvalidSignatureException", kMismatch);
}

TEST_F(SigV4Test, ResigningReplacesThePreviousSignature) {
  SignableRequest request = Signed({kKey, kSecret, "old-token"});
  ASSERT_TRUE(
      SignRequest(request, {kKey, kSecret, ""}, "us-west-2", "sagemaker", At(kNow + 60)).ok());
  int authorizations = 0, dates = 0, tokens = 0;
  for (const auto& [name, value] : request.headers) {
    authorizations += name == "Authorization";
    dates += name == "X-Amz-Date";
    tokens += name == "X-Amz-Security-Token";
  }
  EXPECT_EQ(authorizations, 1);
  EXPECT_EQ(dates, 1);
  EXPECT_EQ(tokens, 0);
  EXPECT_TRUE(Verify(request, kNow + 60).ok());
}

TEST_F(SigV4Test, UnsignedHeadersMayChange) {
  SignableRequest request = Signed();
  SetHeader(request, "User-Agent", "rewritten by a proxy");
  request.headers.emplace_back("X-Forwarded-For", "10.0.0.1");
  request.headers.emplace_back("Content-Length", "28");
  EXPECT_TRUE(Verify(request).ok());
}

TEST_F(SigV4Test, PathAndQueryRoundTrip) {
  SignableRequest request = Unsigned();
  request.method = "GET";
  request.target = "/clusters/my%3Acluster/./nodes/../nodes?b=%2F&a=x%20y&a=first&flag&c=a+b";
  request.body = "";
  ASSERT_TRUE(SignRequest(request, {kKey, kSecret, ""}, "us-west-2", "sagemaker", At(kNow)).ok());
  EXPECT_TRUE(Verify(request).ok());
  // Query order on the wire does not matter...
  SignableRequest reordered = request;
  reordered.target = "/clusters/my%3Acluster/nodes?flag=&a=first&c=a%2Bb&a=x%20y&b=%2f";
  EXPECT_TRUE(Verify(reordered).ok());
  // ...but the values do, and '+' is not a space.
  SignableRequest changed = request;
  changed.target = "/clusters/my%3Acluster/nodes?b=%2F&a=x%20y&a=first&flag&c=a%20b";
  ExpectAuthError(Verify(changed), "InvalidSignatureException", kMismatch);
}

TEST_F(SigV4Test, S3PathsAreEncodedOnceAndNotNormalized) {
  // An object key with a space, a plus and a dot segment, encoded once on the wire.
  SignableRequest request;
  request.method = "GET";
  request.target = "/bucket/a/../with%20space%2Bplus.sh";
  request.headers = {{"Host", "127.0.0.1:8080"},
                     {"x-amz-content-sha256", HexEncode(Sha256(""))}};
  ASSERT_TRUE(SignRequest(request, {kKey, kSecret, ""}, "us-east-1", "s3", At(kNow)).ok());
  std::string amz_date;
  for (const auto& [name, value] : request.headers) {
    if (name == "X-Amz-Date") amz_date = value;
  }
  ASSERT_FALSE(amz_date.empty());
  // What S3 computes: the path as sent (encoded once), dot segments kept.
  const std::string canonical = internal::CanonicalRequest(
      "GET", "/bucket/a/../with%20space%2Bplus.sh", "", request.headers,
      {"host", "x-amz-content-sha256", "x-amz-date"}, HexEncode(Sha256("")));
  const std::string scope = internal::CredentialScope(amz_date.substr(0, 8), "us-east-1", "s3");
  const std::string want = internal::Signature(kSecret, amz_date.substr(0, 8), "us-east-1", "s3",
                                               internal::StringToSign(amz_date, scope, canonical));
  std::string authorization;
  for (const auto& [name, value] : request.headers) {
    if (name == "Authorization") authorization = value;
  }
  EXPECT_THAT(authorization, ::testing::EndsWith("Signature=" + want));
}

TEST_F(SigV4Test, TamperedRequestsAreRefused) {
  struct Tamper {
    const char* name;
    void (*apply)(SignableRequest&);
  };
  const Tamper tampers[] = {
      {"body", [](SignableRequest& r) { r.body = R"({"ClusterName":"other"})"; }},
      {"body appended", [](SignableRequest& r) { r.body += " "; }},
      {"signed header",
       [](SignableRequest& r) { SetHeader(r, "X-Amz-Target", "SageMaker.DeleteCluster"); }},
      {"host", [](SignableRequest& r) { SetHeader(r, "Host", "evil.example.com"); }},
      {"repeated signed header",
       [](SignableRequest& r) {
         r.headers.emplace_back("x-amz-target", "SageMaker.DeleteCluster");
       }},
      {"method", [](SignableRequest& r) { r.method = "PUT"; }},
      {"path", [](SignableRequest& r) { r.target = "/other"; }},
      {"query", [](SignableRequest& r) { r.target = "/?x=1"; }},
      {"date", [](SignableRequest& r) { SetHeader(r, "X-Amz-Date", "20231126T002501Z"); }},
      {"signature",
       [](SignableRequest& r) {
         std::string auth = HeaderValue(r, "Authorization");
         auth.back() = auth.back() == '0' ? '1' : '0';
         SetHeader(r, "Authorization", auth);
       }},
      {"signature uppercased",
       [](SignableRequest& r) {
         std::string auth = HeaderValue(r, "Authorization");
         const size_t at = auth.find("Signature=") + 10;
         for (size_t i = at; i < auth.size(); ++i) auth[i] = static_cast<char>(toupper(auth[i]));
         SetHeader(r, "Authorization", auth);
       }},
  };
  for (const Tamper& t : tampers) {
    SCOPED_TRACE(t.name);
    SignableRequest request = Signed();
    t.apply(request);
    ExpectAuthError(Verify(request), "InvalidSignatureException", kMismatch);
  }
}

TEST_F(SigV4Test, WrongSecretIsAMismatch) {
  InMemorySecretLookup wrong(InMemorySecretLookup::SecretMap{{kKey, "not-the-secret"}});
  ExpectAuthError(VerifyRequest(Signed(), wrong, options_, At(kNow)), "InvalidSignatureException",
                  kMismatch);
}

TEST_F(SigV4Test, UnknownKeyIsUnrecognized) {
  ExpectAuthError(Verify(Signed({"AKIAUNKNOWN", kSecret, ""})), "UnrecognizedClientException",
                  "The security token included in the request is invalid.");
}

TEST_F(SigV4Test, LookupFailuresOtherThanNotFoundPassThrough) {
  class Down final : public SecretLookup {
   public:
    StatusOr<std::string> SecretFor(std::string_view) const override {
      return UnavailableError("key store down");
    }
  };
  StatusOr<VerifiedCaller> caller = VerifyRequest(Signed(), Down(), options_, At(kNow));
  ASSERT_FALSE(caller.ok());
  EXPECT_EQ(caller.status().code(), StatusCode::kUnavailable);
  EXPECT_THAT(caller.status().message(), HasSubstr("key store down"));
}

TEST_F(SigV4Test, ClockSkew) {
  const SignableRequest request = Signed();
  EXPECT_TRUE(Verify(request, kNow + 900).ok());
  EXPECT_TRUE(Verify(request, kNow - 900).ok());
  // Signed at 00:25:00; at 00:40:01 the earliest acceptable date is 00:25:01.
  ExpectAuthError(Verify(request, kNow + 901), "InvalidSignatureException",
                  "Signature expired: 20231126T002500Z is now earlier than 20231126T002501Z "
                  "(20231126T004001Z - 15 min.)");
  ExpectAuthError(Verify(request, kNow - 901), "InvalidSignatureException",
                  "Signature not yet current: 20231126T002500Z is still later than "
                  "20231126T002459Z (20231126T000959Z + 15 min.)");
  options_.max_skew = seconds(30);
  ExpectAuthError(Verify(request, kNow + 31), "InvalidSignatureException", "- 30 sec.)");
}

TEST_F(SigV4Test, SkewMessageMatchesAwsWording) {
  // The brief's example: signed 00:00:00, now 00:25:00.
  SignableRequest request = Unsigned();
  ASSERT_TRUE(
      SignRequest(request, {kKey, kSecret, ""}, "us-west-2", "sagemaker", At(1700956800)).ok());
  ExpectAuthError(Verify(request, 1700958300), "InvalidSignatureException",
                  "Signature expired: 20231126T000000Z is now earlier than 20231126T001000Z "
                  "(20231126T002500Z - 15 min.)");
}

TEST_F(SigV4Test, ScopeMustNameThisServiceAndRegion) {
  ExpectAuthError(Verify(Signed({kKey, kSecret, ""}, "s3")), "InvalidSignatureException",
                  "Credential should be scoped to correct service: 'sagemaker'.");
  ExpectAuthError(Verify(Signed({kKey, kSecret, ""}, "sagemaker", "us-east-1")),
                  "InvalidSignatureException", "Credential should be scoped to a valid region.");
}

// Rewrites the Authorization header of a signed request; verification must stop
// before the signature, so the signature itself need not be right.
SignableRequest WithAuthorization(SignableRequest request, std::string authorization) {
  SetHeader(request, "Authorization", std::move(authorization));
  return request;
}

TEST_F(SigV4Test, ScopeChecksOnHandWrittenCredentials) {
  const std::string tail = ", SignedHeaders=host;x-amz-date, Signature=00";
  ExpectAuthError(
      Verify(WithAuthorization(Signed(), "AWS4-HMAC-SHA256 Credential=" + std::string(kKey) +
                                             "/20231125/us-west-2/sagemaker/aws4_request" + tail)),
      "InvalidSignatureException",
      "Date in Credential scope does not match YYYYMMDD from ISO-8601 version of date from HTTP: "
      "'20231125' != '20231126', from '20231126T002500Z'.");
  ExpectAuthError(
      Verify(WithAuthorization(Signed(), "AWS4-HMAC-SHA256 Credential=" + std::string(kKey) +
                                             "/20231126/us-west-2/sagemaker/aws5_request" + tail)),
      "InvalidSignatureException",
      "Credential should be scoped with a valid terminator: 'aws4_request', not 'aws5_request'.");
  ExpectAuthError(
      Verify(WithAuthorization(Signed(), "AWS4-HMAC-SHA256 Credential=" + std::string(kKey) +
                                             "/20231126//sagemaker/aws4_request" + tail)),
      "InvalidSignatureException", "Credential should be scoped to a valid region.");
}

TEST_F(SigV4Test, AuthorizationParsingIsFlexibleAboutOrderAndSpacing) {
  const SignableRequest request = Signed();
  const std::string auth = HeaderValue(request, "Authorization");
  const std::string credential =
      auth.substr(auth.find("Credential="), auth.find(", ") - auth.find("Credential="));
  const std::string signed_headers = "SignedHeaders=content-type;host;x-amz-date;x-amz-target";
  const std::string signature = auth.substr(auth.find("Signature="));
  for (const std::string& variant :
       {"AWS4-HMAC-SHA256 " + credential + "," + signed_headers + "," + signature,
        "AWS4-HMAC-SHA256 " + signature + ", " + credential + ", " + signed_headers,
        "AWS4-HMAC-SHA256 " + signed_headers + " ,  " + signature + "," + credential,
        "  AWS4-HMAC-SHA256   " + credential + ",\t" + signed_headers + ", " + signature + " "}) {
    SCOPED_TRACE(variant);
    StatusOr<VerifiedCaller> caller = Verify(WithAuthorization(request, variant));
    EXPECT_TRUE(caller.ok()) << caller.status().ToString();
  }
}

TEST_F(SigV4Test, MalformedAuthorizationIsIncomplete) {
  const std::string key(kKey);
  const std::string cred = "Credential=" + key + "/20231126/us-west-2/sagemaker/aws4_request";
  const std::string sh = "SignedHeaders=host;x-amz-date";
  const std::string sig = "Signature=" + std::string(64, 'a');
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"AWS4-HMAC-SHA256", "requires 'Credential' parameter"},
      {"AWS4-HMAC-SHA256 ", "requires 'Signature' parameter"},
      {"AWS4-HMAC-SHA256 " + cred, "requires 'SignedHeaders' parameter"},
      {"AWS4-HMAC-SHA256 " + cred + ", " + sh, "requires 'Signature' parameter"},
      {"AWS4-HMAC-SHA512 " + cred + ", " + sh + ", " + sig, "algorithm"},
      {"AWS4-HMAC-SHA256" + cred + ", " + sh + ", " + sig, "algorithm"},
      {"Bearer abc.def.ghi", "algorithm"},
      {"AWS " + key + ":c2lnbmF0dXJl", "algorithm"},
      {"aws4-hmac-sha256 " + cred + ", " + sh + ", " + sig, "algorithm"},
      {"AWS4-HMAC-SHA256 " + cred + ", " + sh + ", " + sig + ",", "key=value"},
      {"AWS4-HMAC-SHA256 " + cred + ",, " + sh + ", " + sig, "key=value"},
      {"AWS4-HMAC-SHA256 ,,,,", "key=value"},
      {"AWS4-HMAC-SHA256 =", "must be Credential, SignedHeaders and Signature"},
      {"AWS4-HMAC-SHA256 Credential", "key=value"},
      {"AWS4-HMAC-SHA256 " + cred + " " + sh + " " + sig, "requires 'Signature' parameter"},
      {"AWS4-HMAC-SHA256 " + cred + ", " + cred + ", " + sh + ", " + sig, "repeats"},
      {"AWS4-HMAC-SHA256 " + cred + ", " + sh + ", " + sig + ", Foo=bar",
       "must be Credential, SignedHeaders and Signature"},
      {"AWS4-HMAC-SHA256 credential=x, " + sh + ", " + sig,
       "must be Credential, SignedHeaders and Signature"},
      {"AWS4-HMAC-SHA256 Credential=" + key + "/20231126/us-west-2/sagemaker, " + sh + ", " + sig,
       "exactly 5"},
      {"AWS4-HMAC-SHA256 Credential=" + key + "/20231126/us-west-2/sagemaker/aws4_request/x, " +
           sh + ", " + sig,
       "exactly 5"},
      {"AWS4-HMAC-SHA256 Credential=/20231126/us-west-2/sagemaker/aws4_request, " + sh + ", " + sig,
       "exactly 5"},
      {"AWS4-HMAC-SHA256 Credential=, " + sh + ", " + sig, "exactly 5"},
      {"AWS4-HMAC-SHA256 Credential=" + std::string(600, 'A') + "/d/r/s/aws4_request, " + sh +
           ", " + sig,
       "too long"},
      {"AWS4-HMAC-SHA256 Credential=AK\x01ID/20231126/us-west-2/sagemaker/aws4_request, " + sh +
           ", " + sig,
       "invalid characters"},
      {"AWS4-HMAC-SHA256 " + cred + ", SignedHeaders=, " + sig, "';'-separated"},
      {"AWS4-HMAC-SHA256 " + cred + ", SignedHeaders=host;;x-amz-date, " + sig, "';'-separated"},
      {"AWS4-HMAC-SHA256 " + cred + ", SignedHeaders=x-amz-date, " + sig,
       "'Host' or ':authority' must be a 'SignedHeader'"},
      {"AWS4-HMAC-SHA256 " + cred + ", SignedHeaders=hostx;x-amz-date, " + sig,
       "'Host' or ':authority' must be a 'SignedHeader'"},
      {std::string("AWS4-HMAC-SHA256 \0\0\0", 20), "key=value"},
      {"AWS4-HMAC-SHA256 " + std::string(10000, ','), "key=value"},
  };
  for (const auto& [authorization, message] : cases) {
    SCOPED_TRACE(authorization);
    ExpectAuthError(Verify(WithAuthorization(Signed(), authorization)),
                    "IncompleteSignatureException", message);
  }
}

TEST_F(SigV4Test, MissingAuthentication) {
  ExpectAuthError(Verify(Unsigned()), "MissingAuthenticationTokenException",
                  "Missing Authentication Token");
  ExpectAuthError(Verify(WithAuthorization(Unsigned(), "   ")),
                  "MissingAuthenticationTokenException", "Missing Authentication Token");
}

TEST_F(SigV4Test, HeaderProblemsAreIncomplete) {
  SignableRequest no_date = Signed();
  std::erase_if(no_date.headers, [](const auto& h) { return h.first == "X-Amz-Date"; });
  ExpectAuthError(Verify(no_date), "IncompleteSignatureException",
                  "Authorization header requires existence of either a 'X-Amz-Date' or a 'Date' "
                  "header.");

  SignableRequest bad_date = Signed();
  SetHeader(bad_date, "X-Amz-Date", "Sun, 26 Nov 2023 00:25:00 GMT");
  ExpectAuthError(Verify(bad_date), "IncompleteSignatureException", "ISO-8601");

  SignableRequest two_dates = Signed();
  two_dates.headers.emplace_back("x-amz-date", "20231126T002500Z");
  ExpectAuthError(Verify(two_dates), "IncompleteSignatureException", "X-Amz-Date header");

  SignableRequest two_auths = Signed();
  two_auths.headers.emplace_back("authorization", HeaderValue(two_auths, "Authorization"));
  ExpectAuthError(Verify(two_auths), "IncompleteSignatureException", "Authorization header");

  SignableRequest unsigned_token = Signed();
  unsigned_token.headers.emplace_back("X-Amz-Security-Token", "added later");
  ExpectAuthError(Verify(unsigned_token), "IncompleteSignatureException",
                  "'X-Amz-Security-Token' must be a 'SignedHeader'");

  SignableRequest both = Signed();
  both.target = "/?X-Amz-Algorithm=AWS4-HMAC-SHA256";
  ExpectAuthError(Verify(both), "IncompleteSignatureException", "Only one auth mechanism");
}

TEST_F(SigV4Test, ContentSha256Header) {
  SignableRequest hashed = Unsigned();
  hashed.headers.emplace_back("X-Amz-Content-Sha256", HexEncode(Sha256(hashed.body)));
  ASSERT_TRUE(SignRequest(hashed, {kKey, kSecret, ""}, "us-west-2", "sagemaker", At(kNow)).ok());
  EXPECT_TRUE(Verify(hashed).ok());
  SignableRequest hashed_tampered = hashed;
  hashed_tampered.body = "{}";
  ExpectAuthError(Verify(hashed_tampered), "InvalidSignatureException",
                  "The provided 'x-amz-content-sha256' header does not match what was computed.");

  SignableRequest unsigned_payload = Unsigned();
  unsigned_payload.headers.emplace_back("X-Amz-Content-Sha256", "UNSIGNED-PAYLOAD");
  ASSERT_TRUE(
      SignRequest(unsigned_payload, {kKey, kSecret, ""}, "us-west-2", "sagemaker", At(kNow)).ok());
  ExpectAuthError(Verify(unsigned_payload), "InvalidSignatureException", "UNSIGNED-PAYLOAD");
  options_.allow_unsigned_payload = true;
  EXPECT_TRUE(Verify(unsigned_payload).ok());
  unsigned_payload.body = "anything at all";  // by design, outside the signature
  EXPECT_TRUE(Verify(unsigned_payload).ok());

  SignableRequest streaming = Unsigned();
  streaming.headers.emplace_back("X-Amz-Content-Sha256", "STREAMING-AWS4-HMAC-SHA256-PAYLOAD");
  ASSERT_TRUE(SignRequest(streaming, {kKey, kSecret, ""}, "us-west-2", "sagemaker", At(kNow)).ok());
  ExpectAuthError(Verify(streaming), "InvalidSignatureException", "x-amz-content-sha256 must be");
}

TEST_F(SigV4Test, SignRequestRejectsBadInputAndLeavesTheRequestAlone) {
  SignableRequest no_host = Unsigned();
  no_host.headers.erase(no_host.headers.begin());
  const SignableRequest before = no_host;
  EXPECT_EQ(SignRequest(no_host, {kKey, kSecret, ""}, "us-west-2", "sagemaker", At(kNow)).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(no_host.headers, before.headers);

  SignableRequest request = Unsigned();
  for (const Credentials& bad : {Credentials{"", kSecret, ""}, Credentials{"AK/ID", kSecret, ""},
                                 Credentials{kKey, "", ""}}) {
    EXPECT_EQ(SignRequest(request, bad, "us-west-2", "sagemaker", At(kNow)).code(),
              StatusCode::kInvalidArgument);
  }
  EXPECT_EQ(SignRequest(request, {kKey, kSecret, ""}, "", "sagemaker", At(kNow)).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(SignRequest(request, {kKey, kSecret, ""}, "us-west-2", "a/b", At(kNow)).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(request.headers, Unsigned().headers);
}

}  // namespace
}  // namespace hpod::auth
