// Debian's Slurm reads what hpod renders for 10,000 nodes: slurmctld starts on
// the rendered slurm.conf and pairs every NodeName with its own NodeAddr, and
// `scontrol show hostnames` expands the rendered ranges to exactly the 10,000
// names. Slurm 22.05 has no `slurmctld -t`, so slurmctld runs in the foreground
// in a temporary directory (its paths, a free port, the current user, no munge)
// until `scontrol show nodes` answers; the node and partition lines are the
// rendered ones, byte for byte. No slurmd runs. Skipped where Slurm is not
// installed (Debian packages slurmctld and slurm-client).

#include <arpa/inet.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <pwd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "hpod/base/file_util.h"
#include "hpod/base/hostlist.h"
#include "hpod/base/subprocess.h"
#include "hpod/slurm/config.h"
#include "hpod/slurm/config_test_fixture.h"

namespace hpod::slurm {
namespace {

namespace fs = std::filesystem;

constexpr char kSlurmctld[] = "/usr/sbin/slurmctld";
constexpr char kScontrol[] = "/usr/bin/scontrol";
constexpr char kSlurmd[] = "/usr/sbin/slurmd";

// A port nothing listens on now (the kernel's pick for a socket bound to 0).
int FreePort() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  int port = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    port = ntohs(addr.sin_port);
  }
  ::close(fd);
  return port;
}

// The words of `line` that start with `key` ("NodeAddr="), without it.
std::string Field(const std::string& line, const std::string& key) {
  std::istringstream in(line);
  for (std::string word; in >> word;) {
    if (word.rfind(key, 0) == 0) return word.substr(key.size());
  }
  return "";
}

class SlurmctldTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* p : {kSlurmctld, kScontrol}) {
      if (::access(p, X_OK) != 0) GTEST_SKIP() << p << " is not installed (Debian's Slurm)";
    }
    dir_ = fs::temp_directory_path() / ("hpod-slurmctld-" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "state");
    conf_ = (dir_ / "slurm.conf").string();
  }

  void TearDown() override {
    slurmctld_.reset();  // kills its process group
    if (!dir_.empty()) fs::remove_all(dir_);
  }

  // The rendered slurm.conf with the lines that tie it to a HyperPod node
  // replaced: paths here, a free port, this host and user, and no munge. Every
  // other line, the nodes' and partitions' included, is kept as rendered.
  std::string LocalConf(const std::string& rendered) {
    char host[256] = {};
    ::gethostname(host, sizeof(host) - 1);
    std::string short_host(host);
    short_host = short_host.substr(0, short_host.find('.'));
    const passwd* pw = ::getpwuid(::geteuid());
    const std::string d = dir_.string();
    std::map<std::string, std::string> replace = {
        {"SlurmctldHost", short_host + "(127.0.0.1)"},
        {"SlurmUser", pw != nullptr ? pw->pw_name : "root"},
        {"SlurmctldPort", std::to_string(FreePort())},
        {"AuthType", "auth/none"},
        {"CredType", "cred/none"},
        {"AuthInfo", ""},
        {"StateSaveLocation", d + "/state"},
        {"SlurmdSpoolDir", d + "/slurmd"},
        {"SlurmctldPidFile", d + "/slurmctld.pid"},
        {"SlurmdPidFile", d + "/slurmd.pid"},
        {"SlurmctldLogFile", d + "/slurmctld.log"},
        {"SlurmdLogFile", d + "/slurmd.log"},
    };
    std::set<std::string> replaced;
    std::string out;
    std::istringstream in(rendered);
    for (std::string line; std::getline(in, line);) {
      const std::string key = line.substr(0, line.find('='));
      if (auto it = replace.find(key); it != replace.end() && key != line) {
        replaced.insert(key);
        if (!it->second.empty()) out += key + "=" + it->second + "\n";
        continue;
      }
      out += line + "\n";
    }
    // A key the renderer stopped writing would leave slurmctld on HyperPod's paths.
    EXPECT_EQ(replaced.size(), replace.size()) << rendered;
    return out;
  }

  // Runs scontrol against the local slurmctld.
  StatusOr<SubprocessResult> Scontrol(std::vector<std::string> args) {
    SubprocessOptions o;
    o.argv = {kScontrol};
    o.argv.insert(o.argv.end(), args.begin(), args.end());
    o.env = {{"SLURM_CONF", conf_}};
    o.timeout = std::chrono::seconds(20);
    return RunCommand(o);
  }

  // Starts slurmctld on `files` and waits until it lists its nodes; the
  // output of `scontrol -o show nodes`.
  // slurm.conf (LocalConf) and the files beside it.
  Status WriteFiles(const SlurmFiles& files) {
    HPOD_RETURN_IF_ERROR(WriteFileAtomic(conf_, LocalConf(files.slurm_conf)));
    HPOD_RETURN_IF_ERROR(WriteFileAtomic((dir_ / "gres.conf").string(), files.gres_conf));
    HPOD_RETURN_IF_ERROR(WriteFileAtomic((dir_ / "plugstack.conf").string(), files.plugstack_conf));
    return WriteFileAtomic((dir_ / kUserConf).string(), "");
  }

  StatusOr<std::string> StartSlurmctld(const SlurmFiles& files) {
    HPOD_RETURN_IF_ERROR(WriteFiles(files));
    SubprocessOptions o;
    o.argv = {kSlurmctld, "-D", "-f", conf_};
    o.env = {{"SLURM_CONF", conf_}};
    o.output_file = (dir_ / "slurmctld.out").string();
    HPOD_ASSIGN_OR_RETURN(slurmctld_, Subprocess::Start(o));
    // A real daemon's start-up: polled, with a deadline far above the ~1 s it takes.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (std::chrono::steady_clock::now() < deadline) {
      if (auto exited = slurmctld_->Wait(std::chrono::milliseconds(0))) {
        return InternalError("slurmctld exited " + std::to_string(*exited) + ": " + Output());
      }
      HPOD_ASSIGN_OR_RETURN(SubprocessResult r, Scontrol({"-o", "show", "nodes"}));
      if (r.exit_code == 0 && !r.stdout_data.empty()) return r.stdout_data;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return DeadlineExceededError("slurmctld did not answer: " + Output());
  }

  // What slurmctld printed, for a failure's message.
  std::string Output() const {
    auto out = ReadFile((dir_ / "slurmctld.out").string());
    return out.ok() ? *out : out.status().ToString();
  }

  fs::path dir_;
  std::string conf_;
  std::unique_ptr<Subprocess> slurmctld_;
};

TEST_F(SlurmctldTest, AcceptsTenThousandNodesInRanges) {
  const SlurmClusterSpec spec = config_testing::LargeSpec(10000);
  const SlurmFiles files = RenderSlurmFiles(spec);
  std::map<std::string, std::string> expected;  // NodeName → NodeAddr
  std::set<std::string> cpu;
  std::set<std::string> gpu;
  for (const SlurmNodeSpec& n : spec.compute) {
    expected[n.name] = n.addr;
    (n.gpus > 0 ? gpu : cpu).insert(n.name);
  }

  auto shown = StartSlurmctld(files);
  ASSERT_TRUE(shown.ok()) << shown.status().ToString();
  std::map<std::string, std::string> got;
  std::istringstream in(*shown);
  for (std::string line; std::getline(in, line);) {
    const std::string name = Field(line, "NodeName=");
    if (name.empty()) continue;
    got[name] = Field(line, "NodeAddr=");
    EXPECT_EQ(Field(line, "NodeHostName="), name);
    EXPECT_EQ(Field(line, "Gres="), gpu.count(name) ? "gpu:h100:8" : "(null)") << line;
  }
  EXPECT_EQ(got.size(), 10000u);
  EXPECT_TRUE(got == expected) << "slurmctld paired some NodeName with another NodeAddr";

  auto partitions = Scontrol({"-o", "show", "partitions"});
  ASSERT_TRUE(partitions.ok() && partitions->exit_code == 0);
  std::map<std::string, std::set<std::string>> members;
  std::istringstream parts(partitions->stdout_data);
  for (std::string line; std::getline(parts, line);) {
    auto nodes = ExpandHostlist(Field(line, "Nodes="));
    ASSERT_TRUE(nodes.ok()) << line;
    members[Field(line, "PartitionName=")] = {nodes->begin(), nodes->end()};
  }
  EXPECT_EQ(members["dev"], cpu);
  EXPECT_EQ(members["train"], gpu);

  // Slurm's own expansion of every rendered NodeName= list, in the file's order,
  // is ours (DeclaredNodeNames) and names each node once.
  std::string lists;
  std::istringstream rendered(files.slurm_conf);
  for (std::string line; std::getline(rendered, line);) {
    if (line.rfind("NodeName=", 0) != 0) continue;
    lists += (lists.empty() ? "" : ",") + line.substr(9, line.find(' ') - 9);
  }
  auto hostnames = Scontrol({"show", "hostnames", lists});
  ASSERT_TRUE(hostnames.ok() && hostnames->exit_code == 0) << lists;
  std::vector<std::string> expanded;
  std::istringstream names(hostnames->stdout_data);
  for (std::string name; std::getline(names, name);) expanded.push_back(name);
  auto declared = DeclaredNodeNames(files.slurm_conf);
  ASSERT_TRUE(declared.ok()) << declared.status().ToString();
  EXPECT_EQ(expanded, *declared);
  EXPECT_EQ(expanded.size(), 10000u);
  std::set<std::string> all = cpu;
  all.insert(gpu.begin(), gpu.end());
  EXPECT_EQ(std::set<std::string>(expanded.begin(), expanded.end()), all);
}

// slurmd finds its node's line in a gres.conf of host ranges: `slurmd -G`
// prints the GPUs it would offer, from slurm.conf and gres.conf, and exits.
TEST_F(SlurmctldTest, SlurmdFindsItsGpusInGresRanges) {
  if (::access(kSlurmd, X_OK) != 0) GTEST_SKIP() << kSlurmd << " is not installed";
  SlurmClusterSpec spec = config_testing::LargeSpec(10000);
  // Plain files stand in for the devices: slurmd says they are not devices
  // (only root may make those) and counts them all the same.
  spec.gpu_device_dir = (dir_ / "dev").string();
  fs::create_directories(spec.gpu_device_dir);
  for (int i = 0; i < 8; ++i) {
    ASSERT_TRUE(WriteFileAtomic(spec.gpu_device_dir + "/nvidia" + std::to_string(i), "").ok());
  }
  const SlurmFiles files = RenderSlurmFiles(spec);
  ASSERT_TRUE(WriteFiles(files).ok());
  // spec.compute is in reverse: [0] is the last GPU node, [1000] one inside a
  // range, and the end is the CPU nodes.
  for (const SlurmNodeSpec* n : {&spec.compute[0], &spec.compute[1000], &spec.compute.back()}) {
    SubprocessOptions o;
    o.argv = {kSlurmd, "-G", "-N", n->name, "-f", conf_};
    o.merge_stderr = true;
    o.timeout = std::chrono::seconds(20);
    auto r = RunCommand(o);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->exit_code, 0) << r->stdout_data;
    const bool offers =
        r->stdout_data.find("Gres Name=gpu Type=h100 Count=8 ") != std::string::npos;
    EXPECT_EQ(offers, n->gpus > 0) << n->name << ": " << r->stdout_data;
  }
}

}  // namespace
}  // namespace hpod::slurm
