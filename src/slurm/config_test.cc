#include "hpod/slurm/config.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "hpod/base/hostlist.h"
#include "hpod/slurm/config_test_fixture.h"

namespace hpod::slurm {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;
using ::testing::SizeIs;
using namespace config_testing;  // NOLINT(build/namespaces): the specs' builders

// Compares `content` with testdata/<name>; with HPOD_UPDATE_GOLDEN=1 writes it
// instead (review the diff by eye before committing).
void ExpectGolden(const std::string& name, const std::string& content) {
  const std::string path = std::string(HPOD_SLURM_TESTDATA) + "/" + name;
  const char* update = std::getenv("HPOD_UPDATE_GOLDEN");
  if (update != nullptr && std::string(update) == "1") {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << content;
    ASSERT_TRUE(out.good()) << "cannot write " << path;
    return;
  }
  std::ifstream in(path, std::ios::binary);
  ASSERT_TRUE(in.good()) << "missing golden " << path << " (run with HPOD_UPDATE_GOLDEN=1)";
  std::stringstream golden;
  golden << in.rdbuf();
  EXPECT_EQ(content, golden.str()) << "differs from " << path;
}

std::vector<std::string> Lines(const std::string& text, const std::string& prefix) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(prefix, 0) == 0) out.push_back(line);
  }
  return out;
}

// The value of `key` ("NodeAddr=") on a line.
std::string Value(const std::string& line, const std::string& key) {
  size_t at = line.find(" " + key);
  if (at == std::string::npos) return "";
  at += key.size() + 1;
  return line.substr(at, line.find(' ', at) - at);
}

// NodeName → NodeAddr as Slurm reads slurm.conf: each line's host lists
// expanded and paired element by element. A name declared twice, or a line whose
// NodeHostname or NodeAddr list differs in length from its NodeName list, fails
// the test.
std::map<std::string, std::string> DeclaredAddrs(const std::string& conf) {
  std::map<std::string, std::string> out;
  for (const std::string& l : Lines(conf, "NodeName=")) {
    auto names = ExpandHostlist(l.substr(9, l.find(' ') - 9));
    auto hostnames = ExpandHostlist(Value(l, "NodeHostname="));
    auto addrs = ExpandHostlist(Value(l, "NodeAddr="));
    EXPECT_TRUE(names.ok() && hostnames.ok() && addrs.ok()) << l;
    if (!names.ok() || !hostnames.ok() || !addrs.ok()) continue;
    EXPECT_EQ(*hostnames, *names) << l;
    EXPECT_EQ(addrs->size(), names->size()) << l;
    for (size_t i = 0; i < names->size() && i < addrs->size(); ++i) {
      EXPECT_TRUE(out.emplace((*names)[i], (*addrs)[i]).second)
          << "declared twice: " << (*names)[i];
    }
  }
  return out;
}

// (1) one controller, three CPU workers in partition "dev". Given out of order
// on purpose: the renderer sorts by name.
SlurmClusterSpec CpuSpec() {
  SlurmClusterSpec spec = BaseSpec();
  spec.compute = {CpuNode("10.77.0.13"), CpuNode("10.77.0.11"), CpuNode("10.77.0.12")};
  spec.roles.partitions = {{"workers", "dev"}};
  return spec;
}

// (2) two ml.p5.48xlarge workers with 8 H100s each.
SlurmClusterSpec GpuSpec() {
  SlurmClusterSpec spec = BaseSpec();
  spec.compute = {GpuNode("10.77.1.11"), GpuNode("10.77.1.12")};
  spec.roles.partitions = {{"gpu", "ml.p5.48xlarge"}};
  return spec;
}

// (3) two compute groups in two partitions, plus a login group.
SlurmClusterSpec TwoPartitionSpec() {
  SlurmClusterSpec spec = BaseSpec();
  spec.compute = {GpuNode("10.77.1.11"), CpuNode("10.77.2.11", "cpu"),
                  CpuNode("10.77.2.12", "cpu")};
  spec.roles.login_groups = {"login"};
  spec.roles.partitions = {{"gpu", "train"}, {"cpu", "dev"}};
  return spec;
}

// (4) no compute nodes yet; the partition still exists.
SlurmClusterSpec EmptySpec() {
  SlurmClusterSpec spec = BaseSpec();
  spec.roles.partitions = {{"workers", "dev"}};
  return spec;
}

TEST(RenderSlurmFilesTest, GoldenCpu) {
  SlurmFiles files = RenderSlurmFiles(CpuSpec());
  ExpectGolden("cpu.slurm.conf", files.slurm_conf);
  ExpectGolden("plugstack.conf", files.plugstack_conf);
  EXPECT_EQ(files.gres_conf, "");
  EXPECT_THAT(files.slurm_conf, Not(HasSubstr("GresTypes")));
  EXPECT_THAT(Lines(files.slurm_conf, "PartitionName="),
              ElementsAre("PartitionName=dev Nodes=ip-10-77-0-[11-13] "
                          "Default=YES MaxTime=INFINITE State=UP OverSubscribe=EXCLUSIVE"));
}

// The generated files claim only what works: a plugin only when the provider
// installed one on the nodes, and then exactly once, as `required`.
TEST(RenderSlurmFilesTest, PlugstackListsThePluginOnlyWhenInstalled) {
  SlurmFiles none = RenderSlurmFiles(CpuSpec());
  EXPECT_THAT(none.plugstack_conf, Not(HasSubstr("required")));
  EXPECT_THAT(none.plugstack_conf, Not(HasSubstr(".so")));
  EXPECT_THAT(none.slurm_conf, HasSubstr("# SPANK plugins: none are loaded"));
  SlurmClusterSpec spec = CpuSpec();
  spec.spank_plugin = "/var/lib/hpod-agent/spank_hpod.so";
  SlurmFiles with = RenderSlurmFiles(spec);
  ExpectGolden("plugstack-hpod.conf", with.plugstack_conf);
  EXPECT_THAT(Lines(with.plugstack_conf, "required"),
              ElementsAre("required /var/lib/hpod-agent/spank_hpod.so"));
  // The default path (beside slurm.conf) is the one configless workers have too.
  EXPECT_THAT(with.slurm_conf, Not(HasSubstr("PlugStackConfig")));
  EXPECT_NE(FilesHash(none), FilesHash(with));
}

TEST(RenderSlurmFilesTest, GoldenGpu) {
  SlurmFiles files = RenderSlurmFiles(GpuSpec());
  ExpectGolden("gpu.slurm.conf", files.slurm_conf);
  ExpectGolden("gpu.gres.conf", files.gres_conf);
  EXPECT_THAT(Lines(files.slurm_conf, "GresTypes="), ElementsAre("GresTypes=gpu"));
  EXPECT_THAT(Lines(files.gres_conf, "NodeName="),
              ElementsAre("NodeName=ip-10-77-1-[11-12] Name=gpu Type=h100 File=/dev/nvidia[0-7]"));
  EXPECT_THAT(files.slurm_conf, HasSubstr(" CPUs=192 RealMemory=2097152 Gres=gpu:h100:8 "));
}

TEST(RenderSlurmFilesTest, GoldenTwoPartitionsWithLogin) {
  SlurmFiles files = RenderSlurmFiles(TwoPartitionSpec());
  ExpectGolden("two_partitions.slurm.conf", files.slurm_conf);
  ExpectGolden("two_partitions.gres.conf", files.gres_conf);
  EXPECT_THAT(Lines(files.slurm_conf, "PartitionName="),
              ElementsAre("PartitionName=train Nodes=ip-10-77-1-11 Default=YES MaxTime=INFINITE "
                          "State=UP OverSubscribe=EXCLUSIVE",
                          "PartitionName=dev Nodes=ip-10-77-2-[11-12] Default=NO "
                          "MaxTime=INFINITE State=UP OverSubscribe=EXCLUSIVE"));
  // Only the GPU node has a gres.conf line.
  EXPECT_EQ(Lines(files.gres_conf, "NodeName=").size(), 1u);
}

TEST(RenderSlurmFilesTest, GoldenNoComputeNodes) {
  SlurmFiles files = RenderSlurmFiles(EmptySpec());
  ExpectGolden("empty.slurm.conf", files.slurm_conf);
  EXPECT_TRUE(Lines(files.slurm_conf, "NodeName=").empty());
  EXPECT_THAT(Lines(files.slurm_conf, "PartitionName="),
              ElementsAre("PartitionName=dev Default=YES MaxTime=INFINITE State=UP "
                          "OverSubscribe=EXCLUSIVE"));
  EXPECT_EQ(files.gres_conf, "");
}

TEST(RenderSlurmFilesTest, IncludeIsRelativeAndLast) {
  std::string conf = RenderSlurmFiles(CpuSpec()).slurm_conf;
  EXPECT_THAT(Lines(conf, "Include"), ElementsAre("Include slurm.user.conf"));
  EXPECT_TRUE(conf.ends_with("Include slurm.user.conf\n"));
}

TEST(RenderSlurmFilesTest, ControllerAndTunables) {
  SlurmClusterSpec spec = CpuSpec();
  spec.slurmd_timeout_s = 45;
  spec.cred_expire_s = 7;
  std::string conf = RenderSlurmFiles(spec).slurm_conf;
  EXPECT_THAT(Lines(conf, "SlurmctldHost="),
              ElementsAre("SlurmctldHost=ip-10-77-0-10(10.77.0.10)"));
  EXPECT_THAT(Lines(conf, "SlurmdTimeout="), ElementsAre("SlurmdTimeout=45"));
  EXPECT_THAT(Lines(conf, "AuthInfo="), ElementsAre("AuthInfo=cred_expire=7"));
  EXPECT_THAT(Lines(conf, "SlurmctldParameters="),
              ElementsAre("SlurmctldParameters=enable_configless"));
}

TEST(RenderSlurmFilesTest, EveryNodeHasAddrAndHostname) {
  SlurmClusterSpec spec = TwoPartitionSpec();
  std::map<std::string, std::string> expected;
  for (const SlurmNodeSpec& n : spec.compute) expected[n.name] = n.addr;
  EXPECT_EQ(DeclaredAddrs(RenderSlurmFiles(spec).slurm_conf), expected);
}

TEST(RenderSlurmFilesTest, OneGpuAndCustomDeviceDir) {
  SlurmClusterSpec spec = GpuSpec();
  spec.compute.resize(1);
  spec.compute[0].gpus = 1;
  spec.compute[0].gpu_type = "a10g";
  spec.gpu_device_dir = "/var/lib/hpod/fakedev";
  EXPECT_THAT(Lines(RenderSlurmFiles(spec).gres_conf, "NodeName="),
              ElementsAre("NodeName=ip-10-77-1-11 Name=gpu Type=a10g "
                          "File=/var/lib/hpod/fakedev/nvidia0"));
}

TEST(RenderSlurmFilesTest, GroupsSharingAPartitionRenderOneLine) {
  SlurmClusterSpec spec = TwoPartitionSpec();
  spec.roles.partitions = {{"gpu", "dev"}, {"cpu", "dev"}};
  EXPECT_THAT(Lines(RenderSlurmFiles(spec).slurm_conf, "PartitionName="),
              ElementsAre("PartitionName=dev Nodes=ip-10-77-1-11,ip-10-77-2-[11-12] "
                          "Default=YES MaxTime=INFINITE State=UP OverSubscribe=EXCLUSIVE"));
}

TEST(RenderSlurmFilesTest, ClusterNameSanitized) {
  SlurmClusterSpec spec = CpuSpec();
  spec.cluster_name = "My Cluster.Prod_1";
  EXPECT_THAT(Lines(RenderSlurmFiles(spec).slurm_conf, "ClusterName="),
              ElementsAre("ClusterName=my-cluster-prod_1"));
  spec.cluster_name = std::string(63, 'A');
  EXPECT_THAT(Lines(RenderSlurmFiles(spec).slurm_conf, "ClusterName="),
              ElementsAre("ClusterName=" + std::string(40, 'a')));
  spec.cluster_name = "";
  EXPECT_THAT(Lines(RenderSlurmFiles(spec).slurm_conf, "ClusterName="),
              ElementsAre("ClusterName=hpod"));
}

TEST(FilesHashTest, StableAndSensitive) {
  const std::string base = FilesHash(RenderSlurmFiles(CpuSpec()));
  EXPECT_EQ(base.size(), 64u);
  EXPECT_EQ(FilesHash(RenderSlurmFiles(CpuSpec())), base);

  // Input order does not matter: nodes are sorted.
  SlurmClusterSpec reordered = CpuSpec();
  std::reverse(reordered.compute.begin(), reordered.compute.end());
  EXPECT_EQ(FilesHash(RenderSlurmFiles(reordered)), base);

  SlurmClusterSpec grown = CpuSpec();
  grown.compute.push_back(CpuNode("10.77.0.14"));
  EXPECT_NE(FilesHash(RenderSlurmFiles(grown)), base);

  // The same bytes moved between files change the hash (names are hashed).
  SlurmFiles a{"x", "y", ""};
  SlurmFiles b{"xy", "", ""};
  EXPECT_NE(FilesHash(a), FilesHash(b));
}

// The NodeName= lines of the spec's slurm.conf.
std::vector<std::string> NodeLines(const SlurmClusterSpec& spec) {
  return Lines(RenderSlurmFiles(spec).slurm_conf, "NodeName=");
}

SlurmNodeSpec Named(const std::string& name, const std::string& addr) {
  SlurmNodeSpec n = CpuNode(addr);
  n.name = name;
  return n;
}

constexpr char kCpu[] = " CPUs=8 RealMemory=16384 State=UNKNOWN";

TEST(NodeRangesTest, ASingleNodeIsWrittenPlainly) {
  SlurmClusterSpec spec = BaseSpec();
  spec.compute = {CpuNode("10.77.1.11")};
  EXPECT_THAT(NodeLines(spec), ElementsAre("NodeName=ip-10-77-1-11 NodeHostname=ip-10-77-1-11 "
                                           "NodeAddr=10.77.1.11" +
                                           std::string(kCpu)));
}

TEST(NodeRangesTest, RangesAndGaps) {
  SlurmClusterSpec spec = BaseSpec();
  for (const char* ip :
       {"10.77.1.15", "10.77.1.11", "10.77.1.13", "10.77.1.12", "10.77.1.9", "10.77.1.10"}) {
    spec.compute.push_back(CpuNode(ip));
  }
  EXPECT_THAT(NodeLines(spec), ElementsAre("NodeName=ip-10-77-1-[9-13,15] "
                                           "NodeHostname=ip-10-77-1-[9-13,15] "
                                           "NodeAddr=10.77.1.[9-13,15]" +
                                           std::string(kCpu)));
}

TEST(NodeRangesTest, AnotherSlash24IsAnotherLine) {
  SlurmClusterSpec spec = BaseSpec();
  for (const char* ip : {"10.77.2.1", "10.77.1.254", "10.77.2.2", "10.77.1.253"}) {
    spec.compute.push_back(CpuNode(ip));
  }
  EXPECT_THAT(NodeLines(spec),
              ElementsAre("NodeName=ip-10-77-1-[253-254] NodeHostname=ip-10-77-1-[253-254] "
                          "NodeAddr=10.77.1.[253-254]" +
                              std::string(kCpu),
                          "NodeName=ip-10-77-2-[1-2] NodeHostname=ip-10-77-2-[1-2] "
                          "NodeAddr=10.77.2.[1-2]" +
                              std::string(kCpu)));
  EXPECT_THAT(Lines(RenderSlurmFiles(spec).slurm_conf, "PartitionName="), IsEmpty());
  spec.roles.partitions = {{"workers", "dev"}};
  EXPECT_THAT(Value(Lines(RenderSlurmFiles(spec).slurm_conf, "PartitionName=").at(0), "Nodes="),
              "ip-10-77-1-[253-254],ip-10-77-2-[1-2]");
}

TEST(NodeRangesTest, NodesOfOtherKindsAreNotMerged) {
  SlurmClusterSpec spec = BaseSpec();
  SlurmNodeSpec small = CpuNode("10.77.1.14");
  small.memory_mib = 8192;
  spec.compute = {CpuNode("10.77.1.11"), GpuNode("10.77.1.12"), CpuNode("10.77.1.13"), small};
  EXPECT_THAT(NodeLines(spec),
              ElementsAre("NodeName=ip-10-77-1-[11,13] NodeHostname=ip-10-77-1-[11,13] "
                          "NodeAddr=10.77.1.[11,13]" +
                              std::string(kCpu),
                          "NodeName=ip-10-77-1-12 NodeHostname=ip-10-77-1-12 NodeAddr=10.77.1.12 "
                          "CPUs=192 RealMemory=2097152 Gres=gpu:h100:8 State=UNKNOWN",
                          "NodeName=ip-10-77-1-14 NodeHostname=ip-10-77-1-14 NodeAddr=10.77.1.14 "
                          "CPUs=8 RealMemory=8192 State=UNKNOWN"));
}

// A replacement keeps its predecessor's NodeName at a new address; Slurm pairs
// names and addresses by position, so it must not sit inside its neighbours' range.
TEST(NodeRangesTest, AnAddressOutOfStepWithItsNameHasItsOwnLine) {
  SlurmClusterSpec spec = BaseSpec();
  spec.compute = {CpuNode("10.77.1.11"), Named("ip-10-77-1-12", "10.77.5.7"), CpuNode("10.77.1.13"),
                  Named("ip-10-77-1-14", "10.77.1.16"), Named("ip-10-77-1-15", "10.77.1.15")};
  EXPECT_THAT(NodeLines(spec),
              ElementsAre("NodeName=ip-10-77-1-[11,13-14] NodeHostname=ip-10-77-1-[11,13-14] "
                          "NodeAddr=10.77.1.[11,13,16]" +
                              std::string(kCpu),
                          "NodeName=ip-10-77-1-12 NodeHostname=ip-10-77-1-12 NodeAddr=10.77.5.7" +
                              std::string(kCpu),
                          "NodeName=ip-10-77-1-15 NodeHostname=ip-10-77-1-15 NodeAddr=10.77.1.15" +
                              std::string(kCpu)));
  std::map<std::string, std::string> expected;
  for (const SlurmNodeSpec& n : spec.compute) expected[n.name] = n.addr;
  EXPECT_EQ(DeclaredAddrs(RenderSlurmFiles(spec).slurm_conf), expected);
}

TEST(NodeRangesTest, PaddedNamesKeepTheirWidthAndOthersStandAlone) {
  SlurmClusterSpec spec = BaseSpec();
  spec.compute = {Named("node08", "10.0.0.8"), Named("node09", "10.0.0.9"),
                  Named("node10", "10.0.0.10"), Named("login-a", "10.0.0.20"),
                  Named("login-b", "10.0.0.21")};
  EXPECT_THAT(
      NodeLines(spec),
      ElementsAre(
          "NodeName=login-a NodeHostname=login-a NodeAddr=10.0.0.20" + std::string(kCpu),
          "NodeName=login-b NodeHostname=login-b NodeAddr=10.0.0.21" + std::string(kCpu),
          "NodeName=node[08-09] NodeHostname=node[08-09] NodeAddr=10.0.0.[8-9]" + std::string(kCpu),
          "NodeName=node10 NodeHostname=node10 NodeAddr=10.0.0.10" + std::string(kCpu)));
}

TEST(NodeRangesTest, TenThousandNodesTakeAFewDozenLines) {
  const SlurmClusterSpec spec = LargeSpec(10000);
  const auto start = std::chrono::steady_clock::now();
  const SlurmFiles files = RenderSlurmFiles(spec);
  const auto took = std::chrono::steady_clock::now() - start;
  // A bound far above the ~20 ms it takes, to catch a quadratic step (a scan of
  // the nodes per node), not to time the renderer.
  EXPECT_LT(took, std::chrono::seconds(3));

  // 8,000 CPU nodes over 32 /24s, 2,000 GPU nodes over 9 (the first shared with
  // the CPU nodes), and the replaced node.
  EXPECT_THAT(Lines(files.slurm_conf, "NodeName="), SizeIs(42));
  EXPECT_LT(std::count(files.slurm_conf.begin(), files.slurm_conf.end(), '\n'), 150);
  std::map<std::string, std::string> expected;
  std::set<std::string> cpu;
  std::set<std::string> gpu;
  for (const SlurmNodeSpec& n : spec.compute) {
    expected[n.name] = n.addr;
    (n.gpus > 0 ? gpu : cpu).insert(n.name);
  }
  ASSERT_EQ(expected.size(), 10000u);
  EXPECT_EQ(DeclaredAddrs(files.slurm_conf), expected);

  auto partitions = Lines(files.slurm_conf, "PartitionName=");
  ASSERT_THAT(partitions, SizeIs(2));
  auto dev = ExpandHostlist(Value(partitions[0], "Nodes="));
  auto train = ExpandHostlist(Value(partitions[1], "Nodes="));
  ASSERT_TRUE(dev.ok() && train.ok());
  EXPECT_EQ(std::set<std::string>(dev->begin(), dev->end()), cpu);
  EXPECT_EQ(dev->size(), cpu.size());
  EXPECT_EQ(std::set<std::string>(train->begin(), train->end()), gpu);
  EXPECT_EQ(train->size(), gpu.size());
  EXPECT_LT(partitions[0].size(), 2000u);

  EXPECT_THAT(Lines(files.gres_conf, "NodeName="), SizeIs(9));
  auto gres_names = DeclaredNodeNames(files.gres_conf);
  ASSERT_TRUE(gres_names.ok()) << gres_names.status().ToString();
  EXPECT_EQ(std::set<std::string>(gres_names->begin(), gres_names->end()), gpu);
  EXPECT_EQ(gres_names->size(), gpu.size());
}

TEST(DeclaredNodeNamesTest, ExpandsEveryNodeNameLine) {
  auto names = DeclaredNodeNames(RenderSlurmFiles(TwoPartitionSpec()).slurm_conf);
  ASSERT_TRUE(names.ok()) << names.status().ToString();
  EXPECT_THAT(*names, ElementsAre("ip-10-77-1-11", "ip-10-77-2-11", "ip-10-77-2-12"));
  EXPECT_THAT(*DeclaredNodeNames("# NodeName=x\nNodeName=a[1-2] CPUs=1\nNodeName=b\n"),
              ElementsAre("a1", "a2", "b"));
  EXPECT_EQ(DeclaredNodeNames("NodeName=a[2-1] CPUs=1\n").status().code(),
            StatusCode::kInvalidArgument);
}

TEST(NodeNamesTest, Sorted) {
  EXPECT_THAT(NodeNames(CpuSpec()), ElementsAre("ip-10-77-0-11", "ip-10-77-0-12", "ip-10-77-0-13"));
  EXPECT_TRUE(NodeNames(EmptySpec()).empty());
}

}  // namespace
}  // namespace hpod::slurm
