#include "hpod/controlplane/pagination.h"

#include <gtest/gtest.h>

namespace hpod::controlplane {
namespace {

TEST(PaginationTest, RoundTrip) {
  PageTokenCodec codec("k");
  std::string scope = PageTokenCodec::ScopeOf("ListClusters", {{"SortBy", "NAME"}});
  std::string t = codec.Encode(scope, {{"v", "abc"}, {"id", "x"}});
  auto p = codec.Decode(scope, t);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ((*p)["v"], "abc");
}

TEST(PaginationTest, ScopeIgnoresPagingMembersOnly) {
  EXPECT_EQ(PageTokenCodec::ScopeOf("L", {{"A", 1}, {"MaxResults", 5}, {"NextToken", "t"}}),
            PageTokenCodec::ScopeOf("L", {{"A", 1}}));
  EXPECT_NE(PageTokenCodec::ScopeOf("L", {{"A", 1}}), PageTokenCodec::ScopeOf("L", {{"A", 2}}));
}

TEST(PaginationTest, TamperedOrForeignTokensAreRejected) {
  PageTokenCodec codec("k");
  std::string scope = PageTokenCodec::ScopeOf("ListClusters", {});
  std::string t = codec.Encode(scope, 42);
  std::string tampered = t;
  tampered[3] = tampered[3] == 'A' ? 'B' : 'A';
  for (const std::string& bad : {tampered, std::string("garbage"), std::string("."), t + "x",
                                 PageTokenCodec("other").Encode(scope, 42)}) {
    auto r = codec.Decode(scope, bad);
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << bad;
  }
  EXPECT_FALSE(codec.Decode(PageTokenCodec::ScopeOf("ListClusterNodes", {}), t).ok());
}

}  // namespace
}  // namespace hpod::controlplane
