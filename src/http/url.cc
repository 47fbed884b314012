// ParseUrl and Url::HostHeader (declared in client.h). Hand-written because
// Boost.URL exists only for Boost 1.81, which conflicts with the 1.74 we use.

#include <charconv>
#include <string>
#include <string_view>

#include "hpod/http/client.h"

namespace hpod::http {
namespace {

int DefaultPort(std::string_view scheme) { return scheme == "https" ? 443 : 80; }

bool StartsWithIgnoreCase(std::string_view s, std::string_view prefix) {
  if (s.size() < prefix.size()) return false;
  for (size_t i = 0; i < prefix.size(); ++i) {
    char c = s[i];
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    if (c != prefix[i]) return false;
  }
  return true;
}

Status Invalid(std::string_view url, std::string_view why) {
  return InvalidArgumentError("Invalid endpoint: " + std::string(url) + " (" + std::string(why) +
                              ")");
}

}  // namespace

std::string Url::HostHeader() const {
  if (port == DefaultPort(scheme)) return host;
  return host + ":" + std::to_string(port);
}

StatusOr<Url> ParseUrl(std::string_view url) {
  for (char c : url) {
    // Control characters and spaces would be sent verbatim on the request line.
    if (static_cast<unsigned char>(c) <= 0x20 || c == 0x7f) {
      return Invalid(url, "contains whitespace or control characters");
    }
  }
  Url out;
  std::string_view rest;
  if (StartsWithIgnoreCase(url, "http://")) {
    out.scheme = "http";
    rest = url.substr(7);
  } else if (StartsWithIgnoreCase(url, "https://")) {
    out.scheme = "https";
    rest = url.substr(8);
  } else {
    return Invalid(url, "scheme must be http or https");
  }

  size_t authority_end = rest.find_first_of("/?#");
  std::string_view authority = rest.substr(0, authority_end);
  std::string_view tail =
      authority_end == std::string_view::npos ? std::string_view() : rest.substr(authority_end);
  if (authority.find('@') != std::string_view::npos) {
    // Credentials travel in headers (SigV4), never in the URL.
    return Invalid(url, "user information is not supported");
  }

  std::string_view port_text;
  bool has_port = false;
  if (!authority.empty() && authority.front() == '[') {
    size_t close = authority.find(']');
    if (close == std::string_view::npos || close == 1) return Invalid(url, "bad IPv6 literal");
    out.host = std::string(authority.substr(0, close + 1));
    std::string_view after = authority.substr(close + 1);
    if (!after.empty()) {
      if (after.front() != ':') return Invalid(url, "unexpected text after IPv6 literal");
      has_port = true;
      port_text = after.substr(1);
    }
  } else {
    size_t colon = authority.find(':');
    out.host = std::string(authority.substr(0, colon));
    if (colon != std::string_view::npos) {
      has_port = true;
      port_text = authority.substr(colon + 1);
    }
  }
  if (out.host.empty()) return Invalid(url, "missing host");

  out.port = DefaultPort(out.scheme);
  // RFC 3986 allows an empty port ("host:"), meaning the scheme's default.
  if (has_port && !port_text.empty()) {
    int port = 0;
    auto [end, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
    if (ec != std::errc() || end != port_text.data() + port_text.size() || port < 1 ||
        port > 65535) {
      return Invalid(url, "bad port");
    }
    out.port = port;
  }

  // The fragment is client-side only and never sent.
  tail = tail.substr(0, tail.find('#'));
  if (tail.empty()) {
    out.target = "/";
  } else if (tail.front() == '?') {
    out.target = "/" + std::string(tail);
  } else {
    out.target = std::string(tail);
  }
  return out;
}

}  // namespace hpod::http
