#include "hpod/base/backoff.h"

#include <gtest/gtest.h>

#include <vector>

namespace hpod {
namespace {

using std::chrono::milliseconds;

TEST(BackoffTest, DoublesUpToTheCapAndResets) {
  Backoff b({.initial = milliseconds(50), .max = milliseconds(400)});
  std::vector<int64_t> waits;
  for (int i = 0; i < 6; ++i) waits.push_back(b.Next().count());
  EXPECT_EQ(waits, (std::vector<int64_t>{50, 100, 200, 400, 400, 400}));
  EXPECT_EQ(b.failures(), 6);
  b.Reset();
  EXPECT_EQ(b.failures(), 0);
  EXPECT_EQ(b.Peek(), milliseconds(50));
  EXPECT_EQ(b.Next(), milliseconds(50));
}

TEST(BackoffTest, ManyFailuresDoNotOverflow) {
  Backoff b({.initial = milliseconds(100), .max = milliseconds(10000)});
  for (int i = 0; i < 1000; ++i) b.Next();
  EXPECT_EQ(b.Next(), milliseconds(10000));
  Backoff huge({.initial = milliseconds(1), .max = milliseconds(INT64_MAX)});
  for (int i = 0; i < 100; ++i) EXPECT_GT(huge.Next().count(), 0);
}

TEST(BackoffTest, JitterStaysWithinTheBoundAndIsReproducibleWithASeed) {
  BackoffOptions o{
      .initial = milliseconds(100), .max = milliseconds(1000), .jitter = true, .seed = 42};
  Backoff a(o), b(o);
  bool varied = false;
  for (int i = 0; i < 50; ++i) {
    milliseconds bound = a.Peek();
    milliseconds wait = a.Next();
    EXPECT_GE(wait.count(), 0);
    EXPECT_LE(wait, bound);
    EXPECT_EQ(wait, b.Next()) << "same seed, same sequence";
    varied |= wait != bound;
  }
  EXPECT_TRUE(varied);
  // The bound grows as without jitter.
  Backoff c(o);
  c.Next();
  c.Next();
  EXPECT_EQ(c.Peek(), milliseconds(400));
}

TEST(BackoffTest, ZeroInitialNeverWaits) {
  Backoff b({.initial = milliseconds(0), .max = milliseconds(100), .jitter = true});
  EXPECT_EQ(b.Next(), milliseconds(0));
  EXPECT_EQ(b.Next(), milliseconds(0));
}

}  // namespace
}  // namespace hpod
