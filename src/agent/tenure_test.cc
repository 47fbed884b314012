// A pool host's tenures (tenure.h): one directory per instance, wiped whole at
// its end with the machine paths that link into it, and nothing else.

#include "hpod/agent/tenure.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>

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

  ASSERT_TRUE(runner.Serve("").ok());
  EXPECT_EQ(runner.Current(), "");
  EXPECT_FALSE(fs::exists(t));
  EXPECT_FALSE(fs::exists(fs::symlink_status(dir_ / "opt/ml/config")));
  EXPECT_EQ(ReadTestFile(dir_ / "var/log/slurm/theirs.log"), "x");
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

}  // namespace
}  // namespace hpod::agent
