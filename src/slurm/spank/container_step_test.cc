#include "hpod/slurm/spank/container_step.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <nlohmann/json.hpp>

namespace hpod::spank {
namespace {

TEST(ContainerOptionsTest, PyxisOptionsAreCheckedWhereTheyAreParsed) {
  ContainerRequest r;
  EXPECT_FALSE(r.Wanted());
  ASSERT_TRUE(ApplyContainerOption(r, ContainerOption::kImage, "/fsx/images/a.sqsh").ok());
  EXPECT_TRUE(r.Wanted());
  EXPECT_TRUE(r.writable);
  ASSERT_TRUE(ApplyContainerOption(r, ContainerOption::kReadonly, "").ok());
  EXPECT_FALSE(r.writable);
  ASSERT_TRUE(ApplyContainerOption(r, ContainerOption::kEnv, "PATH,LD_LIBRARY_PATH").ok());
  EXPECT_EQ(r.host_env, (std::vector<std::string>{"PATH", "LD_LIBRARY_PATH"}));
  for (auto [opt, value] : std::vector<std::pair<ContainerOption, std::string>>{
           {ContainerOption::kImage, "nvcr.io/nvidia/pytorch"},
           {ContainerOption::kMounts, "/fsx"},
           {ContainerOption::kMounts, "fsx:/fsx"},
           {ContainerOption::kWorkdir, "work"},
           {ContainerOption::kName, "a/b"},
           {ContainerOption::kEnv, "A=1"},
           {ContainerOption::kEntrypoint, ""}}) {
    if (opt == ContainerOption::kMounts && value == "/fsx") {
      EXPECT_TRUE(ApplyContainerOption(r, opt, value).ok());
      continue;
    }
    Status s = ApplyContainerOption(r, opt, value);
    EXPECT_FALSE(s.ok()) << value;
    EXPECT_EQ(s.message().find('\n'), std::string::npos);
  }
}

TEST(ContainerOptionsTest, HelperSpecCarriesMountsHomeAndIdentity) {
  ContainerRequest r;
  ASSERT_TRUE(ApplyContainerOption(r, ContainerOption::kImage, "reg:5000#a/b:1").ok());
  ASSERT_TRUE(ApplyContainerOption(r, ContainerOption::kMounts, "/fsx:/data:ro").ok());
  ASSERT_TRUE(ApplyContainerOption(r, ContainerOption::kMountHome, "").ok());
  StepIdentity who{"12", "3", 1000, 1000, "/fsx/home/alice", true};
  auto j = nlohmann::json::parse(HelperSpec(r, who, "/opt/sagemaker/hpod-container"));
  EXPECT_EQ(j["image"], "reg:5000#a/b:1");
  EXPECT_EQ(j["job_id"], "12");
  EXPECT_EQ(j["allow_http"], true);
  ASSERT_EQ(j["mounts"].size(), 2u);
  EXPECT_EQ(j["mounts"][0]["destination"], "/data");
  EXPECT_EQ(j["mounts"][0]["read_only"], true);
  EXPECT_EQ(j["mounts"][1]["source"], "/fsx/home/alice");
}

class ContainerStepTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/hpod-container-step-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::system(("rm -rf " + dir_).c_str()); }
  std::string Helper(const std::string& body) {
    const std::string p = dir_ + "/helper";
    std::ofstream(p) << "#!/bin/sh\n" << body;
    ::chmod(p.c_str(), 0755);
    return p;
  }
  std::string dir_;
};

TEST_F(ContainerStepTest, TheHelpersErrorIsTheStepsOneLine) {
  ContainerStep step;
  ContainerRequest r;
  Status s = step.Start(Helper("echo '{\"error\":\"image /fsx/x.sqsh does not exist\"}'; exit 1\n"),
                        "{}", r);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message(), "image /fsx/x.sqsh does not exist");
  EXPECT_FALSE(step.started());
  s = step.Start("", "{}", r);
  EXPECT_NE(s.message().find("not installed"), std::string::npos);
}

TEST_F(ContainerStepTest, AHeldContainerGivesItsNamespaceAndTheImagesEnv) {
  ContainerStep step;
  ContainerRequest r;
  r.host_env = {"PATH"};
  // Stands in for the holder: a process whose namespace the step opens, living
  // until the lifeline (stdin) closes.
  const std::string marker = dir_ + "/gone";
  Status s = step.Start(
      Helper("sleep 60 & echo \"{\\\"pid\\\":$!,\\\"env\\\":[\\\"PATH=/opt/x\\\",\\\"A=1=2\\\"],"
             "\\\"workdir\\\":\\\"/w\\\"}\"\ncat >/dev/null\nkill $!\ntouch " +
             marker + "\n"),
      "{}", r);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_TRUE(step.started());
  ASSERT_EQ(step.TaskEnv().size(), 1u);  // PATH stays the node's (--container-env)
  EXPECT_EQ(step.TaskEnv()[0], (std::pair<std::string, std::string>{"A", "1=2"}));
  step.Stop();
  EXPECT_FALSE(step.started());
  EXPECT_EQ(::access(marker.c_str(), F_OK), 0) << "Stop closes the lifeline and reaps the helper";
}

}  // namespace
}  // namespace hpod::spank
