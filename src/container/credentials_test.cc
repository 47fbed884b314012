#include "hpod/container/credentials.h"

#include <gtest/gtest.h>

namespace hpod::container {
namespace {

TEST(CredentialsTest, NetrcAsEnrootWritesIt) {
  const std::string netrc =
      "# NGC\n"
      "machine nvcr.io login $oauthtoken password abc123\n"
      "machine 10.77.0.1:5000\n  login alice\n  password s3cret\n"
      "default login anon password none\n";
  auto c = FindCredential(netrc, "10.77.0.1:5000");
  ASSERT_TRUE(c.ok());
  ASSERT_TRUE(c->has_value());
  EXPECT_EQ((*c)->login, "alice");
  EXPECT_EQ((*c)->password, "s3cret");
  c = FindCredential(netrc, "nvcr.io");
  ASSERT_TRUE(c.ok() && c->has_value());
  EXPECT_EQ((*c)->login, "$oauthtoken");
  c = FindCredential(netrc, "elsewhere.example");
  ASSERT_TRUE(c.ok() && c->has_value());
  EXPECT_EQ((*c)->login, "anon");
  c = FindCredential("machine a login x password y\n", "b");
  ASSERT_TRUE(c.ok());
  EXPECT_FALSE(c->has_value());
}

TEST(CredentialsTest, CommandPasswordsAreRefusedNotRun) {
  auto c = FindCredential("machine r login u password $(cat /tmp/secret)\n", "r");
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("not run"), std::string::npos);
  // Another registry's command password does not stop ours.
  c = FindCredential("machine r login u password $(x)\nmachine s login v password w\n", "s");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ((*c)->login, "v");
}

}  // namespace
}  // namespace hpod::container
