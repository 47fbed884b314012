#include "hpod/api/errors.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace hpod::api {
namespace {

TEST(ErrorsTest, CanonicalCodesMapToAwsTypes) {
  struct {
    Status status;
    const char* type;
    int http;
  } cases[] = {
      {InvalidArgumentError("m"), "ValidationException", 400},
      {NotFoundError("m"), "ResourceNotFound", 400},
      {AlreadyExistsError("m"), "ResourceInUse", 400},
      {ResourceExhaustedError("m"), "ResourceLimitExceeded", 400},
      {FailedPreconditionError("m"), "ConflictException", 400},
      {AbortedError("m"), "ConflictException", 400},
      {UnauthenticatedError("m"), "UnrecognizedClientException", 403},
      {UnauthenticatedError("m").WithAwsType("InvalidSignatureException"),
       "InvalidSignatureException", 403},
      {UnavailableError("m"), "ServiceUnavailable", 503},
      {InternalError("secret detail"), "InternalFailure", 500},
  };
  for (const auto& c : cases) {
    ApiError e = ToApiError(c.status);
    EXPECT_EQ(e.type, c.type) << c.status.ToString();
    EXPECT_EQ(e.http_status, c.http) << c.status.ToString();
  }
  EXPECT_EQ(ToApiError(InternalError("secret detail")).message.find("secret"), std::string::npos);
}

TEST(ErrorsTest, BodyShape) {
  auto j = nlohmann::json::parse(ErrorBody({400, "ResourceNotFound", "Cluster x not found"}));
  EXPECT_EQ(j["__type"], "ResourceNotFound");
  EXPECT_EQ(j["message"], "Cluster x not found");
}

}  // namespace
}  // namespace hpod::api
