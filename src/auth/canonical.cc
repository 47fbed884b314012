#include "hpod/auth/canonical.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>

#include "hpod/base/crypto.h"

namespace hpod::auth::internal {
namespace {

bool IsUnreserved(unsigned char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '_' || c == '.' || c == '~';
}

// Python's str.split() whitespace within ASCII, so that values trim exactly as
// botocore trims them.
bool IsSpace(unsigned char c) {
  return c == ' ' || (c >= '\t' && c <= '\r') || (c >= 0x1c && c <= 0x1f);
}

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    char x = a[i], y = b[i];
    if (x >= 'A' && x <= 'Z') x = static_cast<char>(x - 'A' + 'a');
    if (y >= 'A' && y <= 'Z') y = static_cast<char>(y - 'A' + 'a');
    if (x != y) return false;
  }
  return true;
}

// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's algorithm).
int64_t DaysFromCivil(int64_t y, int64_t m, int64_t d) {
  y -= m <= 2;
  const int64_t era = (y >= 0 ? y : y - 399) / 400;
  const int64_t yoe = y - era * 400;
  const int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + doe - 719468;
}

struct Civil {
  int64_t year;
  int month;
  int day;
};

Civil CivilFromDays(int64_t z) {
  z += 719468;
  const int64_t era = (z >= 0 ? z : z - 146096) / 146097;
  const int64_t doe = z - era * 146097;
  const int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  const int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  const int64_t mp = (5 * doy + 2) / 153;
  const int d = static_cast<int>(doy - (153 * mp + 2) / 5 + 1);
  const int m = static_cast<int>(mp < 10 ? mp + 3 : mp - 9);
  return {yoe + era * 400 + (m <= 2), m, d};
}

int DaysInMonth(int64_t year, int month) {
  static constexpr int kDays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  const bool leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
  return month == 2 && leap ? 29 : kDays[month - 1];
}

}  // namespace

std::string UriEncode(std::string_view text, bool keep_slash) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(text.size());
  for (unsigned char c : text) {
    if (IsUnreserved(c) || (keep_slash && c == '/')) {
      out.push_back(static_cast<char>(c));
    } else {
      out.push_back('%');
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 15]);
    }
  }
  return out;
}

std::string PercentDecode(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '%' && i + 2 < text.size()) {
      const int hi = HexDigit(text[i + 1]), lo = HexDigit(text[i + 2]);
      if (hi >= 0 && lo >= 0) {
        out.push_back(static_cast<char>(hi << 4 | lo));
        i += 2;
        continue;
      }
    }
    out.push_back(text[i]);
  }
  return out;
}

std::string ToLower(std::string_view text) {
  std::string out(text);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

std::string TrimAll(std::string_view value) {
  std::string out;
  out.reserve(value.size());
  bool pending_space = false;
  for (unsigned char c : value) {
    if (IsSpace(c)) {
      pending_space = !out.empty();
      continue;
    }
    if (pending_space) out.push_back(' ');
    pending_space = false;
    out.push_back(static_cast<char>(c));
  }
  return out;
}

std::pair<std::string_view, std::string_view> SplitTarget(std::string_view target) {
  const size_t q = target.find('?');
  if (q == std::string_view::npos) return {target, {}};
  return {target.substr(0, q), target.substr(q + 1)};
}

std::string CanonicalPath(std::string_view raw_path) {
  if (raw_path.empty()) return "/";
  // RFC 3986 remove_dot_segments, plus dropping empty segments: AWS services
  // other than S3 treat "//a//b" as "/a/b" (botocore's remove_dot_segments).
  std::vector<std::string_view> segments;
  size_t start = 0;
  while (start <= raw_path.size()) {
    size_t end = raw_path.find('/', start);
    if (end == std::string_view::npos) end = raw_path.size();
    std::string_view segment = raw_path.substr(start, end - start);
    if (segment == "..") {
      if (!segments.empty()) segments.pop_back();
    } else if (!segment.empty() && segment != ".") {
      segments.push_back(segment);
    }
    start = end + 1;
  }
  std::string path;
  if (raw_path.front() == '/') path.push_back('/');
  for (size_t i = 0; i < segments.size(); ++i) {
    if (i > 0) path.push_back('/');
    path.append(segments[i]);
  }
  if (raw_path.back() == '/' && !segments.empty()) path.push_back('/');
  return UriEncode(path, /*keep_slash=*/true);
}

std::vector<QueryParam> ParseQuery(std::string_view raw_query) {
  std::vector<QueryParam> params;
  size_t start = 0;
  while (start <= raw_query.size()) {
    size_t end = raw_query.find('&', start);
    if (end == std::string_view::npos) end = raw_query.size();
    std::string_view piece = raw_query.substr(start, end - start);
    if (!piece.empty()) {
      const size_t eq = piece.find('=');
      if (eq == std::string_view::npos) {
        params.push_back({PercentDecode(piece), ""});
      } else {
        params.push_back({PercentDecode(piece.substr(0, eq)), PercentDecode(piece.substr(eq + 1))});
      }
    }
    start = end + 1;
  }
  return params;
}

std::string CanonicalQuery(const std::vector<QueryParam>& params, std::string_view exclude_key) {
  std::vector<std::pair<std::string, std::string>> encoded;
  encoded.reserve(params.size());
  for (const QueryParam& p : params) {
    if (!exclude_key.empty() && p.key == exclude_key) continue;
    encoded.emplace_back(UriEncode(p.key, false), UriEncode(p.value, false));
  }
  // Sorted by encoded key, then encoded value, byte-wise.
  std::sort(encoded.begin(), encoded.end());
  std::string out;
  for (const auto& [key, value] : encoded) {
    if (!out.empty()) out.push_back('&');
    out.append(key).append("=").append(value);
  }
  return out;
}

std::vector<std::string_view> HeaderValues(const HeaderList& headers,
                                           std::string_view lowercase_name) {
  std::vector<std::string_view> values;
  for (const auto& [name, value] : headers) {
    if (EqualsIgnoreCase(name, lowercase_name)) values.push_back(value);
  }
  return values;
}

std::string CanonicalHeaders(const HeaderList& headers,
                             const std::vector<std::string>& signed_names) {
  std::string out;
  for (const std::string& name : signed_names) {
    out.append(name).push_back(':');
    bool first = true;
    for (std::string_view value : HeaderValues(headers, name)) {
      if (!first) out.push_back(',');
      out.append(TrimAll(value));
      first = false;
    }
    out.push_back('\n');
  }
  return out;
}

std::string JoinSignedHeaders(const std::vector<std::string>& signed_names) {
  std::string out;
  for (const std::string& name : signed_names) {
    if (!out.empty()) out.push_back(';');
    out.append(name);
  }
  return out;
}

std::string CanonicalRequest(std::string_view method, std::string_view canonical_path,
                             std::string_view canonical_query, const HeaderList& headers,
                             const std::vector<std::string>& signed_names,
                             std::string_view payload_hash) {
  std::string out;
  out.append(method).push_back('\n');
  out.append(canonical_path).push_back('\n');
  out.append(canonical_query).push_back('\n');
  out.append(CanonicalHeaders(headers, signed_names)).push_back('\n');
  out.append(JoinSignedHeaders(signed_names)).push_back('\n');
  out.append(payload_hash);
  return out;
}

std::string CredentialScope(std::string_view date, std::string_view region,
                            std::string_view service) {
  std::string out;
  out.append(date).append("/").append(region).append("/").append(service).append("/");
  out.append(kTerminator);
  return out;
}

std::string StringToSign(std::string_view amz_date, std::string_view scope,
                         std::string_view canonical_request) {
  std::string out(kAlgorithm);
  out.append("\n").append(amz_date).append("\n").append(scope).append("\n");
  out.append(HexEncode(Sha256(canonical_request)));
  return out;
}

std::string SigningKey(std::string_view secret, std::string_view date, std::string_view region,
                       std::string_view service) {
  const std::string k_date = HmacSha256(std::string("AWS4").append(secret), date);
  const std::string k_region = HmacSha256(k_date, region);
  const std::string k_service = HmacSha256(k_region, service);
  return HmacSha256(k_service, kTerminator);
}

std::string Signature(std::string_view secret, std::string_view date, std::string_view region,
                      std::string_view service, std::string_view string_to_sign) {
  return HexEncode(HmacSha256(SigningKey(secret, date, region, service), string_to_sign));
}

std::string FormatAmzDate(int64_t epoch_seconds) {
  // Floor division, so instants before 1970 land on the right day.
  int64_t days = epoch_seconds / 86400;
  int64_t rest = epoch_seconds % 86400;
  if (rest < 0) {
    rest += 86400;
    days -= 1;
  }
  const Civil civil = CivilFromDays(days);
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%04" PRId64 "%02d%02dT%02d%02d%02dZ", civil.year, civil.month,
                civil.day, static_cast<int>(rest / 3600), static_cast<int>(rest / 60 % 60),
                static_cast<int>(rest % 60));
  return buf;
}

std::optional<int64_t> ParseAmzDate(std::string_view text) {
  if (text.size() != 16 || text[8] != 'T' || text[15] != 'Z') return std::nullopt;
  auto number = [&](size_t pos, size_t len) -> int64_t {
    int64_t v = 0;
    for (size_t i = pos; i < pos + len; ++i) {
      if (text[i] < '0' || text[i] > '9') return -1;
      v = v * 10 + (text[i] - '0');
    }
    return v;
  };
  const int64_t year = number(0, 4), month = number(4, 2), day = number(6, 2);
  const int64_t hour = number(9, 2), minute = number(11, 2), second = number(13, 2);
  if (year < 0 || month < 1 || month > 12 || day < 1 || hour < 0 || hour > 23 || minute < 0 ||
      minute > 59 || second < 0 || second > 59) {
    return std::nullopt;
  }
  if (day > DaysInMonth(year, static_cast<int>(month))) return std::nullopt;
  return DaysFromCivil(year, month, day) * 86400 + hour * 3600 + minute * 60 + second;
}

}  // namespace hpod::auth::internal
