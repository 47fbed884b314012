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
    fs::remove(root_ / "args");
    std::ofstream(p) << "#!/bin/sh\necho \"$@\" >> " << (root_ / "args").string() << "\n"
                     << (says.empty() ? "" : "echo '" + says + "' >&2\n") << "exit " << code
                     << "\n";
    ::chmod(p.c_str(), 0755);
    h_.systemctl = p.string();
  }

  fs::path root_;
  ServiceHandoff h_;
};

TEST_F(ServiceHandoffTest, HandsOffOnlyASystemdMachinesJoinFromTheUnitsStateDir) {
  const std::string state = h_.unit_state_dir;
  EXPECT_TRUE(ShouldHandOff(h_, state));
  EXPECT_TRUE(ShouldHandOff(h_, state + "/"));  // the same dir, spelt otherwise
  // Another state dir: a second agent the unit does not run (tests, a person's choice).
  EXPECT_FALSE(ShouldHandOff(h_, (root_ / "elsewhere").string()));
  ServiceHandoff no_unit = h_;
  no_unit.unit_files = {(root_ / "lib/none.service").string()};
  EXPECT_FALSE(ShouldHandOff(no_unit, state));
  ServiceHandoff no_systemd = h_;
  no_systemd.systemd_run_dir = (root_ / "no-such-dir").string();
  EXPECT_FALSE(ShouldHandOff(no_systemd, state));
}

TEST_F(ServiceHandoffTest, HandOffEnablesAndRestartsTheUnitOrSaysWhyNot) {
  FakeSystemctl(0, "");
  ASSERT_TRUE(HandOff(h_).ok());
  std::ifstream args(root_ / "args");
  std::string all((std::istreambuf_iterator<char>(args)), std::istreambuf_iterator<char>());
  EXPECT_EQ(all, "enable hpod-agent.service\nrestart hpod-agent.service\n");

  FakeSystemctl(1, "Failed to enable unit: Access denied");
  Status s = HandOff(h_);
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(s.message(),
            "systemctl enable hpod-agent.service exited 1: Failed to enable unit: Access denied");

  // A systemctl that never answers (a start job waiting on the network).
  std::ofstream(h_.systemctl) << "#!/bin/sh\nsleep 30\n";
  s = HandOff(h_, std::chrono::milliseconds(300));
  EXPECT_EQ(s.message(), "systemctl enable hpod-agent.service timed out after 300 ms");
}

}  // namespace
}  // namespace hpod::agent
