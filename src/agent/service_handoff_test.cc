#include "hpod/agent/service_handoff.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>

namespace hpod::agent {
namespace {

namespace fs = std::filesystem;

class ServiceHandoffTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() / ("hpod-handoff-" + std::to_string(::getpid()));
    fs::remove_all(root_);
    fs::create_directories(root_ / "run-systemd");
    fs::create_directories(root_ / "state");
    fs::create_directories(root_ / "lib");
    std::ofstream(root_ / "lib/hpod-agent.service") << "[Service]\n";
    h_.unit_state_dir = (root_ / "state").string();
    h_.systemd_run_dir = (root_ / "run-systemd").string();
    h_.unit_files = {(root_ / "lib/hpod-agent.service").string()};
  }
  void TearDown() override { fs::remove_all(root_); }

  // A systemctl that records its arguments and exits `code`, saying `says`.
  void FakeSystemctl(int code, const std::string& says) {
    const fs::path p = root_ / "systemctl";
    std::ofstream(p) << "#!/bin/sh\necho \"$@\" > " << (root_ / "args").string() << "\n"
                     << (says.empty() ? "" : "echo '" + says + "' >&2\n") << "exit " << code
                     << "\n";
    ::chmod(p.c_str(), 0755);
    h_.systemctl = p.string();
  }

  fs::path root_;
  ServiceHandoff h_;
};

TEST_F(ServiceHandoffTest, HandsOffOnlyASystemdMachinesFirstJoinFromTheUnitsStateDir) {
  const std::string state = h_.unit_state_dir;
  EXPECT_TRUE(ShouldHandOff(h_, state, /*invoked_by_systemd=*/false));
  EXPECT_TRUE(ShouldHandOff(h_, state + "/", false));  // the same dir, spelt otherwise
  // Started by systemd already (the unit itself): it runs the agent.
  EXPECT_FALSE(ShouldHandOff(h_, state, /*invoked_by_systemd=*/true));
  // Another state dir: a second agent the unit does not run (tests, a person's choice).
  EXPECT_FALSE(ShouldHandOff(h_, (root_ / "elsewhere").string(), false));
  ServiceHandoff no_unit = h_;
  no_unit.unit_files = {(root_ / "lib/none.service").string()};
  EXPECT_FALSE(ShouldHandOff(no_unit, state, false));
  ServiceHandoff no_systemd = h_;
  no_systemd.systemd_run_dir = (root_ / "no-such-dir").string();
  EXPECT_FALSE(ShouldHandOff(no_systemd, state, false));
}

TEST_F(ServiceHandoffTest, HandOffEnablesAndStartsTheUnitOrSaysWhyNot) {
  FakeSystemctl(0, "");
  ASSERT_TRUE(HandOff(h_).ok());
  std::ifstream args(root_ / "args");
  std::string line;
  std::getline(args, line);
  EXPECT_EQ(line, "enable --now hpod-agent.service");

  FakeSystemctl(1, "Failed to enable unit: Access denied");
  Status s = HandOff(h_);
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(s.message(),
            "systemctl enable --now hpod-agent.service exited 1: Failed to enable unit: Access "
            "denied");
}

}  // namespace
}  // namespace hpod::agent
