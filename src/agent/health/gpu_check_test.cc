#include "hpod/agent/health/gpu_check.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>

#include "hpod/agent/health/checks.h"
#include "hpod/agent/test_util.h"

namespace hpod::agent::health {
namespace {

using testing::TempDir;

// The GPU check against libhpod_fake_nvml.so, scripted through the file named
// by HPOD_FAKE_NVML_SCRIPT. One GpuCheck at a time: the fake is one NVML per
// process, as the real one is.
class GpuCheckTest : public ::testing::Test {
 protected:
  void SetUp() override { ::setenv("HPOD_FAKE_NVML_SCRIPT", script_.c_str(), 1); }
  void TearDown() override { ::unsetenv("HPOD_FAKE_NVML_SCRIPT"); }

  // Rewritten atomically, as a live fault injection should be.
  void Script(const std::string& json) {
    testing::WriteTestFile(script_ + ".tmp", json);
    std::filesystem::rename(script_ + ".tmp", script_);
  }
  std::unique_ptr<GpuCheck> Check(std::string type = "ml.p5.48xlarge",
                                  std::string library = HPOD_FAKE_NVML_PATH) {
    return std::make_unique<GpuCheck>(
        GpuCheckOptions{std::move(library), [type] { return type; }, 90});
  }
  Outcome RunWith(const std::string& json) {
    Script(json);
    return Check()->Run();
  }

  TempDir dir_;
  const std::string script_ = dir_ / "nvml.json";
};

TEST_F(GpuCheckTest, SkippedWithoutGpusOrWithoutNvml) {
  EXPECT_EQ(Check("")->Run(), Outcome::Skipped("the node's instance type is not known yet"));
  EXPECT_EQ(Check("ml.c5.large")->Run(), Outcome::Skipped("ml.c5.large has no GPUs"));
  EXPECT_EQ(Check("ml.c5.large", "/no/libnvidia-ml.so.1")->Run().result, Result::kSkipped);
  // A GPU type without NVML (a local node on a host without GPUs): skipped, saying so.
  Outcome o = Check("ml.p5.48xlarge", "/no/libnvidia-ml.so.1")->Run();
  EXPECT_EQ(o.result, Result::kSkipped);
  EXPECT_EQ(o.reason.rfind("NVML is missing (", 0), 0u) << o.reason;
  EXPECT_NE(o.reason.find("the 8 GPUs of ml.p5.48xlarge are not checked"), std::string::npos);
  // A library without NVML's symbols.
  o = Check("ml.p5.48xlarge", "libc.so.6")->Run();
  EXPECT_EQ(o.result, Result::kSkipped);
  // Turned off (the local provider's stand-in GPUs), even on a host with real ones.
  o = Check("ml.p5.48xlarge", "none")->Run();
  EXPECT_EQ(o.result, Result::kSkipped);
  EXPECT_NE(o.reason.find("turned off"), std::string::npos) << o.reason;
}

TEST_F(GpuCheckTest, HealthyGpusAreOk) {
  EXPECT_EQ(RunWith(R"({"devices": 8})"), Outcome::Ok());
  EXPECT_EQ(RunWith("{}"), Outcome::Ok());  // 8 by default
  Script(R"({"devices": 1})");
  EXPECT_EQ(Check("ml.g5.xlarge")->Run(), Outcome::Ok());
}

TEST_F(GpuCheckTest, EachScriptedFault) {
  struct Case {
    const char* script;
    Verdict verdict;
    const char* reason;
  };
  const Case cases[] = {
      {R"({"devices": 7})", Verdict::kReboot, "NVML sees 7 GPUs; ml.p5.48xlarge has 8"},
      {R"({"lost": [3]})", Verdict::kReplace, "GPU 3 is lost"},
      {R"({"ecc_uncorrected": {"0": 1}})", Verdict::kReplace, "GPU 0 has uncorrected ECC errors"},
      {R"({"remapped_pending": [1]})", Verdict::kReboot, "GPU 1 has row remappings pending"},
      {R"({"remap_failure": [2]})", Verdict::kReplace, "GPU 2 row remapping failed"},
      {R"({"temperature": {"0": 95}})", Verdict::kReboot, "GPU 0 at or above 90 °C"},
      {R"({"temperature": {"5": 90}})", Verdict::kReboot, "GPU 5 at or above 90 °C"},
      {R"({"xids": [74]})", Verdict::kReplace, "Xid 74 on GPU 0 (NVLink error)"},
      {R"({"xids": [73]})", Verdict::kReboot, "Xid 73 on GPU 0 (NVENC2 error)"},
      {R"({"init_error": 999})", Verdict::kReboot, "nvmlInit failed: Unknown Error (999)"},
      // The worst finding decides; the reason lists them all.
      {R"({"devices": 7, "lost": [3]})", Verdict::kReplace,
       "NVML sees 7 GPUs; ml.p5.48xlarge has 8; GPU 3 is lost"},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(RunWith(c.script), Outcome::Fail(c.verdict, c.reason)) << c.script;
  }
  EXPECT_EQ(RunWith(R"({"temperature": {"0": 89}})"), Outcome::Ok());
  EXPECT_EQ(RunWith(R"({"xids": [13, 43]})"), Outcome::Ok());           // application errors
  EXPECT_EQ(RunWith(R"({"init_error": 9})").result, Result::kSkipped);  // no driver
  EXPECT_EQ(RunWith("not json"), Outcome::Ok());                        // read as no script
}

TEST_F(GpuCheckTest, FaultsInjectedLiveAndXidsKept) {
  Script(R"({"devices": 8})");
  auto check = Check();
  EXPECT_EQ(check->Run(), Outcome::Ok());
  Script(R"({"temperature": {"2": 99}})");
  EXPECT_EQ(check->Run().verdict, Verdict::kReboot);
  Script(R"({})");
  EXPECT_EQ(check->Run(), Outcome::Ok());  // it cooled down
  Script(R"({"xids": [79]})");
  Outcome xid = check->Run();
  EXPECT_EQ(xid, Outcome::Fail(Verdict::kReplace, "Xid 79 on GPU 0 (GPU has fallen off the bus)"));
  EXPECT_EQ(check->Run(), xid) << "delivered once, and kept until the agent restarts";
  Script(R"({})");
  EXPECT_EQ(check->Run(), xid);
}

TEST(HealthFactoryTest, ChecksInReportOrderAndEnvOverrides) {
  TempDir dir;
  HealthOptions options;
  options.disk_paths = {"/", dir.path(), "/fsx"};
  NodeProbes probes;
  probes.state_dir = dir.path();
  probes.slurm_state = [] { return api::agentproto::SlurmStatus{}; };
  FakeClock clock;
  std::vector<std::string> names;
  for (const auto& c : MakeHealthChecks(options, probes, clock)) names.push_back(c->name());
  EXPECT_EQ(names, (std::vector<std::string>{"disk:/", "disk:" + dir.path(), "disk:/fsx", "memory",
                                             "slurm", "flag_file", "kernel_log", "gpu"}));
  ::unsetenv("HPOD_KERNEL_LOG");
  ::unsetenv("HPOD_NVML_LIBRARY");
  EXPECT_EQ(KernelLogPath(options), "/dev/kmsg");
  EXPECT_EQ(NvmlLibrary(options), "libnvidia-ml.so.1");
  options.kernel_log = "/var/log/kern.log";
  options.nvml_library = "/opt/nvml.so";
  EXPECT_EQ(KernelLogPath(options), "/var/log/kern.log");
  EXPECT_EQ(NvmlLibrary(options), "/opt/nvml.so");
  ::setenv("HPOD_KERNEL_LOG", "/tmp/k.log", 1);
  ::setenv("HPOD_NVML_LIBRARY", "/tmp/fake.so", 1);
  EXPECT_EQ(KernelLogPath(options), "/tmp/k.log");
  EXPECT_EQ(NvmlLibrary(options), "/tmp/fake.so");
  ::unsetenv("HPOD_KERNEL_LOG");
  ::unsetenv("HPOD_NVML_LIBRARY");
}

}  // namespace
}  // namespace hpod::agent::health
