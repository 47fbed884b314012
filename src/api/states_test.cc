#include "hpod/api/states.h"

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "hpod/api/model.h"

namespace hpod::api {
namespace {

// The table of E, in order, as strings.
template <typename E>
std::vector<std::string> TableOf() {
  std::vector<std::string> out;
  for (auto name : StateTable<E>::kNames) out.emplace_back(name);
  return out;
}

// Every state the model defines is in the table and nothing else is, in the
// model's order: a botocore update that adds a state fails here, not in a branch.
template <typename E>
void ExpectMatchesModel() {
  const Shape* shape = ServiceModel::Get().FindShape(StateTable<E>::kShape);
  ASSERT_NE(shape, nullptr) << StateTable<E>::kShape;
  EXPECT_EQ(TableOf<E>(), shape->enum_values) << StateTable<E>::kShape;
}

TEST(StatesTest, TablesAreTheModelsEnums) {
  ExpectMatchesModel<ClusterStatus>();
  ExpectMatchesModel<InstanceGroupStatus>();
  ExpectMatchesModel<ClusterInstanceStatus>();
  ExpectMatchesModel<ClusterNodeRecovery>();
  ExpectMatchesModel<HostState>();
}

template <typename E>
void ExpectRoundTrip() {
  std::set<std::string_view> seen;
  for (size_t i = 0; i < StateTable<E>::kNames.size(); ++i) {
    E e = static_cast<E>(i);
    EXPECT_EQ(Parse<E>(Name(e)), e);
    EXPECT_TRUE(Is(Name(e), e));
    EXPECT_TRUE(seen.insert(Name(e)).second) << "duplicate " << Name(e);
  }
}

TEST(StatesTest, EveryNameParsesBackToItsState) {
  ExpectRoundTrip<ClusterStatus>();
  ExpectRoundTrip<InstanceGroupStatus>();
  ExpectRoundTrip<ClusterInstanceStatus>();
  ExpectRoundTrip<ClusterNodeRecovery>();
  ExpectRoundTrip<LifecycleState>();
  ExpectRoundTrip<NodePhase>();
  ExpectRoundTrip<HostState>();
}

TEST(StatesTest, UnknownAndMiscasedStringsAreNoState) {
  EXPECT_EQ(Parse<ClusterStatus>("inservice"), std::nullopt);
  EXPECT_EQ(Parse<ClusterStatus>(""), std::nullopt);
  EXPECT_EQ(Parse<ClusterInstanceStatus>("Failed"), std::nullopt);  // that is a cluster's
  EXPECT_FALSE(Is("Failure ", ClusterInstanceStatus::kFailure));
  EXPECT_EQ(NameString(InstanceGroupStatus::kDegraded), "Degraded");
  static_assert(Name(ClusterStatus::kInService) == "InService");
  static_assert(*Parse<LifecycleState>("Succeeded") == LifecycleState::kSucceeded);
}

}  // namespace
}  // namespace hpod::api
