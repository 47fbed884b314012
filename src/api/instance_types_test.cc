#include "hpod/api/instance_types.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

#include "hpod/api/model.h"

namespace hpod::api {
namespace {

TEST(InstanceTypesTest, EveryModelEnumValueHasAnEntry) {
  const api::Shape* shape = api::ServiceModel::Get().FindShape("ClusterInstanceType");
  ASSERT_NE(shape, nullptr);
  ASSERT_GT(shape->enum_values.size(), 100u);
  for (const auto& name : shape->enum_values) {
    auto info = LookupInstanceType(name);
    ASSERT_TRUE(info.has_value()) << name << " has no entry";
    EXPECT_GT(info->vcpus, 0) << name;
    EXPECT_GT(info->memory_mib, 0) << name;
    EXPECT_EQ(info->gpus == 0, info->gpu_type.empty()) << name;
  }
  // And nothing that is not in the model.
  std::set<std::string> model(shape->enum_values.begin(), shape->enum_values.end());
  for (const auto& t : AllInstanceTypes()) EXPECT_TRUE(model.count(std::string(t.name))) << t.name;
}

TEST(InstanceTypesTest, PublishedSpecs) {
  auto p5 = LookupInstanceType("ml.p5.48xlarge");
  ASSERT_TRUE(p5);
  EXPECT_EQ(p5->vcpus, 192);
  EXPECT_EQ(p5->memory_mib, 2048 * 1024);
  EXPECT_EQ(p5->gpus, 8);
  EXPECT_EQ(p5->gpu_type, "H100");
  auto p4d = LookupInstanceType("ml.p4d.24xlarge");
  ASSERT_TRUE(p4d);
  EXPECT_EQ(p4d->vcpus, 96);
  EXPECT_EQ(p4d->memory_mib, 1152 * 1024);
  EXPECT_EQ(p4d->gpu_type, "A100");
  auto trn1 = LookupInstanceType("ml.trn1.32xlarge");
  ASSERT_TRUE(trn1);
  EXPECT_EQ(trn1->gpus, 0);
  EXPECT_EQ(trn1->neuron_devices, 16);
  auto c5 = LookupInstanceType("ml.c5.xlarge");
  ASSERT_TRUE(c5);
  EXPECT_EQ(c5->vcpus, 4);
  EXPECT_EQ(c5->memory_mib, 8 * 1024);
  EXPECT_FALSE(LookupInstanceType("ml.nope.large"));
  EXPECT_FALSE(LookupInstanceType("p5.48xlarge"));  // without the ml. prefix
}

}  // namespace
}  // namespace hpod::api
