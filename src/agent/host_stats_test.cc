#include "hpod/agent/host_stats.h"

#include <gtest/gtest.h>
#include <sys/statvfs.h>

#include <filesystem>
#include <fstream>
#include <limits>

namespace hpod::agent {
namespace {

namespace fs = std::filesystem;

// A real kernel's files (Linux 6.1, 2 CPUs), shortened.
constexpr char kProcStat[] =
    "cpu  123456 789 45678 9876543 2100 0 321 5 0 0\n"
    "cpu0 61728 394 22839 4938271 1050 0 160 2 0 0\n"
    "cpu1 61728 395 22839 4938272 1050 0 161 3 0 0\n"
    "intr 123456789 0 9 0 0\n"
    "ctxt 987654321\n"
    "btime 1700000000\n";
constexpr char kMeminfo[] =
    "MemTotal:       16318060 kB\n"
    "MemFree:         1234567 kB\n"
    "MemAvailable:   12000000 kB\n"
    "Buffers:          123456 kB\n";
constexpr char kMountinfo[] =
    "22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw\n"
    "40 22 0:35 /srv/fsx/c1 /fsx rw,relatime shared:20 - ext4 /dev/sda1 rw\n"
    "41 22 0:36 / /mnt/with\\040space rw - tmpfs tmpfs rw\n";

TEST(HostStatsTest, ParsesProcStatIntoSecondsByMode) {
  auto cpu = ParseProcStat(kProcStat, 100);
  ASSERT_TRUE(cpu.ok()) << cpu.status().ToString();
  EXPECT_DOUBLE_EQ(cpu->user, 1234.56);
  EXPECT_DOUBLE_EQ(cpu->nice, 7.89);
  EXPECT_DOUBLE_EQ(cpu->system, 456.78);
  EXPECT_DOUBLE_EQ(cpu->idle, 98765.43);
  EXPECT_DOUBLE_EQ(cpu->iowait, 21);
  EXPECT_DOUBLE_EQ(cpu->irq, 0);
  EXPECT_DOUBLE_EQ(cpu->softirq, 3.21);
  EXPECT_DOUBLE_EQ(cpu->steal, 0.05);
}

TEST(HostStatsTest, OldKernelsLineIsShorter) {
  // Linux 2.6.0's cpu line has no steal: the missing modes read 0.
  auto cpu = ParseProcStat("cpu 100 0 50 1000 10 1 2\n", 100);
  ASSERT_TRUE(cpu.ok());
  EXPECT_DOUBLE_EQ(cpu->softirq, 0.02);
  EXPECT_DOUBLE_EQ(cpu->steal, 0);
}

TEST(HostStatsTest, BadProcStatIsAnError) {
  EXPECT_EQ(ParseProcStat("cpu0 1 2 3\nintr 1\n", 100).status().code(),
            StatusCode::kInvalidArgument);
  auto bad = ParseProcStat("cpu 1 x 3\n", 100);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("cpu field 2 'x'"), std::string_view::npos);
  EXPECT_FALSE(ParseProcStat(kProcStat, 0).ok());
}

TEST(HostStatsTest, ParsesMeminfoInBytes) {
  auto mem = ParseMeminfo(kMeminfo);
  ASSERT_TRUE(mem.ok()) << mem.status().ToString();
  EXPECT_EQ(mem->total_bytes, 16318060LL * 1024);
  EXPECT_EQ(mem->available_bytes, 12000000LL * 1024);
  auto old_kernel = ParseMeminfo("MemTotal: 100 kB\nMemFree: 50 kB\n");
  ASSERT_FALSE(old_kernel.ok());
  EXPECT_NE(old_kernel.status().message().find("MemAvailable"), std::string_view::npos);
  EXPECT_FALSE(ParseMeminfo("MemTotal: lots kB\nMemAvailable: 1 kB\n").ok());
}

TEST(HostStatsTest, HugeFilesystemsSaturateInsteadOfOverflowing) {
  EXPECT_EQ(StatvfsBytes(1000, 4096), 4096000);
  EXPECT_EQ(StatvfsBytes(0, 4096), 0);
  EXPECT_EQ(StatvfsBytes(1000, 0), 0);
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  // What FUSE and object-store mounts report: 2^51 blocks of 4 KiB is 8 EiB,
  // one past int64's range (and a negative size before, which hpodd refused).
  EXPECT_EQ(StatvfsBytes(uint64_t{1} << 51, 4096), kMax);
  EXPECT_EQ(StatvfsBytes((uint64_t{1} << 51) - 1, 4096), kMax - 4095);
  EXPECT_EQ(StatvfsBytes(std::numeric_limits<uint64_t>::max(), 1 << 20), kMax);
  EXPECT_EQ(StatvfsBytes(std::numeric_limits<uint64_t>::max(), 1), kMax);
}

TEST(HostStatsTest, FindsMountPointsInMountinfo) {
  EXPECT_TRUE(IsMountPoint(kMountinfo, "/"));
  EXPECT_TRUE(IsMountPoint(kMountinfo, "/fsx"));
  EXPECT_TRUE(IsMountPoint(kMountinfo, "/mnt/with space"));
  // The bind mount's source root (field 4) is not a mount point.
  EXPECT_FALSE(IsMountPoint(kMountinfo, "/srv/fsx/c1"));
  EXPECT_FALSE(IsMountPoint(kMountinfo, "/fs"));
  EXPECT_FALSE(IsMountPoint("", "/"));
}

class HostSamplerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("hpod-host-stats-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_ / "proc/self");
    Write("proc/stat", kProcStat);
    Write("proc/meminfo", kMeminfo);
    // "/" is mounted in the fixture, "/fsx" (which need not exist here) is not.
    Write("proc/self/mountinfo", "22 1 8:1 / / rw - ext4 /dev/sda1 rw\n");
  }
  void TearDown() override { fs::remove_all(dir_); }
  void Write(const std::string& name, const std::string& text) {
    std::ofstream(dir_ / name) << text;
  }
  HostSamplerOptions Options() {
    HostSamplerOptions o;
    o.proc_dir = (dir_ / "proc").string();
    o.filesystems = {dir_.string()};
    o.filesystems_if_mounted = {"/fsx", "/"};
    o.interval = std::chrono::milliseconds(1000);
    return o;
  }

  fs::path dir_;
  FakeClock clock_;
};

TEST_F(HostSamplerTest, SampleCarriesProcFiguresAndFreshFilesystems) {
  HostSampler sampler(Options(), clock_);
  auto before = sampler.Sample();
  ASSERT_TRUE(before.has_value());
  EXPECT_EQ(before->memory_total_bytes, 16318060LL * 1024);
  EXPECT_GT(before->cpu_seconds.idle, 0);
  EXPECT_TRUE(before->filesystems.empty()) << "no statvfs has answered yet";

  sampler.SampleFilesystemsOnce();
  auto s = sampler.Sample();
  ASSERT_TRUE(s.has_value());
  ASSERT_EQ(s->filesystems.size(), 2u);  // the always-sampled dir and the mounted "/"
  struct statvfs st {};
  ASSERT_EQ(::statvfs(dir_.c_str(), &st), 0);
  const auto& mine = s->filesystems[0].mountpoint == "/" ? s->filesystems[1] : s->filesystems[0];
  EXPECT_EQ(mine.mountpoint, dir_.string());
  EXPECT_EQ(mine.size_bytes, static_cast<int64_t>(st.f_blocks) * static_cast<int64_t>(st.f_frsize));
  EXPECT_GT(mine.avail_bytes, 0);
  EXPECT_LE(mine.avail_bytes, mine.size_bytes);

  // An answer older than stale_intervals (3) intervals is left out: a statvfs
  // stuck on a hung /fsx must not keep reporting the last figures.
  clock_.AdvanceTime(std::chrono::milliseconds(3000));
  EXPECT_EQ(sampler.Sample()->filesystems.size(), 2u);
  clock_.AdvanceTime(std::chrono::milliseconds(1));
  EXPECT_TRUE(sampler.Sample()->filesystems.empty());
}

TEST_F(HostSamplerTest, FilesystemThatGoesAwayIsDropped) {
  HostSamplerOptions o = Options();
  o.filesystems = {(dir_ / "disk").string()};
  fs::create_directories(dir_ / "disk");
  HostSampler sampler(o, clock_);
  sampler.SampleFilesystemsOnce();
  ASSERT_EQ(sampler.Sample()->filesystems.size(), 2u);
  fs::remove(dir_ / "disk");         // statvfs now fails: ENOENT
  Write("proc/self/mountinfo", "");  // and "/" is no longer mounted
  sampler.SampleFilesystemsOnce();
  EXPECT_TRUE(sampler.Sample()->filesystems.empty());
}

TEST_F(HostSamplerTest, UnreadableProcMeansNoSample) {
  fs::remove(dir_ / "proc/meminfo");
  HostSampler sampler(Options(), clock_);
  EXPECT_FALSE(sampler.Sample().has_value());
}

TEST_F(HostSamplerTest, ThreadSamplesAndStops) {
  HostSamplerOptions o = Options();
  o.interval = std::chrono::milliseconds(10);
  HostSampler sampler(o, clock_);
  sampler.Start();
  // The thread's first pass runs at once; wait for it (bounded).
  for (int i = 0; i < 500 && sampler.Sample()->filesystems.size() < 2; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(sampler.Sample()->filesystems.size(), 2u);
  sampler.Stop();
  sampler.Stop();  // idempotent
}

TEST(HostStatsRealProcTest, ThisMachineSamples) {
  // The real /proc of the test host: the parsers read what the kernel writes.
  FakeClock clock;
  HostSampler sampler(HostSamplerOptions{}, clock);
  sampler.SampleFilesystemsOnce();
  auto s = sampler.Sample();
  ASSERT_TRUE(s.has_value());
  EXPECT_GT(s->memory_total_bytes, 0);
  EXPECT_GE(s->memory_total_bytes, s->memory_available_bytes);
  EXPECT_GT(s->cpu_seconds.user + s->cpu_seconds.system + s->cpu_seconds.idle, 0);
  ASSERT_FALSE(s->filesystems.empty());
  EXPECT_EQ(s->filesystems[0].mountpoint, "/");
  EXPECT_GT(s->filesystems[0].size_bytes, 0);
}

}  // namespace
}  // namespace hpod::agent
