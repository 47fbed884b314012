#include "hpod/slurm/spank/options.h"

#include <gtest/gtest.h>

namespace hpod::spank {
namespace {

TEST(ParseAutoResume, AcceptsRetryCounts) {
  EXPECT_EQ(*ParseAutoResume("0"), 0);
  EXPECT_EQ(*ParseAutoResume("1"), 1);
  EXPECT_EQ(*ParseAutoResume("007"), 7);
  EXPECT_EQ(*ParseAutoResume("100"), 100);
}

TEST(ParseAutoResume, RejectsWhatIsNotACount) {
  for (const char* bad : {"abc", "-1", "1x", "", " 1", "+1", "1.5", "0x1"}) {
    StatusOr<int> n = ParseAutoResume(bad);
    ASSERT_FALSE(n.ok()) << bad;
    EXPECT_EQ(n.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(n.status().message(), AutoResumeError(bad));
  }
  EXPECT_EQ(
      ParseAutoResume("abc").status().message(),
      "[Auto Resume] Error: --auto-resume=abc: expected the number of retries (0, 1, 2, ...)");
}

TEST(ParseAutoResume, RejectsMoreThanTheLimitWithoutOverflow) {
  EXPECT_EQ(ParseAutoResume("101").status().message(),
            "[Auto Resume] Error: --auto-resume=101: at most 100 retries");
  EXPECT_FALSE(ParseAutoResume("99999999999999999999999999").ok());
}

}  // namespace
}  // namespace hpod::spank
