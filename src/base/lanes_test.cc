// Lanes (lanes.h): order within a lane, one task at a time per lane, lanes
// taking turns, the per-lane limit, and shutdown.

#include "hpod/base/lanes.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <mutex>
#include <vector>

namespace hpod {
namespace {

TEST(LanesTest, RunsALanesTasksInOrderOneAtATime) {
  Lanes lanes(4);
  constexpr int kLanes = 8, kTasks = 500;
  std::vector<std::shared_ptr<Lanes::Lane>> lane;
  std::vector<std::vector<int>> seen(kLanes);
  std::vector<std::atomic<int>> running(kLanes);
  std::atomic<int> overlaps{0}, done{0};
  for (int l = 0; l < kLanes; ++l) lane.push_back(lanes.NewLane());
  for (int i = 0; i < kTasks; ++i) {
    for (int l = 0; l < kLanes; ++l) {
      ASSERT_TRUE(lanes.Post(lane[l], [&, l, i] {
        if (running[l].fetch_add(1) != 0) ++overlaps;
        seen[l].push_back(i);  // no lock: one task of a lane at a time
        running[l].fetch_sub(1);
        ++done;
      }));
    }
  }
  for (int spins = 0; done < kLanes * kTasks && spins < 10000; ++spins) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ASSERT_EQ(done, kLanes * kTasks);
  EXPECT_EQ(overlaps, 0);
  for (int l = 0; l < kLanes; ++l) {
    ASSERT_EQ(seen[l].size(), static_cast<size_t>(kTasks));
    for (int i = 0; i < kTasks; ++i) ASSERT_EQ(seen[l][i], i) << "lane " << l;
  }
  EXPECT_EQ(lanes.queued(), 0u);
}

// A lane with a long queue does not hold back the others: with one thread, a
// task posted to a second lane runs after one more of the first's, not all.
TEST(LanesTest, LanesTakeTurns) {
  Lanes lanes(1);
  auto busy = lanes.NewLane(), other = lanes.NewLane();
  std::promise<void> release;
  std::shared_future<void> gate = release.get_future().share();
  std::mutex mu;
  std::vector<std::string> order;
  auto note = [&](std::string what) {
    std::lock_guard<std::mutex> lock(mu);
    order.push_back(std::move(what));
  };
  ASSERT_TRUE(lanes.Post(busy, [&] {
    gate.wait();
    note("busy0");
  }));
  for (int i = 1; i <= 3; ++i) {
    ASSERT_TRUE(lanes.Post(busy, [&, i] { note("busy" + std::to_string(i)); }));
  }
  ASSERT_TRUE(lanes.Post(other, [&] { note("other"); }));
  release.set_value();
  for (int spins = 0; spins < 10000; ++spins) {
    {
      std::lock_guard<std::mutex> lock(mu);
      if (order.size() == 5) break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  std::lock_guard<std::mutex> lock(mu);
  EXPECT_EQ(order, (std::vector<std::string>{"busy0", "other", "busy1", "busy2", "busy3"}));
}

TEST(LanesTest, RefusesPastALanesLimitAndAfterShutdown) {
  Lanes lanes(1);
  auto lane = lanes.NewLane();
  std::promise<void> release;
  std::shared_future<void> gate = release.get_future().share();
  std::promise<void> started;
  std::atomic<int> ran{0};
  ASSERT_TRUE(lanes.Post(lane, [&] {
    started.set_value();
    gate.wait();
    ++ran;
  }));
  started.get_future().wait();  // running: it no longer counts against the limit
  EXPECT_TRUE(lanes.Post(
      lane, [&] { ++ran; }, 2));
  EXPECT_TRUE(lanes.Post(
      lane, [&] { ++ran; }, 2));
  EXPECT_FALSE(lanes.Post(
      lane, [&] { ++ran; }, 2));
  EXPECT_TRUE(lanes.Post(
      lanes.NewLane(), [&] { ++ran; }, 2))
      << "another lane has room";
  release.set_value();
  lanes.Shutdown();  // the running task ends; what is queued may be dropped
  const int after_shutdown = ran;
  EXPECT_GE(after_shutdown, 1);
  EXPECT_FALSE(lanes.Post(lane, [&] { ++ran; }));
  EXPECT_EQ(ran, after_shutdown);
  lanes.Shutdown();  // idempotent
}

}  // namespace
}  // namespace hpod
