#include "hpod/slurm/spank/container_step.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
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
  ASSERT_TRUE(ApplyContainerOption(r, ContainerOption::kEntrypoint, "").ok());
  EXPECT_TRUE(r.entrypoint);
  ASSERT_TRUE(ApplyContainerOption(r, ContainerOption::kNoEntrypoint, "").ok());
  EXPECT_FALSE(r.entrypoint);
  for (auto [opt, value] : std::vector<std::pair<ContainerOption, std::string>>{
           {ContainerOption::kImage, "nvcr.io/nvidia/pytorch"},
           {ContainerOption::kMounts, "/fsx"},
           {ContainerOption::kMounts, "fsx:/fsx"},
           {ContainerOption::kWorkdir, "work"},
           {ContainerOption::kName, "a/b"},
           {ContainerOption::kEnv, "A=1"}}) {
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
  auto j = nlohmann::json::parse(HelperSpec(r, who, "/opt/sagemaker/hpod-container", 7ull << 30));
  EXPECT_EQ(j["cache_max_bytes"], 7ull << 30);
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

TEST_F(ContainerStepTest, TheEntrypointRunsWithTheCommandAsItsArguments) {
  // A stand-in helper: holds a process and answers with this reply ("PID" is its pid).
  const std::string out = dir_ + "/out";
  nlohmann::json reply = {{"pid", "PID"},
                          {"entrypoint", {"sh", "-c", "echo entry \"$@\" > " + out, "ep"}}};
  std::ofstream(dir_ + "/reply.json") << reply.dump() << "\n";
  const std::string helper = Helper("sleep 60 & sed \"s/\\\"PID\\\"/$!/\" " + dir_ +
                                    "/reply.json\n" + "cat >/dev/null\nkill $!\n");
  ContainerStep step;
  ContainerRequest r;
  r.entrypoint = true;
  Status s = step.Start(helper, "{}", r);
  ASSERT_TRUE(s.ok()) << s.ToString();
  pid_t pid = fork();
  if (pid == 0) {
    char path[] = "PATH=/usr/bin:/bin";
    char* env[] = {path, nullptr};
    (void)step.ExecEntrypoint({"python3", "train.py"}, env);
    _exit(99);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  std::ifstream in(out);
  std::string line;
  std::getline(in, line);
  EXPECT_EQ(line, "entry python3 train.py");
  step.Stop();
  // Without --container-entrypoint nothing is exec'd.
  ContainerStep plain;
  r.entrypoint = false;
  ASSERT_TRUE(plain.Start(helper, "{}", r).ok());
  EXPECT_TRUE(plain.ExecEntrypoint({"true"}, nullptr).ok());
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
