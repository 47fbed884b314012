#include "hpod/agent/health/xid.h"

#include <charconv>

namespace hpod::agent::health {

XidJudgement JudgeXid(int xid) {
  switch (xid) {
    // HyperPod (§13): Xid 74 → replace, 73 → reboot, 71 → NvidiaErrorReboot.
    case 74:
      return {Verdict::kReplace, "NVLink error"};
    case 73:
      return {Verdict::kReboot, "NVENC2 error"};
    case 71:
      return {Verdict::kReboot, "hardware failure (HyperPod's NvidiaErrorReboot)"};
    // hpod's choices: memory that lost data or a GPU gone from the bus needs new
    // hardware; a contained ECC error is cleared by a GPU reset (a reboot).
    case 48:
      return {Verdict::kReplace, "double-bit ECC error"};
    case 79:
      return {Verdict::kReplace, "GPU has fallen off the bus"};
    case 95:
      return {Verdict::kReplace, "uncontained ECC error"};
    case 94:
      return {Verdict::kReboot, "contained ECC error"};
    // Application errors (a bad kernel, a page fault, a killed process): the
    // job's fault, not the node's.
    case 13:
      return {Verdict::kHealthy, "graphics engine exception", true};
    case 31:
      return {Verdict::kHealthy, "GPU memory page fault", true};
    case 43:
      return {Verdict::kHealthy, "GPU stopped processing", true};
    case 45:
      return {Verdict::kHealthy, "preemptive cleanup", true};
    default:
      // An Xid we do not know: a reboot resets the GPU and costs little.
      return {Verdict::kReboot, "unlisted Xid"};
  }
}

std::optional<XidEvent> ParseXidLine(std::string_view line) {
  constexpr std::string_view kMarker = "NVRM: Xid (";
  size_t at = line.find(kMarker);
  if (at == std::string_view::npos) return std::nullopt;
  size_t open = at + kMarker.size();
  size_t close = line.find("):", open);
  if (close == std::string_view::npos) return std::nullopt;
  std::string_view rest = line.substr(close + 2);
  while (!rest.empty() && rest.front() == ' ') rest.remove_prefix(1);
  int xid = 0;
  auto [end, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), xid);
  if (ec != std::errc() || end == rest.data()) return std::nullopt;
  return XidEvent{xid, std::string(line.substr(open, close - open))};
}

void XidLedger::Add(const XidEvent& e) {
  if (JudgeXid(e.xid).ignored) return;
  for (const auto& s : seen_) {
    if (s.xid == e.xid && s.where == e.where) return;
  }
  seen_.push_back(e);
}

Outcome XidLedger::Judge() const {
  if (seen_.empty()) return Outcome::Ok();
  Verdict worst = Verdict::kHealthy;
  std::string reason;
  for (size_t i = 0; i < seen_.size(); ++i) {
    XidJudgement j = JudgeXid(seen_[i].xid);
    if (j.verdict > worst) worst = j.verdict;
    if (i < 4) {
      reason += (i ? "; " : "") + std::string("Xid ") + std::to_string(seen_[i].xid) + " on " +
                seen_[i].where + " (" + std::string(j.meaning) + ")";
    }
  }
  if (seen_.size() > 4) reason += "; and " + std::to_string(seen_.size() - 4) + " more";
  return Outcome::Fail(worst, reason);
}

}  // namespace hpod::agent::health
