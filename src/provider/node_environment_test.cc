#include "hpod/provider/node_environment.h"

#include <gtest/gtest.h>

namespace hpod::provider {
namespace {

NodeEnvironment SameMachine() {
  NodeEnvironment e;
  e.agent_socket = "/run/hpod/agent.sock";
  e.s3_relay_socket = "/run/hpod/s3.sock";
  e.sees_hpodd_files = true;
  e.private_dirs = {"/etc/hosts", "/fsx", "/tmp", "/run", "/run/hpod", "/var/log"};
  e.spank_plugin = "/var/lib/hpod-agent/spank_hpod.so";
  e.gpu_stand_ins = true;
  e.gpu_device_dir = "/run/hpod-gpus";
  e.replacement_keeps_address = true;
  return e;
}

TEST(NodeEnvironmentTest, TheLocalShapeIsConsistent) {
  EXPECT_TRUE(SameMachine().Validate().ok()) << SameMachine().Validate().ToString();
}

TEST(NodeEnvironmentTest, PrivateDirOfFindsTheOutermostPrivateDir) {
  const NodeEnvironment e = SameMachine();
  EXPECT_EQ(e.PrivateDirOf("/tmp/lcs/"), "/tmp");
  EXPECT_EQ(e.PrivateDirOf("/tmp"), "/tmp");
  EXPECT_EQ(e.PrivateDirOf("/run/hpod/x"), "/run");  // /run hides /run/hpod too
  EXPECT_EQ(e.PrivateDirOf("/var/log/scripts"), "/var/log");
  EXPECT_EQ(e.PrivateDirOf("/var/tmp/lcs"), "");
  EXPECT_EQ(e.PrivateDirOf("/tmpfoo/lcs"), "");  // a component, not a string prefix
  EXPECT_EQ(e.PrivateDirOf("/srv"), "");
}

TEST(NodeEnvironmentTest, NodesOnOtherMachinesSeeNothingOfHpodds) {
  NodeEnvironment e;
  e.agent_url = "https://10.0.0.5:8451";
  ASSERT_TRUE(e.Validate().ok()) << e.Validate().ToString();
  EXPECT_EQ(e.PrivateDirOf("/srv/lcs"), "/");
  EXPECT_EQ(e.PrivateDirOf("/"), "/");
}

TEST(NodeEnvironmentTest, InconsistentDeclarationsAreRefusedNamingTheField) {
  struct Case {
    const char* what;
    void (*mutate)(NodeEnvironment&);
    const char* field;
  };
  const Case cases[] = {
      {"two dials", [](NodeEnvironment& e) { e.agent_url = "https://h:1"; }, "agent_url"},
      {"relative socket", [](NodeEnvironment& e) { e.agent_socket = "run/a.sock"; },
       "agent_socket"},
      {"plain url",
       [](NodeEnvironment& e) {
         e.agent_socket.clear();
         e.s3_relay_socket.clear();
         e.agent_url = "http://h:1";
       },
       "https://"},
      {"socket without files",
       [](NodeEnvironment& e) {
         e.sees_hpodd_files = false;
         e.private_dirs.clear();
       },
       "agent_socket"},
      {"private dirs without files",
       [](NodeEnvironment& e) {
         e.agent_socket.clear();
         e.s3_relay_socket.clear();
         e.sees_hpodd_files = false;
       },
       "private_dirs"},
      {"relative private dir", [](NodeEnvironment& e) { e.private_dirs.push_back("tmp"); },
       "private dir"},
      {"relay without socket",
       [](NodeEnvironment& e) {
         e.agent_socket.clear();
         e.agent_url = "https://h:1";
       },
       "s3_relay_socket"},
      {"relay elsewhere", [](NodeEnvironment& e) { e.s3_relay_socket = "/run/other/s3.sock"; },
       "s3_relay_socket"},
      {"relative plugin", [](NodeEnvironment& e) { e.spank_plugin = "spank_hpod.so"; },
       "spank_plugin"},
      {"relative gpu dir", [](NodeEnvironment& e) { e.gpu_device_dir = "gpus"; }, "gpu_device_dir"},
  };
  for (const Case& c : cases) {
    NodeEnvironment e = SameMachine();
    c.mutate(e);
    Status s = e.Validate();
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << c.what;
    EXPECT_NE(s.message().find(c.field), std::string::npos) << c.what << ": " << s.message();
  }
}

}  // namespace
}  // namespace hpod::provider
