#include "hpod/agent/health/node_checks.h"

#include <gtest/gtest.h>
#include <sys/mount.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "hpod/agent/test_util.h"

namespace hpod::agent::health {
namespace {

using namespace std::chrono_literals;
using testing::TempDir;
using testing::WriteTestFile;

void Append(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::app) << text;
}

// A tmpfs of a given size under a temp dir (root only), unmounted at scope exit:
// a full disk without filling the host's.
class SizedTmpfs {
 public:
  explicit SizedTmpfs(const std::string& options) : path_(dir_ / "fs") {
    std::filesystem::create_directories(path_);
    mounted_ = ::mount("tmpfs", path_.c_str(), "tmpfs", 0, options.c_str()) == 0;
  }
  ~SizedTmpfs() {
    if (mounted_) ::umount2(path_.c_str(), MNT_DETACH);
  }
  bool mounted() const { return mounted_; }
  const std::string& path() const { return path_; }

 private:
  TempDir dir_;
  std::string path_;
  bool mounted_ = false;
};

#define REQUIRE_MOUNT(fs) \
  if (!(fs).mounted()) GTEST_SKIP() << "needs root to mount a tmpfs"

DiskCheckOptions Disk(const std::string& path, Verdict verdict = Verdict::kReplace) {
  DiskCheckOptions o;
  o.path = path;
  o.verdict = verdict;
  return o;
}

TEST(DiskCheckTest, AHealthyDiskIsOk) {
  SizedTmpfs fs("size=64m");
  REQUIRE_MOUNT(fs);
  DiskCheck check(Disk(fs.path()));
  EXPECT_EQ(check.name(), "disk:" + fs.path());
  EXPECT_EQ(check.Run(), Outcome::Ok());
  EXPECT_TRUE(std::filesystem::is_empty(fs.path())) << "the write test leaves nothing behind";
}

TEST(DiskCheckTest, AFullDiskFailsWithTheConfiguredVerdict) {
  SizedTmpfs fs("size=32m");
  REQUIRE_MOUNT(fs);
  DiskCheck node(Disk(fs.path()));
  DiskCheck shared(Disk(fs.path(), Verdict::kHealthy));
  ASSERT_EQ(node.Run().result, Result::kOk);
  {
    std::ofstream filler(fs.path() + "/filler", std::ios::binary);
    std::string mib(1 << 20, 'x');
    for (int i = 0; i < 20; ++i) filler << mib;
  }
  Outcome o = node.Run();
  EXPECT_EQ(o, Outcome::Fail(Verdict::kReplace, fs.path() + " has less than 16 MiB free"));
  // /fsx: reported, no action (replacing a node cannot free a shared disk).
  o = shared.Run();
  EXPECT_EQ(o.result, Result::kFail);
  EXPECT_EQ(o.verdict, Verdict::kHealthy);
  std::filesystem::remove(fs.path() + "/filler");
  EXPECT_EQ(node.Run().result, Result::kOk);
}

TEST(DiskCheckTest, FewFreeInodesFail) {
  SizedTmpfs fs("size=64m,nr_inodes=80");
  REQUIRE_MOUNT(fs);
  DiskCheck check(Disk(fs.path()));
  for (int i = 0; i < 30; ++i) WriteTestFile(fs.path() + "/f" + std::to_string(i), "");
  Outcome o = check.Run();
  EXPECT_EQ(o.result, Result::kFail);
  EXPECT_EQ(o.reason, fs.path() + " has fewer than 64 free inodes");
}

TEST(DiskCheckTest, AReadOnlyDiskFailsTheWriteTest) {
  SizedTmpfs fs("size=64m");
  REQUIRE_MOUNT(fs);
  ASSERT_EQ(::mount(nullptr, fs.path().c_str(), nullptr, MS_REMOUNT | MS_RDONLY, nullptr), 0);
  Outcome o = DiskCheck(Disk(fs.path())).Run();
  EXPECT_EQ(o.result, Result::kFail);
  EXPECT_EQ(o.verdict, Verdict::kReplace);
  EXPECT_NE(o.reason.find("cannot create a file in " + fs.path()), std::string::npos) << o.reason;
}

TEST(DiskCheckTest, AMissingPathFails) {
  Outcome o = DiskCheck(Disk("/no/such/dir")).Run();
  EXPECT_EQ(o.result, Result::kFail);
  EXPECT_NE(o.reason.find("statvfs /no/such/dir"), std::string::npos);
}

std::string Meminfo(uint64_t total_kb, uint64_t available_kb) {
  return "MemTotal:       " + std::to_string(total_kb) +
         " kB\nMemFree:  1 kB\nMemAvailable:   " + std::to_string(available_kb) + " kB\n";
}

TEST(MemoryCheckTest, RebootsAfterThreeConsecutiveLowRuns) {
  TempDir dir;
  std::string path = dir / "meminfo";
  MemoryCheck check(path);
  WriteTestFile(path, Meminfo(1000000, 500000));
  EXPECT_EQ(check.Run(), Outcome::Ok());
  WriteTestFile(path, Meminfo(1000000, 10000));  // 1 %
  EXPECT_EQ(check.Run(), Outcome::Ok());
  EXPECT_EQ(check.Run(), Outcome::Ok());
  EXPECT_EQ(
      check.Run(),
      Outcome::Fail(Verdict::kReboot, "MemAvailable below 2% of MemTotal on 3 consecutive checks"));
  // One good run starts the count again.
  WriteTestFile(path, Meminfo(1000000, 30000));
  EXPECT_EQ(check.Run(), Outcome::Ok());
  WriteTestFile(path, Meminfo(1000000, 10000));
  EXPECT_EQ(check.Run(), Outcome::Ok());
  EXPECT_EQ(check.Run(), Outcome::Ok());
  EXPECT_EQ(check.Run().result, Result::kFail);
}

TEST(MemoryCheckTest, AnUnreadableMeminfoIsSkipped) {
  EXPECT_EQ(MemoryCheck("/no/such/meminfo").Run().result, Result::kSkipped);
  TempDir dir;
  WriteTestFile(dir / "meminfo", "MemTotal: 10 kB\n");
  EXPECT_EQ(MemoryCheck(dir / "meminfo").Run().result, Result::kSkipped);
  EXPECT_EQ(MemoryCheck("/proc/meminfo").Run().result, Result::kOk);  // the real one parses
}

TEST(SlurmCheckTest, FailedOrRestartingTooLongReboots) {
  FakeClock clock;
  api::agentproto::SlurmStatus state{"compute", "h", "running", 0, ""};
  SlurmCheck check([&] { return state; }, clock);
  EXPECT_EQ(check.Run(), Outcome::Ok());
  state.daemon = "restarting";
  state.message = "slurmd was killed by signal 9";
  EXPECT_EQ(check.Run(), Outcome::Ok());  // the agent restarts it in place
  clock.AdvanceTime(29s);
  EXPECT_EQ(check.Run(), Outcome::Ok());
  clock.AdvanceTime(1s);
  EXPECT_EQ(check.Run(), Outcome::Fail(Verdict::kReboot,
                                       "the Slurm daemon has been restarting for 30 s or more"));
  state.daemon = "running";
  EXPECT_EQ(check.Run(), Outcome::Ok());
  state.daemon = "restarting";  // a new restart episode starts its own count
  EXPECT_EQ(check.Run(), Outcome::Ok());
  state.daemon = "failed";
  state.message = "slurmd: cannot start";
  EXPECT_EQ(check.Run(),
            Outcome::Fail(Verdict::kReboot, "the Slurm daemon failed: slurmd: cannot start"));
  for (const char* d : {"none", "starting"}) {
    state.daemon = d;
    EXPECT_EQ(check.Run(), Outcome::Ok()) << d;
  }
}

TEST(FlagFileCheckTest, ANonEmptyFlagFileReplaces) {
  TempDir dir;
  std::string path = dir / "sagemaker_healthcheck_status";
  FlagFileCheck check(path);
  EXPECT_EQ(check.Run(), Outcome::Ok());
  WriteTestFile(path, "");
  EXPECT_EQ(check.Run(), Outcome::Ok());
  Append(path, "1\n");  // echo "1" >> /var/run/sagemaker_healthcheck_status
  EXPECT_EQ(check.Run(),
            Outcome::Fail(Verdict::kReplace, "HyperPod's fault flag file " + path + " is set"));
}

constexpr char kXid74[] =
    "[ 1234.5] NVRM: Xid (PCI:0000:3b:00): 74, pid=4242, name=python3, NVLink: fatal error\n";

TEST(KernelLogCheckTest, JudgesXidsLoggedSinceStartAndKeepsThem) {
  TempDir dir;
  std::string path = dir / "kern.log";
  WriteTestFile(path, kXid74);  // before the agent started: not judged again
  KernelLogCheck check(path);
  EXPECT_EQ(check.Run(), Outcome::Ok());
  Append(path, "[ 1240.0] NVRM: Xid (PCI:0000:3b:00): 13, Graphics Exception\n");
  EXPECT_EQ(check.Run(), Outcome::Ok());                                     // an application error
  Append(path, "some other line\n[ 1250.0] NVRM: Xid (PCI:0000:3b:00): 7");  // half a line
  EXPECT_EQ(check.Run(), Outcome::Ok());
  Append(path, "4, pid=1, NVLink: fatal error\n");
  Outcome o = check.Run();
  EXPECT_EQ(o, Outcome::Fail(Verdict::kReplace, "Xid 74 on PCI:0000:3b:00 (NVLink error)"));
  Append(path, "quiet line\n");
  EXPECT_EQ(check.Run(), o) << "an Xid stays reported until the agent restarts";
  // A restarted agent (a fresh check) starts clean.
  EXPECT_EQ(KernelLogCheck(path).Run(), Outcome::Ok());
}

TEST(KernelLogCheckTest, AFileCreatedLaterIsReadFromItsStart) {
  TempDir dir;
  std::string path = dir / "kern.log";
  KernelLogCheck check(path);
  EXPECT_EQ(check.Run().result, Result::kSkipped);
  WriteTestFile(path, "NVRM: Xid (PCI:0000:00:1e): 73, pid=1\n");
  EXPECT_EQ(check.Run().verdict, Verdict::kReboot);
}

TEST(KernelLogCheckTest, DevKmsgDoesNotJudgeOldMessages) {
  // The host's kernel log may hold Xids from before; opened at its end, they are
  // not judged (or /dev/kmsg is not readable here: skipped, never failed).
  KernelLogCheck check("/dev/kmsg");
  EXPECT_NE(check.Run().result, Result::kFail);
}

}  // namespace
}  // namespace hpod::agent::health
