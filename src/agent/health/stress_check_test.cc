#include "hpod/agent/health/stress_check.h"

#include <gtest/gtest.h>

#include <filesystem>

namespace hpod::agent::health {
namespace {

// stress-ng 0.15.06's --yaml output (Debian 12), cut to what is read.
constexpr const char* kYaml = R"(---
system-info:
      stress-ng-version: 0.15.06
      cpus: 2
metrics:
    - stressor: cpu
      bogo-ops: 8859
      bogo-ops-per-second-usr-sys-time: 1723.622342
      bogo-ops-per-second-real-time: 1770.739871
      wall-clock-time: 5.002993
      cpu-usage-per-instance: 51.366817

    - stressor: vm
      bogo-ops: 154100
      bogo-ops-per-second-real-time: 30756.862805
      cpu-usage-per-instance: 56.408146

    - stressor: hdd
      bogo-ops: 32219
      bogo-ops-per-second-real-time: 6402.835205
      cpu-usage-per-instance: 39.301592
      mbsec-write-rate: 1865.783440

...
)";

TEST(StressCheckTest, ParsesTheMetricsOfStressNgYaml) {
  auto m = ParseStressYaml(kYaml);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  ASSERT_EQ(m->size(), 3u);
  EXPECT_EQ((*m)[0].stressor, "cpu");
  EXPECT_DOUBLE_EQ((*m)[0].bogo_ops, 8859);
  EXPECT_NEAR((*m)[0].rate_real_time, 1770.74, 0.01);
  EXPECT_NEAR((*m)[1].cpu_usage_per_instance, 56.41, 0.01);
  EXPECT_EQ((*m)[2].stressor, "hdd");
  EXPECT_FALSE(ParseStressYaml("---\nsystem-info:\n      cpus: 2\n").ok());
}

TEST(StressCheckTest, AHealthyRunPassesAndSaysWhatItMeasured) {
  StressOptions o;
  auto v = JudgeStress(o, 2, 0, "", *ParseStressYaml(kYaml));
  EXPECT_TRUE(v.passed) << v.message;
  EXPECT_EQ(v.message,
            "stress-ng for 5 s on 2 CPUs, 256M of memory and 64M of disk: cpu 885/s, vm 30757/s, "
            "hdd 6403/s per instance");
  EXPECT_EQ(v.detail["stressors"][0]["instances"], 2);
}

TEST(StressCheckTest, AThrottledCpuFailsByItsRate) {
  // What `hpod inject-fault --kind cpu-throttle` leaves a node: 1% of one CPU.
  auto m = *ParseStressYaml(kYaml);
  m[0].rate_real_time = 14;
  m[0].cpu_usage_per_instance = 0.4;
  StressOptions o;
  auto v = JudgeStress(o, 2, 0, "", m);
  EXPECT_FALSE(v.passed);
  EXPECT_EQ(v.message,
            "cpu ran at 7 bogo-ops/s per instance, below the minimum of 25 (CPU use 0% per "
            "instance)");
}

TEST(StressCheckTest, AFailedVerificationOrAMissingStressorFails) {
  auto m = *ParseStressYaml(kYaml);
  m.pop_back();
  StressOptions o;
  auto v = JudgeStress(o, 2, 2,
                       "stress-ng: info:  [12] dispatching hogs\n"
                       "stress-ng: fail:  [15] vm: detected 3 bit errors while stressing memory\n",
                       m);
  EXPECT_FALSE(v.passed);
  EXPECT_EQ(v.message,
            "stress-ng exited with code 2 (vm: detected 3 bit errors while stressing memory); the "
            "hdd stressor reported nothing");
}

TEST(StressCheckTest, ArgvRunsEveryStressorWithVerification) {
  StressOptions o;
  o.dir = "/scratch";
  auto argv = StressArgv(o, 4, "/scratch/m.yaml");
  std::string line;
  for (const auto& a : argv) line += a + " ";
  EXPECT_EQ(line,
            "stress-ng --sched idle --cpu 4 --vm 1 --vm-bytes 256M --hdd 1 --hdd-bytes 64M "
            "--temp-path /scratch "
            "--verify --timeout 5s --metrics-brief --yaml /scratch/m.yaml ");
}

TEST(StressCheckTest, RunsTheRealStressNgWhenInstalled) {
  if (!std::filesystem::exists("/usr/bin/stress-ng")) {
    GTEST_SKIP() << "stress-ng is not installed (scripts/install-deps.sh)";
  }
  StressOptions o;
  o.seconds = 1;
  o.cpu_workers = 1;
  o.memory = "16M";
  o.disk = "4M";
  o.dir = ::testing::TempDir() + "/stress";
  // Minimums of zero: this asserts that a real run is parsed, not this host's speed.
  o.min_cpu_rate = o.min_vm_rate = o.min_hdd_rate = 0;
  auto v = RunStressCheck(o);
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  EXPECT_TRUE(v->passed) << v->message;
  ASSERT_EQ(v->detail["stressors"].size(), 3u);
  EXPECT_GT(v->detail["stressors"][0]["bogo_ops"].get<double>(), 0);
}

}  // namespace
}  // namespace hpod::agent::health
