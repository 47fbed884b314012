#pragma once

// IPv4 addresses and blocks as the local provider uses them: node addresses,
// the node block, and the host routes that must not overlap it.
//
// Thread contract: pure functions.

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace hpod::provider::local {

std::optional<uint32_t> ParseIpv4(const std::string& s);
std::string FormatIpv4(uint32_t a);
// "10.77.0.0/16" -> (address, prefix); nullopt if malformed or host bits are set.
std::optional<std::pair<uint32_t, int>> ParseCidr(const std::string& s);
// Routes (as `ip -4 route show` prints them) that overlap the block, other than
// our own guard and bridge routes. `link_prefix` identifies our bridges.
std::vector<std::string> OverlappingRoutes(const std::vector<std::string>& routes, uint32_t block,
                                           int prefix, const std::string& link_prefix);

}  // namespace hpod::provider::local
