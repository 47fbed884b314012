// The store-backed part exchange of sharded checkpoints: rank 0's writer waits
// for every rank's part, and a failing rank ends that wait through the abort key
// (a rank killed during a save used to leave rank 0 waiting out the 10-minute
// commit timeout in its checkpointer's destructor).

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "hpod/train/comm/store.h"
#include "hpod/train/trainer/run.h"

namespace hpod::train {
namespace {

using std::chrono::milliseconds;

TEST(StorePartExchangeTest, CollectReturnsEveryRanksReportInRankOrder) {
  comm::HashStore store;
  auto exchange = MakeStorePartExchange(store, "run");
  ASSERT_TRUE(exchange->Report(8, 1, "one").ok());
  ASSERT_TRUE(exchange->Report(8, 0, "zero").ok());
  auto got = exchange->Collect(8, 2, milliseconds(1000));
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(*got, (std::vector<std::string>{"zero", "one"}));
}

TEST(StorePartExchangeTest, AMissingPartTimesOutNamingTheRank) {
  comm::HashStore store;
  auto exchange = MakeStorePartExchange(store, "run");
  ASSERT_TRUE(exchange->Report(8, 0, "zero").ok());
  auto got = exchange->Collect(8, 2, milliseconds(50));
  EXPECT_EQ(got.status().code(), StatusCode::kDeadlineExceeded);
  EXPECT_NE(got.status().message().find("no part from rank(s) 1"), std::string::npos)
      << got.status().message();
}

TEST(StorePartExchangeTest, AFailedRankEndsTheWaitAtOnce) {
  comm::HashStore store;
  auto exchange = MakeStorePartExchange(store, "run");
  ASSERT_TRUE(exchange->Report(12, 0, "zero").ok());
  std::thread failing([&] {
    std::this_thread::sleep_for(milliseconds(100));
    (void)store.Set(CheckpointAbortKey("run"), "rank 2 stopped: lost rank 1");
  });
  // A 60 s timeout: only the abort key can make it end Aborted (a timeout is
  // DeadlineExceeded), so the status says what ended the wait, not a clock.
  auto got = exchange->Collect(12, 3, milliseconds(60000));
  failing.join();
  EXPECT_EQ(got.status().code(), StatusCode::kAborted) << got.status().ToString();
  EXPECT_NE(got.status().message().find("checkpoint step 12 abandoned: rank 2 stopped"),
            std::string::npos)
      << got.status().message();
}

}  // namespace
}  // namespace hpod::train
