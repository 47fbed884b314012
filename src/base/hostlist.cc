#include "hpod/base/hostlist.h"

#include <charconv>
#include <cstdio>

namespace hpod {
namespace {

Status Bad(std::string_view item, std::string_view why) {
  return InvalidArgumentError("host list item '" + std::string(item) + "': " + std::string(why));
}

bool AllDigits(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
  }
  return true;
}

// The numbers of one bracket group ("11-13,15"), formatted with their width.
StatusOr<std::vector<std::string>> ExpandGroup(std::string_view item, std::string_view group) {
  std::vector<std::string> out;
  std::size_t pos = 0;
  while (pos <= group.size()) {
    std::size_t comma = group.find(',', pos);
    if (comma == std::string_view::npos) comma = group.size();
    std::string_view part = group.substr(pos, comma - pos);
    std::size_t dash = part.find('-');
    std::string_view lo = part.substr(0, dash);
    std::string_view hi = dash == std::string_view::npos ? lo : part.substr(dash + 1);
    if (!AllDigits(lo) || !AllDigits(hi)) {
      return Bad(item, "expected numbers or ranges in brackets, got '" + std::string(part) + "'");
    }
    // Nine digits fit a long and are far beyond any real host index; a longer
    // number is a mistake, not a range to enumerate.
    if (lo.size() > 9 || hi.size() > 9) return Bad(item, "number too long in brackets");
    long a = 0;
    long b = 0;
    std::from_chars(lo.data(), lo.data() + lo.size(), a);
    std::from_chars(hi.data(), hi.data() + hi.size(), b);
    if (b < a) return Bad(item, "range " + std::string(part) + " runs backwards");
    if (static_cast<std::size_t>(b - a) >= kMaxHosts) return Bad(item, "range too large");
    const int width = static_cast<int>(lo.size());
    for (long n = a; n <= b; ++n) {
      char buf[32];
      std::snprintf(buf, sizeof(buf), "%0*ld", width, n);
      out.emplace_back(buf);
    }
    if (out.size() > kMaxHosts) return Bad(item, "more than 100000 hosts");
    pos = comma + 1;
  }
  return out;
}

// Appends the names of one item ("ip-10-77-0-[11-13,15]") to `out`.
Status ExpandItem(std::string_view item, std::vector<std::string>& out) {
  if (item.empty()) return Bad(item, "empty name");
  std::vector<std::string> names = {""};
  std::size_t pos = 0;
  while (pos < item.size()) {
    std::size_t open = item.find('[', pos);
    std::size_t close_before = item.find(']', pos);
    if (close_before != std::string_view::npos &&
        (open == std::string_view::npos || close_before < open)) {
      return Bad(item, "']' without '['");
    }
    std::string_view text =
        item.substr(pos, open == std::string_view::npos ? item.npos : open - pos);
    for (auto& n : names) n.append(text);
    if (open == std::string_view::npos) break;
    std::size_t close = item.find(']', open);
    if (close == std::string_view::npos) return Bad(item, "'[' without ']'");
    std::string_view group = item.substr(open + 1, close - open - 1);
    if (group.find('[') != std::string_view::npos) return Bad(item, "nested '['");
    HPOD_ASSIGN_OR_RETURN(std::vector<std::string> suffixes, ExpandGroup(item, group));
    if (names.size() * suffixes.size() > kMaxHosts) return Bad(item, "more than 100000 hosts");
    std::vector<std::string> next;
    next.reserve(names.size() * suffixes.size());
    for (const auto& n : names) {
      for (const auto& s : suffixes) next.push_back(n + s);
    }
    names = std::move(next);
    pos = close + 1;
  }
  if (out.size() + names.size() > kMaxHosts) return Bad(item, "more than 100000 hosts");
  for (auto& n : names) out.push_back(std::move(n));
  return OkStatus();
}

}  // namespace

StatusOr<std::vector<std::string>> ExpandHostlist(std::string_view hostlist) {
  std::vector<std::string> out;
  if (hostlist.empty()) return out;
  std::size_t start = 0;
  int depth = 0;
  for (std::size_t i = 0; i <= hostlist.size(); ++i) {
    const bool end = i == hostlist.size();
    if (!end && hostlist[i] == '[') ++depth;
    if (!end && hostlist[i] == ']') --depth;
    if (end || (hostlist[i] == ',' && depth == 0)) {
      HPOD_RETURN_IF_ERROR(ExpandItem(hostlist.substr(start, i - start), out));
      start = i + 1;
    }
  }
  return out;
}

}  // namespace hpod
