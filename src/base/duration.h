#pragma once

// Durations as people type them on a command line ("90s", "30m", "6h", "7d",
// "1h30m"), for hpod's CLI (create-join-token --ttl) and hpodd's flags
// (--backup-interval): one parser, so both accept and refuse the same words.
//
// Thread contract: free functions, safe from any thread.

#include <cstdint>
#include <string>
#include <string_view>

#include "hpod/base/status.h"

namespace hpod {

// `value` in seconds: "90s", "30m", "1h", "7d", parts together ("1h30m") or
// plain seconds ("3600"), between min_s and max_s. Otherwise kInvalidArgument
// whose message names `option` and says what to write, e.g.
// `--ttl: "1x" is not a duration; use e.g. 90s, 30m, 1h or 7d`,
// `--ttl: "2h" is too long; use at most 90m (5400s)`,
// `--ttl: "0m" is too short; use at least 1s`.
StatusOr<int64_t> ParseDurationSeconds(std::string_view option, std::string_view value,
                                       int64_t min_s, int64_t max_s);

// "30d", "1h", "90s": `seconds` in the largest unit that divides it evenly.
std::string FormatDuration(int64_t seconds);

}  // namespace hpod
