#include "hpod/http/message.h"

#include <cstddef>

namespace hpod::http {
namespace {

// ASCII-only folding: header names are tokens (RFC 9110 section 5.1), so locale
// rules must not apply.
char AsciiLower(char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c; }

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (AsciiLower(a[i]) != AsciiLower(b[i])) return false;
  }
  return true;
}

}  // namespace

std::string_view FindHeader(const std::vector<Header>& headers, std::string_view name) {
  for (const Header& h : headers) {
    if (EqualsIgnoreCase(h.name, name)) return h.value;
  }
  return {};
}

std::vector<std::string> HeaderList(const std::vector<Header>& headers, std::string_view name) {
  std::vector<std::string> out;
  for (const Header& h : headers) {
    if (!EqualsIgnoreCase(h.name, name)) continue;
    std::string_view rest = h.value;
    while (true) {
      size_t comma = rest.find(',');
      std::string_view item = rest.substr(0, comma);
      size_t first = item.find_first_not_of(" \t");
      if (first != std::string_view::npos) {
        item = item.substr(first, item.find_last_not_of(" \t") - first + 1);
        out.emplace_back(item);
      }
      if (comma == std::string_view::npos) break;
      rest.remove_prefix(comma + 1);
    }
  }
  return out;
}

std::string_view Request::Path() const {
  std::string_view t = target;
  return t.substr(0, t.find('?'));
}

std::string_view Request::Query() const {
  std::string_view t = target;
  size_t q = t.find('?');
  return q == std::string_view::npos ? std::string_view() : t.substr(q + 1);
}

}  // namespace hpod::http
