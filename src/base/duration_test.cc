#include "hpod/base/duration.h"

#include <gtest/gtest.h>

namespace hpod {
namespace {

// The CLI's wrapper has the exhaustive table (src/cli/args_test.cc); here, what
// base promises its other callers: the value, and kInvalidArgument naming the flag.
TEST(ParseDurationSecondsTest, ValuesAndInvalidArgument) {
  EXPECT_EQ(*ParseDurationSeconds("--backup-interval", "6h", 0, 86400 * 365), 21600);
  EXPECT_EQ(*ParseDurationSeconds("--backup-interval", "0", 0, 86400 * 365), 0);
  EXPECT_EQ(*ParseDurationSeconds("--backup-interval", "1h30m", 0, 86400 * 365), 5400);
  StatusOr<int64_t> bad = ParseDurationSeconds("--backup-interval", "abc", 0, 86400 * 365);
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.status().message(),
            R"(--backup-interval: "abc" is not a duration; use e.g. 90s, 30m, 1h or 7d)");
}

TEST(FormatDurationTest, LargestEvenUnit) {
  EXPECT_EQ(FormatDuration(86400 * 30), "30d");
  EXPECT_EQ(FormatDuration(5400), "90m");
  EXPECT_EQ(FormatDuration(1), "1s");
  EXPECT_EQ(FormatDuration(0), "0s");
}

}  // namespace
}  // namespace hpod
