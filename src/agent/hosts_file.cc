#include "hpod/agent/hosts_file.h"

#include <fstream>
#include <sstream>

#include "hpod/base/file_util.h"

namespace hpod::agent {
namespace {

constexpr char kBegin[] = "# BEGIN hpod cluster nodes (hpod-agent keeps this block; edits are lost)";
constexpr char kEnd[] = "# END hpod cluster nodes";

}  // namespace

std::string WithHostsBlock(const std::string& text,
                           const std::map<std::string, std::string>& hosts) {
  std::istringstream in(text);
  std::string out, line;
  bool inside = false;
  while (std::getline(in, line)) {
    if (line == kBegin) {
      inside = true;
      continue;
    }
    if (inside) {
      if (line == kEnd) inside = false;
      continue;
    }
    out += line + "\n";
  }
  if (hosts.empty()) return out;
  out += std::string(kBegin) + "\n";
  for (const auto& [name, addr] : hosts) out += addr + " " + name + "\n";
  out += std::string(kEnd) + "\n";
  return out;
}

Status WriteHostsBlock(const std::string& path, const std::map<std::string, std::string>& hosts) {
  auto text = ReadFile(path);
  if (!text.ok() && text.status().code() != StatusCode::kNotFound) return text.status();
  const std::string before = text.ok() ? *text : "";
  const std::string after = WithHostsBlock(before, hosts);
  if (after == before) return OkStatus();
  std::ofstream f(path, std::ios::trunc);
  f << after;
  f.close();
  if (!f) return InternalError("cannot write " + path);
  return OkStatus();
}

}  // namespace hpod::agent
