#include "hpod/base/clock.h"

#include <gtest/gtest.h>

namespace hpod {
namespace {

TEST(FakeClockTest, OnlyAdvancesWhenTold) {
  FakeClock clock;
  auto t0 = clock.Now();
  auto s0 = clock.SteadyNow();
  EXPECT_EQ(clock.Now(), t0);
  clock.AdvanceTime(std::chrono::milliseconds(1500));
  EXPECT_EQ(clock.Now() - t0, std::chrono::milliseconds(1500));
  EXPECT_EQ(clock.SteadyNow() - s0, std::chrono::milliseconds(1500));
  EXPECT_DOUBLE_EQ(clock.NowEpochSeconds(), 1700000001.5);
}

TEST(FormatUtcTest, SecondsAsUtc) {
  EXPECT_EQ(FormatUtc(1700000001.5), "2023-11-14T22:13:21Z");
  EXPECT_EQ(FormatUtc(0), "1970-01-01T00:00:00Z");
}

}  // namespace
}  // namespace hpod
