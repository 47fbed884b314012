#include "hpod/slurm/roles.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace hpod::slurm {
namespace {

using nlohmann::json;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Pair;

GroupInput Group(std::string name, std::string type, int count, json slurm_config = nullptr) {
  GroupInput g;
  g.name = std::move(name);
  g.instance_type = std::move(type);
  g.instance_count = count;
  g.slurm_config = std::move(slurm_config);
  return g;
}

json Config(const std::string& node_type) { return json{{"NodeType", node_type}}; }
json Config(const std::string& node_type, json partitions) {
  return json{{"NodeType", node_type}, {"PartitionNames", std::move(partitions)}};
}

// controller + login + two compute groups, the second without PartitionNames.
std::vector<GroupInput> FourGroups() {
  return {Group("controller-machine", "ml.c5.xlarge", 1, Config("Controller")),
          Group("login", "ml.m5.large", 2, Config("Login")),
          Group("gpu", "ml.p5.48xlarge", 4, Config("Compute", {"train"})),
          Group("cpu", "ml.c5.2xlarge", 3, Config("Compute"))};
}

void ExpectInvalid(const Status& s, const std::string& substr) {
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
  EXPECT_THAT(s.message(), HasSubstr(substr));
}

TEST(RoleNameTest, Spellings) {
  EXPECT_STREQ(RoleName(NodeRole::kController), "controller");
  EXPECT_STREQ(RoleName(NodeRole::kLogin), "login");
  EXPECT_STREQ(RoleName(NodeRole::kCompute), "compute");
}

TEST(RolesFromSlurmConfigTest, NoneSetMeansUseTheFile) {
  auto roles = RolesFromSlurmConfig({Group("a", "ml.c5.xlarge", 1), Group("b", "ml.c5.xlarge", 2)});
  ASSERT_TRUE(roles.ok()) << roles.status().ToString();
  EXPECT_FALSE(roles->has_value());
}

TEST(RolesFromSlurmConfigTest, ValidFourGroups) {
  auto result = RolesFromSlurmConfig(FourGroups());
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  ASSERT_TRUE(result->has_value());
  const SlurmRoles& roles = **result;
  EXPECT_EQ(roles.controller_group, "controller-machine");
  EXPECT_THAT(roles.login_groups, ElementsAre("login"));
  EXPECT_THAT(roles.partitions, ElementsAre(Pair("gpu", "train"), Pair("cpu", "ml.c5.2xlarge")));
  EXPECT_FALSE(roles.from_provisioning_parameters);
  EXPECT_EQ(roles.RoleOf("controller-machine"), NodeRole::kController);
  EXPECT_EQ(roles.RoleOf("login"), NodeRole::kLogin);
  EXPECT_EQ(roles.RoleOf("gpu"), NodeRole::kCompute);
  EXPECT_EQ(roles.PartitionOf("gpu"), "train");
  EXPECT_EQ(roles.PartitionOf("cpu"), "ml.c5.2xlarge");
  EXPECT_EQ(roles.PartitionOf("login"), "");
}

TEST(RolesFromSlurmConfigTest, EmptyPartitionListMeansInstanceType) {
  auto result =
      RolesFromSlurmConfig({Group("c", "ml.c5.xlarge", 1, Config("Controller")),
                            Group("w", "ml.g5.xlarge", 1, Config("Compute", json::array()))});
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  EXPECT_THAT((*result)->partitions, ElementsAre(Pair("w", "ml.g5.xlarge")));
  EXPECT_TRUE((*result)->login_groups.empty());
}

TEST(RolesFromSlurmConfigTest, GroupWithoutConfigIsComputeWhenOthersHaveOne) {
  auto groups = FourGroups();
  groups[3].slurm_config = nullptr;
  auto roles = RolesFromSlurmConfig(groups);
  ASSERT_TRUE(roles.ok()) << roles.status().ToString();
  EXPECT_EQ((*roles)->RoleOf(groups[3].name), NodeRole::kCompute);
  EXPECT_EQ((*roles)->PartitionOf(groups[3].name), groups[3].instance_type);
}

TEST(RolesFromSlurmConfigTest, BadNodeType) {
  auto groups = FourGroups();
  groups[2].slurm_config = Config("Worker");
  auto s = RolesFromSlurmConfig(groups).status();
  ExpectInvalid(s, "'gpu'");
  EXPECT_THAT(s.message(), HasSubstr("'Worker'"));

  groups[2].slurm_config = json{{"PartitionNames", {"x"}}};
  ExpectInvalid(RolesFromSlurmConfig(groups).status(), "'gpu' has SlurmConfig.NodeType (missing)");
}

TEST(RolesFromSlurmConfigTest, NoController) {
  auto groups = FourGroups();
  groups[0].slurm_config = Config("Compute");
  ExpectInvalid(RolesFromSlurmConfig(groups).status(),
                "No instance group has SlurmConfig.NodeType Controller");
}

TEST(RolesFromSlurmConfigTest, TwoControllersNamesBoth) {
  auto groups = FourGroups();
  groups[3].slurm_config = Config("Controller");
  groups[3].instance_count = 1;
  auto s = RolesFromSlurmConfig(groups).status();
  ExpectInvalid(s, "'controller-machine'");
  EXPECT_THAT(s.message(), HasSubstr("'cpu'"));
}

TEST(RolesFromSlurmConfigTest, ControllerMustHaveOneInstance) {
  auto groups = FourGroups();
  groups[0].instance_count = 2;
  auto s = RolesFromSlurmConfig(groups).status();
  ExpectInvalid(s, "controller group 'controller-machine' has InstanceCount 2");
  EXPECT_THAT(s.message(), HasSubstr("exactly 1 instance"));
}

TEST(RolesFromSlurmConfigTest, TwoLoginGroupsNamesBoth) {
  auto groups = FourGroups();
  groups[3].slurm_config = Config("Login");
  auto s = RolesFromSlurmConfig(groups).status();
  ExpectInvalid(s, "'login'");
  EXPECT_THAT(s.message(), HasSubstr("'cpu'"));
}

TEST(RolesFromSlurmConfigTest, PartitionRules) {
  auto groups = FourGroups();
  groups[2].slurm_config = Config("Compute", {"a", "b"});
  ExpectInvalid(RolesFromSlurmConfig(groups).status(), "'gpu' has 2 SlurmConfig.PartitionNames");

  groups = FourGroups();
  groups[1].slurm_config = Config("Login", {"dev"});
  ExpectInvalid(RolesFromSlurmConfig(groups).status(), "'login' has NodeType Login");

  groups = FourGroups();
  groups[0].slurm_config = Config("Controller", {"dev"});
  ExpectInvalid(RolesFromSlurmConfig(groups).status(), "'controller-machine' has NodeType");

  for (const char* bad : {"has space", "", "a/b", "DEFAULT", "x=y"}) {
    groups = FourGroups();
    groups[2].slurm_config = Config("Compute", {bad});
    ExpectInvalid(RolesFromSlurmConfig(groups).status(), "'gpu'");
  }
  groups = FourGroups();
  groups[2].slurm_config = Config("Compute", {std::string(65, 'p')});
  ExpectInvalid(RolesFromSlurmConfig(groups).status(), "not a valid Slurm partition name");

  groups = FourGroups();
  groups[2].slurm_config = Config("Compute", {"ml.p5_48x-large"});
  EXPECT_TRUE(RolesFromSlurmConfig(groups).ok());
}

// The cluster of the provisioning-parameters tests: no SlurmConfig anywhere.
std::vector<GroupInput> PlainGroups() {
  return {Group("controller-machine", "ml.c5.xlarge", 1), Group("login", "ml.m5.large", 1),
          Group("gpu", "ml.p5.48xlarge", 2), Group("cpu", "ml.c5.2xlarge", 3)};
}

json ValidParams() {
  return json::parse(R"({
    "version": "1.0.0", "workload_manager": "slurm",
    "controller_group": "controller-machine", "login_group": "login",
    "worker_groups": [{"instance_group_name": "cpu"},
                      {"instance_group_name": "gpu", "partition_name": "train"}],
    "fsx_dns_name": "fs-1.fsx.us-west-2.amazonaws.com"})");
}

TEST(RolesFromProvisioningParametersTest, Valid) {
  auto roles = RolesFromProvisioningParameters(ValidParams(), PlainGroups());
  ASSERT_TRUE(roles.ok()) << roles.status().ToString();
  EXPECT_EQ(roles->controller_group, "controller-machine");
  EXPECT_THAT(roles->login_groups, ElementsAre("login"));
  // Groups' order, not the file's; "cpu" has no partition_name → instance type.
  EXPECT_THAT(roles->partitions, ElementsAre(Pair("gpu", "train"), Pair("cpu", "ml.c5.2xlarge")));
  EXPECT_TRUE(roles->from_provisioning_parameters);
}

TEST(RolesFromProvisioningParametersTest, LoginOptional) {
  json params = ValidParams();
  params.erase("login_group");
  params["worker_groups"].push_back({{"instance_group_name", "login"}, {"partition_name", "lg"}});
  auto roles = RolesFromProvisioningParameters(params, PlainGroups());
  ASSERT_TRUE(roles.ok()) << roles.status().ToString();
  EXPECT_TRUE(roles->login_groups.empty());
  EXPECT_EQ(roles->PartitionOf("login"), "lg");

  params["login_group"] = "";  // HyperPod samples leave it empty
  EXPECT_TRUE(RolesFromProvisioningParameters(params, PlainGroups()).ok());
}

TEST(RolesFromProvisioningParametersTest, NotAnObject) {
  ExpectInvalid(RolesFromProvisioningParameters(json::array(), PlainGroups()).status(),
                "provisioning_parameters.json must be a JSON object");
}

TEST(RolesFromProvisioningParametersTest, OtherWorkloadManager) {
  json params = ValidParams();
  params["workload_manager"] = "eks";
  ExpectInvalid(RolesFromProvisioningParameters(params, PlainGroups()).status(),
                "workload_manager is 'eks'");
}

TEST(RolesFromProvisioningParametersTest, MissingController) {
  json params = ValidParams();
  params.erase("controller_group");
  ExpectInvalid(RolesFromProvisioningParameters(params, PlainGroups()).status(),
                "controller_group is required");
}

TEST(RolesFromProvisioningParametersTest, UnknownControllerListsGroups) {
  json params = ValidParams();
  params["controller_group"] = "head";
  ExpectInvalid(RolesFromProvisioningParameters(params, PlainGroups()).status(),
                "controller_group 'head' is not an instance group of this cluster (groups: "
                "controller-machine, login, gpu, cpu)");
}

TEST(RolesFromProvisioningParametersTest, ControllerMustHaveOneInstance) {
  auto groups = PlainGroups();
  groups[0].instance_count = 3;
  ExpectInvalid(RolesFromProvisioningParameters(ValidParams(), groups).status(),
                "controller group 'controller-machine' has InstanceCount 3");
}

TEST(RolesFromProvisioningParametersTest, UnknownLoginAndWorker) {
  json params = ValidParams();
  params["login_group"] = "nope";
  ExpectInvalid(RolesFromProvisioningParameters(params, PlainGroups()).status(),
                "login_group 'nope' is not an instance group");

  params = ValidParams();
  params["worker_groups"].push_back({{"instance_group_name", "gpu2"}});
  ExpectInvalid(RolesFromProvisioningParameters(params, PlainGroups()).status(),
                "'gpu2' is not an instance group of this cluster (groups: controller-machine");
}

TEST(RolesFromProvisioningParametersTest, UnlistedGroup) {
  json params = ValidParams();
  params["worker_groups"].erase(0);  // drops "cpu"
  ExpectInvalid(RolesFromProvisioningParameters(params, PlainGroups()).status(),
                "provisioning_parameters.json does not name instance group 'cpu' (add it to "
                "worker_groups");
}

TEST(RolesFromProvisioningParametersTest, GroupTwice) {
  json params = ValidParams();
  params["worker_groups"].push_back({{"instance_group_name", "cpu"}, {"partition_name", "x"}});
  ExpectInvalid(RolesFromProvisioningParameters(params, PlainGroups()).status(),
                "instance group 'cpu' is named twice");

  params = ValidParams();
  params["worker_groups"].push_back({{"instance_group_name", "controller-machine"}});
  ExpectInvalid(RolesFromProvisioningParameters(params, PlainGroups()).status(),
                "'controller-machine' is named twice");

  params = ValidParams();
  params["login_group"] = "controller-machine";
  params["worker_groups"].push_back({{"instance_group_name", "login"}});
  ExpectInvalid(RolesFromProvisioningParameters(params, PlainGroups()).status(),
                "'controller-machine' is named twice");
}

TEST(RolesFromProvisioningParametersTest, MalformedEntries) {
  json params = ValidParams();
  params["worker_groups"] = "cpu";
  ExpectInvalid(RolesFromProvisioningParameters(params, PlainGroups()).status(),
                "worker_groups must be a list");

  params = ValidParams();
  params["worker_groups"][0] = {{"partition_name", "dev"}};
  ExpectInvalid(RolesFromProvisioningParameters(params, PlainGroups()).status(),
                "instance_group_name");

  params = ValidParams();
  params["worker_groups"][1]["partition_name"] = "bad name";
  ExpectInvalid(RolesFromProvisioningParameters(params, PlainGroups()).status(),
                "entry 'gpu' partition_name 'bad name' is not a valid");

  params = ValidParams();
  params["controller_group"] = 7;
  ExpectInvalid(RolesFromProvisioningParameters(params, PlainGroups()).status(),
                "controller_group is required");
}

TEST(ToProvisioningParametersTest, ShapeAndRoundTrip) {
  auto from_config = RolesFromSlurmConfig(FourGroups());
  ASSERT_TRUE(from_config.ok()) << from_config.status().ToString();
  json params = (*from_config)->ToProvisioningParameters();
  EXPECT_EQ(params, json::parse(R"({
    "version": "1.0.0", "workload_manager": "slurm",
    "controller_group": "controller-machine", "login_group": "login",
    "worker_groups": [{"instance_group_name": "gpu", "partition_name": "train"},
                      {"instance_group_name": "cpu", "partition_name": "ml.c5.2xlarge"}]})"));

  auto back = RolesFromProvisioningParameters(params, FourGroups());
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->controller_group, (*from_config)->controller_group);
  EXPECT_EQ(back->login_groups, (*from_config)->login_groups);
  EXPECT_EQ(back->partitions, (*from_config)->partitions);
  EXPECT_TRUE(back->from_provisioning_parameters);
}

TEST(ToProvisioningParametersTest, NoLoginKeyWithoutLoginGroup) {
  SlurmRoles roles;
  roles.controller_group = "c";
  roles.partitions = {{"w", "dev"}};
  json params = roles.ToProvisioningParameters();
  EXPECT_FALSE(params.contains("login_group"));
  auto back = RolesFromProvisioningParameters(
      params, {Group("c", "ml.c5.xlarge", 1), Group("w", "ml.c5.xlarge", 5)});
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_TRUE(back->login_groups.empty());
  EXPECT_EQ(back->PartitionOf("w"), "dev");
}

}  // namespace
}  // namespace hpod::slurm

namespace hpod::slurm {
namespace {

TEST(RolesFromProvisioningParametersTest, GoneGroupsAreSkippedOnlyWhenTolerated) {
  std::vector<GroupInput> groups = {{"ctl", "ml.c5.xlarge", 1, nullptr},
                                    {"w", "ml.c5.2xlarge", 2, nullptr}};
  nlohmann::json params = {{"controller_group", "ctl"},
                           {"login_group", "old-login"},
                           {"worker_groups",
                            {{{"instance_group_name", "w"}, {"partition_name", "dev"}},
                             {{"instance_group_name", "old"}, {"partition_name", "x"}}}}};
  EXPECT_EQ(RolesFromProvisioningParameters(params, groups).status().code(),
            StatusCode::kInvalidArgument);
  auto roles = RolesFromProvisioningParameters(params, groups, /*tolerate_gone_groups=*/true);
  ASSERT_TRUE(roles.ok()) << roles.status().ToString();
  EXPECT_EQ(roles->partitions.size(), 1u);
  EXPECT_EQ(roles->PartitionOf("w"), "dev");
  EXPECT_TRUE(roles->login_groups.empty());
  // The controller group can never be gone.
  params["controller_group"] = "old-ctl";
  EXPECT_FALSE(RolesFromProvisioningParameters(params, groups, true).ok());
}

}  // namespace
}  // namespace hpod::slurm
