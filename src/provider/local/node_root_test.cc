#include "hpod/provider/local/node_root.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <filesystem>

#include "hpod/base/file_util.h"

namespace hpod::provider::local {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;

TEST(MountsToCarryTest, KeepsOutermostOtherFilesystemsOnly) {
  const std::string mountinfo =
      "22 1 8:1 / / rw - ext4 /dev/vda rw\n"
      "23 22 0:5 / /proc rw - proc proc rw\n"
      "24 22 0:6 / /sys rw - sysfs sysfs rw\n"
      "25 24 0:7 / /sys/fs/cgroup rw - tmpfs tmpfs rw\n"
      "26 22 0:8 / /dev rw - devtmpfs udev rw\n"
      "27 22 0:9 / /run rw - tmpfs tmpfs rw\n"
      "28 27 8:1 /run/netns /run/netns rw - ext4 /dev/vda rw\n"
      "29 22 8:2 / /home rw - ext4 /dev/vdb rw\n"
      "30 29 8:3 / /home/alice/data rw - ext4 /dev/vdc rw\n"
      "31 22 0:10 / /tmp rw - tmpfs tmpfs rw\n"
      "32 22 0:11 / /var/lib/hpod/nodes/i-a/disk rw - tmpfs tmpfs rw\n"
      "33 22 0:12 / /var/lib/hpod/nodes/i-b/disk rw - tmpfs tmpfs rw\n"
      "34 22 0:13 / /srv/my\\040data rw - tmpfs tmpfs rw\n"
      "35 22 0:14 / /procfs-not-proc rw - tmpfs tmpfs rw\n";
  // /home carries /home/alice/data with it (recursive bind); the node's own disk
  // (i-a) is not carried into its own root, another node's is, as before.
  EXPECT_THAT(
      MountsToCarry(mountinfo, "/var/lib/hpod/nodes/i-a/disk"),
      ElementsAre("/home", "/var/lib/hpod/nodes/i-b/disk", "/srv/my data", "/procfs-not-proc"));
  EXPECT_THAT(MountsToCarry("", "/d"), ::testing::IsEmpty());
  EXPECT_THAT(MountsToCarry("garbage\n", "/d"), ::testing::IsEmpty());
}

class PrepareRootUpperTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("hpod-node-root-" + std::to_string(getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "home/.cache/x");
    fs::create_directories(dir_ / "home/checkout");
    fs::create_directories(dir_ / "skel");
    fs::create_directories(dir_ / "upper");
    ASSERT_TRUE(WriteFileAtomic((dir_ / "home/.bashrc").string(), "host venv\n", 0644).ok());
    ASSERT_TRUE(WriteFileAtomic((dir_ / "home/.profile").string(), "host profile\n", 0644).ok());
    ASSERT_TRUE(WriteFileAtomic((dir_ / "skel/.bashrc").string(), "skel bashrc\n", 0644).ok());
  }
  void TearDown() override { fs::remove_all(dir_); }

  fs::path dir_;
};

TEST_F(PrepareRootUpperTest, FirstBootHidesTheHostsDotfilesAndLaterBootsKeepTheNodes) {
  if (geteuid() != 0) GTEST_SKIP() << "whiteouts (mknod) need root";
  const std::string upper = (dir_ / "upper").string();
  const std::string home = (dir_ / "home").string();
  ASSERT_TRUE(PrepareRootUpper(upper, home, (dir_ / "skel").string()).ok());
  // The upper layer mirrors the host path of the home directory.
  const fs::path got = fs::path(upper + home);
  struct stat st;
  ASSERT_EQ(::stat((got / ".cache").c_str(), &st), 0);
  EXPECT_TRUE(S_ISCHR(st.st_mode) && st.st_rdev == makedev(0, 0)) << "a whiteout";
  ASSERT_EQ(::stat((got / ".profile").c_str(), &st), 0);
  EXPECT_TRUE(S_ISCHR(st.st_mode));
  EXPECT_EQ(*ReadFile((got / ".bashrc").string()), "skel bashrc\n");
  EXPECT_FALSE(fs::exists(got / "checkout")) << "non-dot entries stay the lower layer's";
  EXPECT_EQ(::stat(got.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);

  // A later boot keeps what the node did to its /root.
  ASSERT_TRUE(WriteFileAtomic((got / ".bashrc").string(), "node's own\n", 0644).ok());
  ASSERT_TRUE(PrepareRootUpper(upper, home, (dir_ / "skel").string()).ok());
  EXPECT_EQ(*ReadFile((got / ".bashrc").string()), "node's own\n");
}

}  // namespace
}  // namespace hpod::provider::local

namespace hpod::provider::local {
namespace {

TEST(IsSystemMountTest, TheSystemsDirectoriesGetTheNodesOwnLayer) {
  for (const char* p : {"/usr", "/var", "/var/lib/docker", "/etc", "/opt", "/lib64", "/root"}) {
    EXPECT_TRUE(IsSystemMount(p)) << p;
  }
  for (const char* p : {"/home", "/srv", "/data", "/variable", "/usrdata", "/mnt/x"}) {
    EXPECT_FALSE(IsSystemMount(p)) << p;
  }
}

}  // namespace
}  // namespace hpod::provider::local
