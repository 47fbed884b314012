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

HostName SplitHostName(std::string_view host) {
  std::size_t digits = 0;
  while (digits < host.size() && host[host.size() - 1 - digits] >= '0' &&
         host[host.size() - 1 - digits] <= '9') {
    ++digits;
  }
  HostName out;
  out.prefix = host;
  // A name without a prefix would be a bare "[1-3]", and more than nine digits
  // could overflow; neither occurs in real host names, so they stay whole.
  if (digits == 0 || digits == host.size() || digits > 9) return out;
  std::string_view number = host.substr(host.size() - digits);
  out.prefix = host.substr(0, host.size() - digits);
  std::from_chars(number.data(), number.data() + number.size(), out.number);
  // "007" expands back only from a range whose lower bound has three digits.
  if (digits > 1 && number[0] == '0') out.width = static_cast<int>(digits);
  return out;
}

bool HostCanFollow(const HostName& last, const HostName& next) {
  return last.number >= 0 && next.number > last.number && last.width == next.width &&
         last.prefix == next.prefix;
}

bool HostNameLess(std::string_view a, std::string_view b) {
  // Names as sequences of digit runs and other characters; runs compare as
  // numbers. Every run starts with a digit, so a run sorts between the
  // characters below '0' and those above '9': the order stays transitive.
  auto digit = [](char c) { return c >= '0' && c <= '9'; };
  std::size_t i = 0;
  std::size_t j = 0;
  while (i < a.size() && j < b.size()) {
    if (!digit(a[i]) || !digit(b[j])) {
      if (a[i] != b[j]) return a[i] < b[j];
      ++i;
      ++j;
      continue;
    }
    std::size_t i_end = i;
    std::size_t j_end = j;
    while (i_end < a.size() && digit(a[i_end])) ++i_end;
    while (j_end < b.size() && digit(b[j_end])) ++j_end;
    while (i + 1 < i_end && a[i] == '0') ++i;  // leading zeros
    while (j + 1 < j_end && b[j] == '0') ++j;
    std::string_view x = a.substr(i, i_end - i);
    std::string_view y = b.substr(j, j_end - j);
    if (x.size() != y.size()) return x.size() < y.size();
    if (x != y) return x < y;
    i = i_end;
    j = j_end;
  }
  if (a.size() - i != b.size() - j) return a.size() - i < b.size() - j;
  // Equal but for padding ("n1", "n01"): the text decides, so that only equal
  // names are equivalent.
  return a < b;
}

std::string CompressHostlist(const std::vector<std::string>& hosts) {
  std::string out;
  std::size_t i = 0;
  while (i < hosts.size()) {
    if (!out.empty()) out += ',';
    // hosts[i, end) is one item.
    std::vector<HostName> item = {SplitHostName(hosts[i])};
    std::size_t end = i + 1;
    for (; end < hosts.size(); ++end) {
      HostName next = SplitHostName(hosts[end]);
      if (!HostCanFollow(item.back(), next)) break;
      item.push_back(next);
    }
    if (item.size() == 1) {
      out += hosts[i];
      i = end;
      continue;
    }
    out += item[0].prefix;
    out += '[';
    // Each bound is written with the host's own digits, so a padded range keeps
    // the width of its lower bound, which is what Slurm expands with.
    const std::size_t digits_at = item[0].prefix.size();
    for (std::size_t k = 0; k < item.size();) {
      std::size_t last = k;
      while (last + 1 < item.size() && item[last + 1].number == item[last].number + 1 &&
             item[last + 1].number - item[k].number < kMaxHostRange) {
        ++last;
      }
      if (k > 0) out += ',';
      out.append(hosts[i + k], digits_at);
      if (last > k) {
        out += '-';
        out.append(hosts[i + last], digits_at);
      }
      k = last + 1;
    }
    out += ']';
    i = end;
  }
  return out;
}

}  // namespace hpod
