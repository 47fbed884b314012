#include "hpod/container/mounts.h"

#include <gtest/gtest.h>

namespace hpod::container {
namespace {

TEST(MountsTest, PyxisSyntax) {
  auto m = ParseMounts("/fsx:/fsx,/data:/mnt/data:ro+rprivate,/scratch");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  ASSERT_EQ(m->size(), 3u);
  EXPECT_EQ((*m)[0], (BindMount{"/fsx", "/fsx", false}));
  EXPECT_EQ((*m)[1], (BindMount{"/data", "/mnt/data", true}));
  EXPECT_EQ((*m)[2], (BindMount{"/scratch", "/scratch", false}));
}

TEST(MountsTest, BadEntriesNameThemselves) {
  for (const char* bad :
       {"fsx:/fsx", "/fsx:fsx", "/a:/b:rx", "/a:/b:ro:x", "/a:/", ",", "/a/../etc:/b"}) {
    auto m = ParseMounts(bad);
    EXPECT_FALSE(m.ok()) << bad;
    if (!m.ok()) {
      EXPECT_NE(m.status().message().find("--container-mounts"), std::string::npos);
    }
  }
}

}  // namespace
}  // namespace hpod::container
