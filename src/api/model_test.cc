#include "hpod/api/model.h"

#include <gtest/gtest.h>

namespace hpod::api {
namespace {

TEST(ServiceModelTest, HasTheClusterOperations) {
  const ServiceModel& m = ServiceModel::Get();
  EXPECT_EQ(m.target_prefix(), "SageMaker");
  EXPECT_EQ(m.signing_name(), "sagemaker");
  for (const char* op :
       {"CreateCluster", "DescribeCluster", "ListClusters", "DeleteCluster", "UpdateCluster",
        "ListClusterNodes", "DescribeClusterNode", "BatchDeleteClusterNodes",
        "BatchRebootClusterNodes", "BatchReplaceClusterNodes", "ListClusterEvents",
        "DescribeClusterEvent", "BatchAddClusterNodes"}) {
    EXPECT_NE(m.FindOperation(op), nullptr) << op;
  }
  EXPECT_EQ(m.FindOperation("CreateTrainingJob"), nullptr);
}

TEST(ServiceModelTest, ShapesCarryConstraints) {
  const ServiceModel& m = ServiceModel::Get();
  const Shape* name = m.FindShape("ClusterName");
  ASSERT_NE(name, nullptr);
  EXPECT_EQ(name->type, ShapeType::kString);
  EXPECT_EQ(name->min, 1);
  EXPECT_EQ(name->max, 63);
  EXPECT_EQ(name->pattern, "[a-zA-Z0-9](-*[a-zA-Z0-9])*");

  const Operation* create = m.FindOperation("CreateCluster");
  ASSERT_NE(create, nullptr);
  EXPECT_TRUE(create->input->IsRequired("ClusterName"));
  // Members keep the model's order (used for output ordering).
  ASSERT_GE(create->input->members.size(), 2u);
  EXPECT_EQ(create->input->members[0].name, "ClusterName");
  EXPECT_EQ(create->input->members[1].name, "InstanceGroups");
  const Member* groups = create->input->FindMember("InstanceGroups");
  ASSERT_NE(groups, nullptr);
  EXPECT_EQ(groups->shape->type, ShapeType::kList);
  EXPECT_EQ(groups->shape->member->name, "ClusterInstanceGroupSpecification");
  EXPECT_TRUE(m.FindShape("ClusterInstanceStorageConfig")->is_union);
  EXPECT_TRUE(m.FindShape("ResourceNotFound")->is_exception);
}

// The reboot/replace errors are their own shapes, with codes unlike
// BatchDeleteClusterNodes' (InstanceId*, not NodeId*), and at most 25 ids a call.
TEST(ServiceModelTest, BatchRebootAndReplace) {
  const ServiceModel& m = ServiceModel::Get();
  for (const std::string op : {"BatchRebootClusterNodes", "BatchReplaceClusterNodes"}) {
    const Operation* o = m.FindOperation(op);
    ASSERT_NE(o, nullptr) << op;
    EXPECT_TRUE(o->input->IsRequired("ClusterName")) << op;
    for (const char* ids : {"NodeIds", "NodeLogicalIds"}) {
      const Member* member = o->input->FindMember(ids);
      ASSERT_NE(member, nullptr) << op << " " << ids;
      EXPECT_EQ(member->shape->type, ShapeType::kList);
      EXPECT_EQ(member->shape->min, 1);
      EXPECT_EQ(member->shape->max, 25);
    }
    const Member* failed = o->output->FindMember("Failed");
    ASSERT_NE(failed, nullptr) << op;
    EXPECT_EQ(failed->shape->member->name, op + "Error");
    const Shape* code = m.FindShape(op + "ErrorCode");
    ASSERT_NE(code, nullptr) << op;
    EXPECT_EQ(code->enum_values,
              (std::vector<std::string>{"InstanceIdNotFound", "InvalidInstanceStatus",
                                        "InstanceIdInUse", "InternalServerError"}));
    for (const char* member : {"Successful", "FailedNodeLogicalIds", "SuccessfulNodeLogicalIds"}) {
      EXPECT_NE(o->output->FindMember(member), nullptr) << op << " " << member;
    }
    ASSERT_EQ(o->errors.size(), 1u);
    EXPECT_EQ(o->errors[0]->name, "ResourceNotFound");
  }
}

TEST(ServiceModelTest, Paginators) {
  const Operation* list = ServiceModel::Get().FindOperation("ListClusterNodes");
  ASSERT_TRUE(list->paginator.has_value());
  EXPECT_EQ(list->paginator->input_token, "NextToken");
  EXPECT_EQ(list->paginator->limit_key, "MaxResults");
  ASSERT_EQ(list->paginator->result_keys.size(), 1u);
  EXPECT_EQ(list->paginator->result_keys[0], "ClusterNodeSummaries");
  EXPECT_FALSE(ServiceModel::Get().FindOperation("CreateCluster")->paginator.has_value());
}

}  // namespace
}  // namespace hpod::api
