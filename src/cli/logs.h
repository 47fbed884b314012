#pragma once

// `hpod logs --cluster-name X --node-id i-... [--stream LifecycleConfig|Agent]
// [--follow]`: a node's log through HpodGetNodeLogs, printed raw.
//
// Without --follow it reads until the service has nothing more (a call that
// returns empty Data); with --follow it keeps polling, calling again at once while
// data keeps coming and waiting `poll_interval` (1 s) after an empty answer, until
// the process is interrupted. NextToken is the service's opaque resume position: it
// is passed back verbatim and kept when a response omits it.
//
// Thread contract: FollowNodeLogs runs on the caller's thread and uses the given
// client, sleeper and stream exclusively while it runs.

#include <chrono>
#include <cstdint>
#include <optional>
#include <ostream>
#include <string>

#include "hpod/base/status.h"
#include "hpod/cli/client.h"

namespace hpod::cli {

struct LogsOptions {
  std::string cluster_name;
  std::string node_id;
  std::optional<std::string> stream;  // LifecycleConfig (the service default) | Agent
  bool follow = false;
  std::chrono::milliseconds poll_interval{1000};
  // Stop after this many calls (a test seam; unset = until interrupted).
  std::optional<int64_t> max_calls;
};

// Prints the log to `out` (flushed after every chunk). Errors are the ApiClient's
// (e.g. "An error occurred (ResourceNotFound) when calling the HpodGetNodeLogs
// operation: ...").
Status FollowNodeLogs(ApiClient& client, const LogsOptions& options, Sleeper& sleeper,
                      std::ostream& out);

}  // namespace hpod::cli
