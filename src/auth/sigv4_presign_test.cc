// Presigned (query-string) signing and verification.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "hpod/auth/sigv4.h"
#include "hpod/auth/sigv4_test_util.h"

namespace hpod::auth {
namespace {

using namespace ::hpod::auth::test;  // NOLINT: shared test helpers

class PresignTest : public SigV4Test {
 protected:
  SignableRequest Presigned(std::string target = "/console/login?cluster=c1",
                            seconds expires = seconds(300),
                            Credentials credentials = {kKey, kSecret, ""}) {
    SignableRequest request{
        "GET", std::move(target), {{"Host", "api.sagemaker.us-west-2.amazonaws.com"}}, ""};
    StatusOr<std::string> signed_target =
        PresignTarget(request, credentials, "us-west-2", "sagemaker", At(kNow), expires);
    EXPECT_TRUE(signed_target.ok()) << signed_target.status().ToString();
    if (signed_target.ok()) request.target = *signed_target;
    return request;
  }
};

TEST_F(PresignTest, RoundTripWithinItsLifetime) {
  const SignableRequest request = Presigned();
  EXPECT_THAT(request.target,
              ::testing::StartsWith("/console/login?cluster=c1&X-Amz-Algorithm=AWS4-HMAC-SHA256&"
                                    "X-Amz-Credential=AKIAHPODTEST0000001%2F20231126%2Fus-west-2%"
                                    "2Fsagemaker%2Faws4_request&X-Amz-Date=20231126T002500Z&X-Amz-"
                                    "Expires=300&X-Amz-SignedHeaders=host&X-Amz-Signature="));
  EXPECT_TRUE(Verify(request).ok());
  EXPECT_TRUE(Verify(request, kNow + 300).ok());
  EXPECT_TRUE(Verify(request, kNow - 900).ok());
  // Presigned requests carry no body worth protecting.
  SignableRequest with_body = request;
  with_body.body = "ignored";
  EXPECT_TRUE(Verify(with_body).ok());
}

TEST_F(PresignTest, TargetsWithoutQueryOrEndingInQuestionMark) {
  for (const char* target : {"/", "/a%20b/c", "/x?", "/x?a=1&"}) {
    SCOPED_TRACE(target);
    const SignableRequest request = Presigned(target);
    EXPECT_EQ(request.target.find("?&"), std::string::npos);
    EXPECT_EQ(request.target.find("&&"), std::string::npos);
    EXPECT_TRUE(Verify(request).ok());
  }
}

TEST_F(PresignTest, ExpiryAndFutureDates) {
  const SignableRequest request = Presigned();
  ExpectAuthError(Verify(request, kNow + 301), "InvalidSignatureException",
                  "Signature expired: 20231126T003000Z (X-Amz-Date + X-Amz-Expires) is now "
                  "earlier than 20231126T003001Z");
  ExpectAuthError(Verify(request, kNow - 901), "InvalidSignatureException",
                  "Signature not yet current");
  EXPECT_TRUE(Verify(Presigned("/", seconds(604800)), kNow + 604800).ok());
}

TEST_F(PresignTest, SessionToken) {
  const SignableRequest request = Presigned("/", seconds(60), {kKey, kSecret, "tok/en+=="});
  EXPECT_THAT(request.target, HasSubstr("&X-Amz-Security-Token=tok%2Fen%2B%3D%3D&"));
  StatusOr<VerifiedCaller> caller = Verify(request);
  ASSERT_TRUE(caller.ok()) << caller.status().ToString();
  EXPECT_EQ(caller->session_token, "tok/en+==");
}

void Replace(std::string& s, std::string_view from, std::string_view to) {
  const size_t at = s.find(from);
  ASSERT_NE(at, std::string::npos) << from;
  s.replace(at, from.size(), to);
}

TEST_F(PresignTest, TamperingIsAMismatch) {
  const std::vector<std::pair<std::string, std::string>> edits = {
      {"cluster=c1", "cluster=c2"},
      {"/console/login", "/console/logout"},
      {"X-Amz-Expires=300", "X-Amz-Expires=600"},
      {"X-Amz-Date=20231126T002500Z", "X-Amz-Date=20231126T002600Z"},
      {"X-Amz-SignedHeaders=host", "X-Amz-SignedHeaders=host%3Bx-amz-date"},
      {"&X-Amz-Signature=", "&extra=1&X-Amz-Signature="},
  };
  for (const auto& [from, to] : edits) {
    SCOPED_TRACE(to);
    SignableRequest request = Presigned();
    Replace(request.target, from, to);
    ExpectAuthError(Verify(request), "InvalidSignatureException", kMismatch);
  }
  SignableRequest other_host = Presigned();
  SetHeader(other_host, "Host", "elsewhere.example.com");
  ExpectAuthError(Verify(other_host), "InvalidSignatureException", kMismatch);
}

TEST_F(PresignTest, MalformedParametersAreIncomplete) {
  const std::vector<std::tuple<std::string, std::string, std::string>> edits = {
      {"X-Amz-Expires=300", "X-Amz-Expires=0", "at least 1 second"},
      {"X-Amz-Expires=300", "X-Amz-Expires=604801", "less than a week"},
      {"X-Amz-Expires=300", "X-Amz-Expires=99999999999999999999", "whole number"},
      {"X-Amz-Expires=300", "X-Amz-Expires=-1", "whole number"},
      {"X-Amz-Expires=300", "X-Amz-Expires=", "whole number"},
      {"X-Amz-Expires=300", "X-Amz-Expires=3e2", "whole number"},
      {"X-Amz-Expires=300&", "", "must include 'X-Amz-Expires'"},
      {"X-Amz-Algorithm=AWS4-HMAC-SHA256&", "", "must include 'X-Amz-Algorithm'"},
      {"X-Amz-Algorithm=AWS4-HMAC-SHA256", "X-Amz-Algorithm=AWS4-HMAC-SHA1", "X-Amz-Algorithm"},
      {"X-Amz-Date=20231126T002500Z", "X-Amz-Date=2023-11-26", "ISO-8601"},
      {"X-Amz-SignedHeaders=host", "X-Amz-SignedHeaders=x-amz-date", "'Host'"},
      {"X-Amz-SignedHeaders=host", "X-Amz-SignedHeaders=host&X-Amz-SignedHeaders=host",
       "must appear once"},
      {"X-Amz-Credential=", "X-Amz-Credential=junk&x=", "exactly 5"},
  };
  for (const auto& [from, to, message] : edits) {
    SCOPED_TRACE(to);
    SignableRequest request = Presigned();
    Replace(request.target, from, to);
    ExpectAuthError(Verify(request), "IncompleteSignatureException", message);
  }
  SignableRequest only_signature{"GET", "/?X-Amz-Signature=abc", {{"Host", "h"}}, ""};
  ExpectAuthError(Verify(only_signature), "IncompleteSignatureException",
                  "must include 'X-Amz-Algorithm'");
}

TEST_F(PresignTest, ScopeAndKeyChecksApply) {
  SignableRequest request{"GET", "/", {{"Host", "api.sagemaker.us-west-2.amazonaws.com"}}, ""};
  StatusOr<std::string> s3 =
      PresignTarget(request, {kKey, kSecret, ""}, "us-west-2", "s3", At(kNow), seconds(60));
  ASSERT_TRUE(s3.ok());
  request.target = *s3;
  ExpectAuthError(Verify(request), "InvalidSignatureException",
                  "Credential should be scoped to correct service: 'sagemaker'.");

  SignableRequest unknown_request{"GET", "/", request.headers, ""};
  StatusOr<std::string> unknown = PresignTarget(unknown_request, {"AKIAUNKNOWN", kSecret, ""},
                                                "us-west-2", "sagemaker", At(kNow), seconds(60));
  ASSERT_TRUE(unknown.ok()) << unknown.status().ToString();
  unknown_request.target = *unknown;
  ExpectAuthError(Verify(unknown_request), "UnrecognizedClientException",
                  "The security token included in the request is invalid.");
}

TEST_F(PresignTest, PresignTargetRejectsBadInput) {
  const SignableRequest request{"GET", "/", {{"Host", "h"}}, ""};
  const Credentials credentials{kKey, kSecret, ""};
  for (seconds expires : {seconds(0), seconds(-5), seconds(604801)}) {
    EXPECT_EQ(PresignTarget(request, credentials, "us-west-2", "sagemaker", At(kNow), expires)
                  .status()
                  .code(),
              StatusCode::kInvalidArgument);
  }
  const SignableRequest no_host{"GET", "/", {}, ""};
  EXPECT_EQ(PresignTarget(no_host, credentials, "us-west-2", "sagemaker", At(kNow), seconds(60))
                .status()
                .code(),
            StatusCode::kInvalidArgument);
  const SignableRequest already{"GET", "/?X-Amz-Date=1", {{"Host", "h"}}, ""};
  EXPECT_EQ(PresignTarget(already, credentials, "us-west-2", "sagemaker", At(kNow), seconds(60))
                .status()
                .code(),
            StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace hpod::auth
