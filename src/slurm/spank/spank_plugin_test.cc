// The built artifacts: spank_hpod.so as Slurm's plugin loader sees it, and
// hpod-auto-resume running the whole loop (real runner, real socket client) against
// a fake agent.

#include <dlfcn.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "hpod/slurm/spank/spank_test_util.h"

namespace hpod::spank {
namespace {

using testing::FakeAgentServer;
using ::testing::HasSubstr;
using testing::TempDir;

TEST(SpankPlugin, ExportsWhatSlurmsLoaderLooksUp) {
  // RTLD_LAZY: the spank_* functions it calls come from srun/slurmstepd at run time.
  void* h = dlopen(HPOD_SPANK_SO, RTLD_LAZY | RTLD_LOCAL);
  ASSERT_NE(h, nullptr) << dlerror();
  auto* name = static_cast<const char*>(dlsym(h, "plugin_name"));
  auto* type = static_cast<const char*>(dlsym(h, "plugin_type"));
  auto* version = static_cast<const unsigned int*>(dlsym(h, "plugin_version"));
  auto* spank_version = static_cast<const unsigned int*>(dlsym(h, "spank_plugin_version"));
  ASSERT_NE(name, nullptr);
  ASSERT_NE(type, nullptr);
  ASSERT_NE(version, nullptr);
  ASSERT_NE(spank_version, nullptr);
  EXPECT_STREQ(name, "hpod");
  EXPECT_STREQ(type, "spank");
  EXPECT_NE(*version, 0u);
  EXPECT_EQ(*spank_version, 1u);
  for (const char* fn : {"slurm_spank_init", "slurm_spank_init_post_opt",
                         "slurm_spank_local_user_init", "slurm_spank_task_init"}) {
    EXPECT_NE(dlsym(h, fn), nullptr) << fn;
  }
  // The C++ library stays inside: nothing else to clash with other plugins.
  EXPECT_EQ(dlsym(h, "hpod_auto_resume_supervise"), nullptr);
  dlclose(h);
}

std::string ReadAll(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

TEST(HpodAutoResume, RetriesAfterARecoveryAndReportsTheJob) {
  TempDir dir;
  int health_calls = 0;
  FakeAgentServer agent(dir.path("agent.sock"), [&health_calls](const nlohmann::json& r) {
    if (r["op"] == "job_event") return std::optional<std::string>(R"({"ok":true})");
    return std::optional<std::string>(
        health_calls++ == 0 ? R"({"verdict":"recovered","nodes":[{"name":"n2","state":"recovered",)"
                              R"("recovery_id":"r-1","action":"Replace","status":"Succeeded"}]})"
                            : R"({"verdict":"healthy","nodes":[]})");
  });
  // Fails on attempt 0, succeeds on attempt 1; appends to the goodput ledger.
  const std::string step = dir.path("step.sh");
  std::ofstream(step) << "#!/bin/sh\n"
                         "echo '{\"event\":\"start\",\"time\":10,\"process_start\":9}' >> "
                         "\"$HPOD_GOODPUT_FILE\"\n"
                         "[ \"$HPOD_AUTO_RESUME_ATTEMPT\" = 1 ]\n";
  const std::string cmd =
      "cd " + dir.path() +
      " && env -u HPOD_GOODPUT_FILE HPOD_AGENT_SOCKET=" + dir.path("agent.sock") +
      " SLURM_SUBMIT_DIR=" + dir.path() + " " + HPOD_AUTO_RESUME_BIN +
      " --max-attempts 2 --job-id 12 --nodes 'n[1-2]' -- sh " + step + " 2> " + dir.path("stderr");
  int status = std::system(cmd.c_str());
  const std::string err = ReadAll(dir.path("stderr"));
  ASSERT_TRUE(WIFEXITED(status)) << err;
  EXPECT_EQ(WEXITSTATUS(status), 0) << err;
  EXPECT_THAT(err, HasSubstr("[Auto Resume] Info: JobID: 12 Response from cluster agent: JobId=12, "
                             "ResumeAction=RETRYSTEP"));
  EXPECT_THAT(err, HasSubstr("[Auto Resume] Info: JobID: 12 Retrying step. Attempt number: 1"));

  std::vector<std::string> ops;
  nlohmann::json finished;
  for (const auto& r : agent.Requests()) {
    ops.push_back(r["op"] == "job_health" ? "health" : r["event"].get<std::string>());
    if (r.value("event", "") == "finished") finished = r;
  }
  EXPECT_THAT(ops, ::testing::ElementsAre("started", "ended", "health", "retrying", "started",
                                          "ended", "health", "finished"));
  EXPECT_EQ(finished["exit_code"], 0);
  EXPECT_EQ(finished["nodes"], nlohmann::json({"n1", "n2"}));
  EXPECT_EQ(finished["recovery_ids"], nlohmann::json({"r-1"}));
  EXPECT_TRUE(finished.contains("goodput") || finished.contains("ledger_tail")) << finished.dump();
  EXPECT_FALSE(ReadAll(dir.path(".hpod/goodput-12.jsonl")).empty()) << finished.dump();
}

TEST(HpodAutoResume, HelpAndBadUsage) {
  EXPECT_EQ(
      WEXITSTATUS(std::system((std::string(HPOD_AUTO_RESUME_BIN) + " --help >/dev/null").c_str())),
      0);
  EXPECT_EQ(
      WEXITSTATUS(std::system(
          (std::string(HPOD_AUTO_RESUME_BIN) + " --max-attempts x -- true 2>/dev/null").c_str())),
      2);
  EXPECT_EQ(WEXITSTATUS(std::system((std::string(HPOD_AUTO_RESUME_BIN) + " 2>/dev/null").c_str())),
            2);
}

}  // namespace
}  // namespace hpod::spank
