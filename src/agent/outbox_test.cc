#include "hpod/agent/outbox.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace hpod::agent {
namespace {

using Kind = Outbox::Kind;

std::vector<std::string> Drain(Outbox& o) {
  std::vector<std::string> out;
  while (!o.empty()) out.push_back(o.Pop());
  return out;
}

TEST(OutboxTest, OrderedFramesGoInOrder) {
  Outbox o(1 << 20);
  o.Push("a");
  o.Push("b");
  o.Push("c");
  EXPECT_EQ(o.bytes(), 3u);
  EXPECT_EQ(Drain(o), (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(o.bytes(), 0u);
}

// A controller queues its Slurm table whenever Slurm changes: an unsent one is
// replaced where it waits, so the queue holds one table, the newest.
TEST(OutboxTest, ALatestFrameReplacesTheUnsentOneOfItsType) {
  Outbox o(1 << 20);
  o.Push("lifecycle");
  o.Push("table-1", Kind::kLatest, "slurm_nodes");
  o.Push("log");
  o.Push("table-22", Kind::kLatest, "slurm_nodes");
  o.Push("other-1", Kind::kLatest, "other");
  EXPECT_EQ(o.size(), 4u);
  EXPECT_EQ(o.bytes(), 9u + 8u + 3u + 7u);
  EXPECT_EQ(Drain(o), (std::vector<std::string>{"lifecycle", "table-22", "log", "other-1"}));
  // Once sent, the next table is queued anew.
  o.Push("table-3", Kind::kLatest, "slurm_nodes");
  EXPECT_EQ(Drain(o), (std::vector<std::string>{"table-3"}));
}

// A heartbeat late by the timeout gets the node replaced: it goes ahead of the
// tables queued last, never ahead of a frame whose order counts.
TEST(OutboxTest, AHeartbeatPassesTheLatestFramesQueuedLastOnly) {
  Outbox o(1 << 20);
  o.Push("table", Kind::kLatest, "slurm_nodes");
  o.Push("lifecycle");
  o.Push("other", Kind::kLatest, "other");
  o.Push("table-2", Kind::kLatest, "slurm_nodes");  // replaces "table", before lifecycle
  o.Push("beat", Kind::kHeartbeat, "", 7);
  uint64_t tag = 1;
  EXPECT_EQ(o.Pop(&tag), "table-2");
  EXPECT_EQ(tag, 0u);
  EXPECT_EQ(o.Pop(&tag), "lifecycle");
  EXPECT_EQ(o.Pop(&tag), "beat");
  EXPECT_EQ(tag, 7u) << "the caller's tag comes back with its frame";
  EXPECT_EQ(Drain(o), (std::vector<std::string>{"other"}));
  o.Push("other", Kind::kLatest, "other");
  o.Push("beat-1", Kind::kHeartbeat);
  o.Push("beat-2", Kind::kHeartbeat);
  EXPECT_EQ(Drain(o), (std::vector<std::string>{"beat-1", "beat-2", "other"}));
  o.Push("log");
  o.Push("beat", Kind::kHeartbeat);
  EXPECT_EQ(Drain(o), (std::vector<std::string>{"log", "beat"}));
}

TEST(OutboxTest, BeyondItsBytesTheOldestGoAndAreCounted) {
  Outbox o(10);
  o.Push("aaaa");
  o.Push("bbbb");
  o.Push("cccc");
  EXPECT_EQ(o.dropped(), 1u);
  EXPECT_EQ(o.bytes(), 8u);
  o.Push(std::string(32, 'x'));  // larger than the bound: kept alone
  EXPECT_EQ(o.dropped(), 3u);
  EXPECT_EQ(o.size(), 1u);
  o.ClearDropped();
  EXPECT_EQ(o.dropped(), 0u);
  EXPECT_EQ(o.TakeAll(), (std::deque<std::string>{std::string(32, 'x')}));
  EXPECT_TRUE(o.empty());
  EXPECT_EQ(o.bytes(), 0u);
}

TEST(OutboxTest, AFrameThatCouldNotBeSentIsFirstAgain) {
  Outbox o(1 << 20);
  o.Push("a");
  o.Push("b");
  std::string a = o.Pop();
  o.PushFront(std::move(a));
  o.Push("beat", Kind::kHeartbeat);
  EXPECT_EQ(Drain(o), (std::vector<std::string>{"a", "b", "beat"}));
}

}  // namespace
}  // namespace hpod::agent
