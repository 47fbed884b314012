#include "hpod/cli/main.h"

#include <gtest/gtest.h>

#include <sstream>

#include "hpod/cli/fake_transport.h"
#include "hpod/cli/test_json.h"
#include "hpod/cli/testdata/awscli_golden.h"

namespace hpod::cli {
namespace {

using testing::SameJson;

// The canned SageMaker of testdata/capture_awscli_golden.py, plus a few error cases.
void ServeGoldenResponses(FakeTransport& t) {
  static const Json responses = Json::parse(golden::kResponses);
  static const Json pages = Json::parse(golden::kListPages);
  for (const auto& [op, body] : responses.items()) {
    Json reply = body;
    t.On(op, [reply](const Json&) -> StatusOr<http::Response> { return JsonResponse(200, reply); });
  }
  t.On("ListClusters", [](const Json& body) -> StatusOr<http::Response> {
    return JsonResponse(200, pages[body.value("NextToken", "")]);
  });
  Json describe = responses["DescribeCluster"];
  t.On("DescribeCluster", [describe](const Json& body) -> StatusOr<http::Response> {
    std::string name = body.value("ClusterName", "");
    if (name == "missing") {
      return JsonResponse(400, {{"__type", "com.amazon#ResourceNotFound"},
                                {"Message", "Cluster missing not found."}});
    }
    if (name == "boom")
      return JsonResponse(500, {{"__type", "InternalFailure"}, {"message", "kaboom"}});
    return JsonResponse(200, describe);
  });
}

class MainTest : public ::testing::Test {
 protected:
  MainTest() { ServeGoldenResponses(transport_); }

  int Run(std::vector<std::string> args) {
    out_.str("");
    err_.str("");
    Runtime rt;
    rt.env = env_;
    rt.out = &out_;
    rt.err = &err_;
    rt.stderr_is_tty = false;
    rt.make_transport = [this](const http::ClientOptions& options) {
      http_options_ = options;
      return std::make_unique<BorrowedTransport>(transport_);
    };
    rt.clock = &clock_;
    rt.sleeper = &sleeper_;
    rt.random = [] { return 0.0; };
    return cli::Run(args, rt);
  }

  Environment env_ = {{"AWS_ACCESS_KEY_ID", "AKID"},
                      {"AWS_SECRET_ACCESS_KEY", "secret-key-value"},
                      {"AWS_REGION", "us-west-2"},
                      {"AWS_MAX_ATTEMPTS", "1"},
                      {"HOME", "/nonexistent/hpod-cli-test"}};
  FakeTransport transport_;
  FakeClock clock_;
  FakeSleeper sleeper_{clock_};
  http::ClientOptions http_options_;
  std::ostringstream out_;
  std::ostringstream err_;
};

std::vector<std::string> Words(const char* json_array) {
  std::vector<std::string> words;
  for (const auto& w : Json::parse(json_array)) words.push_back(w.get<std::string>());
  return words;
}

TEST_F(MainTest, PrintsWhatTheAwsCliPrints) {
  int checked = 0;
  for (const auto& c : golden::kOutputs) {
    std::vector<std::string> args = Words(c.args);
    args.insert(args.end(), {"--output", c.format});
    EXPECT_EQ(Run(args), kExitOk) << c.name << " " << c.format << ": " << err_.str();
    EXPECT_EQ(out_.str(), c.stdout_text) << c.name << " --output " << c.format;
    ++checked;
  }
  EXPECT_GE(checked, 25);
}

TEST_F(MainTest, SendsWhatTheAwsCliSends) {
  for (const auto& c : golden::kRequests) {
    transport_.calls.clear();
    ASSERT_EQ(Run(Words(c.args)), kExitOk) << c.name << ": " << err_.str();
    Json want = Json::parse(c.bodies);
    ASSERT_EQ(transport_.calls.size(), want.size()) << c.name;
    for (size_t i = 0; i < want.size(); ++i) {
      EXPECT_TRUE(SameJson(transport_.calls[i].body, want[i]))
          << c.name << "\n sent: " << transport_.calls[i].body.dump()
          << "\n aws:  " << want[i].dump();
    }
  }
}

TEST_F(MainTest, UsageErrorsExit252) {
  EXPECT_EQ(Run({"describe-cluster"}), kExitUsage);
  EXPECT_EQ(err_.str(),
            "usage: hpod [options] <command> [parameters]\nTo see help text, you can run:\n\n"
            "  hpod help\n  hpod <command> help\n\n"
            "hpod: error: the following arguments are required: --cluster-name\n");
  EXPECT_TRUE(transport_.calls.empty());

  EXPECT_EQ(Run({"describe-cluster", "--cluster-name", "c", "--bogus"}), kExitUsage);
  EXPECT_NE(err_.str().find("hpod: error: Unknown options: --bogus"), std::string::npos);

  EXPECT_EQ(Run({"create-cluster", "--cli-input-json", R"({"InstanceGroups": []})"}), kExitUsage);
  EXPECT_EQ(err_.str(),
            "\nParameter validation failed:\nMissing required parameter in input: \"ClusterName\"\n"
            "Invalid length for parameter InstanceGroups, value: 0, valid min length: 1\n");

  EXPECT_EQ(Run({"list-clusters", "--no-paginate", "--max-items", "1"}), kExitUsage);
  EXPECT_EQ(err_.str(),
            "\nCannot specify --no-paginate along with pagination arguments: --max-items\n");
  EXPECT_EQ(Run({"create-cluster", "--cluster-name", "c", "--vpc-config", "Subnets"}), kExitUsage);
  EXPECT_EQ(err_.str().rfind("\nError parsing parameter '--vpc-config': Expected: '='", 0), 0u)
      << err_.str();
  EXPECT_TRUE(transport_.calls.empty());
}

TEST_F(MainTest, ConfigurationErrorsExit253) {
  env_.erase("AWS_REGION");
  EXPECT_EQ(Run({"describe-cluster", "--cluster-name", "c"}), kExitConfig);
  EXPECT_EQ(err_.str(),
            "\nYou must specify a region. You can also configure your region by running \"aws "
            "configure\".\n");
  EXPECT_EQ(Run({"describe-cluster", "--cluster-name", "c", "--region", "eu-west-1"}), kExitOk);

  env_.erase("AWS_ACCESS_KEY_ID");
  env_.erase("AWS_SECRET_ACCESS_KEY");
  EXPECT_EQ(Run({"describe-cluster", "--cluster-name", "c", "--region", "r"}), kExitConfig);
  EXPECT_EQ(err_.str(),
            "\nUnable to locate credentials. You can configure credentials by running \"aws "
            "configure\".\n");
  // Unsigned requests need no credentials.
  transport_.calls.clear();
  EXPECT_EQ(Run({"describe-cluster", "--cluster-name", "c", "--region", "r", "--no-sign-request"}),
            kExitOk);
  ASSERT_EQ(transport_.calls.size(), 1u);
  EXPECT_TRUE(transport_.calls[0].request.HeaderValue("Authorization").empty());

  EXPECT_EQ(Run({"describe-cluster", "--cluster-name", "c", "--profile", "ghost"}), kExitConfig);
  EXPECT_EQ(err_.str(), "\nThe config profile (ghost) could not be found\n");
}

TEST_F(MainTest, ServiceErrorsExit254) {
  EXPECT_EQ(Run({"describe-cluster", "--cluster-name", "missing"}), kExitService);
  EXPECT_EQ(err_.str(),
            "\nAn error occurred (ResourceNotFound) when calling the DescribeCluster operation: "
            "Cluster missing not found.\n");
  EXPECT_EQ(out_.str(), "");

  env_["AWS_MAX_ATTEMPTS"] = "3";
  transport_.calls.clear();
  EXPECT_EQ(Run({"describe-cluster", "--cluster-name", "boom"}), kExitService);
  EXPECT_EQ(err_.str(),
            "\nAn error occurred (InternalFailure) when calling the DescribeCluster operation "
            "(reached max retries: 2): kaboom\n");
  EXPECT_EQ(transport_.calls.size(), 3u);
}

TEST_F(MainTest, OtherFailuresExit255) {
  transport_.Queue("DescribeCluster", {UnavailableError("refused")});
  EXPECT_EQ(
      Run({"describe-cluster", "--cluster-name", "c", "--endpoint-url", "http://127.0.0.1:1"}),
      kExitOther);
  EXPECT_EQ(err_.str(), "\nCould not connect to the endpoint URL: \"http://127.0.0.1:1/\"\n");

  EXPECT_EQ(Run({"describe-cluster", "--cluster-name", "c", "--endpoint-url", "ftp://x"}),
            kExitOther);
  EXPECT_EQ(err_.str(), "\nInvalid endpoint: ftp://x\n");
}

TEST_F(MainTest, EndpointAndTimeouts) {
  env_["HPOD_ENDPOINT_URL"] = "http://hpodd.internal:9000";
  EXPECT_EQ(Run({"delete-cluster", "--cluster-name", "c", "--cli-connect-timeout", "5",
                 "--cli-read-timeout", "0"}),
            kExitOk);
  EXPECT_EQ(transport_.calls.back().url, "http://hpodd.internal:9000/");
  EXPECT_EQ(transport_.calls.back().request.HeaderValue("Host"), "hpodd.internal:9000");
  EXPECT_EQ(http_options_.connect_timeout, std::chrono::seconds(5));
  EXPECT_EQ(http_options_.timeout, std::chrono::hours(24));
  EXPECT_EQ(Run({"delete-cluster", "--cluster-name", "c", "--endpoint-url", "http://flag:1"}),
            kExitOk);
  EXPECT_EQ(transport_.calls.back().url, "http://flag:1/");
  EXPECT_EQ(http_options_.timeout, std::chrono::seconds(60));
}

// --ca-bundle (or AWS_CA_BUNDLE, or the profile's ca_bundle) reaches the HTTP
// client, which verifies an https:// endpoint against it.
TEST_F(MainTest, CaBundleReachesTheTransport) {
  EXPECT_EQ(Run({"delete-cluster", "--cluster-name", "c"}), kExitOk);
  EXPECT_EQ(http_options_.ca_file, "");
  env_["AWS_CA_BUNDLE"] = "/var/lib/hpod/tls/ca.pem";
  EXPECT_EQ(Run({"delete-cluster", "--cluster-name", "c", "--endpoint-url", "https://h:8450"}),
            kExitOk);
  EXPECT_EQ(http_options_.ca_file, "/var/lib/hpod/tls/ca.pem");
  EXPECT_EQ(Run({"delete-cluster", "--cluster-name", "c", "--ca-bundle", "/tmp/other.pem"}),
            kExitOk);
  EXPECT_EQ(http_options_.ca_file, "/tmp/other.pem");
  EXPECT_EQ(Run({"delete-cluster", "--cluster-name", "c", "--ca-bundle"}), kExitUsage);
}

TEST_F(MainTest, DebugNeverPrintsSecrets) {
  env_["AWS_SESSION_TOKEN"] = "session-token-value";
  EXPECT_EQ(Run({"describe-cluster", "--cluster-name", "c", "--debug"}), kExitOk);
  std::string trace = err_.str();
  EXPECT_NE(trace.find("[debug] POST http://127.0.0.1:8450/"), std::string::npos) << trace;
  EXPECT_NE(trace.find("Signature=<redacted>"), std::string::npos);
  EXPECT_NE(trace.find("credentials from env"), std::string::npos);
  EXPECT_EQ(trace.find("secret-key-value"), std::string::npos);
  EXPECT_EQ(trace.find("session-token-value"), std::string::npos);
}

TEST_F(MainTest, Skeletons) {
  env_.clear();  // an input skeleton needs no configuration at all
  EXPECT_EQ(Run({"describe-cluster", "--generate-cli-skeleton"}), kExitOk);
  EXPECT_EQ(out_.str(), "{\n    \"ClusterName\": \"\"\n}\n");
  env_ = {{"AWS_REGION", "r"}};
  EXPECT_EQ(Run({"delete-cluster", "--cluster-name", "c", "--generate-cli-skeleton", "output"}),
            kExitOk);
  EXPECT_EQ(out_.str(), "{\n    \"ClusterArn\": \"ClusterArn\"\n}\n");
  EXPECT_TRUE(transport_.calls.empty());
}

TEST_F(MainTest, HelpAndVersion) {
  EXPECT_EQ(Run({"help"}), kExitOk);
  EXPECT_NE(out_.str().find("batch-delete-cluster-nodes"), std::string::npos);
  EXPECT_NE(out_.str().find("JMESPath SUBSET"), std::string::npos);
  EXPECT_EQ(Run({"list-cluster-nodes", "help"}), kExitOk);
  EXPECT_NE(out_.str().find("--include-node-logical-ids | --no-include-node-logical-ids (boolean)"),
            std::string::npos)
      << out_.str();
  EXPECT_NE(out_.str().find("Possible values: Ascending | Descending"), std::string::npos);
  EXPECT_EQ(out_.str().find("--next-token"), std::string::npos);  // hidden, like the CLI
  EXPECT_EQ(Run({"create-cluster", "help"}), kExitOk);
  EXPECT_NE(
      out_.str().find("Shorthand syntax: SecurityGroupIds=string,string,Subnets=string,string"),
      std::string::npos)
      << out_.str();
  EXPECT_NE(out_.str().find("Key=string,Value=string ..."), std::string::npos);
  EXPECT_EQ(Run({"wait", "help"}), kExitOk);
  EXPECT_NE(out_.str().find("cluster-in-service"), std::string::npos);
  EXPECT_EQ(Run({"--version"}), kExitOk);
  EXPECT_EQ(out_.str().rfind("hpod-cli/", 0), 0u);
}

TEST_F(MainTest, WaitSucceedsAndFails) {
  EXPECT_EQ(Run({"wait", "cluster-in-service", "--cluster-name", "ml-cluster"}), kExitOk);
  EXPECT_EQ(out_.str(), "");
  EXPECT_NE(err_.str().find("ml-cluster: InService  controller-machine 1/1  compute-nodes 4/4"),
            std::string::npos)
      << err_.str();
  EXPECT_EQ(Run({"wait", "cluster-in-service", "--cluster-name", "missing"}), kExitOther);
  EXPECT_NE(err_.str().find("Waiter ClusterInService failed: An error occurred (ResourceNotFound)"),
            std::string::npos);
  EXPECT_EQ(Run({"wait", "cluster-deleted", "--cluster-name", "missing"}), kExitOk);
}

// hpodd adds the node's clock offset (its agent's clock minus hpodd's) to
// DescribeClusterNode as an hpod member of the shape; the CLI keeps modelled
// members only, so it prints it because the model has it.
TEST_F(MainTest, DescribeClusterNodeShowsTheNodesClockOffset) {
  transport_.On("DescribeClusterNode", [](const Json& body) -> StatusOr<http::Response> {
    return JsonResponse(200, {{"NodeDetails",
                               {{"InstanceGroupName", "workers"},
                                {"InstanceId", body["NodeId"]},
                                {"InstanceStatus", {{"Status", "Running"}, {"Message", ""}}},
                                {"HpodClockOffsetSeconds", -90.25},
                                {"NotInTheModel", 1}}}});
  });
  ASSERT_EQ(
      Run({"describe-cluster-node", "--cluster-name", "demo", "--node-id", "i-0123456789abcdef0"}),
      kExitOk)
      << err_.str();
  EXPECT_NE(out_.str().find("\"HpodClockOffsetSeconds\": -90.25"), std::string::npos) << out_.str();
  EXPECT_EQ(out_.str().find("NotInTheModel"), std::string::npos) << out_.str();
  ASSERT_EQ(
      Run({"describe-cluster-node", "--cluster-name", "demo", "--node-id", "i-0123456789abcdef0",
           "--query", "NodeDetails.HpodClockOffsetSeconds", "--output", "text"}),
      kExitOk)
      << err_.str();
  EXPECT_EQ(out_.str(), "-90.25\n");
}

TEST_F(MainTest, InjectFaultIsTheHpodInjectFaultOperation) {
  transport_.On("HpodInjectFault", [](const Json& body) -> StatusOr<http::Response> {
    return JsonResponse(
        200, {{"NodeId", body["NodeId"]}, {"Kind", body["Kind"]}, {"InjectedTime", 1700000000.5}});
  });
  ASSERT_EQ(Run({"inject-fault", "--cluster-name", "demo", "--node-id", "i-0123456789abcdef0",
                 "--kind", "partition", "--seconds", "20"}),
            kExitOk)
      << err_.str();
  ASSERT_EQ(transport_.calls.size(), 1u);
  EXPECT_TRUE(SameJson(transport_.calls[0].body, {{"ClusterName", "demo"},
                                                  {"NodeId", "i-0123456789abcdef0"},
                                                  {"Kind", "partition"},
                                                  {"Seconds", 20}}))
      << transport_.calls[0].body.dump();
  EXPECT_NE(out_.str().find("\"Kind\": \"partition\""), std::string::npos) << out_.str();
  ASSERT_EQ(Run({"inject-fault", "--cluster-name", "demo", "--node-id", "i-0123456789abcdef0",
                 "--kind", "gpu-xid", "--xid-code", "79", "--query", "Kind", "--output", "text"}),
            kExitOk)
      << err_.str();
  EXPECT_EQ(out_.str(), "gpu-xid\n");
  EXPECT_EQ(transport_.calls.back().body["XidCode"], 79);

  // One line of usage error saying what to fix; nothing is sent.
  transport_.calls.clear();
  const std::vector<std::string> base = {"inject-fault", "--cluster-name", "demo", "--node-id",
                                         "i-0123456789abcdef0"};
  auto with = [&](std::vector<std::string> more) {
    std::vector<std::string> args = base;
    args.insert(args.end(), more.begin(), more.end());
    return args;
  };
  auto last_line = [&] {
    std::string e = err_.str();
    e.pop_back();
    return e.substr(e.rfind('\n') + 1);
  };
  EXPECT_EQ(Run(with({"--kind", "explode"})), kExitUsage);
  EXPECT_EQ(last_line(),
            "hpod: error: argument --kind: Invalid choice: 'explode' (choose from 'kill-node', "
            "'kill-agent', 'kill-slurmd', 'partition', 'hang', 'disk-full', 'gpu-xid', "
            "'flag-file', 'cpu-throttle', 'slow-link')");
  EXPECT_EQ(Run(with({"--kind", "partition"})), kExitUsage);
  EXPECT_EQ(last_line(),
            "hpod: error: --kind partition needs --seconds N: how long the node's link stays down");
  EXPECT_EQ(Run(with({"--kind", "gpu-xid"})), kExitUsage);
  EXPECT_EQ(last_line(),
            "hpod: error: --kind gpu-xid needs --xid-code N: the Xid to report, e.g. 79");
  EXPECT_EQ(Run(with({"--kind", "partition", "--seconds", "soon"})), kExitUsage);
  EXPECT_EQ(last_line(), "hpod: error: argument --seconds: invalid int value: 'soon'");
  EXPECT_EQ(Run({"inject-fault", "--cluster-name", "demo", "--kind", "hang"}), kExitUsage);
  EXPECT_EQ(last_line(), "hpod: error: the following arguments are required: --node-id");
  EXPECT_EQ(Run(with({"--kind", "partition", "--seconds", "0"})), kExitUsage);  // model range
  EXPECT_TRUE(transport_.calls.empty());

  EXPECT_EQ(Run({"inject-fault", "help"}), kExitOk);
  EXPECT_NE(out_.str().find("inject-fault - break a cluster node on purpose"), std::string::npos);
  EXPECT_EQ(Run({"help"}), kExitOk);
  EXPECT_NE(out_.str().find("\n  inject-fault "), std::string::npos);
}

TEST_F(MainTest, CreateJoinTokenIsTheHpodCreateJoinTokenOperation) {
  const std::string token = "hpodjt1.3f2a...pin.0123abcd.secret-part";
  transport_.On("HpodCreateJoinToken", [token](const Json& body) -> StatusOr<http::Response> {
    return JsonResponse(200, {{"JoinToken", token},
                              {"TokenId", "0123abcd"},
                              {"Pool", body.value("Pool", "default")},
                              {"Uses", body.value("Uses", 1)},
                              {"ExpiresAt", 1700003600}});
  });
  // The flags become the request's members.
  ASSERT_EQ(Run({"create-join-token", "--pool", "gpu-a", "--ttl", "2h", "--uses", "3",
                 "--description", "rack 4"}),
            kExitOk)
      << err_.str();
  ASSERT_EQ(transport_.calls.size(), 1u);
  EXPECT_EQ(transport_.calls[0].operation, "HpodCreateJoinToken");
  EXPECT_TRUE(SameJson(transport_.calls[0].body, {{"Pool", "gpu-a"},
                                                  {"TtlSeconds", 7200},
                                                  {"Uses", 3},
                                                  {"Description", "rack 4"}}))
      << transport_.calls[0].body.dump();
  // Nothing given: an empty request, hpodd's defaults (default pool, 1h, one use).
  ASSERT_EQ(Run({"create-join-token"}), kExitOk) << err_.str();
  EXPECT_TRUE(SameJson(transport_.calls.back().body, Json::object()))
      << transport_.calls.back().body.dump();

  // --ttl takes durations and plain seconds.
  for (const auto& [ttl, seconds] : std::vector<std::pair<std::string, int64_t>>{
           {"90s", 90}, {"30m", 1800}, {"1h", 3600}, {"7d", 604800}, {"1h30m", 5400},
           {"45", 45}, {"30d", 2592000}}) {
    ASSERT_EQ(Run({"create-join-token", "--ttl", ttl}), kExitOk) << ttl << ": " << err_.str();
    EXPECT_EQ(transport_.calls.back().body["TtlSeconds"], seconds) << ttl;
  }
}

TEST_F(MainTest, CreateJoinTokenRefusesBadValuesInOneLine) {
  auto last_line = [&] {
    std::string e = err_.str();
    e.pop_back();
    return e.substr(e.rfind('\n') + 1);
  };
  const std::pair<const char*, const char*> refusals[] = {
      {"1x", R"(hpod: error: --ttl: "1x" is not a duration; use e.g. 90s, 30m, 1h or 7d)"},
      {"h", R"(hpod: error: --ttl: "h" is not a duration; use e.g. 90s, 30m, 1h or 7d)"},
      {"-5s", R"(hpod: error: --ttl: "-5s" is not a duration; use e.g. 90s, 30m, 1h or 7d)"},
      {"1h30", R"(hpod: error: --ttl: "1h30" is not a duration; use e.g. 90s, 30m, 1h or 7d)"},
      {"1.5h", R"(hpod: error: --ttl: "1.5h" is not a duration; use e.g. 90s, 30m, 1h or 7d)"},
      {"", R"(hpod: error: --ttl: "" is not a duration; use e.g. 90s, 30m, 1h or 7d)"},
      {"0s", R"(hpod: error: --ttl: "0s" is too short; use at least 1s)"},
      {"0", R"(hpod: error: --ttl: "0" is too short; use at least 1s)"},
      {"31d", R"(hpod: error: --ttl: "31d" is too long; use at most 30d (2592000s))"},
      {"30d1s", R"(hpod: error: --ttl: "30d1s" is too long; use at most 30d (2592000s))"},
      {"99999999999999999999d",
       R"(hpod: error: --ttl: "99999999999999999999d" is too long; use at most 30d (2592000s))"},
  };
  for (const auto& [ttl, want] : refusals) {
    EXPECT_EQ(Run({"create-join-token", "--ttl=" + std::string(ttl)}), kExitUsage) << ttl;
    EXPECT_EQ(last_line(), want) << ttl;
  }
  EXPECT_EQ(Run({"create-join-token", "--ttl"}), kExitUsage);
  EXPECT_EQ(last_line(), "hpod: error: argument --ttl: expected one argument");
  EXPECT_EQ(Run({"create-join-token", "--uses", "many"}), kExitUsage);
  EXPECT_EQ(last_line(), "hpod: error: argument --uses: invalid int value: 'many'");
  EXPECT_EQ(Run({"create-join-token", "--uses", "0"}), kExitUsage);  // the model's range
  // (A pool name that breaks the model's pattern is hpodd's to refuse, as botocore
  // leaves patterns to the service.)
  EXPECT_EQ(Run({"create-join-token", "--cluster-name", "demo"}), kExitUsage);
  EXPECT_EQ(last_line(), "hpod: error: Unknown options: --cluster-name, demo");
  EXPECT_TRUE(transport_.calls.empty());
}

TEST_F(MainTest, CreateJoinTokenPrintsTheBareTokenUnlessAskedForTheResponse) {
  const std::string token = "hpodjt1.pin.0123abcd.secret";
  transport_.On("HpodCreateJoinToken", [token](const Json&) -> StatusOr<http::Response> {
    return JsonResponse(200, {{"JoinToken", token},
                              {"TokenId", "0123abcd"},
                              {"Pool", "default"},
                              {"Uses", 1},
                              {"ExpiresAt", 1700003600}});
  });
  // The default, and --output text: the token alone, for TOKEN=$(hpod create-join-token).
  ASSERT_EQ(Run({"create-join-token"}), kExitOk) << err_.str();
  EXPECT_EQ(out_.str(), token + "\n");
  EXPECT_EQ(err_.str(), "");
  ASSERT_EQ(Run({"create-join-token", "--output", "text"}), kExitOk) << err_.str();
  EXPECT_EQ(out_.str(), token + "\n");
  // Configured output formats do not change it; only the command line does.
  env_["AWS_DEFAULT_OUTPUT"] = "table";
  ASSERT_EQ(Run({"create-join-token", "--ttl", "10m"}), kExitOk) << err_.str();
  EXPECT_EQ(out_.str(), token + "\n");
  env_.erase("AWS_DEFAULT_OUTPUT");

  // --output json: the whole response, as for any operation.
  ASSERT_EQ(Run({"create-join-token", "--output", "json"}), kExitOk) << err_.str();
  Json printed = Json::parse(out_.str(), nullptr, false);
  ASSERT_TRUE(printed.is_object()) << out_.str();
  EXPECT_EQ(printed["JoinToken"], token);
  EXPECT_EQ(printed["TokenId"], "0123abcd");
  EXPECT_EQ(printed["Pool"], "default");
  EXPECT_EQ(printed["Uses"], 1);
  EXPECT_TRUE(printed.contains("ExpiresAt")) << out_.str();
  ASSERT_EQ(Run({"hpod-create-join-token", "--output", "json"}), kExitOk) << err_.str();
  EXPECT_EQ(Json::parse(out_.str()), printed);  // the same as the generated verb
  ASSERT_EQ(Run({"create-join-token", "--output", "table"}), kExitOk) << err_.str();
  EXPECT_NE(out_.str().find("HpodCreateJoinToken"), std::string::npos) << out_.str();
  EXPECT_NE(out_.str().find("0123abcd"), std::string::npos) << out_.str();
  // --query picks from the whole response.
  ASSERT_EQ(Run({"create-join-token", "--query", "TokenId", "--output", "text"}), kExitOk)
      << err_.str();
  EXPECT_EQ(out_.str(), "0123abcd\n");
  ASSERT_EQ(Run({"create-join-token", "--query", "TokenId"}), kExitOk) << err_.str();
  EXPECT_EQ(out_.str(), "\"0123abcd\"\n");

  // A response without a token is an error, not an empty line.
  transport_.On("HpodCreateJoinToken", [](const Json&) -> StatusOr<http::Response> {
    return JsonResponse(200, {{"TokenId", "0123abcd"}});
  });
  EXPECT_EQ(Run({"create-join-token"}), kExitOther);
  EXPECT_EQ(out_.str(), "");
  EXPECT_EQ(err_.str(), "\nThe HpodCreateJoinToken response has no JoinToken string\n");

  EXPECT_EQ(Run({"create-join-token", "help"}), kExitOk);
  EXPECT_NE(out_.str().find("create-join-token - a token with which a machine joins"),
            std::string::npos);
  EXPECT_NE(out_.str().find("hpod-agent join --server https://HOST:PORT --token TOKEN"),
            std::string::npos);
  EXPECT_EQ(Run({"create-join-token", "--help"}), kExitOk);
  EXPECT_NE(out_.str().find("create-join-token - "), std::string::npos);
  EXPECT_EQ(Run({"help"}), kExitOk);
  EXPECT_NE(out_.str().find("\n  create-join-token "), std::string::npos);
  EXPECT_NE(out_.str().find("\n  hpod create-join-token [--pool NAME]"), std::string::npos);
}

}  // namespace
}  // namespace hpod::cli
