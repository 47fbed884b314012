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

TEST(InstanceTypesTest, AMachineFitsATypeWithEnoughCpusMemoryAndTheExactGpus) {
  const InstanceTypeInfo c5 = *LookupInstanceType("ml.c5.2xlarge");  // 8 vCPUs, 16 GiB
  const int64_t gib = int64_t{1} << 30;
  EXPECT_EQ(MachineMisfit(c5, {8, 16 * gib, 0}), "");
  EXPECT_EQ(MachineMisfit(c5, {64, 15 * gib, 0}), "");  // MemTotal below nominal
  EXPECT_EQ(MachineMisfit(c5, {2, 16 * gib, 0}), "it has 2 CPUs, ml.c5.2xlarge has 8");
  EXPECT_EQ(MachineMisfit(c5, {8, 8 * gib, 0}),
            "it has 8.0 GiB of memory, ml.c5.2xlarge has 16.0 GiB (at least 90% of it is needed)");
  const InstanceTypeInfo g5 = *LookupInstanceType("ml.g5.12xlarge");  // 48, 192 GiB, 4 GPUs
  EXPECT_EQ(MachineMisfit(g5, {48, 192 * gib, 8}), "it has 8 GPUs, ml.g5.12xlarge has 4");
  EXPECT_EQ(MachineMisfit(g5, {4, 192 * gib, 0}),
            "it has 4 CPUs, ml.g5.12xlarge has 48; it has 0 GPUs, ml.g5.12xlarge has 4");
}

TEST(InstanceTypesTest, TypesThatFitAreTheLargestFirst) {
  const int64_t gib = int64_t{1} << 30;
  // This development machine's size: 2 CPUs, about 24 GiB, no GPU.
  std::vector<std::string> fit = TypesThatFit({2, 23 * gib, 0}, 3);
  ASSERT_EQ(fit.size(), 3u);
  EXPECT_EQ(LookupInstanceType(fit[0])->memory_mib, 16384);  // r6i/r7i.large: 2 vCPUs, 16 GiB
  for (const std::string& t : fit) {
    EXPECT_EQ(MachineMisfit(*LookupInstanceType(t), {2, 23 * gib, 0}), "") << t;
  }
  EXPECT_TRUE(TypesThatFit({1, gib, 0}, 5).empty());
}

}  // namespace
}  // namespace hpod::api
