// BatchRebootClusterNodes / BatchReplaceClusterNodes: what they accept, how they
// refuse (the model's per-node error codes), and the recovery intent they write.
// The recovery itself is RecoveryReconciler's (recovery_reconciler_test.cc);
// these tests stop before the reconciler takes a step.

#include <gtest/gtest.h>

#include <cstdio>
#include <map>

#include "hpod/controlplane/recovery.h"
#include "hpod/controlplane/test_harness.h"

namespace hpod::controlplane {
namespace {

using nlohmann::json;
using testing::Harness;

constexpr char kReboot[] = "BatchRebootClusterNodes";
constexpr char kReplace[] = "BatchReplaceClusterNodes";
constexpr char kUnknownId[] = "i-00000000000000000";

// A cluster "demo": Slurm controller group "ctl" (1 node), compute group "w".
// Returns instance ids by group.
std::map<std::string, std::vector<std::string>> CreateDemo(Harness& h, int workers = 2) {
  json ctl = Harness::Group("ctl", 1);
  ctl["SlurmConfig"] = {{"NodeType", "Controller"}};
  auto r = h.Call("CreateCluster", {{"ClusterName", "demo"},
                                    {"InstanceGroups", {ctl, Harness::Group("w", workers)}}});
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  h.Converge();
  std::map<std::string, std::vector<std::string>> ids;
  auto nodes = h.Call("ListClusterNodes", {{"ClusterName", "demo"}});
  EXPECT_TRUE(nodes.ok()) << nodes.status().ToString();
  for (const auto& n : (*nodes)["ClusterNodeSummaries"]) {
    ids[n["InstanceGroupName"]].push_back(n["InstanceId"]);
  }
  return ids;
}

std::vector<store::RecoveryRecord> Recoveries(Harness& h) {
  std::vector<store::RecoveryRecord> out;
  EXPECT_TRUE(h.store_
                  ->Read([&](store::ReadTx& tx) -> Status {
                    HPOD_ASSIGN_OR_RETURN(auto clusters, tx.ListClusterIds());
                    for (const auto& id : clusters) {
                      HPOD_ASSIGN_OR_RETURN(auto rs, tx.ListRecoveries(id));
                      out.insert(out.end(), rs.begin(), rs.end());
                    }
                    return OkStatus();
                  })
                  .ok());
  return out;
}

json Call(Harness& h, const std::string& op, json req) {
  auto r = h.Call(op, req);
  EXPECT_TRUE(r.ok()) << op << ": " << r.status().ToString();
  return r.ok() ? json::parse(r->dump()) : json();
}

TEST(ClusterApiRecoveryTest, OneToTwentyFiveIds) {
  Harness h;
  auto ids = CreateDemo(h);
  for (const char* op : {kReboot, kReplace}) {
    auto none = h.Call(op, {{"ClusterName", "demo"}, {"NodeIds", json::array()}});
    EXPECT_EQ(none.status().code(), StatusCode::kInvalidArgument) << op;
    EXPECT_EQ(none.status().aws_type(), "ValidationException") << op;
    EXPECT_NE(none.status().message().find(
                  "at 'nodeIds' failed to satisfy constraint: Member must have length greater "
                  "than or equal to 1"),
              std::string::npos)
        << none.status().message();

    json many = json::array();
    for (int i = 0; i < 26; ++i) {
      char id[32];
      std::snprintf(id, sizeof(id), "i-%017x", i + 1);
      many.push_back(id);
    }
    auto too_many = h.Call(op, {{"ClusterName", "demo"}, {"NodeIds", many}});
    EXPECT_EQ(too_many.status().aws_type(), "ValidationException") << op;
    EXPECT_NE(too_many.status().message().find(
                  "at 'nodeIds' failed to satisfy constraint: Member must have length less "
                  "than or equal to 25"),
              std::string::npos)
        << too_many.status().message();

    auto neither = h.Call(op, {{"ClusterName", "demo"}});
    EXPECT_EQ(neither.status().code(), StatusCode::kInvalidArgument) << op;
  }
  EXPECT_TRUE(Recoveries(h).empty());
}

TEST(ClusterApiRecoveryTest, UnknownClusterIsResourceNotFound) {
  Harness h;
  for (const char* op : {kReboot, kReplace}) {
    auto r = h.Call(op, {{"ClusterName", "nope"}, {"NodeIds", {kUnknownId}}});
    EXPECT_EQ(r.status().code(), StatusCode::kNotFound) << op;
    EXPECT_NE(r.status().message().find("nope"), std::string::npos);
  }
}

TEST(ClusterApiRecoveryTest, UnknownIdIsInstanceIdNotFound) {
  Harness h;
  auto ids = CreateDemo(h);
  json r = Call(h, kReboot, {{"ClusterName", "demo"}, {"NodeIds", {kUnknownId, ids["w"][0]}}});
  EXPECT_EQ(r["Successful"], json::array({ids["w"][0]}));
  ASSERT_EQ(r["Failed"].size(), 1u);
  EXPECT_EQ(r["Failed"][0]["NodeId"], kUnknownId);
  EXPECT_EQ(r["Failed"][0]["ErrorCode"], "InstanceIdNotFound");
  EXPECT_NE(r["Failed"][0]["Message"].get<std::string>().find(kUnknownId), std::string::npos);
  EXPECT_FALSE(r.contains("FailedNodeLogicalIds"));
}

TEST(ClusterApiRecoveryTest, ControllerIsNotReplacedButMayBeRebooted) {
  Harness h;
  auto ids = CreateDemo(h);
  const std::string ctl = ids["ctl"][0];
  json r = Call(h, kReplace, {{"ClusterName", "demo"}, {"NodeIds", {ctl}}});
  // The model's Successful holds at least one id: none accepted leaves it out.
  EXPECT_FALSE(r.contains("Successful"));
  ASSERT_EQ(r["Failed"].size(), 1u);
  EXPECT_EQ(r["Failed"][0]["ErrorCode"], "InvalidInstanceStatus");
  EXPECT_NE(r["Failed"][0]["Message"].get<std::string>().find("controller"), std::string::npos);
  EXPECT_TRUE(Recoveries(h).empty());

  r = Call(h, kReboot, {{"ClusterName", "demo"}, {"NodeIds", {ctl}}});
  EXPECT_EQ(r["Successful"], json::array({ctl}));
  auto rs = Recoveries(h);
  ASSERT_EQ(rs.size(), 1u);
  EXPECT_EQ(rs[0].action, "Reboot");
  EXPECT_EQ(rs[0].instance_id, ctl);
}

TEST(ClusterApiRecoveryTest, NodeThatIsNotRunningIsInvalidInstanceStatus) {
  provider::FakeProviderOptions po;
  po.pending_for = std::chrono::hours(1);  // nodes stay Pending
  Harness h(po);
  auto ids = CreateDemo(h);
  ASSERT_EQ(ids["w"].size(), 2u);
  for (const char* op : {kReboot, kReplace}) {
    json r = Call(h, op, {{"ClusterName", "demo"}, {"NodeIds", {ids["w"][0]}}});
    ASSERT_EQ(r["Failed"].size(), 1u) << op;
    EXPECT_EQ(r["Failed"][0]["ErrorCode"], "InvalidInstanceStatus");
    EXPECT_NE(r["Failed"][0]["Message"].get<std::string>().find("Pending"), std::string::npos);
  }
  EXPECT_TRUE(Recoveries(h).empty());
}

TEST(ClusterApiRecoveryTest, NodeBeingDeletedIsInvalidInstanceStatus) {
  Harness h;
  auto ids = CreateDemo(h);
  ASSERT_TRUE(
      h.Call("BatchDeleteClusterNodes", {{"ClusterName", "demo"}, {"NodeIds", {ids["w"][0]}}})
          .ok());
  json r = Call(h, kReplace, {{"ClusterName", "demo"}, {"NodeIds", {ids["w"][0]}}});
  ASSERT_EQ(r["Failed"].size(), 1u);
  EXPECT_EQ(r["Failed"][0]["ErrorCode"], "InvalidInstanceStatus");
  EXPECT_TRUE(Recoveries(h).empty());
}

TEST(ClusterApiRecoveryTest, SecondRequestIsInstanceIdInUseAndRecoversOnce) {
  Harness h;
  auto ids = CreateDemo(h);
  const std::string w = ids["w"][0];
  // Named twice in one call: answered once.
  json first = Call(h, kReplace, {{"ClusterName", "demo"}, {"NodeIds", {w, w}}});
  EXPECT_EQ(first["Successful"], json::array({w}));
  EXPECT_EQ(first["Failed"], json::array()) << "this Failed may be empty (min 0 in the model)";
  // Asked again (either way) while the first is in progress.
  for (const char* op : {kReplace, kReboot}) {
    json again = Call(h, op, {{"ClusterName", "demo"}, {"NodeIds", {w}}});
    EXPECT_FALSE(again.contains("Successful")) << op;
    ASSERT_EQ(again["Failed"].size(), 1u) << op;
    EXPECT_EQ(again["Failed"][0]["ErrorCode"], "InstanceIdInUse");
  }
  auto rs = Recoveries(h);
  ASSERT_EQ(rs.size(), 1u);
  EXPECT_EQ(rs[0].action, "Replace");
}

TEST(ClusterApiRecoveryTest, WritesOneRecoveryPerNodeWithItsEvent) {
  Harness h;
  auto ids = CreateDemo(h, 3);
  const auto& w = ids["w"];
  json r = Call(h, kReplace, {{"ClusterName", "demo"}, {"NodeIds", {w[0], w[1]}}});
  EXPECT_EQ(r["Successful"], json::array({w[0], w[1]}));
  EXPECT_EQ(r["Failed"], json::array());
  r = Call(h, kReboot, {{"ClusterName", "demo"}, {"NodeIds", {w[2]}}});
  EXPECT_EQ(r["Successful"], json::array({w[2]}));

  std::map<std::string, store::RecoveryRecord> by_node;
  for (const auto& rec : Recoveries(h)) by_node[rec.instance_id] = rec;
  ASSERT_EQ(by_node.size(), 3u);
  for (int i = 0; i < 3; ++i) {
    const store::RecoveryRecord& rec = by_node[w[i]];
    const bool replace = i < 2;
    EXPECT_EQ(rec.action, replace ? "Replace" : "Reboot") << w[i];
    EXPECT_EQ(rec.source, replace ? kReplace : kReboot);
    EXPECT_EQ(rec.check, "api");
    EXPECT_EQ(rec.reason, std::string("requested by ") + (replace ? kReplace : kReboot));
    EXPECT_FALSE(rec.node_dead);
    EXPECT_TRUE(RecoveryActive(rec));
    EXPECT_EQ(rec.group_name, "w");
    json events = Call(h, "ListClusterEvents", {{"ClusterName", "demo"}, {"NodeId", w[i]}});
    bool found = false;
    for (const auto& e : events["Events"]) {
      found |= e["Description"].get<std::string>().find(rec.recovery_id) != std::string::npos;
    }
    EXPECT_TRUE(found) << events.dump();
  }
}

TEST(ClusterApiRecoveryTest, LogicalIds) {
  Harness h;
  auto ids = CreateDemo(h);
  auto nodes =
      Call(h, "ListClusterNodes", {{"ClusterName", "demo"}, {"IncludeNodeLogicalIds", true}});
  std::string logical;
  for (const auto& n : nodes["ClusterNodeSummaries"]) {
    if (n["InstanceId"] == ids["w"][0]) logical = n["NodeLogicalId"];
  }
  ASSERT_FALSE(logical.empty());
  json r = Call(h, kReboot, {{"ClusterName", "demo"}, {"NodeLogicalIds", {logical, "nosuch"}}});
  EXPECT_FALSE(r.contains("Successful"));
  EXPECT_EQ(r["SuccessfulNodeLogicalIds"], json::array({logical}));
  ASSERT_EQ(r["FailedNodeLogicalIds"].size(), 1u);
  EXPECT_EQ(r["FailedNodeLogicalIds"][0]["NodeLogicalId"], "nosuch");
  EXPECT_EQ(r["FailedNodeLogicalIds"][0]["ErrorCode"], "InstanceIdNotFound");
  EXPECT_EQ(Recoveries(h).size(), 1u);
}

TEST(ClusterApiRecoveryTest, WritesNeedAnAdminKey) {
  EXPECT_FALSE(ClusterApi::IsReadOnly(kReboot));
  EXPECT_FALSE(ClusterApi::IsReadOnly(kReplace));
}

}  // namespace
}  // namespace hpod::controlplane
