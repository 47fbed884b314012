// The InstanceConnectivity judgement, and one real check of two ranks as threads
// over 127.0.0.1 (iperf3 and gloo, as on nodes).
#include "hpod/train/comm/connectivity_check.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <thread>

#include "hpod/train/comm/gloo_communicator.h"

namespace hpod::train::comm {
namespace {

constexpr double kGbit = 1e9;

TEST(ConnectivityCheckTest, RingLinksGoBothWaysAroundTheRingOnce) {
  EXPECT_TRUE(RingLinks(1).empty());
  EXPECT_EQ(RingLinks(2), (std::vector<std::pair<int, int>>{{0, 1}, {1, 0}}));
  EXPECT_EQ(RingLinks(3),
            (std::vector<std::pair<int, int>>{{0, 1}, {1, 2}, {2, 0}, {0, 2}, {1, 0}, {2, 1}}));
}

TEST(ConnectivityCheckTest, HealthyLinksAndCollectivesPass) {
  ConnectivityOptions o;
  std::vector<LinkMeasure> links;
  for (auto [f, t] : RingLinks(3)) links.push_back({f, t, 9 * kGbit + f * 1e8, ""});
  auto v = JudgeConnectivity({"a", "b", "c"}, links, 3 * kGbit, 0.2, o);
  EXPECT_EQ(v.failures, (std::vector<std::string>{"", "", ""}));
  EXPECT_NE(v.summary.find("3 nodes, every pair connected; 6 iperf3 links"), std::string::npos)
      << v.summary;
  EXPECT_EQ(v.detail["links"].size(), 6u);
}

TEST(ConnectivityCheckTest, ANodeWhoseLinksOutAreSlowIsBlamedAloneByRatio) {
  // b's egress is shaped (tc inside its namespace): both its links out are slow,
  // its links in are not; c and a each keep one fast link out.
  ConnectivityOptions o;
  std::vector<LinkMeasure> links;
  for (auto [f, t] : RingLinks(3)) links.push_back({f, t, f == 1 ? 0.02 * kGbit : 8 * kGbit, ""});
  auto v = JudgeConnectivity({"a", "b", "c"}, links, 0.02 * kGbit, 2, o);
  EXPECT_EQ(v.failures[0], "");
  EXPECT_EQ(v.failures[2], "");
  EXPECT_NE(v.failures[1].find("every link out of b is slow (iperf3 to c 0.02 Gbit/s, to a 0.02"),
            std::string::npos)
      << v.failures[1];
  EXPECT_NE(v.failures[1].find("below 25% of the best link, 8.00 Gbit/s"), std::string::npos);
  // The same links three times faster are still slow by ratio: no absolute number.
  for (auto& l : links) l.bits_per_second *= 3;
  EXPECT_NE(JudgeConnectivity({"a", "b", "c"}, links, 1, 2, o).failures[1], "");
}

TEST(ConnectivityCheckTest, WithTwoNodesTheSendingEndOfASlowLinkFails) {
  ConnectivityOptions o;
  auto v = JudgeConnectivity({"a", "b"}, {{0, 1, 8 * kGbit, ""}, {1, 0, 0, "unable to connect"}},
                             1 * kGbit, 1, o);
  EXPECT_EQ(v.failures[0], "");
  EXPECT_NE(v.failures[1].find("to a unmeasured (unable to connect)"), std::string::npos)
      << v.failures[1];
}

TEST(ConnectivityCheckTest, SlowCollectivesOnFastLinksFailEveryNode) {
  ConnectivityOptions o;
  std::vector<LinkMeasure> links = {{0, 1, 8 * kGbit, ""}, {1, 0, 8 * kGbit, ""}};
  auto v = JudgeConnectivity({"a", "b"}, links, 0.01 * kGbit, 1, o);
  ASSERT_NE(v.failures[0], "");
  EXPECT_EQ(v.failures[0], v.failures[1]);
  EXPECT_NE(v.failures[0].find("allreduce bus bandwidth 0.01 Gbit/s is 0.001 of the median"),
            std::string::npos)
      << v.failures[0];
  v = JudgeConnectivity({"a", "b"}, links, 4 * kGbit, 250, o);
  EXPECT_NE(v.failures[1].find("4-byte allreduce latency 250.00 ms is above 100 ms"),
            std::string::npos)
      << v.failures[1];
}

bool HaveIperf3() {
  for (const char* d : {"/usr/bin/iperf3", "/usr/local/bin/iperf3"}) {
    if (std::filesystem::exists(d)) return true;
  }
  return false;
}

TEST(ConnectivityCheckTest, TwoRanksOnLoopbackMeasureLinksAndCollectives) {
  if (!HaveIperf3()) GTEST_SKIP() << "iperf3 is not installed (scripts/install-deps.sh)";
  HashStore store;
  ConnectivityOptions o;
  o.iperf_port = 20000 + getpid() % 20000;
  o.allreduce_bytes = 1 << 20;
  o.names = {"node-a", "node-b"};
  std::vector<StatusOr<ConnectivityVerdict>> out(2, InternalError("not run"));
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      GlooOptions g;
      g.rank = r;
      g.size = 2;
      g.prefix = "check";
      g.peer_names = {"rank 0", "rank 1"};
      auto comm = ConnectGloo(store, g);
      if (!comm.ok()) {
        out[r] = comm.status();
        return;
      }
      JoinedWorld w;
      w.hostname = "127.0.0.1";
      w.comm = std::move(*comm);
      out[r] = RunConnectivityCheck(w, o);
    });
  }
  for (auto& t : threads) t.join();
  ASSERT_TRUE(out[0].ok()) << out[0].status().ToString();
  ASSERT_TRUE(out[1].ok()) << out[1].status().ToString();
  const ConnectivityVerdict& v = *out[0];
  ASSERT_EQ(v.detail["links"].size(), 2u) << v.detail.dump();
  for (const auto& l : v.detail["links"]) {
    EXPECT_GT(l["bits_per_second"].get<double>(), 0) << l.dump();
    EXPECT_FALSE(l.contains("error")) << l.dump();
  }
  EXPECT_GT(v.detail["allreduce_bus_bits_per_second"].get<double>(), 0);
  EXPECT_GT(v.detail["allreduce_latency_ms"].get<double>(), 0);
  EXPECT_EQ(v.detail["nodes"], nlohmann::json({"node-a", "node-b"}));
  EXPECT_TRUE(out[1]->failures.empty());  // only rank 0 judges
}

}  // namespace
}  // namespace hpod::train::comm
