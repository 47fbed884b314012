// A pool host's tenures (tenure.h): one directory per instance, wiped whole at
// its end with the machine paths that link into it, and nothing else.

#include "hpod/agent/tenure.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>

#include "hpod/agent/hosts_file.h"
#include "hpod/agent/test_util.h"

namespace hpod::agent {
namespace {

namespace fs = std::filesystem;
using testing::ReadTestFile;
using testing::TempDir;
using testing::WriteTestFile;

class TenureTest : public ::testing::Test {
 protected:
  TenureOptions Options() {
    TenureOptions o;
    o.state_dir = dir_ / "state";
    o.server = "https://127.0.0.1:1";
    o.kill_job_steps = false;  // other tests' Slurm jobs run on this machine
    o.hosts_file = dir_ / "hosts";
    o.node_template.health.flag_file = dir_ / "healthcheck_status";
    o.links = {{std::string(dir_ / "opt/ml/config"), "config"}, {std::string(dir_ / "var/log/slurm"), "log/slurm"}};
    return o;
  }
  TempDir dir_;
};

TEST_F(TenureTest, TheTenureOnDiskIsReportedAndEndingItWipesItAndItsLinksOnly) {
  TenureRunner runner(Options());
  EXPECT_EQ(runner.Current(), "");
  // A tenure an earlier run of the agent left (the machine path links into it).
  const std::string t = runner.TenureDir("i-0123456789abcdef0");
  fs::create_directories(t + "/config");
  WriteTestFile(t + "/config/resource_config.json", "{}");
  fs::create_directories(dir_ / "opt/ml");
  fs::create_directory_symlink(t + "/config", dir_ / "opt/ml/config");
  // The admin's own directory where another link would go: never touched.
  fs::create_directories(dir_ / "var/log/slurm");
  WriteTestFile(dir_ / "var/log/slurm/theirs.log", "x");
  EXPECT_EQ(runner.Current(), "i-0123456789abcdef0");
  WriteTestFile(dir_ / "hosts", "127.0.0.1 localhost\n");
  WriteTestFile(dir_ / "healthcheck_status", "1\n");  // the instance's fault flag
  ASSERT_TRUE(WriteHostsBlock(dir_ / "hosts", {{"host1", "10.0.0.11"}}).ok());

  ASSERT_TRUE(runner.Serve("").ok());
  EXPECT_EQ(runner.Current(), "");
  EXPECT_FALSE(fs::exists(t));
  EXPECT_FALSE(fs::exists(fs::symlink_status(dir_ / "opt/ml/config")));
  EXPECT_EQ(ReadTestFile(dir_ / "var/log/slurm/theirs.log"), "x");
  EXPECT_EQ(ReadTestFile(dir_ / "hosts"), "127.0.0.1 localhost\n");  // its block is gone
  EXPECT_FALSE(fs::exists(dir_ / "healthcheck_status"));  // the next tenure starts clean
  ASSERT_TRUE(runner.Serve("").ok());  // idempotent
}

TEST_F(TenureTest, AnAssignmentThatIsNoInstanceIdIsRefusedAndChangesNothing) {
  TenureRunner runner(Options());
  fs::create_directories(runner.TenureDir("i-0123456789abcdef0"));
  for (const char* bad : {"../../etc", "i-XYZ", "i-", "h-0123456789abcdef"}) {
    EXPECT_EQ(runner.Serve(bad).code(), StatusCode::kInvalidArgument) << bad;
  }
  EXPECT_EQ(runner.Current(), "i-0123456789abcdef0");
}

// The cluster's names are one block of /etc/hosts: replaced as nodes move,
// removed at the end, the machine's own lines never touched.
TEST(HostsFileTest, TheBlockIsReplacedAndRemovedAndNothingElseChanges) {
  const std::string mine = "127.0.0.1 localhost\n# the admin's\n10.9.9.9 nas\n";
  std::string t = WithHostsBlock(mine, {{"host1", "10.0.0.11"}, {"host0", "10.0.0.10"}});
  EXPECT_EQ(t, mine +
                   "# BEGIN hpod cluster nodes (hpod-agent keeps this block; edits are lost)\n"
                   "10.0.0.10 host0\n10.0.0.11 host1\n# END hpod cluster nodes\n");
  // host1 moved to another machine's address: the block follows.
  t = WithHostsBlock(t, {{"host1", "10.0.0.14"}, {"host0", "10.0.0.10"}});
  EXPECT_NE(t.find("10.0.0.14 host1\n"), std::string::npos);
  EXPECT_EQ(t.find("10.0.0.11"), std::string::npos);
  EXPECT_EQ(WithHostsBlock(t, {}), mine);
  EXPECT_EQ(WithHostsBlock(mine, {}), mine);
}

}  // namespace
}  // namespace hpod::agent
