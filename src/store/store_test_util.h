#pragma once

// Shared by the store's tests: an in-memory store and a cluster record to put in
// it.

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "hpod/store/store.h"

namespace hpod::store::test_util {

// A fresh in-memory SQLite store (fails the test when it cannot be opened).
inline std::unique_ptr<Store> Memory() {
  auto s = OpenSqliteStore({});
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  return std::move(s).value();
}

// A Creating cluster with an ARN and one tag in its spec.
inline ClusterRecord Cluster(const std::string& id, const std::string& name, double t) {
  ClusterRecord c;
  c.id = id;
  c.name = name;
  c.arn = "arn:aws:sagemaker:us-west-2:123456789012:cluster/" + id;
  c.status = "Creating";
  c.creation_time = t;
  c.spec = {{"Tags", {{{"Key", "team"}, {"Value", "llm"}}}}};
  return c;
}

}  // namespace hpod::store::test_util
