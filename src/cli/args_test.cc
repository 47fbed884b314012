#include "hpod/cli/args.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "hpod/cli/args_internal.h"

namespace hpod::cli {
namespace {

StatusOr<Invocation> Parse(std::vector<std::string> args, const Environment& env = {}) {
  return ParseCommandLine(args, env);
}

TEST(XformNameTest, MatchesBotocore) {
  // Expected values from botocore.xform_name(name, '-').
  const std::pair<const char*, const char*> cases[] = {
      {"InstanceGroupsToDelete", "instance-groups-to-delete"},
      {"NodeIds", "node-ids"},
      {"ClusterARNs", "cluster-arns"},
      {"IncludeNodeLogicalIds", "include-node-logical-ids"},
      {"S3Uri", "s3-uri"},
      {"VolumeSizeInGB", "volume-size-in-gb"},
      {"OnStartDeepHealthChecks", "on-start-deep-health-checks"},
      {"CreationTimeAfter", "creation-time-after"},
      {"DescribeClusterNode", "describe-cluster-node"},
      {"BatchDeleteClusterNodes", "batch-delete-cluster-nodes"},
      {"already-kebab", "already-kebab"},
  };
  for (const auto& [in, want] : cases) EXPECT_EQ(XformName(in), want) << in;
}

TEST(ParseCommandLineTest, EveryVerbWithItsRequiredMembers) {
  for (const api::Operation* op : api::ServiceModel::Get().operations()) {
    std::string verb = XformName(op->name);
    EXPECT_EQ(FindOperationByVerb(verb), op);
    std::vector<std::string> args = {verb};
    Json want = Json::object();
    for (const std::string& r : op->input->required) {
      args.push_back("--" + XformName(r));
      const api::Shape* shape = op->input->FindMember(r)->shape;
      if (shape->type == api::ShapeType::kList && shape->member->type == api::ShapeType::kString) {
        args.push_back("v-" + r);  // one item (DeleteTags' TagKeys)
        want[r] = Json::array({"v-" + r});
      } else if (shape->type == api::ShapeType::kList) {
        args.push_back("[]");  // JSON for a list of structures (AddTags' Tags)
        want[r] = Json::array();
      } else {
        args.push_back("v-" + r);
        want[r] = "v-" + r;
      }
    }
    StatusOr<Invocation> inv = Parse(args);
    ASSERT_TRUE(inv.ok()) << verb << ": " << inv.status().ToString();
    EXPECT_EQ(inv->kind, Invocation::Kind::kOperation);
    EXPECT_EQ(inv->operation, op);
    EXPECT_EQ(inv->params, want) << verb;
    EXPECT_EQ(inv->paginate, op->paginator.has_value()) << verb;
  }
}

TEST(ParseCommandLineTest, TrainingOperationsUnderShortNames) {
  StatusOr<Invocation> inv = Parse({"list-training-runs", "--cluster-name", "demo"});
  ASSERT_TRUE(inv.ok()) << inv.status().ToString();
  EXPECT_EQ(inv->operation->name, "HpodListTrainingRuns");
  EXPECT_EQ(inv->params, Json({{"ClusterName", "demo"}}));
  inv = Parse({"get-training-metrics", "--cluster-name", "demo", "--path", "/fsx/tb",
               "--max-points", "50"});
  ASSERT_TRUE(inv.ok()) << inv.status().ToString();
  EXPECT_EQ(inv->operation->name, "HpodGetTrainingMetrics");
  EXPECT_EQ(inv->params, Json({{"ClusterName", "demo"}, {"Path", "/fsx/tb"}, {"MaxPoints", 50}}));
  inv = Parse({"get-training-metrics", "--help"});
  ASSERT_TRUE(inv.ok());
  EXPECT_EQ(inv->kind, Invocation::Kind::kHelp);
  EXPECT_EQ(inv->help_topic, "hpod-get-training-metrics");
}

TEST(ParseCommandLineTest, MissingRequiredIsAUsageError) {
  StatusOr<Invocation> inv = Parse({"describe-cluster"});
  ASSERT_FALSE(inv.ok());
  EXPECT_TRUE(IsUsageError(inv.status()));
  EXPECT_EQ(inv.status().message(), "the following arguments are required: --cluster-name");
  inv = Parse({"describe-cluster-event"});
  EXPECT_EQ(inv.status().message(),
            "the following arguments are required: --event-id, --cluster-name");
}

TEST(ParseCommandLineTest, UnknownOptionsAreUsageErrors) {
  StatusOr<Invocation> inv = Parse({"describe-cluster", "--cluster-name", "c", "--foo", "1", "x"});
  ASSERT_FALSE(inv.ok());
  EXPECT_TRUE(IsUsageError(inv.status()));
  EXPECT_EQ(inv.status().message(), "Unknown options: --foo, 1, x");
  inv = Parse({"describe-cluster", "--cluster-name", "c", "stray"});
  EXPECT_EQ(inv.status().message(), "Unknown options: stray");
  inv = Parse({"descrbe-cluster"});
  EXPECT_TRUE(IsUsageError(inv.status()));
  EXPECT_NE(inv.status().message().find("Invalid choice 'descrbe-cluster'"), std::string::npos);
  EXPECT_NE(inv.status().message().find("describe-cluster"), std::string::npos);
  EXPECT_EQ(Parse({}).status().message(), "the following arguments are required: command");
  EXPECT_EQ(Parse({"describe-cluster", "--cluster-name"}).status().message(),
            "argument --cluster-name: expected one argument");
}

TEST(ParseCommandLineTest, GlobalOptionsAnywhere) {
  StatusOr<Invocation> inv =
      Parse({"--region", "us-west-2", "sagemaker", "describe-cluster", "--output=table",
             "--cluster-name", "c", "--debug", "--endpoint-url", "http://h:1", "--no-sign-request",
             "--profile", "p", "--cli-read-timeout", "0", "--query", "ClusterArn"});
  ASSERT_TRUE(inv.ok()) << inv.status().ToString();
  EXPECT_EQ(inv->globals.config.region, "us-west-2");
  EXPECT_EQ(inv->globals.config.output, "table");
  EXPECT_EQ(inv->globals.config.endpoint_url, "http://h:1");
  EXPECT_EQ(inv->globals.config.profile, "p");
  EXPECT_TRUE(inv->globals.debug);
  EXPECT_TRUE(inv->globals.no_sign_request);
  EXPECT_EQ(inv->globals.read_timeout_s, 0);
  ASSERT_TRUE(inv->query.has_value());
  EXPECT_EQ(inv->query->text(), "ClusterArn");
  EXPECT_EQ(inv->params, Json({{"ClusterName", "c"}}));

  inv = Parse({"list-clusters", "--output", "yaml"});
  EXPECT_TRUE(IsUsageError(inv.status()));
  EXPECT_EQ(inv.status().message(),
            "argument --output: Invalid choice: 'yaml' (choose from 'json', 'text', 'table')");
  inv = Parse({"list-clusters", "--query", "[["});
  ASSERT_FALSE(inv.ok());
  EXPECT_FALSE(IsUsageError(inv.status()));
  EXPECT_EQ(
      inv.status().message().rfind("Bad value for --query [[: Invalid jmespath expression", 0), 0u)
      << inv.status().message();
}

TEST(ParseCommandLineTest, ValuesByShape) {
  StatusOr<Invocation> inv =
      Parse({"create-cluster", "--cluster-name", "c", "--instance-groups",
             "InstanceGroupName=a,InstanceCount=2,ExecutionRole=arn:aws:iam::1:role/r,"
             "LifeCycleConfig={SourceS3Uri=s3://b/p,OnCreate=on_create.sh},ThreadsPerCore=1,"
             "OnStartDeepHealthChecks=InstanceStress",
             R"({"InstanceGroupName": "b", "InstanceCount": 1})", "--tags", "Key=a,Value=b",
             "Key=c,Value=d", "--vpc-config", R"( {"Subnets": ["s"], "SecurityGroupIds": ["g"]})",
             "--node-recovery", "None"});
  // The first word decides: shorthand here, so the JSON word is parsed as shorthand
  // and fails, as in the AWS CLI.
  ASSERT_FALSE(inv.ok());
  EXPECT_EQ(
      inv.status().message().rfind("Error parsing parameter '--instance-groups': Expected:", 0), 0u)
      << inv.status().message();

  inv = Parse({"create-cluster", "--cluster-name", "c", "--instance-groups",
               "InstanceGroupName=a,InstanceCount=2,ExecutionRole=arn:aws:iam::1:role/r,"
               "LifeCycleConfig={SourceS3Uri=s3://b/p,OnCreate=on_create.sh},ThreadsPerCore=1,"
               "OnStartDeepHealthChecks=InstanceStress",
               "--tags", "Key=a,Value=b", "Key=c,Value=d", "--vpc-config",
               R"( {"Subnets": ["s"], "SecurityGroupIds": ["g"]})", "--node-recovery", "None"});
  ASSERT_TRUE(inv.ok()) << inv.status().ToString();
  EXPECT_EQ(
      inv->params.dump(),
      R"({"ClusterName":"c","InstanceGroups":[{"InstanceGroupName":"a","InstanceCount":2,)"
      R"("ExecutionRole":"arn:aws:iam::1:role/r","LifeCycleConfig":{"SourceS3Uri":"s3://b/p",)"
      R"("OnCreate":"on_create.sh"},"ThreadsPerCore":1,"OnStartDeepHealthChecks":)"
      R"(["InstanceStress"]}],"VpcConfig":{"Subnets":["s"],"SecurityGroupIds":["g"]},)"
      R"("Tags":[{"Key":"a","Value":"b"},{"Key":"c","Value":"d"}],"NodeRecovery":"None"})");

  inv = Parse({"create-cluster", "--cluster-name", "c", "--instance-groups",
               R"({"InstanceGroupName": "a"})", R"({"InstanceGroupName": "b"})"});
  ASSERT_TRUE(inv.ok()) << inv.status().ToString();
  EXPECT_EQ(inv->params["InstanceGroups"].size(), 2u);

  inv = Parse({"batch-delete-cluster-nodes", "--cluster-name", "c", "--node-ids", "i-1", "i-2"});
  ASSERT_TRUE(inv.ok());
  EXPECT_EQ(inv->params["NodeIds"], Json::array({"i-1", "i-2"}));
  inv = Parse({"batch-delete-cluster-nodes", "--cluster-name", "c", "--node-ids", R"(["i-3"])"});
  EXPECT_EQ(inv->params["NodeIds"], Json::array({"i-3"}));
  for (const char* verb : {"batch-reboot-cluster-nodes", "batch-replace-cluster-nodes"}) {
    inv = Parse({verb, "--cluster-name", "c", "--node-ids", "i-1", "i-2"});
    ASSERT_TRUE(inv.ok()) << verb << ": " << inv.status().ToString();
    EXPECT_EQ(inv->params, Json::parse(R"({"ClusterName": "c", "NodeIds": ["i-1", "i-2"]})"));
    inv = Parse({verb, "--cluster-name", "c", "--node-logical-ids", "n-1"});
    ASSERT_TRUE(inv.ok()) << verb << ": " << inv.status().ToString();
    EXPECT_EQ(inv->params["NodeLogicalIds"], Json::array({"n-1"}));
  }

  inv = Parse({"list-cluster-nodes", "--cluster-name", "c", "--include-node-logical-ids"});
  EXPECT_EQ(inv->params["IncludeNodeLogicalIds"], true);
  inv = Parse({"list-cluster-nodes", "--cluster-name", "c", "--no-include-node-logical-ids"});
  EXPECT_EQ(inv->params["IncludeNodeLogicalIds"], false);
}

TEST(ParseCommandLineTest, IntegersAreStrict) {
  StatusOr<Invocation> inv = Parse({"list-clusters", "--max-results", "5x"});
  EXPECT_TRUE(IsUsageError(inv.status()));
  EXPECT_EQ(inv.status().message(), "argument --max-results: invalid int value: '5x'");
  EXPECT_FALSE(Parse({"list-clusters", "--max-results", " 5"}).ok());
  EXPECT_FALSE(Parse({"list-clusters", "--max-items", "1.0"}).ok());
  inv = Parse({"create-cluster", "--cluster-name", "c", "--instance-groups",
               "InstanceGroupName=a,InstanceCount=two"});
  ASSERT_FALSE(inv.ok());
  EXPECT_FALSE(IsUsageError(inv.status()));
  EXPECT_EQ(inv.status().message(),
            "Error parsing parameter '--instance-groups': expected an integer for InstanceCount, "
            "received: 'two'");
  EXPECT_EQ(Parse({"list-clusters", "--max-results", "-3"})->params["MaxResults"], -3);
}

TEST(ParseCommandLineTest, FileValues) {
  std::string dir_template =
      (std::filesystem::temp_directory_path() / "hpod-cli-args-XXXXXX").string();
  std::string dir = ::mkdtemp(dir_template.data());
  std::ofstream(dir + "/groups.json") << R"([{"InstanceGroupName": "from-file"}])";
  std::ofstream(dir + "/input.json") << R"({"ClusterName": "in-json", "NodeRecovery": "None"})";
  std::ofstream(dir + "/ids.txt") << "i-1\ni-2\n";
  Environment env = {{"HOME", dir}};

  StatusOr<Invocation> inv = Parse({"create-cluster", "--cluster-name", "c", "--instance-groups",
                                    "file://" + dir + "/groups.json"});
  ASSERT_TRUE(inv.ok()) << inv.status().ToString();
  EXPECT_EQ(inv->params["InstanceGroups"][0]["InstanceGroupName"], "from-file");
  inv = Parse(
      {"create-cluster", "--cluster-name", "c", "--instance-groups", "file://~/groups.json"}, env);
  ASSERT_TRUE(inv.ok()) << inv.status().ToString();

  // --cli-input-json supplies the request; explicit flags win.
  inv = Parse({"create-cluster", "--cli-input-json", "file://" + dir + "/input.json",
               "--node-recovery", "Automatic"});
  ASSERT_TRUE(inv.ok()) << inv.status().ToString();
  EXPECT_EQ(inv->params.dump(), R"({"ClusterName":"in-json","NodeRecovery":"Automatic"})");
  inv = Parse({"describe-cluster", "--cli-input-json", R"({"ClusterName": "inline"})"});
  ASSERT_TRUE(inv.ok());
  EXPECT_EQ(inv->params["ClusterName"], "inline");
  // No required-argument check with --cli-input-json: validation reports it later.
  EXPECT_TRUE(Parse({"describe-cluster", "--cli-input-json", "{}"}).ok());
  EXPECT_FALSE(Parse({"describe-cluster", "--cli-input-json", "[1]"}).ok());

  inv = Parse({"batch-delete-cluster-nodes", "--cluster-name", "c", "--node-ids",
               "file://" + dir + "/ids.txt"});
  ASSERT_TRUE(inv.ok());
  EXPECT_EQ(inv->params["NodeIds"], Json::array({"i-1", "i-2"}));

  // Text values keep the file's bytes (trailing newline included), as the CLI does.
  inv = Parse({"describe-cluster", "--cluster-name", "file://" + dir + "/ids.txt"});
  EXPECT_EQ(inv->params["ClusterName"], "i-1\ni-2\n");

  inv = Parse({"describe-cluster", "--cluster-name", "file://" + dir + "/missing.txt"});
  ASSERT_FALSE(inv.ok());
  EXPECT_EQ(inv.status().message(),
            "Error parsing parameter '--cluster-name': Unable to load paramfile file://" + dir +
                "/missing.txt: [Errno 2] No such file or directory: '" + dir + "/missing.txt'");
  std::filesystem::remove_all(dir);
}

TEST(ParseCommandLineTest, RelativeFilePaths) {
  std::string name = "hpod-cli-relative-" + std::to_string(::getpid()) + ".json";
  std::ofstream(name) << R"({"ClusterName": "rel"})";
  StatusOr<Invocation> inv = Parse({"describe-cluster", "--cli-input-json", "file://" + name});
  std::filesystem::remove(name);
  ASSERT_TRUE(inv.ok()) << inv.status().ToString();
  EXPECT_EQ(inv->params["ClusterName"], "rel");
}

TEST(ParseCommandLineTest, PaginationArguments) {
  StatusOr<Invocation> inv =
      Parse({"list-clusters", "--page-size", "10", "--max-items", "5", "--starting-token", "t"});
  ASSERT_TRUE(inv.ok());
  EXPECT_TRUE(inv->paginate);
  EXPECT_EQ(inv->pagination.page_size, 10);
  EXPECT_EQ(inv->pagination.max_items, 5);
  EXPECT_EQ(inv->pagination.starting_token, "t");
  EXPECT_EQ(inv->params, Json::object());

  // The service's own parameters still work and turn auto-pagination off.
  inv = Parse({"list-clusters", "--max-results", "3", "--next-token", "abc"});
  ASSERT_TRUE(inv.ok());
  EXPECT_FALSE(inv->paginate);
  EXPECT_EQ(inv->params.dump(), R"({"MaxResults":3,"NextToken":"abc"})");
  inv = Parse({"list-clusters", "--cli-input-json", R"({"MaxResults": 3})"});
  EXPECT_FALSE(inv->paginate);
  EXPECT_FALSE(Parse({"list-clusters", "--no-paginate"})->paginate);

  inv = Parse({"list-clusters", "--no-paginate", "--max-items", "3", "--page-size", "2"});
  ASSERT_FALSE(inv.ok());
  EXPECT_FALSE(IsUsageError(inv.status()));
  EXPECT_EQ(
      inv.status().message(),
      "Cannot specify --no-paginate along with pagination arguments: --page-size, --max-items");
  inv = Parse({"list-clusters", "--max-results", "3", "--starting-token", "x"});
  EXPECT_EQ(inv.status().message(),
            "Cannot specify --no-paginate along with pagination arguments: --starting-token");
  // Not a paginated operation: no pagination flags.
  EXPECT_TRUE(IsUsageError(
      Parse({"describe-cluster", "--cluster-name", "c", "--max-items", "1"}).status()));
}

TEST(ParseCommandLineTest, SkeletonHelpVersionWait) {
  StatusOr<Invocation> inv = Parse({"create-cluster", "--generate-cli-skeleton"});
  ASSERT_TRUE(inv.ok()) << inv.status().ToString();
  EXPECT_EQ(inv->skeleton, "input");
  inv = Parse({"describe-cluster", "--cluster-name", "c", "--generate-cli-skeleton", "output"});
  EXPECT_EQ(inv->skeleton, "output");
  EXPECT_TRUE(
      IsUsageError(Parse({"describe-cluster", "--generate-cli-skeleton", "output"}).status()));

  EXPECT_EQ(Parse({"help"})->kind, Invocation::Kind::kHelp);
  EXPECT_EQ(Parse({"--help"})->kind, Invocation::Kind::kHelp);
  EXPECT_EQ(Parse({"describe-cluster", "help"})->help_topic, "describe-cluster");
  EXPECT_EQ(Parse({"describe-cluster", "--help"})->help_topic, "describe-cluster");
  EXPECT_EQ(Parse({"wait", "help"})->help_topic, "wait");
  EXPECT_EQ(Parse({"wait", "cluster-deleted", "help"})->help_topic, "wait cluster-deleted");
  EXPECT_EQ(Parse({"--version"})->kind, Invocation::Kind::kVersion);

  inv = Parse(
      {"wait", "cluster-in-service", "--cluster-name", "c", "--timeout", "30", "--delay", "1"});
  ASSERT_TRUE(inv.ok()) << inv.status().ToString();
  EXPECT_EQ(inv->kind, Invocation::Kind::kWait);
  EXPECT_EQ(inv->waiter, Waiter::kClusterInService);
  EXPECT_EQ(inv->cluster_name, "c");
  EXPECT_EQ(inv->wait_timeout, std::chrono::seconds(30));
  EXPECT_EQ(inv->wait_delay, std::chrono::seconds(1));
  EXPECT_EQ(Parse({"wait", "cluster-deleted"}).status().message(),
            "the following arguments are required: --cluster-name");
  EXPECT_TRUE(IsUsageError(Parse({"wait", "cluster-exploded", "--cluster-name", "c"}).status()));
  EXPECT_TRUE(IsUsageError(
      Parse({"wait", "cluster-deleted", "--cluster-name", "c", "--delay", "0"}).status()));
}

TEST(ParseCommandLineTest, CreateJoinToken) {
  StatusOr<Invocation> inv = Parse({"create-join-token", "--pool", "gpu", "--ttl", "1h30m",
                                    "--uses=2", "--description", "rack 4"});
  ASSERT_TRUE(inv.ok()) << inv.status().ToString();
  EXPECT_EQ(inv->kind, Invocation::Kind::kOperation);
  EXPECT_EQ(inv->operation->name, "HpodCreateJoinToken");
  EXPECT_EQ(inv->params,
            Json({{"Pool", "gpu"}, {"TtlSeconds", 5400}, {"Uses", 2}, {"Description", "rack 4"}}));
  EXPECT_EQ(inv->bare_member, "JoinToken");
  // The token alone unless the command line asks for the response.
  EXPECT_EQ(Parse({"create-join-token", "--output", "text"})->bare_member, "JoinToken");
  EXPECT_EQ(Parse({"create-join-token", "--output", "json"})->bare_member, "");
  EXPECT_EQ(Parse({"--output", "table", "create-join-token"})->bare_member, "");
  EXPECT_EQ(Parse({"create-join-token", "--query", "TokenId"})->bare_member, "");
  EXPECT_EQ(Parse({"hpod-create-join-token"})->bare_member, "");  // the generated verb
  EXPECT_EQ(Parse({"create-join-token", "help"})->help_topic, "create-join-token");
  EXPECT_EQ(Parse({"create-join-token", "--help"})->help_topic, "create-join-token");
  Status bad = Parse({"create-join-token", "--ttl", "1x"}).status();
  EXPECT_TRUE(IsUsageError(bad));
  EXPECT_EQ(bad.message(), R"(--ttl: "1x" is not a duration; use e.g. 90s, 30m, 1h or 7d)");
}

TEST(ParseDurationSecondsTest, UnitsPartsAndBounds) {
  using internal::ParseDurationSeconds;
  const std::pair<const char*, int64_t> good[] = {
      {"1", 1},       {"3600", 3600},  {"90s", 90},         {"30m", 1800},    {"1h", 3600},
      {"7d", 604800}, {"1h30m", 5400}, {"1d1h1m1s", 90061}, {"30d", 2592000}, {"007s", 7}};
  for (const auto& [text, want] : good) {
    StatusOr<int64_t> got = ParseDurationSeconds("--ttl", text, 1, 2592000);
    ASSERT_TRUE(got.ok()) << text << ": " << got.status().ToString();
    EXPECT_EQ(*got, want) << text;
  }
  for (const char* text :
       {"", "x", "1x", "s", "1H", " 1h", "1h ", "-1h", "+1h", "1.5h", "1h30", "1hh", "1e3"}) {
    StatusOr<int64_t> got = ParseDurationSeconds("--ttl", text, 1, 2592000);
    ASSERT_FALSE(got.ok()) << text;
    EXPECT_TRUE(IsUsageError(got.status())) << text;
    EXPECT_EQ(got.status().message(), "--ttl: \"" + std::string(text) +
                                          "\" is not a duration; use e.g. 90s, 30m, 1h or 7d");
  }
  EXPECT_EQ(ParseDurationSeconds("--ttl", "0m", 1, 2592000).status().message(),
            R"(--ttl: "0m" is too short; use at least 1s)");
  EXPECT_EQ(ParseDurationSeconds("--ttl", "2592001", 1, 2592000).status().message(),
            R"(--ttl: "2592001" is too long; use at most 30d (2592000s))");
  EXPECT_EQ(ParseDurationSeconds("--ttl", "9223372036854775807d", 1, 2592000).status().message(),
            R"(--ttl: "9223372036854775807d" is too long; use at most 30d (2592000s))");
  EXPECT_EQ(ParseDurationSeconds("--ttl", "2h", 1, 5400).status().message(),
            R"(--ttl: "2h" is too long; use at most 90m (5400s))");
}

}  // namespace
}  // namespace hpod::cli
