#include "hpod/api/codec.h"

#include <gtest/gtest.h>

namespace hpod::api {
namespace {

constexpr char kJson[] = "application/x-amz-json-1.1";

TEST(CodecTest, DecodesAValidRequest) {
  auto r = DecodeRequest(ServiceModel::Get(), "SageMaker.DescribeCluster", kJson,
                         R"({"ClusterName": "demo"})");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->operation->name, "DescribeCluster");
  EXPECT_EQ(r->input["ClusterName"], "demo");
}

TEST(CodecTest, EmptyBodyIsAnEmptyObject) {
  auto r = DecodeRequest(ServiceModel::Get(), "SageMaker.ListClusters", kJson, "");
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->input.is_object());
}

// The cluster operations of botocore's model hpod does not serve are refused
// with their reason (a ValidationException), not as unknown.
TEST(CodecTest, RefusedClusterOperationsSayWhy) {
  const ServiceModel& m = ServiceModel::Get();
  for (const char* op :
       {"AttachClusterNodeVolume", "CreateClusterSchedulerConfig", "ListComputeQuotas"}) {
    auto r = DecodeRequest(m, std::string("SageMaker.") + op, kJson, "{}");
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << op;
    EXPECT_EQ(r.status().aws_type(), "") << op << ": answered as a ValidationException";
    EXPECT_EQ(r.status().message().find(std::string(op) + " is not supported by hpod: "), 0u)
        << r.status().message();
  }
  EXPECT_NE(RefusedClusterOperation("DetachClusterNodeVolume").find("EKS"), std::string::npos);
  EXPECT_EQ(RefusedClusterOperation("CreateTrainingJob"), "");
  EXPECT_EQ(RefusedClusterOperation("CreateCluster"), "");
  EXPECT_EQ(RefusedClusterOperation("UpdateClusterSoftware"), "") << "served";
}

TEST(CodecTest, Errors) {
  const ServiceModel& m = ServiceModel::Get();
  EXPECT_EQ(DecodeRequest(m, "", kJson, "{}").status().aws_type(), "UnknownOperationException");
  EXPECT_EQ(DecodeRequest(m, "Other.ListClusters", kJson, "{}").status().aws_type(),
            "UnknownOperationException");
  EXPECT_EQ(DecodeRequest(m, "SageMaker.CreateTrainingJob", kJson, "{}").status().aws_type(),
            "UnknownOperationException");
  EXPECT_EQ(DecodeRequest(m, "SageMaker.ListClusters", "text/plain", "{}").status().aws_type(),
            "SerializationException");
  EXPECT_EQ(DecodeRequest(m, "SageMaker.ListClusters", kJson, "{").status().aws_type(),
            "SerializationException");
  EXPECT_EQ(DecodeRequest(m, "SageMaker.ListClusters", kJson, "[]").status().aws_type(),
            "SerializationException");
  EXPECT_EQ(DecodeRequest(m, "SageMaker.ListClusters", kJson, "\xff").status().aws_type(),
            "SerializationException");
  EXPECT_TRUE(
      DecodeRequest(m, "SageMaker.ListClusters", "application/x-amz-json-1.1; charset=utf-8", "{}")
          .ok());
}

TEST(CodecTest, NullMembersAreAbsent) {
  auto r = DecodeRequest(ServiceModel::Get(), "SageMaker.ListClusters", kJson,
                         R"({"MaxResults": null, "SortBy": null, "NameContains": "a"})");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_FALSE(r->input.contains("MaxResults"));
  EXPECT_FALSE(r->input.contains("SortBy"));
  EXPECT_EQ(r->input["NameContains"], "a");
  auto nested = DecodeRequest(
      ServiceModel::Get(), "SageMaker.CreateCluster", kJson,
      R"({"ClusterName": "c", "InstanceGroups": [{"InstanceGroupName": "g", "InstanceCount": 1,
          "ExecutionRole": "arn:aws:iam::123456789012:role/r", "InstanceType": null}]})");
  ASSERT_TRUE(nested.ok());
  EXPECT_FALSE(nested->input["InstanceGroups"][0].contains("InstanceType"));
  // A required member sent as null is still missing.
  EXPECT_FALSE(DecodeRequest(ServiceModel::Get(), "SageMaker.DescribeCluster", kJson,
                             R"({"ClusterName": null})")
                   .ok());
}

TEST(CodecTest, DeepNestingIsAnErrorNotACrash) {
  std::string deep(200000, '[');
  deep += std::string(200000, ']');
  auto r = DecodeRequest(ServiceModel::Get(), "SageMaker.ListClusters", kJson,
                         "{\"ClusterName\": " + deep + "}");
  EXPECT_FALSE(r.ok());
}

}  // namespace
}  // namespace hpod::api
