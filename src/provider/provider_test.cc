#include "hpod/provider/provider.h"

#include <gtest/gtest.h>

namespace hpod::provider {
namespace {

TEST(FaultKindTest, EveryKindRoundTripsThroughItsName) {
  using K = FaultSpec::Kind;
  for (K k : {K::kKillNode, K::kKillAgent, K::kKillSlurmd, K::kPartition, K::kHang, K::kDiskFull,
              K::kGpuXid, K::kFlagFile, K::kCpuThrottle, K::kSlowLink}) {
    EXPECT_EQ(ParseFaultKind(FaultKindName(k)), k) << FaultKindName(k);
  }
  EXPECT_EQ(FaultKindName(K::kDiskFull), "disk-full");
  EXPECT_EQ(ParseFaultKind("gpu-xid"), K::kGpuXid);
  EXPECT_FALSE(ParseFaultKind("Partition").has_value());
  EXPECT_FALSE(ParseFaultKind("").has_value());
}

TEST(ProviderTest, RebootAndFaultsAreUnimplementedByDefault) {
  struct Minimal final : Provider {
    Status Launch(const LaunchSpec&) override { return OkStatus(); }
    Status Terminate(const std::string&) override { return OkStatus(); }
    StatusOr<NodeObservation> Describe(const std::string&) override { return NodeObservation{}; }
    StatusOr<std::vector<std::string>> List(const std::string&) override {
      return std::vector<std::string>{};
    }
  } p;
  EXPECT_EQ(p.Reboot("i-1", "r-1").code(), StatusCode::kUnimplemented);
  EXPECT_EQ(p.InjectFault("i-1", FaultSpec{}).code(), StatusCode::kUnimplemented);
}

}  // namespace
}  // namespace hpod::provider
