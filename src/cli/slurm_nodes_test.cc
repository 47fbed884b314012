#include "hpod/cli/slurm_nodes.h"

#include <gtest/gtest.h>

#include <sstream>

#include "hpod/cli/fake_transport.h"
#include "hpod/cli/main.h"

namespace hpod::cli {
namespace {

Json Summary(const std::string& group, const std::string& id, const std::string& status,
             const std::string& ip) {
  Json s = {{"InstanceGroupName", group},
            {"InstanceId", id},
            {"InstanceType", "ml.c5.xlarge"},
            {"LaunchTime", 1700000000},
            {"InstanceStatus", {{"Status", status}}}};
  if (!ip.empty()) s["PrivateDnsHostname"] = "ip-" + ip + ".us-west-2.compute.internal";
  return s;
}

Json SlurmNode(const std::string& name, const std::string& state, const std::string& reason) {
  return {{"NodeName", name},
          {"State", state},
          {"Reason", reason},
          {"SlurmdStartTime", "2025-01-02T03:04:05"}};
}

class SlurmNodesTest : public ::testing::Test {
 protected:
  SlurmNodesTest() {
    // Two pages, so that the join is proven to cover every page: the controller
    // and a worker, then a drained worker and one still without an address.
    transport_.On("ListClusterNodes", [](const Json& body) -> StatusOr<http::Response> {
      if (body.value("NextToken", "").empty()) {
        return JsonResponse(
            200, {{"ClusterNodeSummaries",
                   {Summary("controller", "i-00000000000000001", "Running", "10-77-0-10"),
                    Summary("workers", "i-00000000000000002", "Running", "10-77-0-11")}},
                  {"NextToken", "page2"}});
      }
      return JsonResponse(200,
                          {{"ClusterNodeSummaries",
                            {Summary("workers", "i-00000000000000003", "Running", "10-77-0-12"),
                             Summary("workers", "i-00000000000000004", "Pending", "")}}});
    });
    SlurmReport(true);
  }

  void SlurmReport(bool available) {
    Json body = {{"SlurmNodes", Json::array()}, {"Available", available}};
    if (available) {
      body["SlurmNodes"] = {SlurmNode("ip-10-77-0-11", "IDLE", ""),
                            SlurmNode("ip-10-77-0-12", "IDLE+DRAIN", "hpod: health check failed")};
      body["ReportedBy"] = "i-00000000000000001";
    }
    transport_.Queue("HpodListSlurmNodes", {JsonResponse(200, body)});
  }

  int Run(std::vector<std::string> args) {
    out_.str("");
    err_.str("");
    return cli::Run(args, FakeRuntime(transport_, clock_, sleeper_, out_, err_));
  }

  FakeTransport transport_;
  FakeClock clock_;
  FakeSleeper sleeper_{clock_};
  std::ostringstream out_;
  std::ostringstream err_;
};

TEST_F(SlurmNodesTest, JsonJoinsEveryPageByHostname) {
  ASSERT_EQ(Run({"list-cluster-nodes", "--cluster-name", "ml", "--with-slurm"}), kExitOk)
      << err_.str();
  EXPECT_EQ(err_.str(), "");
  Json out = Json::parse(out_.str());
  EXPECT_EQ(out["SlurmAvailable"], true);
  const Json& nodes = out["ClusterNodeSummaries"];
  ASSERT_EQ(nodes.size(), 4u);
  EXPECT_TRUE(nodes[0]["Slurm"].is_null());  // the controller is not a Slurm node
  EXPECT_EQ(nodes[1]["InstanceId"], "i-00000000000000002");
  EXPECT_EQ(nodes[1]["Slurm"], Json({{"NodeName", "ip-10-77-0-11"},
                                     {"State", "IDLE"},
                                     {"Reason", ""},
                                     {"SlurmdStartTime", "2025-01-02T03:04:05"}}));
  EXPECT_EQ(nodes[2]["Slurm"]["State"], "IDLE+DRAIN");
  EXPECT_EQ(nodes[2]["Slurm"]["Reason"], "hpod: health check failed");
  EXPECT_TRUE(nodes[3]["Slurm"].is_null());  // no address yet
  // The summaries themselves pass through as ListClusterNodes returned them.
  EXPECT_EQ(nodes[1]["InstanceStatus"]["Status"], "Running");
  EXPECT_EQ(nodes[1]["PrivateDnsHostname"], "ip-10-77-0-11.us-west-2.compute.internal");
}

TEST_F(SlurmNodesTest, FlagIsNeverSentAndSlurmIsAskedOnceAfterTheNodes) {
  ASSERT_EQ(Run({"list-cluster-nodes", "--with-slurm", "--cluster-name", "ml"}), kExitOk)
      << err_.str();
  ASSERT_EQ(transport_.calls.size(), 3u);
  EXPECT_EQ(transport_.calls[0].operation, "ListClusterNodes");
  EXPECT_EQ(transport_.calls[0].body, Json({{"ClusterName", "ml"}}));
  EXPECT_EQ(transport_.calls[1].operation, "ListClusterNodes");
  EXPECT_EQ(transport_.calls[1].body, Json({{"ClusterName", "ml"}, {"NextToken", "page2"}}));
  EXPECT_EQ(transport_.calls[2].operation, "HpodListSlurmNodes");
  EXPECT_EQ(transport_.calls[2].body, Json({{"ClusterName", "ml"}}));
}

TEST_F(SlurmNodesTest, PageSizeIsKept) {
  ASSERT_EQ(Run({"list-cluster-nodes", "--cluster-name", "ml", "--with-slurm", "--page-size", "2"}),
            kExitOk)
      << err_.str();
  EXPECT_EQ(transport_.CountCalls("ListClusterNodes"), 2u);
  EXPECT_EQ(transport_.calls[0].body.value("MaxResults", 0), 2);
}

TEST_F(SlurmNodesTest, TableHasSlurmColumns) {
  ASSERT_EQ(
      Run({"list-cluster-nodes", "--cluster-name", "ml", "--with-slurm", "--output", "table"}),
      kExitOk)
      << err_.str();
  EXPECT_EQ(out_.str(),
            "InstanceGroupName  InstanceId           Hostname       InstanceStatus  SlurmState  "
            "SlurmReason\n"
            "controller         i-00000000000000001  ip-10-77-0-10  Running         -           "
            "-\n"
            "workers            i-00000000000000002  ip-10-77-0-11  Running         IDLE        "
            "-\n"
            "workers            i-00000000000000003  ip-10-77-0-12  Running         IDLE+DRAIN  "
            "hpod: health check failed\n"
            "workers            i-00000000000000004  -              Pending         -           "
            "-\n");
}

TEST_F(SlurmNodesTest, TextIsOneTabSeparatedLinePerNode) {
  ASSERT_EQ(Run({"list-cluster-nodes", "--cluster-name", "ml", "--with-slurm", "--output", "text"}),
            kExitOk)
      << err_.str();
  EXPECT_EQ(out_.str(),
            "controller\ti-00000000000000001\tip-10-77-0-10\tRunning\t-\t-\n"
            "workers\ti-00000000000000002\tip-10-77-0-11\tRunning\tIDLE\t-\n"
            "workers\ti-00000000000000003\tip-10-77-0-12\tRunning\tIDLE+DRAIN\t"
            "hpod: health check failed\n"
            "workers\ti-00000000000000004\t-\tPending\t-\t-\n");
}

TEST_F(SlurmNodesTest, UnavailablePrintsANoteAndStillListsTheNodes) {
  SlurmReport(false);
  ASSERT_EQ(Run({"list-cluster-nodes", "--cluster-name", "ml", "--with-slurm"}), kExitOk);
  EXPECT_EQ(err_.str(), std::string(kSlurmUnavailableNote) + "\n");
  Json out = Json::parse(out_.str());
  EXPECT_EQ(out["SlurmAvailable"], false);
  ASSERT_EQ(out["ClusterNodeSummaries"].size(), 4u);
  for (const Json& n : out["ClusterNodeSummaries"]) EXPECT_TRUE(n["Slurm"].is_null());
}

TEST_F(SlurmNodesTest, QueryAppliesToTheJoinedResult) {
  ASSERT_EQ(Run({"list-cluster-nodes", "--cluster-name", "ml", "--with-slurm", "--output", "text",
                 "--query", "ClusterNodeSummaries[?Slurm.State=='IDLE+DRAIN'].InstanceId"}),
            kExitOk)
      << err_.str();
  EXPECT_EQ(out_.str(), "i-00000000000000003\n");
  ASSERT_EQ(Run({"list-cluster-nodes", "--cluster-name", "ml", "--with-slurm", "--query",
                 "SlurmAvailable"}),
            kExitOk);
  EXPECT_EQ(out_.str(), "true\n");
}

TEST_F(SlurmNodesTest, PartialListingsAreRefused) {
  for (std::vector<std::string> extra : {std::vector<std::string>{"--max-items", "1"},
                                         {"--starting-token", "x"},
                                         {"--no-paginate"},
                                         {"--max-results", "1"},
                                         {"--next-token", "t"}}) {
    std::vector<std::string> args = {"list-cluster-nodes", "--cluster-name", "ml", "--with-slurm"};
    args.insert(args.end(), extra.begin(), extra.end());
    EXPECT_EQ(Run(args), kExitUsage) << extra[0];
    EXPECT_NE(err_.str().find("--with-slurm lists every node"), std::string::npos) << err_.str();
  }
  EXPECT_TRUE(transport_.calls.empty());
}

TEST_F(SlurmNodesTest, WithoutTheFlagNothingChanges) {
  ASSERT_EQ(Run({"list-cluster-nodes", "--cluster-name", "ml"}), kExitOk) << err_.str();
  EXPECT_EQ(transport_.CountCalls("HpodListSlurmNodes"), 0u);
  Json out = Json::parse(out_.str());
  EXPECT_FALSE(out.contains("SlurmAvailable"));
  EXPECT_FALSE(out["ClusterNodeSummaries"][0].contains("Slurm"));
}

TEST_F(SlurmNodesTest, OnlyListClusterNodesTakesTheFlag) {
  EXPECT_EQ(Run({"describe-cluster", "--cluster-name", "ml", "--with-slurm"}), kExitUsage);
  EXPECT_NE(err_.str().find("Unknown options: --with-slurm"), std::string::npos) << err_.str();
}

TEST_F(SlurmNodesTest, ServiceErrorsAreReported) {
  transport_.Queue("HpodListSlurmNodes",
                   {ErrorResponse(400, "ResourceNotFound", "Cluster ml not found.")});
  EXPECT_EQ(Run({"list-cluster-nodes", "--cluster-name", "ml", "--with-slurm"}), kExitService);
  EXPECT_NE(err_.str().find("when calling the HpodListSlurmNodes operation"), std::string::npos)
      << err_.str();
  EXPECT_EQ(out_.str(), "");
}

TEST_F(SlurmNodesTest, HelpShowsTheFlag) {
  ASSERT_EQ(Run({"list-cluster-nodes", "help"}), kExitOk);
  EXPECT_NE(out_.str().find("[--with-slurm]"), std::string::npos);
  EXPECT_NE(out_.str().find("--with-slurm (boolean) hpod only"), std::string::npos);
}

TEST(JoinSlurmNodesTest, MatchesOnTheFirstHostnameLabelOnly) {
  Json nodes = {{"ClusterNodeSummaries",
                 {{{"InstanceId", "i-1"}, {"PrivateDnsHostname", "ip-10-0-0-1.ec2.internal"}},
                  {{"InstanceId", "i-2"}, {"PrivateDnsHostname", "ip-10-0-0-2"}},
                  {{"InstanceId", "i-3"}}}}};
  Json slurm = {{"SlurmNodes",
                 {{{"NodeName", "ip-10-0-0-1"}, {"State", "ALLOCATED"}},
                  {{"NodeName", "ip-10-0-0-2.ec2.internal"}, {"State", "IDLE"}},
                  {{"NodeName", ""}, {"State", "IDLE"}}}},
                {"Available", true}};
  Json joined = JoinSlurmNodes(nodes, slurm);
  const Json& s = joined["ClusterNodeSummaries"];
  ASSERT_EQ(s.size(), 3u);
  // Members the service left out read as "" so that the object's shape is fixed.
  EXPECT_EQ(s[0]["Slurm"], Json({{"NodeName", "ip-10-0-0-1"},
                                 {"State", "ALLOCATED"},
                                 {"Reason", ""},
                                 {"SlurmdStartTime", ""}}));
  EXPECT_TRUE(s[1]["Slurm"].is_null());
  EXPECT_TRUE(s[2]["Slurm"].is_null());  // no hostname never matches a nameless entry
  EXPECT_EQ(joined["SlurmAvailable"], true);
  EXPECT_EQ(JoinSlurmNodes(nodes, Json::object())["SlurmAvailable"], false);
}

}  // namespace
}  // namespace hpod::cli
