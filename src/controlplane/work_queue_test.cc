#include "hpod/controlplane/work_queue.h"

#include <gtest/gtest.h>

#include <atomic>
#include <map>

namespace hpod::controlplane {
namespace {

TEST(WorkQueueTest, DeduplicatesKeys) {
  FakeClock clock;
  std::map<std::string, int> calls;
  WorkQueue q(clock, {}, [&](const std::string& k) {
    calls[k]++;
    return WorkQueue::Result{};
  });
  q.Add("a");
  q.Add("a");
  q.Add("b");
  EXPECT_EQ(q.RunUntilIdle(), 2);
  EXPECT_EQ(calls["a"], 1);
  EXPECT_EQ(calls["b"], 1);
}

TEST(WorkQueueTest, FailuresBackOffExponentially) {
  FakeClock clock;
  int calls = 0;
  WorkQueueOptions o;
  o.base_backoff = std::chrono::milliseconds(100);
  WorkQueue q(clock, o, [&](const std::string&) {
    ++calls;
    return WorkQueue::Result{UnavailableError("later"), {}};
  });
  q.Add("a");
  q.RunUntilIdle();
  EXPECT_EQ(calls, 1);
  clock.AdvanceTime(std::chrono::milliseconds(99));
  q.RunUntilIdle();
  EXPECT_EQ(calls, 1);
  clock.AdvanceTime(std::chrono::milliseconds(1));
  q.RunUntilIdle();
  EXPECT_EQ(calls, 2);
  clock.AdvanceTime(std::chrono::milliseconds(150));  // second backoff is 200 ms
  q.RunUntilIdle();
  EXPECT_EQ(calls, 2);
  clock.AdvanceTime(std::chrono::milliseconds(50));
  q.RunUntilIdle();
  EXPECT_EQ(calls, 3);
}

// A polling key woken many times still has one look pending, not one per pass:
// each pass asks to be looked at again, the wakes' passes included.
TEST(WorkQueueTest, AWokenPollingKeyKeepsOneLookPending) {
  FakeClock clock;
  int calls = 0;
  WorkQueue q(clock, {}, [&](const std::string&) {
    ++calls;
    return WorkQueue::Result{OkStatus(), std::chrono::milliseconds(1000)};
  });
  for (int i = 0; i < 5; ++i) {
    q.Add("a");
    EXPECT_EQ(q.RunUntilIdle(), 1);
    clock.AdvanceTime(std::chrono::milliseconds(100));
  }
  EXPECT_EQ(q.Pending(), 1u);
  // Due 1 s after the first pass: one pass, then one look pending again.
  clock.AdvanceTime(std::chrono::milliseconds(500));
  EXPECT_EQ(q.RunUntilIdle(), 1);
  EXPECT_EQ(q.Pending(), 1u);
  clock.AdvanceTime(std::chrono::milliseconds(999));
  EXPECT_EQ(q.RunUntilIdle(), 0);
  clock.AdvanceTime(std::chrono::milliseconds(1));
  EXPECT_EQ(q.RunUntilIdle(), 1);
  EXPECT_EQ(calls, 7);
  // An earlier request moves the look forward.
  q.AddAfter("a", std::chrono::milliseconds(10));
  EXPECT_EQ(q.Pending(), 1u);
  clock.AdvanceTime(std::chrono::milliseconds(10));
  EXPECT_EQ(q.RunUntilIdle(), 1);
}

TEST(WorkQueueTest, RequeueAfter) {
  FakeClock clock;
  int calls = 0;
  WorkQueue q(clock, {}, [&](const std::string&) {
    ++calls;
    return WorkQueue::Result{OkStatus(), std::chrono::milliseconds(500)};
  });
  q.Add("a");
  q.RunUntilIdle();
  clock.AdvanceTime(std::chrono::milliseconds(500));
  q.RunUntilIdle();
  EXPECT_EQ(calls, 2);
}

TEST(WorkQueueTest, ThrowingProcessorIsRetriedNotFatal) {
  FakeClock clock;
  int calls = 0;
  WorkQueue q(clock, {}, [&](const std::string&) -> WorkQueue::Result {
    if (++calls == 1) throw std::runtime_error("boom");
    return {};
  });
  q.Add("a");
  q.RunUntilIdle();
  clock.AdvanceTime(std::chrono::seconds(1));
  q.RunUntilIdle();
  EXPECT_EQ(calls, 2);
}

TEST(WorkQueueTest, ThreadedWorkersNeverRunOneKeyTwiceAtOnce) {
  RealClock clock;
  std::atomic<int> in_flight{0}, max_in_flight{0}, calls{0};
  WorkQueueOptions o;
  o.workers = 4;
  WorkQueue q(clock, o, [&](const std::string&) {
    int now = ++in_flight;
    int prev = max_in_flight.load();
    while (now > prev && !max_in_flight.compare_exchange_weak(prev, now)) {
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    --in_flight;
    ++calls;
    return WorkQueue::Result{};
  });
  q.Start();
  for (int i = 0; i < 200; ++i) q.Add("same");
  while (q.Pending() > 0 || in_flight > 0)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  q.Stop();
  EXPECT_EQ(max_in_flight.load(), 1);
  EXPECT_GE(calls.load(), 1);
}

}  // namespace
}  // namespace hpod::controlplane
