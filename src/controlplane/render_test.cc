#include "hpod/controlplane/render.h"

#include <gtest/gtest.h>

#include "hpod/api/model.h"

namespace hpod::controlplane {
namespace {

const api::Shape& Shape(const char* name) {
  const api::Shape* s = api::ServiceModel::Get().FindShape(name);
  EXPECT_NE(s, nullptr) << name;
  return *s;
}

// Members come out in the model's order, unknown and null ones left out, and each
// scalar as it came: its type (an integer stays an integer, a double a double),
// its text (escapes, non-ASCII) and its value.
TEST(RenderTest, InModelOrderKeepsEveryScalarAsItIs) {
  const nlohmann::json value = {
      {"LaunchTime", 1700000000.25},
      {"InstanceStatus", {{"Message", "line\n\"quoted\" é"}, {"Status", "Running"}}},
      {"InstanceId", "i-0123456789abcdef0"},
      {"InstanceGroupName", "workers"},
      {"NotInTheModel", true},
      {"NodeLogicalId", nullptr},
  };
  EXPECT_EQ(InModelOrder(Shape("ClusterNodeSummary"), value).dump(),
            R"({"InstanceGroupName":"workers","InstanceId":"i-0123456789abcdef0",)"
            R"("LaunchTime":1700000000.25,"InstanceStatus":{"Status":"Running",)"
            R"("Message":"line\n\"quoted\" é"}})");
  nlohmann::json integers = {{"LaunchTime", 1700000000}};
  auto out = InModelOrder(Shape("ClusterNodeSummary"), integers);
  EXPECT_TRUE(out["LaunchTime"].is_number_integer());
  EXPECT_EQ(out.dump(), R"({"LaunchTime":1700000000})");
  integers["LaunchTime"] = uint64_t{18446744073709551615u};
  EXPECT_EQ(InModelOrder(Shape("ClusterNodeSummary"), integers).dump(),
            R"({"LaunchTime":18446744073709551615})");
}

}  // namespace
}  // namespace hpod::controlplane
