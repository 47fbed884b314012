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

}  // namespace
}  // namespace hpod
