#include "hpod/agent/ami_user.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>

#include "hpod/agent/fs_util.h"
#include "hpod/agent/test_util.h"

namespace hpod::agent {
namespace {

namespace fs = std::filesystem;

TEST(AmiUserTest, AnExistingUserGetsItsHomeAndSudoersOnce) {
  // root exists on any machine: no useradd, only the home and the drop-in.
  testing::TempDir tmp;
  ASSERT_TRUE(WriteFileAtomic(tmp / "skel/.bashrc", "# skel\n", 0644).ok());
  fs::create_directories(tmp / "fsx");
  fs::create_directories(tmp / "sudoers.d");
  AmiUserOptions o;
  o.user = "root";
  o.home_parent = tmp / "fsx";
  o.skel = tmp / "skel";
  o.sudoers_dir = tmp / "sudoers.d";
  o.useradd = "/bin/false";  // never run for a user that exists
  ASSERT_TRUE(EnsureAmiUser(o).ok());
  EXPECT_EQ(*ReadFile(tmp / "fsx/root/.bashrc"), "# skel\n");
  EXPECT_EQ(*ReadFile(tmp / "sudoers.d/90-hpod-root"), AmiSudoersText("root"));
  struct stat st {};
  ASSERT_EQ(::stat((tmp / "sudoers.d/90-hpod-root").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0440u) << "sudo ignores a drop-in others can write";
  // A home that exists (another node made it on the shared /fsx) is left alone.
  ASSERT_TRUE(WriteFileAtomic(tmp / "fsx/root/.bashrc", "mine\n", 0644).ok());
  ASSERT_TRUE(EnsureAmiUser(o).ok());
  EXPECT_EQ(*ReadFile(tmp / "fsx/root/.bashrc"), "mine\n");
  EXPECT_EQ(AmiSudoersText("ubuntu").substr(AmiSudoersText("ubuntu").find('\n') + 1),
            "ubuntu ALL=(ALL) NOPASSWD:ALL\n");
}

TEST(AmiUserTest, AFailedUseraddIsAnError) {
  testing::TempDir tmp;
  AmiUserOptions o;
  o.user = "hpod-test-no-such-user";
  o.home_parent = tmp / "fsx";
  o.sudoers_dir = tmp / "sudoers.d";
  o.useradd = "/bin/false";
  Status s = EnsureAmiUser(o);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("useradd hpod-test-no-such-user exited with code 1"),
            std::string::npos)
      << s.message();
  EXPECT_FALSE(fs::exists(tmp / "sudoers.d"));
}

}  // namespace
}  // namespace hpod::agent
