#pragma once

// Helpers shared by the SigV4 tests: fixed times and keys, header access, an
// error matcher, and a fixture around a signed SageMaker request.
//
// Thread contract: test-only; each test uses its own fixture.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

#include "hpod/auth/in_memory_secret_lookup.h"
#include "hpod/auth/sigv4.h"
#include "hpod/base/status.h"

namespace hpod::auth::test {

using std::chrono::seconds;
using std::chrono::system_clock;
using ::testing::HasSubstr;

inline constexpr char kMismatch[] =
    "The request signature we calculated does not match the signature you provided. Check your "
    "AWS Secret Access Key and signing method. Consult the service documentation for details.";

inline system_clock::time_point At(int64_t epoch_seconds) {
  return system_clock::time_point(seconds(epoch_seconds));
}

// Expects `result` to be an auth failure of AWS type `type` whose message contains
// `message`.
template <typename T>
void ExpectAuthError(const StatusOr<T>& result, std::string_view type, std::string_view message) {
  ASSERT_FALSE(result.ok()) << "expected " << type;
  EXPECT_EQ(result.status().code(), StatusCode::kUnauthenticated) << result.status().ToString();
  EXPECT_EQ(result.status().aws_type(), type) << result.status().ToString();
  EXPECT_THAT(result.status().message(), HasSubstr(std::string(message)));
}

inline std::string HeaderValue(const SignableRequest& request, std::string_view name) {
  for (const auto& [key, value] : request.headers) {
    if (key == name) return value;
  }
  return "";
}

inline void SetHeader(SignableRequest& request, std::string_view name, std::string value) {
  for (auto& [key, v] : request.headers) {
    if (key == name) {
      v = std::move(value);
      return;
    }
  }
  request.headers.emplace_back(std::string(name), std::move(value));
}

// A SageMaker-shaped request signed at kNow with kKey, and a verifier that knows
// kKey (and one other key) for us-west-2.
inline constexpr int64_t kNow = 1700958300;  // 2023-11-26T00:25:00Z
inline constexpr char kKey[] = "AKIAHPODTEST0000001";
inline constexpr char kSecret[] = "hpod/secret+KEY/for/tests0000000000000000";

class SigV4Test : public ::testing::Test {
 protected:
  SigV4Test() : secrets_({{kKey, kSecret}, {"AKIAOTHER", "other-secret"}}) {
    options_.region = "us-west-2";
  }

  static SignableRequest Unsigned() {
    return {"POST",
            "/",
            {{"Host", "api.sagemaker.us-west-2.amazonaws.com"},
             {"Content-Type", "application/x-amz-json-1.1"},
             {"X-Amz-Target", "SageMaker.DescribeCluster"},
             {"User-Agent", "hpod-cli/0.1"}},
            R"({"ClusterName":"my-cluster"})"};
  }

  static SignableRequest Signed(Credentials credentials = {kKey, kSecret, ""},
                                std::string_view service = "sagemaker",
                                std::string_view region = "us-west-2") {
    SignableRequest request = Unsigned();
    Status s = SignRequest(request, credentials, region, service, At(kNow));
    EXPECT_TRUE(s.ok()) << s.ToString();
    return request;
  }

  StatusOr<VerifiedCaller> Verify(const SignableRequest& request, int64_t now = kNow) const {
    return VerifyRequest(request, secrets_, options_, At(now));
  }

  InMemorySecretLookup secrets_;
  VerifyOptions options_;
};

}  // namespace hpod::auth::test
