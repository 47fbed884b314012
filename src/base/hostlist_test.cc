#include "hpod/base/hostlist.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>

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

TEST(SplitHostName, TrailingNumberAndPadding) {
  HostName ip = SplitHostName("ip-10-77-1-11");
  EXPECT_EQ(ip.prefix, "ip-10-77-1-");
  EXPECT_EQ(ip.number, 11);
  EXPECT_EQ(ip.width, 0);
  HostName padded = SplitHostName("n007");
  EXPECT_EQ(padded.prefix, "n");
  EXPECT_EQ(padded.number, 7);
  EXPECT_EQ(padded.width, 3);
  EXPECT_EQ(SplitHostName("n0").width, 0);  // one digit is never padding
  EXPECT_EQ(SplitHostName("n00").width, 2);
  for (const char* whole : {"login", "a1b", "42", "n1234567890"}) {
    EXPECT_LT(SplitHostName(whole).number, 0) << whole;
    EXPECT_EQ(SplitHostName(whole).prefix, whole);
  }
}

TEST(HostNameLess, NumbersCompareAsNumbers) {
  std::vector<std::string> names = {"ip-10-77-10-1", "ip-10-77-1-100", "ip-10-77-2-1",
                                    "ip-10-77-1-9",  "login",          "ip-10-77-1-11",
                                    "ip-9-1-1-1"};
  std::sort(names.begin(), names.end(),
            [](const auto& a, const auto& b) { return HostNameLess(a, b); });
  EXPECT_THAT(names, ElementsAre("ip-9-1-1-1", "ip-10-77-1-9", "ip-10-77-1-11", "ip-10-77-1-100",
                                 "ip-10-77-2-1", "ip-10-77-10-1", "login"));
  EXPECT_FALSE(HostNameLess("n1", "n1"));
  EXPECT_TRUE(HostNameLess("n01", "n1"));  // equal numbers: the text decides
  EXPECT_FALSE(HostNameLess("n1", "n01"));
  EXPECT_TRUE(HostNameLess("n09", "n10"));
  EXPECT_TRUE(HostNameLess("n", "n0"));
  EXPECT_TRUE(HostNameLess("n-1", "n1"));  // '-' sorts before digits
}

// Every case must expand back to its input, in order.
void ExpectRoundTrip(const std::vector<std::string>& hosts, const std::string& expected) {
  const std::string list = CompressHostlist(hosts);
  EXPECT_EQ(list, expected);
  auto back = ExpandHostlist(list);
  ASSERT_TRUE(back.ok()) << list << ": " << back.status().ToString();
  EXPECT_EQ(*back, hosts) << list;
}

TEST(CompressHostlist, RangesGapsAndSingleNames) {
  ExpectRoundTrip({}, "");
  ExpectRoundTrip({"ip-10-77-1-11"}, "ip-10-77-1-11");
  ExpectRoundTrip({"ip-10-77-1-11", "ip-10-77-1-12"}, "ip-10-77-1-[11-12]");
  ExpectRoundTrip({"ip-10-77-1-11", "ip-10-77-1-12", "ip-10-77-1-13", "ip-10-77-1-15"},
                  "ip-10-77-1-[11-13,15]");
  ExpectRoundTrip({"ip-10-77-1-9", "ip-10-77-1-10"}, "ip-10-77-1-[9-10]");
  ExpectRoundTrip({"10.77.1.11", "10.77.1.12", "10.77.1.20"}, "10.77.1.[11-12,20]");
  ExpectRoundTrip({"login", "a1b", "n1", "n2"}, "login,a1b,n[1-2]");
}

TEST(CompressHostlist, AnotherPrefixStartsAnotherItem) {
  // Crossing a /24: the last field varies only within one prefix.
  ExpectRoundTrip({"ip-10-77-1-253", "ip-10-77-1-254", "ip-10-77-2-1", "ip-10-77-2-2"},
                  "ip-10-77-1-[253-254],ip-10-77-2-[1-2]");
}

TEST(CompressHostlist, KeepsTheOrderGiven) {
  // A falling number starts a new item: Slurm pairs NodeName and NodeAddr
  // lists element by element, so nothing may be reordered.
  ExpectRoundTrip({"n3", "n1", "n2"}, "n3,n[1-2]");
  ExpectRoundTrip({"n1", "n1"}, "n1,n1");
}

TEST(CompressHostlist, PaddedNumbersOnlyJoinTheirWidth) {
  ExpectRoundTrip({"n01", "n02", "n03"}, "n[01-03]");
  ExpectRoundTrip({"n08", "n09", "n10", "n11"}, "n[08-09],n[10-11]");
  ExpectRoundTrip({"n8", "n9", "n10"}, "n[8-10]");
  ExpectRoundTrip({"n1", "n01", "n001"}, "n1,n01,n001");
  ExpectRoundTrip({"n0", "n00"}, "n0,n00");
}

TEST(CompressHostlist, RangesStayWithinSlurmsLimit) {
  std::vector<std::string> hosts;
  for (long i = 0; i < kMaxHostRange + 2; ++i) hosts.push_back("n" + std::to_string(i));
  ExpectRoundTrip(hosts, "n[0-65535,65536-65537]");
}

}  // namespace
}  // namespace hpod
