#include "hpod/controlplane/metrics_labels.h"

#include <algorithm>
#include <vector>

namespace hpod::controlplane {
namespace {

// hpod's agent checks (src/agent/health/, docs/node-health.md). The disk checks
// watch "/", the agent's state directory and /fsx unless the agent config's
// health_disk_paths names others, which are then "other".
constexpr std::string_view kHealthChecks[] = {"disk:/",    "disk:/fsx",  "disk:/var/lib/hpod-agent",
                                              "memory",    "slurm",      "network",
                                              "flag_file", "kernel_log", "gpu"};

// Slurm's node state names (src/common/slurm_protocol_defs.c: node_states and
// node_state_flags, 22.05 to 24.05), as node_state_string_complete writes them.
constexpr std::string_view kSlurmBaseStates[] = {"UNKNOWN", "DOWN",  "IDLE",  "ALLOCATED",
                                                 "ERROR",   "MIXED", "FUTURE"};
constexpr std::string_view kSlurmStateFlags[] = {
    "CLOUD",       "COMPLETING",     "DRAIN",         "DYNAMIC_FUTURE",   "DYNAMIC_NORM",
    "INVALID_REG", "FAIL",           "MAINTENANCE",   "POWER_DOWN",       "POWER_UP",
    "PERFCTRS",    "POWERED_DOWN",   "REBOOT_ISSUED", "REBOOT_REQUESTED", "RESERVED",
    "RESUME",      "NOT_RESPONDING", "PLANNED",       "POWERING_UP",      "POWERING_DOWN",
    "BLOCKED",     "EXTERNAL"};

template <size_t N>
bool OneOf(std::string_view s, const std::string_view (&names)[N]) {
  return std::find(std::begin(names), std::end(names), s) != std::end(names);
}

// The length of the UTF-8 sequence starting at s[i], 0 when it is not a valid
// one (overlong forms, surrogates and code points above U+10FFFF included).
size_t Utf8Length(std::string_view s, size_t i) {
  const auto b = [&](size_t k) { return static_cast<unsigned char>(s[i + k]); };
  const auto cont = [&](size_t k) { return i + k < s.size() && (b(k) & 0xC0) == 0x80; };
  const unsigned char c = b(0);
  if (c < 0x80) return 1;
  if (c >= 0xC2 && c <= 0xDF) return cont(1) ? 2 : 0;
  if (c >= 0xE0 && c <= 0xEF) {
    if (!cont(1) || !cont(2)) return 0;
    if (c == 0xE0 && b(1) < 0xA0) return 0;  // overlong
    if (c == 0xED && b(1) > 0x9F) return 0;  // surrogate
    return 3;
  }
  if (c >= 0xF0 && c <= 0xF4) {
    if (!cont(1) || !cont(2) || !cont(3)) return 0;
    if (c == 0xF0 && b(1) < 0x90) return 0;  // overlong
    if (c == 0xF4 && b(1) > 0x8F) return 0;  // above U+10FFFF
    return 4;
  }
  return 0;
}

}  // namespace

std::string BoundedLabelValue(std::string_view value) {
  std::string out;
  out.reserve(std::min(value.size(), kMaxLabelValueBytes));
  for (size_t i = 0; i < value.size();) {
    const size_t n = Utf8Length(value, i);
    const size_t take = n == 0 ? 1 : n;
    if (out.size() + take > kMaxLabelValueBytes) break;
    if (n == 0) {
      out += '?';
    } else {
      out.append(value.substr(i, n));
    }
    i += take;
  }
  return out;
}

std::string HealthCheckLabel(std::string_view check) {
  return std::string(OneOf(check, kHealthChecks) ? check : kOtherLabel);
}

std::string SlurmStateLabel(std::string_view state) {
  if (state.empty() || state.size() > kMaxLabelValueBytes) return std::string(kOtherLabel);
  bool base = true;
  for (std::string_view rest = state; true; base = false) {
    const size_t plus = rest.find('+');
    std::string_view part = rest.substr(0, plus);
    if (!part.empty() && part.back() == '*') part.remove_suffix(1);
    if (!(base ? OneOf(part, kSlurmBaseStates) : OneOf(part, kSlurmStateFlags))) {
      return std::string(kOtherLabel);
    }
    if (plus == std::string_view::npos) break;
    rest.remove_prefix(plus + 1);
  }
  return std::string(state);
}

std::map<std::string, int> CapSlurmStates(std::map<std::string, int> nodes_by_state) {
  if (nodes_by_state.size() <= kMaxSlurmStateLabels) return nodes_by_state;
  int other = 0;
  if (auto it = nodes_by_state.find(std::string(kOtherLabel)); it != nodes_by_state.end()) {
    other = it->second;
    nodes_by_state.erase(it);
  }
  std::vector<std::pair<std::string, int>> by_count(nodes_by_state.begin(), nodes_by_state.end());
  // Most nodes first; the map's order (by name) breaks ties, as stable_sort keeps it.
  std::stable_sort(by_count.begin(), by_count.end(),
                   [](const auto& a, const auto& b) { return a.second > b.second; });
  std::map<std::string, int> out;
  for (size_t i = 0; i < by_count.size(); ++i) {
    if (i + 1 < kMaxSlurmStateLabels) {
      out[by_count[i].first] = by_count[i].second;
    } else {
      other += by_count[i].second;
    }
  }
  out[std::string(kOtherLabel)] = other;
  return out;
}

}  // namespace hpod::controlplane
