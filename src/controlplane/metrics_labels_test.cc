// The bounded label vocabulary of agent-supplied values (metrics_labels.h).

#include "hpod/controlplane/metrics_labels.h"

#include <gtest/gtest.h>

#include <string>

namespace hpod::controlplane {
namespace {

TEST(MetricsLabelsTest, HealthChecksHpodRunsKeepTheirNames) {
  for (const char* name : {"disk:/", "disk:/fsx", "disk:/var/lib/hpod-agent", "memory", "slurm",
                           "network", "flag_file", "kernel_log", "gpu"}) {
    EXPECT_EQ(HealthCheckLabel(name), name);
  }
  for (const char* name : {"", "disk:/tmp", "GPU", "gpu ", "x-4711", "disk:/fsx/../etc"}) {
    EXPECT_EQ(HealthCheckLabel(name), "other") << name;
  }
}

TEST(MetricsLabelsTest, SlurmStatesAreSlurmsBaseStateAndFlags) {
  for (const char* state :
       {"IDLE", "ALLOCATED", "MIXED", "DOWN", "ERROR", "FUTURE", "UNKNOWN", "IDLE+DRAIN",
        "DOWN+FAIL", "DOWN+DRAIN+NOT_RESPONDING", "MIXED+COMPLETING", "IDLE+CLOUD+POWERED_DOWN",
        "IDLE*", "DOWN*+DRAIN", "ALLOCATED+REBOOT_REQUESTED"}) {
    EXPECT_EQ(SlurmStateLabel(state), state);
  }
  for (const char* state : {"", "idle", "DRAIN", "IDLE+", "+DRAIN", "IDLE+IDLE", "IDLE+WHATEVER",
                            "BUSY", "IDLE**", "IDLE DRAIN", "DOWN+FAIL+x"}) {
    EXPECT_EQ(SlurmStateLabel(state), "other") << state;
  }
  // Only known names, but longer than a label may be.
  std::string longest = "IDLE";
  while (longest.size() <= kMaxLabelValueBytes) longest += "+DRAIN";
  EXPECT_EQ(SlurmStateLabel(longest), "other");
}

TEST(MetricsLabelsTest, SlurmStatesAreCappedPerCluster) {
  std::map<std::string, int> few = {{"IDLE", 3}, {"DOWN+FAIL", 1}};
  EXPECT_EQ(CapSlurmStates(few), few);
  std::map<std::string, int> many = {{"other", 2}};
  for (size_t i = 0; i < 100; ++i) many["S" + std::to_string(i)] = 1;
  many["IDLE"] = 50;
  many["MIXED"] = 20;
  auto capped = CapSlurmStates(many);
  EXPECT_EQ(capped.size(), kMaxSlurmStateLabels);
  EXPECT_EQ(capped["IDLE"], 50);
  EXPECT_EQ(capped["MIXED"], 20);
  int total = 0;
  for (const auto& [state, n] : capped) total += n;
  EXPECT_EQ(total, 2 + 100 + 50 + 20) << "no node is lost";
  // The states kept besides the two largest are the first by name (S0, S1, S10, ...).
  EXPECT_EQ(capped.count("S0"), 1u);
  EXPECT_EQ(capped.count("S99"), 0u);
  EXPECT_EQ(capped["other"], 2 + 100 - static_cast<int>(kMaxSlurmStateLabels - 3));
}

TEST(MetricsLabelsTest, LabelValuesAreShortAndValidUtf8) {
  EXPECT_EQ(BoundedLabelValue("ip-10-77-1-11"), "ip-10-77-1-11");
  EXPECT_EQ(BoundedLabelValue(""), "");
  EXPECT_EQ(BoundedLabelValue(std::string(1000, 'a')), std::string(kMaxLabelValueBytes, 'a'));
  EXPECT_EQ(BoundedLabelValue("caf\xc3\xa9"), "caf\xc3\xa9");
  EXPECT_EQ(BoundedLabelValue("a\xff"
                              "b\xc3"),
            "a?b?");
  EXPECT_EQ(BoundedLabelValue("\xed\xa0\x80"), "???") << "a UTF-16 surrogate is not UTF-8";
  EXPECT_EQ(BoundedLabelValue("\xc0\xaf"), "??") << "overlong";
  EXPECT_EQ(BoundedLabelValue("\xf0\x9f\x98\x80"), "\xf0\x9f\x98\x80");
  // Cut at a character boundary: 127 ASCII bytes and a 2-byte character do not fit.
  std::string almost(kMaxLabelValueBytes - 1, 'x');
  EXPECT_EQ(BoundedLabelValue(almost + "\xc3\xa9"), almost);
}

}  // namespace
}  // namespace hpod::controlplane
