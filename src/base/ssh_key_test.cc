#include "hpod/base/ssh_key.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "hpod/base/file_util.h"
#include "hpod/base/subprocess.h"

namespace hpod {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

TEST(SshKeyTest, Ed25519PairInOpenSshFormats) {
  auto k = GenerateEd25519SshKey("ip-10-1-0-5");
  ASSERT_TRUE(k.ok()) << k.status().ToString();
  EXPECT_THAT(k->private_key, StartsWith("-----BEGIN OPENSSH PRIVATE KEY-----\n"));
  EXPECT_THAT(k->private_key, HasSubstr("\n-----END OPENSSH PRIVATE KEY-----\n"));
  EXPECT_THAT(k->public_key, StartsWith("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAI"));
  EXPECT_THAT(k->public_key, ::testing::EndsWith(" ip-10-1-0-5"));
  auto pub = SshPublicKeyOf(k->private_key);
  ASSERT_TRUE(pub.ok()) << pub.status().ToString();
  EXPECT_EQ(*pub + " ip-10-1-0-5", k->public_key);
  EXPECT_NE(GenerateEd25519SshKey("x")->public_key, GenerateEd25519SshKey("x")->public_key);
  EXPECT_FALSE(GenerateEd25519SshKey("a\nb").ok());
  EXPECT_FALSE(SshPublicKeyOf("ssh-ed25519 AAAA").ok());
  EXPECT_FALSE(SshPublicKeyOf("-----BEGIN OPENSSH PRIVATE KEY-----\nAAAA\n").ok());
}

// OpenSSH itself reads the key and derives the same public key from it.
TEST(SshKeyTest, SshKeygenReadsIt) {
  if (::access("/usr/bin/ssh-keygen", X_OK) != 0) GTEST_SKIP() << "no ssh-keygen";
  auto k = GenerateEd25519SshKey("node");
  ASSERT_TRUE(k.ok());
  const std::string path =
      (std::filesystem::temp_directory_path() / ("hpod-ssh-key-" + std::to_string(getpid())))
          .string();
  ASSERT_TRUE(WriteFileAtomic(path, k->private_key, 0600).ok());
  SubprocessOptions o;
  o.argv = {"/usr/bin/ssh-keygen", "-y", "-f", path};
  auto r = RunCommand(o);
  std::filesystem::remove(path);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->exit_code, 0) << r->stderr_data;
  EXPECT_EQ(r->stdout_data, k->public_key + "\n");
}

}  // namespace
}  // namespace hpod
