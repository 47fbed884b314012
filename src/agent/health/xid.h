#pragma once

// The one table that turns an NVIDIA Xid (a driver error code, in the kernel log
// as `NVRM: Xid (PCI:0000:3b:00): 74, …` and in NVML's Xid events) into a
// verdict, and a ledger that keeps every Xid a node has seen until the agent
// restarts (a replaced node comes up with a fresh agent and no Xids; an Xid does
// not heal by itself, so it stays reported).
//
// Thread contract: JudgeXid and ParseXidLine are pure; an XidLedger belongs to
// one check (not synchronized).

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "hpod/agent/health/health_checks.h"

namespace hpod::agent::health {

struct XidJudgement {
  Verdict verdict = Verdict::kReboot;
  std::string_view meaning;  // "NVLink error"
  bool ignored = false;      // an application error: the GPU is fine
};

// 74, 48, 79, 95 → Replace; 94, 73, 71 → Reboot; 13, 31, 43, 45 → ignored; any
// other Xid → Reboot (docs/node-health.md says which are HyperPod's).
XidJudgement JudgeXid(int xid);

struct XidEvent {
  int xid = 0;
  std::string where;  // "PCI:0000:3b:00" or "GPU 3"
};

// The Xid of one kernel log line (`NVRM: Xid (PCI:0000:3b:00): 74, pid=…`), or
// nullopt for any other line.
std::optional<XidEvent> ParseXidLine(std::string_view line);

class XidLedger {
 public:
  void Add(const XidEvent& e);
  // Ok while no Xid that counts was seen; else Fail with the worst verdict and
  // a reason naming each such Xid once ("Xid 74 on PCI:0000:3b:00 (NVLink
  // error); Xid 73 on GPU 1 (…)"), at most four of them.
  Outcome Judge() const;
  bool empty() const { return seen_.empty(); }

 private:
  std::vector<XidEvent> seen_;  // the Xids that count, each (xid, where) once
};

}  // namespace hpod::agent::health
