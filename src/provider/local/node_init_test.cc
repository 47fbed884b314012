#include "hpod/provider/local/node_init.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>

namespace hpod::provider::local {
namespace {

NodeInitConfig Config() {
  NodeInitConfig c;
  c.hostname = "ip-10-77-0-10";
  c.log_file = "/tmp/x/node-init.log";
  c.hosts_file = "/tmp/x/clusters/c1/hosts";
  c.fsx_dir = "/tmp/x/fsx/c1";
  c.agent_socket_dir = "/run/hpodd";
  c.node_disk = "/tmp/x/nodes/i-1/disk";
  c.agent_config = "/tmp/x/nodes/i-1/agent.json";
  c.program = {"sleep", "1000"};
  c.env = {{"HPOD_KERNEL_LOG", "/var/lib/hpod-agent/kmsg"}};
  return c;
}

TEST(NodeInitConfigTest, RoundTripsThroughJson) {
  auto c = NodeInitConfigFromJson(NodeInitConfigToJson(Config()));
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->hostname, "ip-10-77-0-10");
  EXPECT_EQ(c->agent_socket_dir, "/run/hpodd");
  EXPECT_EQ(c->program, (std::vector<std::string>{"sleep", "1000"}));
  EXPECT_EQ(c->env,
            (std::map<std::string, std::string>{{"HPOD_KERNEL_LOG", "/var/lib/hpod-agent/kmsg"}}));
  // Written by an older hpodd: no env at all.
  auto j = NodeInitConfigToJson(Config());
  j.erase("env");
  EXPECT_TRUE(NodeInitConfigFromJson(j).value().env.empty());
  j["env"] = {{"A", 1}};
  EXPECT_EQ(NodeInitConfigFromJson(j).status().code(), StatusCode::kInvalidArgument);
}

TEST(NodeInitConfigTest, RejectsMissingOrRelativeFields) {
  auto j = NodeInitConfigToJson(Config());
  j.erase("hostname");
  EXPECT_EQ(NodeInitConfigFromJson(j).status().code(), StatusCode::kInvalidArgument);
  j = NodeInitConfigToJson(Config());
  j["program"] = nlohmann::json::array();
  EXPECT_EQ(NodeInitConfigFromJson(j).status().code(), StatusCode::kInvalidArgument);
  j = NodeInitConfigToJson(Config());
  j["fsx_dir"] = "relative/fsx";
  EXPECT_EQ(NodeInitConfigFromJson(j).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(NodeInitConfigFromJson(nlohmann::json::array()).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(LoadNodeInitConfig("/nonexistent/node-init.json").status().code(),
            StatusCode::kNotFound);
}

TEST(PlanMountsTest, CoversRunBeforeItsSocketDirAndTmpLast) {
  auto steps = PlanMounts(Config());
  std::vector<std::string> targets;
  for (const auto& s : steps) targets.push_back(s.target);
  EXPECT_EQ(targets,
            (std::vector<std::string>{"/etc/hosts", "/fsx", "/var/spool", "/var/log",
                                      "/var/lib/hpod-agent", "/opt", "/opt/sagemaker", "/run",
                                      "/run/hpod", "/tmp"}));
  EXPECT_EQ(steps[0].source, "/tmp/x/clusters/c1/hosts");
  EXPECT_EQ(steps[4].source, "/tmp/x/nodes/i-1/disk/state");
  EXPECT_EQ(steps[5].kind, MountStep::Kind::kOverlay);
  EXPECT_TRUE(steps[5].optional);
  EXPECT_EQ(steps[5].data,
            "lowerdir=/opt,upperdir=/tmp/x/nodes/i-1/disk/opt-upper,workdir=/tmp/x/nodes/i-1/"
            "disk/opt-work");
  EXPECT_EQ(steps[6].source, "/tmp/x/nodes/i-1/disk/sagemaker");
  EXPECT_EQ(steps[7].kind, MountStep::Kind::kTmpfs);
  EXPECT_EQ(steps[7].data, "mode=755");
  EXPECT_EQ(steps[8].source, "/run/hpodd");
  EXPECT_EQ(steps.back().source, "/tmp/x/nodes/i-1/disk/tmp");
}

TEST(PlanMountsTest, NoSocketDirForTcpEndpoints) {
  auto c = Config();
  c.agent_socket_dir.clear();
  for (const auto& s : PlanMounts(c)) EXPECT_NE(s.target, "/run/hpod");
}

// A file:// lifecycle source there would be empty on the nodes: CreateCluster
// refuses it (cluster_api.cc) with the directory this names.
TEST(NodePrivateDirTest, NamesTheNodesOwnDirectoryThatHidesAHostPath) {
  EXPECT_EQ(NodePrivateDirOf("/tmp/lcs/"), "/tmp");
  EXPECT_EQ(NodePrivateDirOf("/tmp"), "/tmp");
  EXPECT_EQ(NodePrivateDirOf("/tmp/a/../b"), "/tmp");
  EXPECT_EQ(NodePrivateDirOf("/run/hpod/x"), "/run");
  EXPECT_EQ(NodePrivateDirOf("/var/log/scripts"), "/var/log");
  EXPECT_EQ(NodePrivateDirOf("/var/spool/x"), "/var/spool");
  EXPECT_EQ(NodePrivateDirOf("/fsx/scripts"), "/fsx");
  // Seen by the nodes: the host's own files (and /opt, an overlay over the host's).
  EXPECT_EQ(NodePrivateDirOf("/var/tmp/lcs/"), "");
  EXPECT_EQ(NodePrivateDirOf("/srv/lcs"), "");
  EXPECT_EQ(NodePrivateDirOf("/opt/lcs"), "");
  EXPECT_EQ(NodePrivateDirOf("/tmpfoo/lcs"), "");
  EXPECT_EQ(NodePrivateDirOf("/tmp/../var/tmp/lcs"), "");
}

}  // namespace
}  // namespace hpod::provider::local
