#include "hpod/controlplane/response_cache.h"

#include <gtest/gtest.h>

namespace hpod::controlplane {
namespace {

std::shared_ptr<const std::string> Body(std::string text) {
  return std::make_shared<const std::string>(std::move(text));
}

TEST(ResponseCacheTest, ABodyIsServedAtItsGenerationOnly) {
  ResponseCache cache;
  EXPECT_EQ(cache.Find("describe demo", 7), nullptr);
  cache.Put("describe demo", 7, Body("creating"));
  auto hit = cache.Find("describe demo", 7);
  ASSERT_NE(hit, nullptr);
  EXPECT_EQ(*hit, "creating");
  EXPECT_EQ(cache.Find("describe other", 7), nullptr);
  // One write later the body may be wrong: never served again.
  EXPECT_EQ(cache.Find("describe demo", 8), nullptr);
  ResponseCache::Stats s = cache.GetStats();
  EXPECT_EQ(s.hits, 1u);
  EXPECT_EQ(s.misses, 3u);
}

TEST(ResponseCacheTest, ANewerGenerationDropsTheOldBodiesAndAStaleBodyIsNotKept) {
  ResponseCache cache;
  cache.Put("a", 7, Body("a at 7"));
  cache.Put("b", 7, Body("b at 7"));
  cache.Put("a", 9, Body("a at 9"));
  EXPECT_EQ(cache.GetStats().entries, 1u);
  EXPECT_EQ(cache.GetStats().bytes, std::string("a").size() + std::string("a at 9").size());
  // A reader that began before the write at 9 finishes after it: not kept, and
  // a lookup at its own generation finds nothing either.
  cache.Put("b", 8, Body("b at 8"));
  EXPECT_EQ(cache.Find("b", 8), nullptr);
  EXPECT_EQ(cache.Find("b", 9), nullptr);
  EXPECT_EQ(*cache.Find("a", 9), "a at 9");
}

TEST(ResponseCacheTest, BodiesPastTheBoundAreNotKept) {
  ResponseCache cache;
  const std::string big(ResponseCache::kDefaultMaxBytes / 2, 'x');
  cache.Put("one", 1, Body(big));
  cache.Put("two", 1, Body(big));  // the keys' bytes count too: over the bound
  EXPECT_NE(cache.Find("one", 1), nullptr);
  EXPECT_EQ(cache.Find("two", 1), nullptr);
  EXPECT_LE(cache.GetStats().bytes, ResponseCache::kDefaultMaxBytes);
  // The next generation starts empty, so it has room again.
  cache.Put("two", 2, Body(big));
  EXPECT_NE(cache.Find("two", 2), nullptr);
}

TEST(ResponseCacheTest, ABoundOfZeroKeepsNothing) {
  ResponseCache off(0);
  off.Put("a", 1, Body("a"));
  EXPECT_EQ(off.Find("a", 1), nullptr);
  EXPECT_EQ(off.GetStats().entries, 0u);
}

}  // namespace
}  // namespace hpod::controlplane
