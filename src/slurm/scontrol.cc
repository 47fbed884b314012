#include "hpod/slurm/scontrol.h"

#include <time.h>

#include <algorithm>
#include <ctime>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace hpod::slurm {
namespace {

using nlohmann::json;

bool IsUpper(char c) { return c >= 'A' && c <= 'Z'; }
bool IsKeyChar(char c) {
  return IsUpper(c) || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
}

// True when a `Key=` starts at `i`: an upper-case letter, then letters, digits or
// '_', then '='. Values such as OS= ("Linux 6.1 #1 SMP PREEMPT_DYNAMIC") contain
// spaces but no such word, so key boundaries are found without a list of keys,
// which changes between Slurm versions.
bool KeyAt(std::string_view line, size_t i) {
  if (i >= line.size() || !IsUpper(line[i])) return false;
  size_t j = i + 1;
  while (j < line.size() && IsKeyChar(line[j])) ++j;
  return j < line.size() && line[j] == '=';
}

// Start of the next key at or after `from` (npos at the end).
size_t NextKey(std::string_view line, size_t from) {
  for (size_t i = std::max<size_t>(from, 1); i < line.size(); ++i) {
    if (line[i - 1] == ' ' && KeyAt(line, i)) return i;
  }
  return std::string_view::npos;
}

// Reason= is the free-text field: slurmctld appends " [user@time]" to it. When
// that suffix is there it marks the end of the reason exactly, even if the text
// itself looks like "Key=value". Returns {end of reason text, end of suffix}, or
// {npos, npos} without a suffix.
std::pair<size_t, size_t> ReasonSuffix(std::string_view line, size_t from) {
  for (size_t open = line.find(" [", from); open != std::string_view::npos;
       open = line.find(" [", open + 1)) {
    size_t close = line.find(']', open + 2);
    if (close == std::string_view::npos) break;
    std::string_view inside = line.substr(open + 2, close - open - 2);
    bool followed_ok = close + 1 == line.size() || line[close + 1] == ' ';
    if (followed_ok && inside.find('@') != std::string_view::npos &&
        inside.find(' ') == std::string_view::npos) {
      return {open, close + 1};
    }
  }
  return {std::string_view::npos, std::string_view::npos};
}

std::string_view TrimRight(std::string_view s) {
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) {
    s.remove_suffix(1);
  }
  return s;
}

std::string_view TrimLeft(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  return s;
}

SlurmNodeState ParseLine(std::string_view line) {
  SlurmNodeState node;
  size_t pos = 0;
  while (pos < line.size()) {
    size_t eq = line.find('=', pos);
    if (eq == std::string_view::npos) break;
    std::string_view key = line.substr(pos, eq - pos);
    size_t value_start = eq + 1;
    size_t value_end;
    size_t next;
    auto [reason_end, suffix_end] = key == "Reason"
                                        ? ReasonSuffix(line, value_start)
                                        : std::pair{std::string_view::npos, std::string_view::npos};
    if (reason_end != std::string_view::npos) {
      value_end = reason_end;
      next = NextKey(line, suffix_end);
    } else {
      next = NextKey(line, value_start);
      value_end = next == std::string_view::npos ? line.size() : next;
    }
    std::string value(TrimRight(line.substr(value_start, value_end - value_start)));
    if (key == "NodeName") {
      node.name = std::move(value);
    } else if (key == "State") {
      node.state = std::move(value);
    } else if (key == "Reason") {
      node.reason = std::move(value);
    } else if (key == "SlurmdStartTime") {
      node.slurmd_start_time = std::move(value);
    }
    pos = next;
  }
  return node;
}

// "IDLE+DRAIN" → {"IDLE", "DRAIN"}; a trailing '*' (older scontrol's mark for
// "not responding") is kept for the caller to see.
std::vector<std::string_view> StateParts(std::string_view state) {
  std::vector<std::string_view> parts;
  while (!state.empty()) {
    size_t plus = state.find('+');
    parts.push_back(state.substr(0, plus));
    if (plus == std::string_view::npos) break;
    state.remove_prefix(plus + 1);
  }
  return parts;
}

std::string StringOr(const json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

}  // namespace

bool SlurmNodeState::Registered() const {
  if (state.empty()) return false;
  for (std::string_view part : StateParts(state)) {
    if (!part.empty() && part.back() == '*') return false;
    if (part == "DOWN" || part == "UNKNOWN" || part == "FUTURE" || part == "NOT_RESPONDING" ||
        part == "NO_RESPOND" || part == "POWERED_DOWN" || part == "POWERING_UP") {
      return false;
    }
  }
  return true;
}

bool SlurmNodeState::Drained() const {
  for (std::string_view part : StateParts(state)) {
    while (!part.empty() && part.back() == '*') part.remove_suffix(1);
    if (part == "DRAIN" || part == "DRAINING" || part == "DRAINED" || part == "FAIL" ||
        part == "FAILING") {
      return true;
    }
  }
  return false;
}

double SlurmTimeEpoch(const std::string& printed) {
  std::tm tm{};
  if (::strptime(printed.c_str(), "%Y-%m-%dT%H:%M:%S", &tm) == nullptr) return 0;
  tm.tm_isdst = -1;
  std::time_t t = std::mktime(&tm);
  return t < 0 ? 0 : static_cast<double>(t);
}

double SlurmNodeState::SlurmdStartEpoch() const { return SlurmTimeEpoch(slurmd_start_time); }

json SlurmNodeState::ToJson() const {
  return json{{"name", name},
              {"state", state},
              {"reason", reason},
              {"slurmd_start_time", slurmd_start_time}};
}

SlurmNodeState SlurmNodeState::FromJson(const json& j) {
  SlurmNodeState node;
  if (!j.is_object()) return node;
  node.name = StringOr(j, "name");
  node.state = StringOr(j, "state");
  node.reason = StringOr(j, "reason");
  node.slurmd_start_time = StringOr(j, "slurmd_start_time");
  return node;
}

std::vector<SlurmNodeState> ParseShowNodes(std::string_view output) {
  std::vector<SlurmNodeState> nodes;
  while (!output.empty()) {
    size_t nl = output.find('\n');
    std::string_view line = output.substr(0, nl);
    output.remove_prefix(nl == std::string_view::npos ? output.size() : nl + 1);
    line = TrimRight(TrimLeft(line));
    if (line.rfind("NodeName=", 0) != 0) continue;
    nodes.push_back(ParseLine(line));
  }
  return nodes;
}

}  // namespace hpod::slurm
