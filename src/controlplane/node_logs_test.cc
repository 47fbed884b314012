#include "hpod/controlplane/node_logs.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

namespace hpod::controlplane {
namespace {

class NodeLogsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = std::filesystem::temp_directory_path() /
            ("hpod-logs-" + std::to_string(getpid()) + "-" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(root_);
  }
  void TearDown() override { std::filesystem::remove_all(root_); }
  std::filesystem::path root_;
};

TEST_F(NodeLogsTest, FollowReturnsOnlyNewDataAcrossRotations) {
  NodeLogs logs({root_.string(), 10});
  EXPECT_EQ(logs.Read("c", "i-1", "LifecycleConfig", "", 100).status().code(),
            StatusCode::kNotFound);
  ASSERT_TRUE(logs.Append("c", "i-1", "LifecycleConfig", "hello\n").ok());
  auto first = logs.Read("c", "i-1", "LifecycleConfig", "", 100);
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(first->data, "hello\n");
  auto none = logs.Read("c", "i-1", "LifecycleConfig", first->next_token, 100);
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->data, "");
  // Crossing the 10-byte limit rotates; a reader positioned before it still gets
  // every byte exactly once.
  ASSERT_TRUE(logs.Append("c", "i-1", "LifecycleConfig", "world\n").ok());
  ASSERT_TRUE(logs.Append("c", "i-1", "LifecycleConfig", "again\n").ok());
  auto next = logs.Read("c", "i-1", "LifecycleConfig", none->next_token, 100);
  ASSERT_TRUE(next.ok());
  EXPECT_EQ(next->data, "world\nagain\n");
  // Small limits page through the same bytes.
  std::string paged;
  std::string token = first->next_token;
  for (int i = 0; i < 20; ++i) {
    auto c = logs.Read("c", "i-1", "LifecycleConfig", token, 4);
    ASSERT_TRUE(c.ok());
    paged += c->data;
    token = c->next_token;
  }
  EXPECT_EQ(paged, "world\nagain\n");
}

TEST_F(NodeLogsTest, ReaderTooFarBehindIsToldDataWasSkipped) {
  NodeLogs logs({root_.string(), 4});
  ASSERT_TRUE(logs.Append("c", "i-1", "Agent", "aaaa").ok());
  auto start = logs.Read("c", "i-1", "Agent", "", 100);
  ASSERT_TRUE(start.ok());
  ASSERT_TRUE(logs.Append("c", "i-1", "Agent", "bbbb").ok());
  ASSERT_TRUE(logs.Append("c", "i-1", "Agent", "cccc").ok());
  ASSERT_TRUE(logs.Append("c", "i-1", "Agent", "dddd").ok());
  auto late = logs.Read("c", "i-1", "Agent", "0", 100);
  ASSERT_TRUE(late.ok());
  EXPECT_EQ(late->data, "[... older log data was rotated away ...]\nccccdddd");
}

TEST_F(NodeLogsTest, BadInputIsRefused) {
  NodeLogs logs({root_.string()});
  EXPECT_EQ(logs.Append("c", "i-1", "../x", "x").code(), StatusCode::kInvalidArgument);
  ASSERT_TRUE(logs.Append("c", "i-1", "Agent", "x").ok());
  EXPECT_EQ(logs.Read("c", "i-1", "Agent", "garbage", 10).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(logs.Read("c", "i-1", "Agent", "9999", 10).status().code(),
            StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace hpod::controlplane
