#include "hpod/slurm/config.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

namespace hpod::slurm {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

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

SlurmNodeSpec CpuNode(const std::string& ip, const std::string& group = "workers") {
  SlurmNodeSpec n;
  n.addr = ip;
  n.name = "ip-" + ip;
  for (char& c : n.name) c = c == '.' ? '-' : c;
  n.group = group;
  n.cpus = 8;  // ml.c5.2xlarge
  n.memory_mib = 16384;
  return n;
}

SlurmNodeSpec GpuNode(const std::string& ip) {
  SlurmNodeSpec n = CpuNode(ip, "gpu");
  n.cpus = 192;  // ml.p5.48xlarge
  n.memory_mib = 2097152;
  n.gpus = 8;
  n.gpu_type = "h100";
  return n;
}

SlurmClusterSpec BaseSpec() {
  SlurmClusterSpec spec;
  spec.cluster_name = "ml-cluster";
  spec.controller_name = "ip-10-77-0-10";
  spec.controller_addr = "10.77.0.10";
  spec.roles.controller_group = "controller-machine";
  return spec;
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
              ElementsAre("PartitionName=dev Nodes=ip-10-77-0-11,ip-10-77-0-12,ip-10-77-0-13 "
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
              ElementsAre("NodeName=ip-10-77-1-11 Name=gpu Type=h100 File=/dev/nvidia[0-7]",
                          "NodeName=ip-10-77-1-12 Name=gpu Type=h100 File=/dev/nvidia[0-7]"));
  EXPECT_THAT(files.slurm_conf, HasSubstr(" CPUs=192 RealMemory=2097152 Gres=gpu:h100:8 "));
}

TEST(RenderSlurmFilesTest, GoldenTwoPartitionsWithLogin) {
  SlurmFiles files = RenderSlurmFiles(TwoPartitionSpec());
  ExpectGolden("two_partitions.slurm.conf", files.slurm_conf);
  ExpectGolden("two_partitions.gres.conf", files.gres_conf);
  EXPECT_THAT(Lines(files.slurm_conf, "PartitionName="),
              ElementsAre("PartitionName=train Nodes=ip-10-77-1-11 Default=YES MaxTime=INFINITE "
                          "State=UP OverSubscribe=EXCLUSIVE",
                          "PartitionName=dev Nodes=ip-10-77-2-11,ip-10-77-2-12 Default=NO "
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
  auto lines = Lines(RenderSlurmFiles(spec).slurm_conf, "NodeName=");
  ASSERT_EQ(lines.size(), spec.compute.size());
  for (const SlurmNodeSpec& n : spec.compute) {
    std::string expected = "NodeName=" + n.name + " NodeHostname=" + n.name + " NodeAddr=" + n.addr;
    EXPECT_EQ(std::count_if(lines.begin(), lines.end(),
                            [&](const std::string& l) { return l.starts_with(expected + " "); }),
              1)
        << expected;
  }
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
              ElementsAre("PartitionName=dev Nodes=ip-10-77-1-11,ip-10-77-2-11,ip-10-77-2-12 "
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

TEST(NodeNamesTest, Sorted) {
  EXPECT_THAT(NodeNames(CpuSpec()), ElementsAre("ip-10-77-0-11", "ip-10-77-0-12", "ip-10-77-0-13"));
  EXPECT_TRUE(NodeNames(EmptySpec()).empty());
}

}  // namespace
}  // namespace hpod::slurm
