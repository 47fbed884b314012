#include "hpod/base/status.h"

#include <gtest/gtest.h>

namespace hpod {
namespace {

StatusOr<int> Half(int x) {
  if (x % 2 != 0) return InvalidArgumentError("odd");
  return x / 2;
}

StatusOr<int> Quarter(int x) {
  HPOD_ASSIGN_OR_RETURN(int h, Half(x));
  HPOD_ASSIGN_OR_RETURN(int q, Half(h));
  return q;
}

Status Check(int x) {
  HPOD_RETURN_IF_ERROR(Half(x));
  return OkStatus();
}

TEST(StatusTest, OkAndError) {
  EXPECT_TRUE(OkStatus().ok());
  Status s = NotFoundError("no cluster");
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_EQ(s.ToString(), "NOT_FOUND: no cluster");
}

TEST(StatusTest, AnnotateKeepsCodeAndType) {
  Status s = UnauthenticatedError("bad").WithAwsType("InvalidSignatureException");
  Status a = s.Annotate("verifying");
  EXPECT_EQ(a.code(), StatusCode::kUnauthenticated);
  EXPECT_EQ(a.message(), "verifying: bad");
  EXPECT_EQ(a.aws_type(), "InvalidSignatureException");
}

TEST(StatusOrTest, Propagates) {
  EXPECT_EQ(*Quarter(8), 2);
  EXPECT_EQ(Quarter(6).status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(Check(2).ok());
  EXPECT_FALSE(Check(3).ok());
}

TEST(StatusOrTest, OkStatusIsNotAValue) {
  StatusOr<int> s = OkStatus();
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kInternal);
}

}  // namespace
}  // namespace hpod
