#include "hpod/slurm/scontrol.h"

#include <gtest/gtest.h>

#include <ctime>

namespace hpod::slurm {
namespace {

using nlohmann::json;

// A real `scontrol -o show nodes` line from Slurm 22.05 (OS= holds spaces).
constexpr char kAllocated[] =
    "NodeName=ip-10-77-0-11 Arch=x86_64 CoresPerSocket=1  CPUAlloc=2 CPUEfctv=2 CPUTot=2 "
    "CPULoad=0.10 AvailableFeatures=(null) ActiveFeatures=(null) Gres=(null) NodeAddr=10.77.0.11 "
    "NodeHostName=ip-10-77-0-11 Version=22.05.8 OS=Linux 6.18.44-fc-v782 #1 SMP PREEMPT_DYNAMIC "
    "@0  RealMemory=1000 AllocMem=0 FreeMem=23769 Sockets=2 Boards=1 State=ALLOCATED "
    "ThreadsPerCore=1 TmpDisk=0 Weight=1 Owner=N/A MCS_label=N/A Partitions=dev  "
    "BootTime=2026-11-30T09:53:26 SlurmdStartTime=2026-11-30T09:54:53 "
    "LastBusyTime=2026-11-30T09:55:10 CfgTRES=cpu=2,mem=1000M,billing=2 AllocTRES=cpu=2 "
    "CapWatts=n/a CurrentWatts=0 AveWatts=0 ExtSensorsJoules=n/s ExtSensorsWatts=0 "
    "ExtSensorsTemp=n/s";

// The same node drained by hpod; Reason= comes last and holds spaces.
constexpr char kDrained[] =
    "NodeName=ip-10-77-0-12 Arch=x86_64 CoresPerSocket=1  CPUAlloc=0 CPUEfctv=2 CPUTot=2 "
    "CPULoad=0.00 Gres=(null) NodeAddr=10.77.0.12 NodeHostName=ip-10-77-0-12 Version=22.05.8 "
    "OS=Linux 6.18.44-fc-v782 #1 SMP PREEMPT_DYNAMIC @0  RealMemory=1000 State=IDLE+DRAIN "
    "ThreadsPerCore=1 Partitions=dev  BootTime=2026-11-30T09:53:26 "
    "SlurmdStartTime=2026-11-30T09:54:55 CfgTRES=cpu=2,mem=1000M,billing=2 AllocTRES= "
    "CapWatts=n/a CurrentWatts=0 AveWatts=0 ExtSensorsJoules=n/s ExtSensorsWatts=0 "
    "ExtSensorsTemp=n/s Reason=hpod: node is being removed [root@2026-11-30T10:00:00]";

// A node that never registered (slurmd not started yet).
constexpr char kDown[] =
    "NodeName=ip-10-77-0-13 CoresPerSocket=1  CPUAlloc=0 CPUEfctv=2 CPUTot=2 CPULoad=N/A "
    "Gres=(null) NodeAddr=10.77.0.13 NodeHostName=ip-10-77-0-13 RealMemory=1000 AllocMem=0 "
    "FreeMem=N/A Sockets=2 Boards=1 State=DOWN+NOT_RESPONDING ThreadsPerCore=1 TmpDisk=0 "
    "Weight=1 Partitions=dev  BootTime=None SlurmdStartTime=None LastBusyTime=2026-11-30T09:53:00 "
    "CfgTRES=cpu=2,mem=1000M,billing=2 AllocTRES= CapWatts=n/a CurrentWatts=0 AveWatts=0 "
    "ExtSensorsJoules=n/s ExtSensorsWatts=0 ExtSensorsTemp=n/s Reason=Not responding "
    "[slurm@2026-11-30T09:58:00]";

SlurmNodeState State(std::string state) {
  SlurmNodeState s;
  s.name = "n";
  s.state = std::move(state);
  return s;
}

TEST(SlurmNodeStateTest, SlurmdStartEpochReadsLocalTime) {
  SlurmNodeState s;
  s.slurmd_start_time = "None";
  EXPECT_EQ(s.SlurmdStartEpoch(), 0);
  std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%S", &local);
  s.slurmd_start_time = buf;
  EXPECT_EQ(s.SlurmdStartEpoch(), static_cast<double>(now));
}

TEST(ParseShowNodesTest, AllocatedNode) {
  auto nodes = ParseShowNodes(kAllocated);
  ASSERT_EQ(nodes.size(), 1u);
  EXPECT_EQ(nodes[0].name, "ip-10-77-0-11");
  EXPECT_EQ(nodes[0].state, "ALLOCATED");
  EXPECT_EQ(nodes[0].reason, "");
  EXPECT_EQ(nodes[0].slurmd_start_time, "2026-11-30T09:54:53");
  EXPECT_TRUE(nodes[0].Registered());
  EXPECT_FALSE(nodes[0].Drained());
}

TEST(ParseShowNodesTest, DrainedWithReason) {
  auto nodes = ParseShowNodes(kDrained);
  ASSERT_EQ(nodes.size(), 1u);
  EXPECT_EQ(nodes[0].state, "IDLE+DRAIN");
  EXPECT_EQ(nodes[0].reason, "hpod: node is being removed");
  EXPECT_EQ(nodes[0].slurmd_start_time, "2026-11-30T09:54:55");
  EXPECT_TRUE(nodes[0].Registered());
  EXPECT_TRUE(nodes[0].Drained());
}

TEST(ParseShowNodesTest, ReasonThatLooksLikeKeysAndKeysAfterIt) {
  // The [user@time] suffix ends the reason even when its text holds "Key=value";
  // keys after it (newer Slurm prints Comment= and Extra=) are still parsed.
  std::string line =
      "NodeName=a State=IDLE+FAIL Reason=health check Result=gpu lost "
      "[root@2026-11-30T10:00:00] Comment=(null) SlurmdStartTime=2026-11-30T09:54:55";
  auto nodes = ParseShowNodes(line);
  ASSERT_EQ(nodes.size(), 1u);
  EXPECT_EQ(nodes[0].reason, "health check Result=gpu lost");
  EXPECT_EQ(nodes[0].slurmd_start_time, "2026-11-30T09:54:55");
  EXPECT_TRUE(nodes[0].Drained());

  // Without the suffix the reason runs to the next key.
  nodes = ParseShowNodes("NodeName=b State=IDLE+DRAIN Reason=manual drain Comment=(null)");
  ASSERT_EQ(nodes.size(), 1u);
  EXPECT_EQ(nodes[0].reason, "manual drain");
}

TEST(ParseShowNodesTest, DownNotResponding) {
  auto nodes = ParseShowNodes(kDown);
  ASSERT_EQ(nodes.size(), 1u);
  EXPECT_EQ(nodes[0].name, "ip-10-77-0-13");
  EXPECT_EQ(nodes[0].state, "DOWN+NOT_RESPONDING");
  EXPECT_EQ(nodes[0].reason, "Not responding");
  EXPECT_EQ(nodes[0].slurmd_start_time, "None");
  EXPECT_FALSE(nodes[0].Registered());
  EXPECT_FALSE(nodes[0].Drained());
}

TEST(ParseShowNodesTest, SeveralLinesAndNoise) {
  std::string out = std::string(kAllocated) + "\n" + kDrained + "\r\n\n" + kDown + "\n";
  auto nodes = ParseShowNodes(out);
  ASSERT_EQ(nodes.size(), 3u);
  EXPECT_EQ(nodes[0].name, "ip-10-77-0-11");
  EXPECT_EQ(nodes[1].name, "ip-10-77-0-12");
  EXPECT_EQ(nodes[1].reason, "hpod: node is being removed");
  EXPECT_EQ(nodes[2].name, "ip-10-77-0-13");
}

TEST(ParseShowNodesTest, NoNodes) {
  EXPECT_TRUE(ParseShowNodes("No nodes in the system\n").empty());
  EXPECT_TRUE(ParseShowNodes("").empty());
}

TEST(SlurmNodeStateTest, Registered) {
  EXPECT_TRUE(State("IDLE").Registered());
  EXPECT_TRUE(State("MIXED").Registered());
  EXPECT_TRUE(State("IDLE+COMPLETING").Registered());
  EXPECT_FALSE(State("").Registered());
  EXPECT_FALSE(State("DOWN").Registered());
  EXPECT_FALSE(State("UNKNOWN").Registered());
  EXPECT_FALSE(State("FUTURE").Registered());
  EXPECT_FALSE(State("IDLE+NOT_RESPONDING").Registered());
  EXPECT_FALSE(State("IDLE+NO_RESPOND").Registered());
  EXPECT_FALSE(State("IDLE+POWERED_DOWN").Registered());
  // Older scontrol and sinfo mark "not responding" with '*'.
  EXPECT_FALSE(State("IDLE*").Registered());
}

TEST(SlurmNodeStateTest, Drained) {
  EXPECT_TRUE(State("IDLE+DRAIN").Drained());
  EXPECT_TRUE(State("ALLOCATED+DRAIN").Drained());
  EXPECT_TRUE(State("DRAINED").Drained());
  EXPECT_TRUE(State("DRAINING").Drained());
  EXPECT_TRUE(State("IDLE+FAIL").Drained());
  EXPECT_TRUE(State("DOWN+DRAIN+NOT_RESPONDING").Drained());
  EXPECT_FALSE(State("IDLE").Drained());
  EXPECT_FALSE(State("DOWN+NOT_RESPONDING").Drained());
}

TEST(SlurmNodeStateTest, JsonRoundTrip) {
  SlurmNodeState s = ParseShowNodes(kDrained).at(0);
  json j = s.ToJson();
  EXPECT_EQ(j, json({{"name", "ip-10-77-0-12"},
                     {"state", "IDLE+DRAIN"},
                     {"reason", "hpod: node is being removed"},
                     {"slurmd_start_time", "2026-11-30T09:54:55"}}));
  EXPECT_EQ(SlurmNodeState::FromJson(j), s);
  // Bad input yields empty fields, never an exception.
  EXPECT_EQ(SlurmNodeState::FromJson(json::array()), SlurmNodeState());
  EXPECT_EQ(SlurmNodeState::FromJson(json{{"name", 3}, {"state", "IDLE"}}).state, "IDLE");
  EXPECT_EQ(SlurmNodeState::FromJson(json{{"name", 3}}).name, "");
}

}  // namespace
}  // namespace hpod::slurm
