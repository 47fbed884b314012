// Handler semantics and the state machine, driven with a fake clock and the
// fake provider (no threads, no sleeps).

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "hpod/api/errors.h"
#include "hpod/controlplane/node_logs.h"
#include "hpod/controlplane/test_harness.h"

namespace hpod::controlplane {
namespace {

using nlohmann::json;
using testing::Harness;

json CreateReq(const std::string& name, json groups) {
  return {
      {"ClusterName", name},
      {"InstanceGroups", groups},
      {"VpcConfig",
       {{"SecurityGroupIds", {"sg-0123456789abcdef0"}}, {"Subnets", {"subnet-01a2bc3456d78ef90"}}}},
      {"Tags", json::array({{{"Key", "team"}, {"Value", "llm"}}})}};
}

TEST(ClusterApiTest, CreateDescribeReachesInService) {
  Harness h;
  auto r = h.Call("CreateCluster", CreateReq("demo", {Harness::Group("controller-machine", 1),
                                                      Harness::Group("compute", 3)}));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  std::string arn = (*r)["ClusterArn"];
  EXPECT_TRUE(arn.rfind("arn:aws:sagemaker:us-west-2:123456789012:cluster/", 0) == 0) << arn;
  json d = h.Describe("demo");
  EXPECT_EQ(d["ClusterStatus"], "Creating");
  h.Converge();
  d = h.Describe("demo");
  EXPECT_EQ(d["ClusterStatus"], "InService");
  EXPECT_EQ(d["InstanceGroups"][1]["CurrentCount"], 3);
  EXPECT_EQ(d["InstanceGroups"][1]["TargetCount"], 3);
  EXPECT_EQ(d["InstanceGroups"][1]["Status"], "InService");
  // Stored-but-not-acted-on fields round-trip; defaults are filled in.
  EXPECT_EQ(d["VpcConfig"]["Subnets"][0], "subnet-01a2bc3456d78ef90");
  EXPECT_EQ(d["NodeRecovery"], "Automatic");
  EXPECT_EQ(d["InstanceGroups"][0]["LifeCycleConfig"]["OnCreate"], "on_create.sh");
  // Describe by ARN works too.
  EXPECT_EQ(h.Describe(arn)["ClusterName"], "demo");
  // Member order follows the model.
  auto raw = h.Call("DescribeCluster", {{"ClusterName", "demo"}});
  EXPECT_EQ(raw->begin().key(), "ClusterArn");
}

TEST(ClusterApiTest, NameConflictAndNotFound) {
  Harness h;
  ASSERT_TRUE(h.Call("CreateCluster", CreateReq("demo", {Harness::Group("g", 1)})).ok());
  auto dup = h.Call("CreateCluster", CreateReq("demo", {Harness::Group("g", 1)}));
  EXPECT_EQ(dup.status().code(), StatusCode::kAlreadyExists);
  auto missing = h.Call("DescribeCluster", {{"ClusterName", "nope"}});
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("nope"), std::string::npos);
}

TEST(ClusterApiTest, RefusesWhatItCannotHonour) {
  Harness h;
  json g = Harness::Group("g", 1);
  g["KubernetesConfig"] = json::object();
  auto r = h.Call("CreateCluster", CreateReq("demo", {g}));
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("InstanceGroups[0].KubernetesConfig"), std::string::npos);
  json req = CreateReq("demo", {Harness::Group("g", 1)});
  req["TieredStorageConfig"] = {{"Mode", "Enable"}};
  EXPECT_EQ(h.Call("CreateCluster", req).status().code(), StatusCode::kInvalidArgument);
  auto dup =
      h.Call("CreateCluster", CreateReq("demo", {Harness::Group("g", 1), Harness::Group("g", 2)}));
  EXPECT_EQ(dup.status().code(), StatusCode::kInvalidArgument);
  json no_type = Harness::Group("g", 1);
  no_type.erase("InstanceType");
  EXPECT_EQ(h.Call("CreateCluster", CreateReq("demo", {no_type})).status().code(),
            StatusCode::kInvalidArgument);
  // Nothing was written by the refused calls.
  EXPECT_EQ(h.Call("ListClusters", json::object())->at("ClusterSummaries").size(), 0u);
}

// Nodes with their own /tmp cannot read a host's file:///tmp/... source: refused
// at once (a ValidationException naming the group, the path and what to do),
// rather than each node failing minutes later with "No objects found".
TEST(ClusterApiTest, RefusesALifecycleSourceTheNodesCannotSee) {
  provider::FakeProviderOptions po;
  po.environment.private_dirs = {"/tmp"};
  Harness h(po);
  auto at = [](const std::string& group, const std::string& uri) {
    json g = Harness::Group(group, 1);
    g["LifeCycleConfig"]["SourceS3Uri"] = uri;
    return g;
  };
  auto r = h.Call("CreateCluster", CreateReq("demo", {at("ctl", "file:///var/tmp/lcs/"),
                                                      at("workers", "file:///tmp/lcs/")}));
  ASSERT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(api::ToApiError(r.status()).type, "ValidationException");
  EXPECT_EQ(r.status().message(),
            "InstanceGroups[1].LifeCycleConfig.SourceS3Uri of instance group 'workers' is "
            "file:///tmp/lcs/, which the nodes cannot see: each node has its own /tmp, so the "
            "host's /tmp/lcs/ is not there. Put the lifecycle scripts in a directory the nodes "
            "share with the host (e.g. under /var/tmp or /srv), or use an s3:// source");
  EXPECT_EQ(h.Call("ListClusters", json::object())->at("ClusterSummaries").size(), 0u);

  // Elsewhere it is fine, and UpdateCluster checks the groups it is given too.
  ASSERT_TRUE(h.Call("CreateCluster", CreateReq("demo", {at("ctl", "file:///var/tmp/lcs/"),
                                                         at("workers", "file:///srv/lcs/")}))
                  .ok());
  h.Converge();
  auto up = h.Call("UpdateCluster",
                   {{"ClusterName", "demo"}, {"InstanceGroups", {at("more", "file:///tmp/x/")}}});
  EXPECT_EQ(up.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(up.status().message().find("instance group 'more'"), std::string::npos)
      << up.status().message();
  EXPECT_EQ(h.Describe("demo")["ClusterStatus"], "InService");

  // A provider whose nodes see the host's files (the fake's default) takes any path.
  Harness plain;
  EXPECT_TRUE(
      plain.Call("CreateCluster", CreateReq("demo", {at("workers", "file:///tmp/lcs/")})).ok());
}

// Nodes on other machines (a provider that declares they see none of hpodd's
// files) can fetch no file:// source at all: every one is refused at once, naming
// the sources that work there; s3:// and https:// sources are taken.
TEST(ClusterApiTest, RefusesEveryFileSourceWhenNodesAreOtherMachines) {
  provider::FakeProviderOptions po;
  po.environment = provider::NodeEnvironment{};
  po.environment.agent_url = "https://hpodd.example:8451";
  Harness h(po);
  auto at = [](const std::string& group, const std::string& uri) {
    json g = Harness::Group(group, 1);
    g["LifeCycleConfig"]["SourceS3Uri"] = uri;
    return g;
  };
  for (const char* uri : {"file:///var/tmp/lcs/", "file:///srv/lcs/", "file:///tmp/lcs/"}) {
    auto r = h.Call("CreateCluster", CreateReq("demo", {at("workers", uri)}));
    ASSERT_EQ(r.status().code(), StatusCode::kInvalidArgument) << uri;
    EXPECT_EQ(api::ToApiError(r.status()).type, "ValidationException");
    EXPECT_EQ(r.status().message(),
              "InstanceGroups[0].LifeCycleConfig.SourceS3Uri of instance group 'workers' is " +
                  std::string(uri) +
                  ", a directory on hpodd's machine, which this provider's nodes do not see "
                  "(they are other machines). Put the lifecycle scripts where every node can "
                  "fetch them: an s3:// prefix or an https:// URL");
  }
  EXPECT_EQ(h.Call("ListClusters", json::object())->at("ClusterSummaries").size(), 0u);
  EXPECT_TRUE(h.Call("CreateCluster", CreateReq("s3", {at("workers", "s3://bucket/lcs/")})).ok());
  EXPECT_TRUE(
      h.Call("CreateCluster", CreateReq("web", {at("workers", "https://example.com/lcs/")})).ok());
}

TEST(ClusterApiTest, Quotas) {
  ControlPlaneOptions co;
  co.max_clusters = 1;
  co.max_nodes_per_cluster = 4;
  Harness h({}, co);
  EXPECT_EQ(h.Call("CreateCluster", CreateReq("a", {Harness::Group("g", 5)})).status().code(),
            StatusCode::kResourceExhausted);
  ASSERT_TRUE(h.Call("CreateCluster", CreateReq("a", {Harness::Group("g", 1)})).ok());
  EXPECT_EQ(h.Call("CreateCluster", CreateReq("b", {Harness::Group("g", 1)})).status().code(),
            StatusCode::kResourceExhausted);
}

TEST(ClusterApiTest, UpdateNeedsInServiceAndScalesBothWays) {
  Harness h;
  ASSERT_TRUE(
      h.Call("CreateCluster", CreateReq("demo", {Harness::Group("ctl", 1), Harness::Group("w", 2)}))
          .ok());
  json up = {{"ClusterName", "demo"}, {"InstanceGroups", {Harness::Group("w", 4)}}};
  EXPECT_EQ(h.Call("UpdateCluster", up).status().code(), StatusCode::kFailedPrecondition);
  h.Converge();
  ASSERT_TRUE(h.Call("UpdateCluster", up).ok());
  EXPECT_EQ(h.Describe("demo")["ClusterStatus"], "Updating");
  h.Converge();
  json d = h.Describe("demo");
  EXPECT_EQ(d["ClusterStatus"], "InService");
  EXPECT_EQ(d["InstanceGroups"][1]["CurrentCount"], 4);
  up["InstanceGroups"][0]["InstanceCount"] = 1;
  ASSERT_TRUE(h.Call("UpdateCluster", up).ok());
  h.Converge();
  d = h.Describe("demo");
  EXPECT_EQ(d["InstanceGroups"][1]["CurrentCount"], 1);
  auto nodes = h.Call("ListClusterNodes", {{"ClusterName", "demo"}});
  EXPECT_EQ((*nodes)["ClusterNodeSummaries"].size(), 2u);
  // InstanceType is immutable.
  json change = {{"ClusterName", "demo"},
                 {"InstanceGroups", {Harness::Group("w", 1, "ml.m5.large")}}};
  EXPECT_EQ(h.Call("UpdateCluster", change).status().code(), StatusCode::kInvalidArgument);
}

TEST(ClusterApiTest, AddAndDeleteGroups) {
  Harness h;
  ASSERT_TRUE(
      h.Call("CreateCluster", CreateReq("demo", {Harness::Group("ctl", 1), Harness::Group("w", 2)}))
          .ok());
  h.Converge();
  ASSERT_TRUE(h.Call("UpdateCluster", {{"ClusterName", "demo"},
                                       {"InstanceGroups", {Harness::Group("extra", 2)}},
                                       {"InstanceGroupsToDelete", {"w"}}})
                  .ok());
  h.Converge();
  json d = h.Describe("demo");
  ASSERT_EQ(d["InstanceGroups"].size(), 2u);
  EXPECT_EQ(d["InstanceGroups"][0]["InstanceGroupName"], "ctl");
  EXPECT_EQ(d["InstanceGroups"][1]["InstanceGroupName"], "extra");
  EXPECT_EQ(d["InstanceGroups"][1]["CurrentCount"], 2);
  EXPECT_EQ(h.provider_->node_count(), 3u);
  auto bad =
      h.Call("UpdateCluster", {{"ClusterName", "demo"}, {"InstanceGroupsToDelete", {"nosuch"}}});
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
}

TEST(ClusterApiTest, ControllerGroupCannotBeDeleted) {
  Harness h;
  json ctl = Harness::Group("ctl", 1);
  ctl["SlurmConfig"] = {{"NodeType", "Controller"}};
  ASSERT_TRUE(h.Call("CreateCluster", CreateReq("demo", {ctl, Harness::Group("w", 1)})).ok());
  h.Converge();
  auto r = h.Call("UpdateCluster", {{"ClusterName", "demo"}, {"InstanceGroupsToDelete", {"ctl"}}});
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  auto nodes = h.Call("ListClusterNodes", {{"ClusterName", "demo"}, {"SortBy", "NAME"}});
  std::string ctl_id = (*nodes)["ClusterNodeSummaries"][0]["InstanceId"];
  auto del = h.Call("BatchDeleteClusterNodes", {{"ClusterName", "demo"}, {"NodeIds", {ctl_id}}});
  ASSERT_TRUE(del.ok());
  EXPECT_EQ((*del)["Failed"][0]["Code"], "NodeIdInUse");
}

TEST(ClusterApiTest, BatchDeleteNodes) {
  Harness h;
  ASSERT_TRUE(h.Call("CreateCluster", CreateReq("demo", {Harness::Group("w", 3)})).ok());
  h.Converge();
  auto nodes = h.Call("ListClusterNodes", {{"ClusterName", "demo"}});
  std::string id = (*nodes)["ClusterNodeSummaries"][0]["InstanceId"];
  auto r = h.Call("BatchDeleteClusterNodes",
                  {{"ClusterName", "demo"}, {"NodeIds", {id, "i-00000000000000000"}}});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ((*r)["Successful"][0], id);
  EXPECT_EQ((*r)["Failed"][0]["Code"], "NodeIdNotFound");
  EXPECT_EQ((*r)["Failed"][0]["NodeId"], "i-00000000000000000");
  h.Converge();
  json d = h.Describe("demo");
  EXPECT_EQ(d["InstanceGroups"][0]["TargetCount"], 2);
  EXPECT_EQ(d["InstanceGroups"][0]["CurrentCount"], 2);
  auto gone = h.Call("DescribeClusterNode", {{"ClusterName", "demo"}, {"NodeId", id}});
  EXPECT_EQ(gone.status().code(), StatusCode::kNotFound);
}

TEST(ClusterApiTest, DescribeNodeByIdOrLogicalId) {
  Harness h;
  ASSERT_TRUE(h.Call("CreateCluster", CreateReq("demo", {Harness::Group("w", 1)})).ok());
  h.Converge();
  auto nodes =
      h.Call("ListClusterNodes", {{"ClusterName", "demo"}, {"IncludeNodeLogicalIds", true}});
  json n = json::parse((*nodes)["ClusterNodeSummaries"][0].dump());
  EXPECT_EQ(n["InstanceStatus"]["Status"], "Running");
  EXPECT_TRUE(n.contains("NodeLogicalId"));
  EXPECT_NE(n["PrivateDnsHostname"].get<std::string>().find(".us-west-2.compute.internal"),
            std::string::npos);
  auto by_id =
      h.Call("DescribeClusterNode", {{"ClusterName", "demo"}, {"NodeId", n["InstanceId"]}});
  ASSERT_TRUE(by_id.ok());
  EXPECT_EQ((*by_id)["NodeDetails"]["InstanceType"], "ml.c5.xlarge");
  EXPECT_TRUE((*by_id)["NodeDetails"].contains("PrivatePrimaryIp"));
  auto by_logical = h.Call("DescribeClusterNode",
                           {{"ClusterName", "demo"}, {"NodeLogicalId", n["NodeLogicalId"]}});
  ASSERT_TRUE(by_logical.ok());
  EXPECT_EQ((*by_logical)["NodeDetails"]["InstanceId"], n["InstanceId"]);
  auto both = h.Call("DescribeClusterNode", {{"ClusterName", "demo"},
                                             {"NodeId", n["InstanceId"]},
                                             {"NodeLogicalId", n["NodeLogicalId"]}});
  EXPECT_EQ(both.status().code(), StatusCode::kInvalidArgument);
}

TEST(ClusterApiTest, DeleteRemovesEverything) {
  Harness h;
  ASSERT_TRUE(h.Call("CreateCluster", CreateReq("demo", {Harness::Group("w", 2)})).ok());
  h.Converge();
  ASSERT_TRUE(h.Call("DeleteCluster", {{"ClusterName", "demo"}}).ok());
  EXPECT_EQ(h.Describe("demo")["ClusterStatus"], "Deleting");
  ASSERT_TRUE(h.Call("DeleteCluster", {{"ClusterName", "demo"}}).ok());  // idempotent
  h.Converge();
  EXPECT_EQ(h.Call("DescribeCluster", {{"ClusterName", "demo"}}).status().code(),
            StatusCode::kNotFound);
  EXPECT_EQ(h.provider_->node_count(), 0u);
  // The name is free again.
  EXPECT_TRUE(h.Call("CreateCluster", CreateReq("demo", {Harness::Group("w", 1)})).ok());
}

TEST(ClusterApiTest, ListClustersPaginatesSortsAndFilters) {
  Harness h;
  for (int i = 0; i < 7; ++i) {
    ASSERT_TRUE(
        h.Call("CreateCluster", CreateReq("c" + std::to_string(i), {Harness::Group("w", 0)})).ok());
    h.clock_.AdvanceTime(std::chrono::seconds(1));
  }
  std::vector<std::string> names;
  json req = {{"MaxResults", 3}, {"SortOrder", "Descending"}};
  while (true) {
    auto page = h.Call("ListClusters", req);
    ASSERT_TRUE(page.ok()) << page.status().ToString();
    for (const auto& s : (*page)["ClusterSummaries"]) names.push_back(s["ClusterName"]);
    if (!page->contains("NextToken")) break;
    req["NextToken"] = (*page)["NextToken"];
  }
  ASSERT_EQ(names.size(), 7u);
  EXPECT_EQ(names.front(), "c6");
  EXPECT_EQ(names.back(), "c0");
  // A token is bound to its request: other filters or a tampered token fail.
  auto first = h.Call("ListClusters", {{"MaxResults", 3}});
  std::string token = (*first)["NextToken"];
  EXPECT_EQ(h.Call("ListClusters", {{"MaxResults", 3}, {"NextToken", token}, {"SortBy", "NAME"}})
                .status()
                .code(),
            StatusCode::kInvalidArgument);
  std::string bad = token;
  bad[0] = bad[0] == 'e' ? 'f' : 'e';
  EXPECT_EQ(h.Call("ListClusters", {{"NextToken", bad}}).status().code(),
            StatusCode::kInvalidArgument);
  auto filtered = h.Call("ListClusters", {{"NameContains", "c3"}});
  EXPECT_EQ((*filtered)["ClusterSummaries"].size(), 1u);
  double t3 = (*filtered)["ClusterSummaries"][0]["CreationTime"];
  auto after = h.Call("ListClusters", {{"CreationTimeAfter", t3}});
  EXPECT_EQ((*after)["ClusterSummaries"].size(), 3u);
}

TEST(ClusterApiTest, EventsRecordEveryTransition) {
  Harness h;
  ASSERT_TRUE(h.Call("CreateCluster", CreateReq("demo", {Harness::Group("w", 2)})).ok());
  h.Converge();
  auto ev = h.Call("ListClusterEvents", {{"ClusterName", "demo"}});
  ASSERT_TRUE(ev.ok());
  const auto& events = (*ev)["Events"];
  ASSERT_GE(events.size(), 6u);
  // Newest first by default: the last transition is the cluster going InService.
  EXPECT_EQ(events[0]["ResourceType"], "Cluster");
  EXPECT_NE(events[0]["Description"].get<std::string>().find("to InService"), std::string::npos);
  auto instances = h.Call("ListClusterEvents", {{"ClusterName", "demo"},
                                                {"ResourceType", "Instance"},
                                                {"SortOrder", "Ascending"},
                                                {"MaxResults", 1}});
  ASSERT_TRUE(instances.ok());
  EXPECT_EQ((*instances)["Events"][0]["ResourceType"], "Instance");
  EXPECT_TRUE(instances->contains("NextToken"));
  std::string id = events[0]["EventId"];
  auto one = h.Call("DescribeClusterEvent", {{"ClusterName", "demo"}, {"EventId", id}});
  ASSERT_TRUE(one.ok());
  EXPECT_EQ((*one)["EventDetails"]["EventId"], id);
}

// A deleted cluster's events (and node logs) stay readable by its ARN, or by its
// name while no live cluster has it, until the retention ends; DescribeCluster's
// ResourceNotFound says so and why it had failed.
TEST(ClusterApiTest, ADeletedClustersHistoryStaysReadableForItsRetention) {
  provider::FakeProviderOptions po;
  po.fail_groups = {"workers"};
  Harness h(po);
  const std::string arn =
      (*h.Call("CreateCluster", CreateReq("demo", {Harness::Group("workers", 1)})))["ClusterArn"];
  h.Converge();
  ASSERT_EQ(h.Describe("demo")["ClusterStatus"], "Failed");
  ASSERT_TRUE(h.Call("DeleteCluster", {{"ClusterName", "demo"}}).ok());
  h.Converge();
  auto gone = h.Call("DescribeCluster", {{"ClusterName", "demo"}});
  ASSERT_EQ(gone.status().code(), StatusCode::kNotFound);
  const std::string msg(gone.status().message());
  EXPECT_NE(msg.find("Cluster with name or ARN 'demo' not found."), std::string::npos) << msg;
  EXPECT_NE(msg.find("was deleted at 2023-11-14T"), std::string::npos) << msg;
  EXPECT_NE(msg.find("stay readable until 2023-11-21T"), std::string::npos) << msg;
  EXPECT_NE(msg.find("Its last FailureMessage: Instance i-"), std::string::npos) << msg;
  EXPECT_EQ(h.Call("ListClusters", json::object())->at("ClusterSummaries").size(), 0u);

  auto events = [&](const std::string& name) {
    auto r = h.Call("ListClusterEvents", {{"ClusterName", name}, {"MaxResults", 100}});
    return r.ok() ? json::parse(r->dump())["Events"] : json(r.status().ToString());
  };
  json by_arn = events(arn);
  ASSERT_TRUE(by_arn.is_array()) << by_arn;
  EXPECT_EQ(by_arn[0]["Description"], "Cluster deleted");
  EXPECT_EQ(events("demo"), by_arn);
  auto one =
      h.Call("DescribeClusterEvent", {{"ClusterName", arn}, {"EventId", by_arn[1]["EventId"]}});
  EXPECT_TRUE(one.ok()) << one.status().ToString();

  auto first_page = h.Call("ListClusterEvents", {{"ClusterName", "demo"}, {"MaxResults", 1}});
  ASSERT_TRUE(first_page.ok() && first_page->contains("NextToken"));
  const std::string token = (*first_page)["NextToken"];

  // A new cluster takes the name; the old one is still there by its ARN.
  ASSERT_TRUE(h.Call("CreateCluster", CreateReq("demo", {Harness::Group("ctl", 1)})).ok());
  EXPECT_NE(events("demo"), by_arn);
  EXPECT_EQ(events(arn), by_arn);
  // A page token of the old cluster's events does not page the new one's.
  auto switched = h.Call("ListClusterEvents",
                         {{"ClusterName", "demo"}, {"MaxResults", 1}, {"NextToken", token}});
  EXPECT_EQ(switched.status().code(), StatusCode::kInvalidArgument);

  // After the retention the history goes, node logs included.
  const auto root =
      std::filesystem::temp_directory_path() / ("hpod-retention-" + std::to_string(getpid()));
  NodeLogs logs(NodeLogsOptions{root.string()});
  const std::string id = arn.substr(arn.rfind('/') + 1);
  ASSERT_TRUE(logs.Append(id, "i-1", "LifecycleConfig", "failed\n").ok());
  ASSERT_TRUE(
      PurgeExpiredClusters(*h.store_, logs, h.clock_, h.options_.deleted_cluster_retention).ok());
  EXPECT_TRUE(events(arn).is_array()) << "not yet";
  h.clock_.AdvanceTime(h.options_.deleted_cluster_retention);
  ASSERT_TRUE(
      PurgeExpiredClusters(*h.store_, logs, h.clock_, h.options_.deleted_cluster_retention).ok());
  EXPECT_FALSE(events(arn).is_array());
  EXPECT_FALSE(std::filesystem::exists(root / id));
  EXPECT_TRUE(events("demo").is_array()) << "the live cluster keeps its own";
  std::filesystem::remove_all(root);
}

}  // namespace
}  // namespace hpod::controlplane
