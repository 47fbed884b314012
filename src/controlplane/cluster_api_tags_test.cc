// AddTags, ListTags and DeleteTags on cluster ARNs (cluster_api_tags.cc).

#include <gtest/gtest.h>

#include "hpod/controlplane/test_harness.h"

namespace hpod::controlplane {
namespace {

using nlohmann::json;
using testing::Harness;

json Tag(const std::string& key, const std::string& value) {
  return {{"Key", key}, {"Value", value}};
}

class ClusterTagsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    json req = {{"ClusterName", "demo"},
                {"InstanceGroups", {Harness::Group("controller-machine", 1)}},
                {"Tags", json::array({Tag("team", "llm")})}};
    auto r = h_.Call("CreateCluster", req);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    arn_ = (*r)["ClusterArn"];
  }
  json Tags() {
    auto r = h_.Call("ListTags", {{"ResourceArn", arn_}});
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_FALSE(r.ok() && r->contains("NextToken"));
    return r.ok() ? json::parse(r->dump())["Tags"] : json();
  }

  Harness h_;
  std::string arn_;
};

TEST_F(ClusterTagsTest, CreateClustersTagsAreListedAndAddTagsMergesByKey) {
  EXPECT_EQ(Tags(), json::array({Tag("team", "llm")}));
  auto added = h_.Call("AddTags", {{"ResourceArn", arn_},
                                   {"Tags", json::array({Tag("cost", "r&d"), Tag("team", "pt")})}});
  ASSERT_TRUE(added.ok()) << added.status().ToString();
  EXPECT_EQ(json::parse(added->dump()),
            json({{"Tags", json::array({Tag("cost", "r&d"), Tag("team", "pt")})}}));
  // The first key keeps its place and takes the new value.
  EXPECT_EQ(Tags(), json::array({Tag("team", "pt"), Tag("cost", "r&d")}));
  auto deleted = h_.Call("DeleteTags", {{"ResourceArn", arn_}, {"TagKeys", {"team", "absent"}}});
  ASSERT_TRUE(deleted.ok()) << deleted.status().ToString();
  EXPECT_TRUE(deleted->empty());
  EXPECT_EQ(Tags(), json::array({Tag("cost", "r&d")}));
  // Tags change nothing a reconciler acts on: the cluster converges as before.
  h_.Converge();
  EXPECT_EQ(h_.Describe("demo")["ClusterStatus"], "InService");
  EXPECT_EQ(Tags(), json::array({Tag("cost", "r&d")}));
}

TEST_F(ClusterTagsTest, RefusalsSayWhatToFixAndChangeNothing) {
  auto reserved = h_.Call("AddTags", {{"ResourceArn", arn_}, {"Tags", {Tag("aws:owner", "x")}}});
  EXPECT_EQ(reserved.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(reserved.status().message().find("reserved"), std::string::npos);
  auto twice =
      h_.Call("AddTags", {{"ResourceArn", arn_}, {"Tags", {Tag("a", "1"), Tag("a", "2")}}});
  EXPECT_EQ(twice.status().code(), StatusCode::kInvalidArgument);
  json many = json::array();
  for (int i = 0; i < 50; ++i) many.push_back(Tag("k" + std::to_string(i), "v"));
  auto full = h_.Call("AddTags", {{"ResourceArn", arn_}, {"Tags", many}});
  EXPECT_EQ(full.status().code(), StatusCode::kInvalidArgument) << "51 with team";
  EXPECT_NE(full.status().message().find("would have 51 tags"), std::string::npos)
      << full.status().message();
  EXPECT_EQ(Tags(), json::array({Tag("team", "llm")}));

  const std::string other = "arn:aws:sagemaker:us-west-2:123456789012:notebook-instance/nb";
  auto not_cluster = h_.Call("ListTags", {{"ResourceArn", other}});
  EXPECT_EQ(not_cluster.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(not_cluster.status().message().find("is not a cluster ARN"), std::string::npos);
  const std::string gone = arn_.substr(0, arn_.rfind('/') + 1) + "000000000000";
  EXPECT_EQ(h_.Call("AddTags", {{"ResourceArn", gone}, {"Tags", {Tag("a", "1")}}}).status().code(),
            StatusCode::kNotFound);
  EXPECT_EQ(h_.Call("ListTags", {{"ResourceArn", arn_}, {"NextToken", "forged"}}).status().code(),
            StatusCode::kInvalidArgument);
  // CreateCluster's Tags follow the same rules.
  json req = {{"ClusterName", "reserved"},
              {"InstanceGroups", {Harness::Group("controller-machine", 1)}},
              {"Tags", {Tag("aws:x", "1")}}};
  EXPECT_EQ(h_.Call("CreateCluster", req).status().code(), StatusCode::kInvalidArgument);
}

TEST_F(ClusterTagsTest, ListTagsIsReadOnlyAndTheOthersAreNot) {
  EXPECT_TRUE(ClusterApi::IsReadOnly("ListTags"));
  EXPECT_FALSE(ClusterApi::IsReadOnly("AddTags"));
  EXPECT_FALSE(ClusterApi::IsReadOnly("DeleteTags"));
}

}  // namespace
}  // namespace hpod::controlplane
