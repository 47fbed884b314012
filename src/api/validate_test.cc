#include "hpod/api/validate.h"

#include <gtest/gtest.h>

namespace hpod::api {
namespace {

using nlohmann::json;

const Shape& Input(const char* op) { return *ServiceModel::Get().FindOperation(op)->input; }

json ValidGroup() {
  return json::parse(R"({
    "InstanceGroupName": "controller-machine", "InstanceType": "ml.c5.xlarge", "InstanceCount": 1,
    "LifeCycleConfig": {"SourceS3Uri": "s3://sagemaker-lcs/base-config/", "OnCreate": "on_create.sh"},
    "ExecutionRole": "arn:aws:iam::123456789012:role/AmazonSagemakerExecutionRole",
    "ThreadsPerCore": 1,
    "InstanceStorageConfigs": [{"EbsVolumeConfig": {"VolumeSizeInGB": 500}}]})");
}

TEST(ValidateTest, AcceptsTheContractExample) {
  json req = {
      {"ClusterName", "ml-cluster"},
      {"InstanceGroups", json::array({ValidGroup()})},
      {"VpcConfig",
       {{"SecurityGroupIds", {"sg-0123456789abcdef0"}}, {"Subnets", {"subnet-01a2bc3456d78ef90"}}}},
      {"NodeRecovery", "Automatic"},
      {"Tags", json::array({{{"Key", "team"}, {"Value", "llm é"}}})}};
  Status s = ValidateValue(Input("CreateCluster"), req);
  EXPECT_TRUE(s.ok()) << s.ToString();
}

struct Case {
  const char* name;
  const char* op;
  const char* body;
  const char* type;       // expected aws_type
  const char* substring;  // expected in message
};

class BadInputTest : public ::testing::TestWithParam<Case> {};

TEST_P(BadInputTest, IsRejectedNamingTheField) {
  const Case& c = GetParam();
  Status s = ValidateValue(Input(c.op), json::parse(c.body));
  ASSERT_FALSE(s.ok()) << c.name;
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.aws_type(), c.type) << s.message();
  EXPECT_NE(s.message().find(c.substring), std::string::npos) << s.message();
}

INSTANTIATE_TEST_SUITE_P(
    Table, BadInputTest,
    ::testing::Values(
        Case{"pattern", "DescribeCluster", R"({"ClusterName": "x_y"})", "ValidationException",
             "1 validation error detected: Value 'x_y' at 'clusterName' failed to satisfy "
             "constraint: Member must satisfy regular expression pattern"},
        Case{
            "too long", "CreateCluster",
            R"({"ClusterName": "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"})",
            "ValidationException",
            "at 'clusterName' failed to satisfy constraint: Member must have length less than "
            "or equal to 63"},
        Case{"missing required", "DescribeCluster", R"({})", "ValidationException",
             "Value null at 'clusterName' failed to satisfy constraint: Member must not be null"},
        Case{"enum", "ListClusters", R"({"SortBy": "SIZE"})", "ValidationException",
             "Value 'SIZE' at 'sortBy' failed to satisfy constraint: Member must satisfy enum "
             "value set: [CREATION_TIME, NAME]"},
        Case{"range", "ListClusters", R"({"MaxResults": 0})", "ValidationException",
             "Value '0' at 'maxResults' failed to satisfy constraint: Member must have value "
             "greater than or equal to 1"},
        Case{"nested range", "CreateCluster",
             R"({"ClusterName": "c", "InstanceGroups": [{"InstanceGroupName": "g",
                "InstanceCount": 7000, "ExecutionRole": "arn:aws:iam::123456789012:role/r"}]})",
             "ValidationException", "at 'instanceGroups.1.member.instanceCount'"},
        Case{"nested required", "CreateCluster",
             R"({"ClusterName": "c", "InstanceGroups": [{"InstanceGroupName": "g",
                "InstanceCount": 1}]})",
             "ValidationException", "Value null at 'instanceGroups.1.member.executionRole'"},
        Case{"unknown field", "DescribeCluster", R"({"ClusterName": "c", "Bogus": 1})",
             "ValidationException", "Unknown field 'Bogus'"},
        Case{"unknown nested field", "CreateCluster",
             R"({"ClusterName": "c", "VpcConfig": {"SecurityGroupIds": ["sg-1"],
                 "Subnets": ["s-1"], "Extra": true}})",
             "ValidationException", "Unknown field 'Extra' at 'vpcConfig'"},
        Case{"wrong type string", "ListClusters", R"({"MaxResults": "10"})",
             "SerializationException", "Expected integer at 'maxResults'"},
        Case{"wrong type list", "CreateCluster", R"({"ClusterName": "c", "InstanceGroups": {}})",
             "SerializationException", "Expected list (JSON array) at 'instanceGroups'"},
        Case{"fractional int", "ListClusters", R"({"MaxResults": 1.5})", "SerializationException",
             "maxResults"},
        Case{"timestamp as string", "ListClusters", R"({"CreationTimeAfter": "yesterday"})",
             "SerializationException", "creationTimeAfter"},
        Case{"union with two members", "CreateCluster",
             R"({"ClusterName": "c", "InstanceGroups": [{"InstanceGroupName": "g",
                "InstanceCount": 1, "ExecutionRole": "arn:aws:iam::123456789012:role/r",
                "InstanceStorageConfigs": [{"EbsVolumeConfig": {"VolumeSizeInGB": 1},
                  "FsxOpenZfsConfig": {"DnsName": "fs-0123456789abcdef.example"}}]}]})",
             "ValidationException", "exactly one"},
        Case{"tag unicode class", "CreateCluster",
             R"({"ClusterName": "c", "Tags": [{"Key": "bad|key", "Value": "v"}]})",
             "ValidationException", "at 'tags.1.member.key'"},
        Case{"bad uri scheme", "CreateCluster",
             R"({"ClusterName": "c", "InstanceGroups": [{"InstanceGroupName": "g",
                "InstanceCount": 1, "ExecutionRole": "arn:aws:iam::123456789012:role/r",
                "LifeCycleConfig": {"SourceS3Uri": "ftp://x/y", "OnCreate": "a.sh"}}]})",
             "ValidationException", "instanceGroups.1.member.lifeCycleConfig.sourceS3Uri"}),
    [](const auto& info) {
      std::string n = info.param.name;
      for (char& c : n) c = std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
      return n;
    });

TEST(ValidateTest, CollectsSeveralErrors) {
  Status s = ValidateValue(Input("ListClusters"),
                           json::parse(R"({"MaxResults": 1000, "SortOrder": "Up"})"));
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message().rfind("2 validation errors detected: ", 0), 0u) << s.message();
}

TEST(ValidateTest, FileUrisAreAnHpodExtension) {
  json group = ValidGroup();
  group["LifeCycleConfig"]["SourceS3Uri"] = "file:///srv/lcs/base-config/";
  json req = {{"ClusterName", "c"}, {"InstanceGroups", json::array({group})}};
  EXPECT_TRUE(ValidateValue(Input("CreateCluster"), req).ok());
  ValidateOptions strict;
  strict.allow_file_uris = false;
  EXPECT_FALSE(ValidateValue(Input("CreateCluster"), req, strict).ok());
}

TEST(ValidateTest, LengthCountsCodePoints) {
  // 63 two-byte characters are 63 long for AWS even though 126 bytes. (Tag values
  // allow letters of any script.)
  std::string v;
  for (int i = 0; i < 256; ++i) v += "\xc3\xa9";  // é
  json req = {{"ClusterName", "c"}, {"Tags", json::array({{{"Key", "k"}, {"Value", v}}})}};
  EXPECT_TRUE(ValidateValue(Input("CreateCluster"), req).ok());
  req["Tags"][0]["Value"] = v + "e";
  EXPECT_FALSE(ValidateValue(Input("CreateCluster"), req).ok());
}

TEST(ValidateTest, PatternsMatchWholeValue) {
  EXPECT_TRUE(MatchesPattern("[a-z]+", "abc"));
  EXPECT_FALSE(MatchesPattern("[a-z]+", "abc1"));
  EXPECT_FALSE(MatchesPattern("[a-z]+", "abc\n"));
  EXPECT_FALSE(MatchesPattern("[a-z]+", "\xff\xfe"));
  EXPECT_TRUE(MatchesPattern("(?!\\s*$).+", "alarm"));
  EXPECT_FALSE(MatchesPattern("(?!\\s*$).+", "   "));
}

}  // namespace
}  // namespace hpod::api
