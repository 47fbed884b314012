#include "hpod/agent/health/xid.h"

#include <gtest/gtest.h>

namespace hpod::agent::health {
namespace {

TEST(XidTest, TheTable) {
  for (int xid : {74, 48, 79, 95}) EXPECT_EQ(JudgeXid(xid).verdict, Verdict::kReplace) << xid;
  for (int xid : {94, 73, 71, 62, 119}) EXPECT_EQ(JudgeXid(xid).verdict, Verdict::kReboot) << xid;
  for (int xid : {13, 31, 43, 45}) {
    EXPECT_EQ(JudgeXid(xid).verdict, Verdict::kHealthy) << xid;
    EXPECT_TRUE(JudgeXid(xid).ignored) << xid;
  }
  EXPECT_FALSE(JudgeXid(74).ignored);
}

TEST(XidTest, ParsesKernelLines) {
  auto e = ParseXidLine(
      "[12345.678] NVRM: Xid (PCI:0000:3b:00): 74, pid=1234, name=python, NVLink: fatal error");
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->xid, 74);
  EXPECT_EQ(e->where, "PCI:0000:3b:00");
  e = ParseXidLine("NVRM: Xid (PCI:0000:00:1e): 13, Graphics Exception");
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->xid, 13);
  EXPECT_FALSE(ParseXidLine("NVRM: loading NVIDIA UNIX x86_64 Kernel Module").has_value());
  EXPECT_FALSE(ParseXidLine("NVRM: Xid (PCI:0000:3b:00): pid=1").has_value());
  EXPECT_FALSE(ParseXidLine("NVRM: Xid (PCI:0000:3b:00 74").has_value());
  EXPECT_FALSE(ParseXidLine("").has_value());
}

TEST(XidTest, TheLedgerKeepsTheWorstAndIgnoresApplicationErrors) {
  XidLedger ledger;
  EXPECT_EQ(ledger.Judge(), Outcome::Ok());
  ledger.Add({13, "GPU 0"});
  EXPECT_EQ(ledger.Judge(), Outcome::Ok());
  EXPECT_TRUE(ledger.empty());
  ledger.Add({73, "GPU 1"});
  EXPECT_EQ(ledger.Judge(), Outcome::Fail(Verdict::kReboot, "Xid 73 on GPU 1 (NVENC2 error)"));
  ledger.Add({74, "PCI:0000:3b:00"});
  ledger.Add({74, "PCI:0000:3b:00"});  // the same one again: listed once
  Outcome o = ledger.Judge();
  EXPECT_EQ(o.verdict, Verdict::kReplace);
  EXPECT_EQ(o.reason, "Xid 73 on GPU 1 (NVENC2 error); Xid 74 on PCI:0000:3b:00 (NVLink error)");
  for (int i = 0; i < 5; ++i) ledger.Add({62, "GPU " + std::to_string(i)});
  EXPECT_NE(ledger.Judge().reason.find("; and 3 more"), std::string::npos);
}

}  // namespace
}  // namespace hpod::agent::health
