#include "hpod/provider/local/ipv4.h"

#include <algorithm>
#include <set>
#include <sstream>

namespace hpod::provider::local {

std::optional<uint32_t> ParseIpv4(const std::string& s) {
  uint32_t out = 0;
  int parts = 0;
  size_t i = 0;
  while (true) {
    size_t j = s.find('.', i);
    std::string part = s.substr(i, j == std::string::npos ? std::string::npos : j - i);
    if (part.empty() || part.size() > 3 ||
        !std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      return std::nullopt;
    }
    int v = std::stoi(part);
    if (v > 255 || ++parts > 4) return std::nullopt;
    out = (out << 8) | static_cast<uint32_t>(v);
    if (j == std::string::npos) break;
    i = j + 1;
  }
  if (parts != 4) return std::nullopt;
  return out;
}

std::string FormatIpv4(uint32_t a) {
  return std::to_string(a >> 24) + "." + std::to_string((a >> 16) & 255) + "." +
         std::to_string((a >> 8) & 255) + "." + std::to_string(a & 255);
}

std::optional<std::pair<uint32_t, int>> ParseCidr(const std::string& s) {
  size_t slash = s.find('/');
  std::string addr = s.substr(0, slash);
  int prefix = 32;
  if (slash != std::string::npos) {
    std::string p = s.substr(slash + 1);
    if (p.empty() || p.size() > 2 || !std::all_of(p.begin(), p.end(), ::isdigit)) {
      return std::nullopt;
    }
    prefix = std::stoi(p);
    if (prefix > 32) return std::nullopt;
  }
  auto a = ParseIpv4(addr);
  if (!a) return std::nullopt;
  uint32_t mask = prefix == 0 ? 0 : ~uint32_t{0} << (32 - prefix);
  if ((*a & ~mask) != 0) return std::nullopt;
  return std::make_pair(*a, prefix);
}

std::vector<std::string> OverlappingRoutes(const std::vector<std::string>& routes, uint32_t block,
                                           int prefix, const std::string& link_prefix) {
  static const std::set<std::string> kTypes = {"unicast", "unreachable", "blackhole", "prohibit",
                                               "throw",   "local",       "broadcast", "multicast",
                                               "nat",     "anycast"};
  auto range = [](uint32_t a, int p) {
    uint64_t size = uint64_t{1} << (32 - p);
    return std::make_pair(uint64_t{a}, uint64_t{a} + size - 1);
  };
  auto [lo, hi] = range(block, prefix);
  std::vector<std::string> out;
  for (const auto& line : routes) {
    std::istringstream in(line);
    std::vector<std::string> tok;
    for (std::string t; in >> t;) tok.push_back(t);
    if (tok.empty()) continue;
    std::string type = "unicast";
    size_t i = 0;
    if (kTypes.count(tok[0])) type = tok[i++];
    if (i >= tok.size() || tok[i] == "default") continue;
    // Host routes may be printed without /32; a non-canonical prefix is masked.
    std::string dst = tok[i];
    size_t slash = dst.find('/');
    auto a = ParseIpv4(dst.substr(0, slash));
    if (!a) continue;
    int p = slash == std::string::npos ? 32 : std::stoi(dst.substr(slash + 1));
    uint32_t mask = p == 0 ? 0 : ~uint32_t{0} << (32 - p);
    auto [rlo, rhi] = range(*a & mask, p);
    if (rhi < lo || rlo > hi) continue;
    std::string dev;
    for (size_t k = i; k + 1 < tok.size(); ++k) {
      if (tok[k] == "dev") dev = tok[k + 1];
    }
    // Ours: the guard itself, and our bridges' connected /24s inside the block.
    if (type == "unreachable" && (*a & mask) == block && p == prefix) continue;
    if (dev.rfind(link_prefix + "br", 0) == 0 && rlo >= lo && rhi <= hi) continue;
    std::string shown = tok[i];
    if (!dev.empty()) shown += " dev " + dev;
    if (type != "unicast") shown = type + " " + shown;
    out.push_back(shown);
  }
  return out;
}

}  // namespace hpod::provider::local
