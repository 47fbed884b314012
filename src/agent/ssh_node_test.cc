#include "hpod/agent/ssh_node.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>

#include "hpod/agent/fs_util.h"
#include "hpod/base/ssh_key.h"

namespace hpod::agent {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

class SshNodeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("hpod-ssh-node-" + std::to_string(getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "etc/ssh");
    fs::create_directories(dir_ / "root");
    p_.ssh_dir = (dir_ / "etc/ssh").string();
    p_.root_home = (dir_ / "root").string();
    p_.run_dir = (dir_ / "run").string();
    key_ = *GenerateEd25519SshKey("ip-10-1-0-5");
    other_ = *GenerateEd25519SshKey("ip-10-1-0-6");
    known_ = "ip-10-1-0-5,10.1.0.5 " + *SshPublicKeyOf(key_.private_key) + "\n" +
             "ip-10-1-0-6,10.1.0.6 " + *SshPublicKeyOf(other_.private_key) + "\n";
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string Read(const std::string& rel) { return *ReadFile((dir_ / rel).string()); }
  mode_t Mode(const std::string& rel) {
    struct stat st;
    return ::stat((dir_ / rel).c_str(), &st) == 0 ? (st.st_mode & 07777) : 0;
  }

  fs::path dir_;
  SshPaths p_;
  SshKeyPair key_, other_;
  std::string known_;
};

TEST_F(SshNodeTest, WritesTheClustersTrustAndOnlyItsHostKey) {
  // The host machine's keys, as a local node's root shows them.
  ASSERT_TRUE(WriteFileAtomic((dir_ / "etc/ssh/ssh_host_rsa_key").string(), "x", 0600).ok());
  ASSERT_TRUE(WriteFileAtomic((dir_ / "etc/ssh/ssh_host_rsa_key.pub").string(), "x", 0644).ok());
  auto changed = WriteSshSetup(p_, key_.private_key, known_);
  ASSERT_TRUE(changed.ok()) << changed.status().ToString();
  EXPECT_TRUE(*changed);
  EXPECT_EQ(Read("etc/ssh/ssh_host_ed25519_key"), key_.private_key);
  EXPECT_EQ(Mode("etc/ssh/ssh_host_ed25519_key"), 0600u);
  EXPECT_EQ(Read("etc/ssh/ssh_host_ed25519_key.pub"), *SshPublicKeyOf(key_.private_key) + "\n");
  EXPECT_FALSE(fs::exists(dir_ / "etc/ssh/ssh_host_rsa_key"));
  EXPECT_FALSE(fs::exists(dir_ / "etc/ssh/ssh_host_rsa_key.pub"));
  EXPECT_EQ(Read("etc/ssh/ssh_known_hosts"), known_);
  const std::string equiv = "ip-10-1-0-5\n10.1.0.5\nip-10-1-0-6\n10.1.0.6\n";
  EXPECT_EQ(Read("etc/ssh/shosts.equiv"), equiv);
  EXPECT_EQ(Read("root/.shosts"), equiv);
  EXPECT_EQ(Mode("root/.shosts"), 0600u);
  const std::string sshd = Read(std::string("etc/ssh/") + kSshdConfigName);
  EXPECT_THAT(sshd, HasSubstr("HostKey " + p_.ssh_dir + "/ssh_host_ed25519_key\n"));
  EXPECT_THAT(sshd, HasSubstr("HostbasedAuthentication yes\n"));
  EXPECT_THAT(sshd, HasSubstr("PasswordAuthentication no\n"));
  EXPECT_THAT(Read("etc/ssh/ssh_config.d/hpod.conf"), HasSubstr("EnableSSHKeysign yes"));
  EXPECT_TRUE(fs::is_directory(dir_ / "run/sshd"));

  // Again with a node added: the key stays (no sshd restart), the trust grows.
  auto third = *GenerateEd25519SshKey("ip-10-1-0-7");
  changed =
      WriteSshSetup(p_, key_.private_key,
                    known_ + "ip-10-1-0-7,10.1.0.7 " + *SshPublicKeyOf(third.private_key) + "\n");
  ASSERT_TRUE(changed.ok());
  EXPECT_FALSE(*changed);
  EXPECT_THAT(Read("etc/ssh/shosts.equiv"), HasSubstr("ip-10-1-0-7\n10.1.0.7\n"));
}

TEST_F(SshNodeTest, RefusesWhatHpoddNeverSends) {
  EXPECT_FALSE(WriteSshSetup(p_, "not a key", known_).ok());
  for (const std::string bad :
       std::vector<std::string>{"* ssh-ed25519 AAAA\n", "a,b ssh-rsa AAAA\n", "a ssh-ed25519\n",
                                "a ssh-ed25519 AAAA extra\n", "!a ssh-ed25519 AAAA\n"}) {
    EXPECT_FALSE(WriteSshSetup(p_, key_.private_key, bad).ok()) << bad;
  }
  EXPECT_FALSE(fs::exists(dir_ / "etc/ssh/ssh_host_ed25519_key")) << "nothing written";
}

TEST(SshdArgvTest, ListensOnTheClusterAddressOnly) {
  SshPaths p;
  EXPECT_THAT(SshdArgv("/usr/sbin/sshd", p, "10.1.0.5"),
              ElementsAre("/usr/sbin/sshd", "-D", "-e", "-f", "/etc/ssh/hpod_sshd_config", "-o",
                          "ListenAddress=10.1.0.5"));
}

}  // namespace
}  // namespace hpod::agent
