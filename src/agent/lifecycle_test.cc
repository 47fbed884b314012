#include "hpod/agent/lifecycle.h"

#include <gtest/gtest.h>

#include <mutex>

#include "hpod/agent/source_fetch.h"
#include "hpod/agent/test_util.h"

namespace hpod::agent {
namespace {

using api::LifecycleState;
using nlohmann::json;
using testing::ReadTestFile;
using testing::TempDir;
using testing::WriteTestFile;

class LifecycleTest : public ::testing::Test {
 protected:
  LifecycleRunnerOptions Options() {
    LifecycleRunnerOptions options;
    options.config_dir = dir_ / "opt/ml/config";
    options.lifecycle_root = dir_ / "tmp";
    options.state_dir = dir_ / "state";
    options.kill_grace = std::chrono::milliseconds(200);
    return options;
  }
  std::unique_ptr<LifecycleRunner> MakeRunner() {
    return std::make_unique<LifecycleRunner>(
        Options(), RealClock::Get(),
        [this](const LifecycleStatus& s) {
          std::lock_guard<std::mutex> lock(mu_);
          states_.push_back(api::NameString(s.state));
        },
        [this](std::string_view chunk) {
          std::lock_guard<std::mutex> lock(mu_);
          log_ += chunk;
        });
  }
  LifecycleSpec Spec(const std::string& script, int timeout_s = 30) {
    WriteTestFile(dir_ / "source/on_create.sh", script, 0644);  // not executable: runner fixes
    WriteTestFile(dir_ / "source/provisioning_parameters.json", "{\"controller_group\":\"c\"}");
    WriteTestFile(dir_ / "source/utils/helper.sh", "echo helper-ran\n");
    LifecycleSpec spec;
    spec.source_uri = "file://" + dir_.path() + "/source/";
    spec.on_create = "on_create.sh";
    spec.timeout = std::chrono::seconds(timeout_s);
    return spec;
  }

  TempDir dir_;
  std::mutex mu_;
  std::vector<std::string> states_;
  std::string log_;
  const json resource_config_ = {{"ClusterConfig", {{"ClusterName", "c1"}}},
                                 {"InstanceGroups", json::array()}};
};

TEST_F(LifecycleTest, RunsOnCreateWithHyperPodContract) {
  auto runner = MakeRunner();
  LifecycleStatus done = runner->Run(Spec("#!/bin/bash\n"
                                          "echo cwd=$(pwd)\n"
                                          "echo env=$SAGEMAKER_RESOURCE_CONFIG_PATH\n"
                                          "cat \"$SAGEMAKER_RESOURCE_CONFIG_PATH\" | tr -d ' \\n'\n"
                                          "echo\n"
                                          "cat provisioning_parameters.json; echo\n"
                                          "bash ./utils/helper.sh\n"
                                          "echo to-stderr >&2\n"),
                                     resource_config_, nullptr);
  EXPECT_EQ(done.state, LifecycleState::kSucceeded) << done.message << "\n" << log_;
  const std::string config_path = dir_ / "opt/ml/config/resource_config.json";
  EXPECT_EQ(json::parse(ReadTestFile(config_path)), resource_config_);
  EXPECT_EQ(ReadTestFile(dir_ / "opt/ml/config/provisioning_parameters.json"),
            "{\"controller_group\":\"c\"}");
  EXPECT_NE(log_.find("cwd=" + dir_.path() + "/tmp/sagemaker-lifecycle-"), std::string::npos)
      << log_;
  EXPECT_NE(log_.find("/src\n"), std::string::npos) << log_;
  EXPECT_NE(log_.find("env=" + config_path + "\n"), std::string::npos) << log_;
  EXPECT_NE(log_.find("\"ClusterName\":\"c1\""), std::string::npos) << log_;
  EXPECT_NE(log_.find("helper-ran"), std::string::npos) << log_;
  EXPECT_NE(log_.find("to-stderr"), std::string::npos) << log_;
  EXPECT_EQ(ReadTestFile(dir_ / "state/lifecycle.log"), log_);
  EXPECT_EQ(states_, (std::vector<std::string>{"Running", "Succeeded"}));
}

TEST_F(LifecycleTest, NonZeroExitIsReportedAndNeverRerun) {
  const std::string counter = dir_ / "runs";
  auto spec = Spec("#!/bin/sh\necho x >> " + counter + "\nexit 3\n");
  {
    auto runner = MakeRunner();
    LifecycleStatus done = runner->Run(spec, resource_config_, nullptr);
    EXPECT_EQ(done.state, LifecycleState::kFailed);
    EXPECT_EQ(done.exit_code, 3);
    EXPECT_EQ(done.message, "Lifecycle script on_create.sh exited with code 3");
  }
  // A restarted agent loads the outcome and does not run the script again.
  auto restarted = MakeRunner();
  ASSERT_TRUE(restarted->LoadState().ok());
  EXPECT_EQ(restarted->status().state, LifecycleState::kFailed);
  LifecycleStatus again = restarted->Run(spec, resource_config_, nullptr);
  EXPECT_EQ(again.message, "Lifecycle script on_create.sh exited with code 3");
  EXPECT_EQ(ReadTestFile(counter), "x\n");
}

TEST_F(LifecycleTest, InterruptedRunRunsAgain) {
  WriteTestFile(dir_ / "state/lifecycle.json",
                "{\"state\":\"Running\",\"exit_code\":0,\"message\":\"\"}");
  auto runner = MakeRunner();
  ASSERT_TRUE(runner->LoadState().ok());
  EXPECT_EQ(runner->status().state, LifecycleState::kNotStarted);
  EXPECT_EQ(runner->Run(Spec("#!/bin/sh\nexit 0\n"), resource_config_, nullptr).state,
            LifecycleState::kSucceeded);
}

TEST_F(LifecycleTest, TimeoutKillsTheScript) {
  const std::string marker = dir_ / "finished";
  auto runner = MakeRunner();
  auto start = std::chrono::steady_clock::now();
  LifecycleStatus done = runner->Run(Spec("#!/bin/sh\nsleep 30\ntouch " + marker + "\n", 1),
                                     resource_config_, nullptr);
  EXPECT_EQ(done.state, LifecycleState::kFailed);
  EXPECT_EQ(done.message, "Lifecycle script on_create.sh timed out after 1 s");
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
  EXPECT_FALSE(std::filesystem::exists(marker));
}

TEST_F(LifecycleTest, NoLifecycleSucceedsAtOnce) {
  auto runner = MakeRunner();
  LifecycleStatus done = runner->Run(std::nullopt, resource_config_, nullptr);
  EXPECT_EQ(done, (LifecycleStatus{LifecycleState::kSucceeded, 0, "no lifecycle configuration"}));
  EXPECT_TRUE(std::filesystem::exists(dir_ / "opt/ml/config/resource_config.json"));
}

TEST_F(LifecycleTest, FetchFailureIsTheUserMessage) {
  auto runner = MakeRunner();
  LifecycleSpec spec;
  spec.source_uri = "file://" + dir_.path() + "/empty/";
  spec.on_create = "on_create.sh";
  LifecycleStatus done = runner->Run(spec, resource_config_, nullptr);
  EXPECT_EQ(done.state, LifecycleState::kFailed);
  EXPECT_EQ(done.message, "No objects found under " + spec.source_uri + " " + kFileSourceHint);
}

// Scripts hpodd sent in the config (a file:// source of its own, for a node
// that cannot see it) are run as fetched ones are; nothing is fetched, and a
// path out of the directory is refused.
TEST_F(LifecycleTest, RunsTheScriptsHpoddSentWithoutFetching) {
  auto runner = MakeRunner();
  LifecycleSpec spec;
  spec.source_uri = "file:///on/hpodds/machine/";  // not here: must not be read
  spec.on_create = "on_create.sh";
  spec.files = {{"on_create.sh", "#!/bin/bash\n./utils/helper.sh\n"},
                {"utils/helper.sh", "#!/bin/bash\necho sent-helper-ran\n"}};
  spec.executable = {"on_create.sh", "utils/helper.sh"};
  LifecycleStatus done = runner->Run(spec, resource_config_, nullptr);
  EXPECT_EQ(done.state, LifecycleState::kSucceeded) << done.message << "\n" << log_;
  EXPECT_NE(log_.find("sent-helper-ran"), std::string::npos) << log_;

  auto again = MakeRunner();
  std::filesystem::remove(dir_ / "state/lifecycle.json");
  spec.files["../escape.sh"] = "x";
  done = again->Run(spec, resource_config_, nullptr);
  EXPECT_EQ(done.state, LifecycleState::kFailed);
  EXPECT_EQ(done.message, "hpodd sent a lifecycle file outside its directory: ../escape.sh");
  EXPECT_FALSE(std::filesystem::exists(dir_ / "tmp/escape.sh"));
}

TEST(LifecycleSpecTest, Parses) {
  auto spec = ParseLifecycleSpec(json::parse(
      R"({"source_s3_uri":"s3://b/p/","on_create":"x.sh","timeout_s":60,
          "s3":{"endpoint":"http://e","region":"eu-west-1","access_key_id":"A","secret_access_key":"S"}})"));
  ASSERT_TRUE(spec.ok());
  ASSERT_TRUE(spec->has_value());
  EXPECT_EQ((*spec)->timeout, std::chrono::seconds(60));
  EXPECT_EQ((*spec)->s3->region, "eu-west-1");
  EXPECT_FALSE(ParseLifecycleSpec(nullptr)->has_value());
  EXPECT_FALSE(ParseLifecycleSpec(json::parse(R"({"on_create":"x"})")).ok());
}

}  // namespace
}  // namespace hpod::agent
