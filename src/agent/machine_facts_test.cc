#include "hpod/agent/machine_facts.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace hpod::agent {
namespace {

namespace fs = std::filesystem;

class MachineFactsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("hpod-facts-" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "block");
    std::ofstream(dir_ / "machine-id") << "0123456789abcdef0123456789abcdef\n";
    std::ofstream(dir_ / "boot_id") << "7a0e5c1e-0000-4000-8000-000000000001\n";
    std::ofstream(dir_ / "os-release") << "NAME=x\nPRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\n";
    o_.machine_id_file = (dir_ / "machine-id").string();
    o_.boot_id_file = (dir_ / "boot_id").string();
    o_.os_release_file = (dir_ / "os-release").string();
    o_.sys_block_dir = (dir_ / "block").string();
    o_.nvml_library = "libhpod-no-such-nvml.so";
  }
  void TearDown() override { fs::remove_all(dir_); }

  // A slurmd whose -V prints `says`.
  void Slurmd(const std::string& says) {
    const fs::path p = dir_ / "slurmd";
    std::ofstream(p) << "#!/bin/sh\necho '" << says << "'\n";
    ::chmod(p.c_str(), 0755);
    o_.slurmd = p.string();
  }

  fs::path dir_;
  FactsOptions o_;
};

TEST_F(MachineFactsTest, ReportsTheMachineAndSlurmsVersionAsDebianPrintsIt) {
  Slurmd("slurm-wlm 22.05.8");  // Debian's slurmd -V
  auto f = CollectMachineFacts(o_);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ((*f)["machine_id"], "0123456789abcdef0123456789abcdef");
  EXPECT_EQ((*f)["boot_id"], "7a0e5c1e-0000-4000-8000-000000000001");
  EXPECT_EQ((*f)["os"], "Debian GNU/Linux 12 (bookworm)");
  EXPECT_EQ((*f)["slurm_version"], "22.05.8");
  EXPECT_GT((*f)["cpus"].get<int64_t>(), 0);
  EXPECT_TRUE((*f)["gpus"].empty());  // no NVML here
  Slurmd("slurm 23.11.1");  // upstream's
  EXPECT_EQ((*CollectMachineFacts(o_))["slurm_version"], "23.11.1");
  o_.slurmd = (dir_ / "no-slurmd").string();
  EXPECT_FALSE(CollectMachineFacts(o_)->contains("slurm_version"));
}

TEST_F(MachineFactsTest, AMissingMachineIdSaysHowToMakeOne) {
  std::ofstream(dir_ / "machine-id") << "not-an-id\n";
  auto f = CollectMachineFacts(o_);
  EXPECT_EQ(f.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(f.status().message().find("systemd-machine-id-setup"), std::string::npos);
}

}  // namespace
}  // namespace hpod::agent
