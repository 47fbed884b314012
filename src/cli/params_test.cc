#include "hpod/cli/params.h"

#include <gtest/gtest.h>

namespace hpod::cli {
namespace {

const api::Operation& Op(const char* name) {
  const api::Operation* op = api::ServiceModel::Get().FindOperation(name);
  EXPECT_NE(op, nullptr) << name;
  return *op;
}

TEST(ValidateParamsTest, AcceptsAValidRequest) {
  Json params = Json::parse(R"({
    "ClusterName": "c",
    "InstanceGroups": [{"InstanceGroupName": "g", "InstanceCount": 1,
                        "ExecutionRole": "arn:aws:iam::123456789012:role/Role",
                        "LifeCycleConfig": {"SourceS3Uri": "s3://b/p", "OnCreate": "x.sh"}}],
    "Tags": [{"Key": "k", "Value": ""}]})");
  EXPECT_TRUE(ValidateParams(*Op("CreateCluster").input, params).ok());
}

TEST(ValidateParamsTest, ReportsEveryProblemLikeBotocore) {
  Json params = Json::parse(R"({
    "InstanceGroups": [{"InstanceGroupName": "g", "InstanceCount": "1",
                        "ExecutionRole": "r", "Bogus": 1}],
    "VpcConfig": {"SecurityGroupIds": []},
    "NodeRecovery": 3})");
  Status s = ValidateParams(*Op("CreateCluster").input, params);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(
      s.message(),
      "Parameter validation failed:\n"
      "Missing required parameter in input: \"ClusterName\"\n"
      "Unknown parameter in InstanceGroups[0]: \"Bogus\", must be one of: InstanceCount, "
      "MinInstanceCount, InstanceGroupName, InstanceType, InstanceRequirements, "
      "LifeCycleConfig, ExecutionRole, ThreadsPerCore, InstanceStorageConfigs, "
      "OnStartDeepHealthChecks, TrainingPlanArn, OverrideVpcConfig, ScheduledUpdateConfig, "
      "ImageId, KubernetesConfig, SlurmConfig, CapacityRequirements, NetworkInterface, "
      "HpodSharedFilesystem, HpodPool\n"
      "Invalid type for parameter InstanceGroups[0].InstanceCount, value: 1, type: <class "
      "'str'>, valid types: <class 'int'>\n"
      "Invalid length for parameter InstanceGroups[0].ExecutionRole, value: 1, valid min "
      "length: 20\n"
      "Missing required parameter in VpcConfig: \"Subnets\"\n"
      "Invalid length for parameter VpcConfig.SecurityGroupIds, value: 0, valid min length: 1\n"
      "Invalid type for parameter NodeRecovery, value: 3, type: <class 'int'>, valid types: "
      "<class 'str'>");
}

TEST(ValidateParamsTest, DoesNotCheckMaxPatternOrEnum) {
  // botocore leaves these to the service. (Messages above are botocore 1.43.11's.)
  Json params = {{"ClusterName", std::string(300, 'x')}, {"SortOrder", "Sideways"}};
  EXPECT_TRUE(ValidateParams(*Op("ListClusterNodes").input, params).ok());
}

TEST(ValidateParamsTest, TimestampsAcceptIsoDatesAndEpochs) {
  const api::Shape& input = *Op("ListClusters").input;
  for (const char* t : {"2023-11-26", "2023-11-26T15:20:11Z", "2023-11-26T15:20:11.5+01:00",
                        "1700000000", "1700000000.25"}) {
    EXPECT_TRUE(ValidateParams(input, {{"CreationTimeAfter", t}}).ok()) << t;
  }
  EXPECT_TRUE(ValidateParams(input, {{"CreationTimeAfter", 1700000000}}).ok());
  Status s = ValidateParams(input, {{"CreationTimeAfter", "yesterday"}});
  EXPECT_EQ(s.message(),
            "Parameter validation failed:\nInvalid type for parameter CreationTimeAfter, value: "
            "yesterday, type: <class 'str'>, valid types: <class 'datetime.datetime'>, "
            "timestamp-string");
}

TEST(ValidateParamsTest, Unions) {
  const api::Shape* storage = api::ServiceModel::Get().FindShape("ClusterInstanceStorageConfig");
  ASSERT_NE(storage, nullptr);
  EXPECT_TRUE(ValidateParams(*storage, {{"EbsVolumeConfig", {{"VolumeSizeInGB", 10}}}}).ok());
  Status two = ValidateParams(
      *storage,
      Json::parse(
          R"({"EbsVolumeConfig": {}, "FsxLustreConfig": {"DnsName": "d", "MountName": "m"}})"));
  EXPECT_NE(two.message().find("Invalid number of parameters set for tagged union structure input"),
            std::string::npos)
      << two.message();
}

TEST(SerializeRequestTest, ModelOrderEpochTimestampsNoNulls) {
  Json params =
      Json::parse(R"({"SortOrder": "Descending", "CreationTimeAfter": "2023-11-26T00:00:00Z",
                                "ClusterName": "c", "NextToken": null,
                                "CreationTimeBefore": "2023-11-26T00:00:00.250Z"})");
  Json body = SerializeRequest(*Op("ListClusterNodes").input, params);
  EXPECT_EQ(
      body.dump(),
      R"({"ClusterName":"c","CreationTimeAfter":1700956800,"CreationTimeBefore":1700956800.25,)"
      R"("SortOrder":"Descending"})");
}

TEST(ParseResponseTest, ModelOrderIsoTimestampsUnknownDropped) {
  Json raw = Json::parse(R"({"Extra": 1, "ClusterSummaries": [{"ClusterStatus": "InService",
      "CreationTime": 1700000000.5, "ClusterName": "c1", "ClusterArn": "arn", "Surprise": true}],
      "NextToken": null})");
  Json parsed = ParseResponse(*Op("ListClusters").output, raw);
  EXPECT_EQ(parsed.dump(),
            R"({"ClusterSummaries":[{"ClusterArn":"arn","ClusterName":"c1",)"
            R"("CreationTime":"2023-11-14T22:13:20.500000+00:00","ClusterStatus":"InService"}]})");
}

TEST(TimestampTest, IsoFormatLikePython) {
  EXPECT_EQ(FormatIsoTimestamp(1701040811.123), "2023-11-26T23:20:11.123000+00:00");
  EXPECT_EQ(FormatIsoTimestamp(1700000001), "2023-11-14T22:13:21+00:00");
  EXPECT_EQ(FormatIsoTimestamp(0), "1970-01-01T00:00:00+00:00");
  EXPECT_EQ(FormatIsoTimestamp(-1.5), "1969-12-31T23:59:58.500000+00:00");
  EXPECT_EQ(FormatIsoTimestamp(1701041300.665), "2023-11-26T23:28:20.665000+00:00");
  EXPECT_EQ(FormatIsoTimestamp(1700000000.9999996), "2023-11-14T22:13:21+00:00");
}

TEST(TimestampTest, Parses) {
  EXPECT_EQ(ParseTimestamp(Json("2023-11-26")), 1700956800.0);
  EXPECT_EQ(ParseTimestamp(Json("2023-11-26 01:00")), 1700960400.0);
  EXPECT_EQ(ParseTimestamp(Json("2023-11-26T01:00:00+01:00")), 1700956800.0);
  EXPECT_EQ(ParseTimestamp(Json("2023-11-26T01:00:00-0130")), 1700965800.0);
  EXPECT_EQ(ParseTimestamp(Json(" 1700000000 ")), 1700000000.0);
  EXPECT_FALSE(ParseTimestamp(Json("2023-13-01")).has_value());
  EXPECT_FALSE(ParseTimestamp(Json("tomorrow")).has_value());
  EXPECT_FALSE(ParseTimestamp(Json(true)).has_value());
}

TEST(SkeletonTest, InputTemplate) {
  Json s = Skeleton(*Op("DescribeClusterNode").input, false);
  EXPECT_EQ(s.dump(), R"({"ClusterName":"","NodeId":"","NodeLogicalId":""})");
  Json create = Skeleton(*Op("CreateCluster").input, false);
  EXPECT_EQ(create["NodeRecovery"], "Automatic");  // first enum value
  EXPECT_EQ(create["InstanceGroups"][0]["InstanceCount"], 0);
  EXPECT_EQ(create["InstanceGroups"][0]["LifeCycleConfig"]["OnCreate"], "");
  Json list = Skeleton(*Op("ListClusters").input, false);
  EXPECT_EQ(list["CreationTimeAfter"], "1970-01-01T00:00:00");
}

TEST(SkeletonTest, OutputTemplateUsesMemberNames) {
  Json s = Skeleton(*Op("BatchDeleteClusterNodes").output, true);
  EXPECT_EQ(s["Successful"][0], "ClusterNodeId");
  EXPECT_EQ(s["Failed"][0]["Message"], "Message");
}

TEST(PyReprTest, PrintsLikePython) {
  EXPECT_EQ(PyStr(Json("x")), "x");
  EXPECT_EQ(PyStr(Json(true)), "True");
  EXPECT_EQ(PyStr(Json(nullptr)), "None");
  EXPECT_EQ(PyStr(Json(1700000000.5)), "1700000000.5");
  EXPECT_EQ(PyStr(Json(2.0)), "2.0");
  EXPECT_EQ(PyRepr(Json::parse(R"({"NextToken": "t", "n": [1, null, "it's"]})")),
            R"({'NextToken': 't', 'n': [1, None, "it's"]})");
}

}  // namespace
}  // namespace hpod::cli
