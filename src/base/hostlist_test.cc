#include "hpod/base/hostlist.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace hpod {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(ExpandHostlist, RangesListsAndPlainNames) {
  auto hosts = ExpandHostlist("ip-10-77-0-[11-13,15],ip-10-77-1-2");
  ASSERT_TRUE(hosts.ok()) << hosts.status().ToString();
  EXPECT_THAT(*hosts, ElementsAre("ip-10-77-0-11", "ip-10-77-0-12", "ip-10-77-0-13",
                                  "ip-10-77-0-15", "ip-10-77-1-2"));
}

TEST(ExpandHostlist, KeepsTheWidthOfTheLowerBound) {
  EXPECT_THAT(*ExpandHostlist("n[01-03]"), ElementsAre("n01", "n02", "n03"));
  EXPECT_THAT(*ExpandHostlist("n[08-11]"), ElementsAre("n08", "n09", "n10", "n11"));
  EXPECT_THAT(*ExpandHostlist("n[9-10]"), ElementsAre("n9", "n10"));
}

TEST(ExpandHostlist, SeveralGroupsMultiplyAndSuffixesStay) {
  EXPECT_THAT(*ExpandHostlist("r[1-2]-n[1-2]"), ElementsAre("r1-n1", "r1-n2", "r2-n1", "r2-n2"));
  EXPECT_THAT(*ExpandHostlist("gpu[3]x"), ElementsAre("gpu3x"));
  EXPECT_THAT(*ExpandHostlist("a,b"), ElementsAre("a", "b"));
  EXPECT_TRUE(ExpandHostlist("")->empty());
}

TEST(ExpandHostlist, ErrorsAreValuesNamingTheItem) {
  for (const char* bad : {"n[1-3", "n1-3]", "n[]", "n[3-1]", "n[a-b]", "n[1-]", "a,,b", "n[[1]]",
                          "n[1-999999]", "n[1234567890]"}) {
    auto hosts = ExpandHostlist(bad);
    EXPECT_FALSE(hosts.ok()) << bad;
    EXPECT_EQ(hosts.status().code(), StatusCode::kInvalidArgument) << bad;
  }
  EXPECT_THAT(ExpandHostlist("ok,n[3-1]").status().message(), HasSubstr("'n[3-1]'"));
}

}  // namespace
}  // namespace hpod
