#include "hpod/base/duration.h"

#include <algorithm>
#include <charconv>
#include <optional>
#include <utility>

namespace hpod {
namespace {

// Digits only (the caller has checked), or nullopt past int64.
std::optional<int64_t> ParseDigits(std::string_view s) {
  int64_t v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
  return v;
}

}  // namespace

std::string FormatDuration(int64_t seconds) {
  for (const auto& [unit, size] : {std::pair<char, int64_t>{'d', 86400}, {'h', 3600}, {'m', 60}}) {
    if (seconds > 0 && seconds % size == 0) return std::to_string(seconds / size) + unit;
  }
  return std::to_string(seconds) + "s";
}

StatusOr<int64_t> ParseDurationSeconds(std::string_view option, std::string_view value,
                                       int64_t min_s, int64_t max_s) {
  const std::string quoted = "\"" + std::string(value) + "\"";
  const std::string prefix = std::string(option) + ": " + quoted;
  auto not_a_duration = [&] {
    return InvalidArgumentError(prefix + " is not a duration; use e.g. 90s, 30m, 1h or 7d");
  };
  auto too_long = [&] {
    return InvalidArgumentError(prefix + " is too long; use at most " + FormatDuration(max_s) +
                                " (" + std::to_string(max_s) + "s)");
  };
  // Plain seconds, or one or more <digits><unit> parts ("1h30m").
  const bool plain = !value.empty() && std::all_of(value.begin(), value.end(),
                                                   [](char c) { return c >= '0' && c <= '9'; });
  int64_t total = 0;
  size_t i = 0;
  while (i < value.size()) {
    size_t start = i;
    while (i < value.size() && value[i] >= '0' && value[i] <= '9') ++i;
    if (i == start) return not_a_duration();
    int64_t unit = 1;
    if (!plain) {
      if (i == value.size()) return not_a_duration();  // "1h30": the last part has no unit
      switch (value[i++]) {
        case 's':
          unit = 1;
          break;
        case 'm':
          unit = 60;
          break;
        case 'h':
          unit = 3600;
          break;
        case 'd':
          unit = 86400;
          break;
        default:
          return not_a_duration();
      }
    }
    std::optional<int64_t> n = ParseDigits(value.substr(start, (plain ? i : i - 1) - start));
    // Past max_s already (or past int64): no need to add up the rest.
    if (!n.has_value() || *n > max_s / unit || total > max_s - *n * unit) return too_long();
    total += *n * unit;
  }
  if (value.empty()) return not_a_duration();
  if (total < min_s) {
    return InvalidArgumentError(prefix + " is too short; use at least " + FormatDuration(min_s));
  }
  return total;
}

}  // namespace hpod
