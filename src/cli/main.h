#pragma once

// The whole `hpod` command as a function, so that tests run it in-process with a
// fake transport, clock and sleeper. cmd/hpod/main.cc only calls Main().
//
// Exit codes follow AWS CLI v2: 0 success; 252 command-line or parameter error
// (usage, shorthand/JSON, client-side validation); 253 configuration or
// credentials (unknown profile, no region, no credentials); 254 error returned by
// the service; 255 anything else (connection failure, timeout, waiter failure,
// unparsable response).
//
// Thread contract: Run() uses only what it is given and may run concurrently with
// other Run() calls that are given different streams and fakes.

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "hpod/base/clock.h"
#include "hpod/cli/client.h"
#include "hpod/cli/config.h"
#include "hpod/cli/session.h"
#include "hpod/http/client.h"

namespace hpod::cli {

inline constexpr int kExitOk = 0;
inline constexpr int kExitUsage = 252;
inline constexpr int kExitConfig = 253;
inline constexpr int kExitService = 254;
inline constexpr int kExitOther = 255;

// The outside world of one run.
struct Runtime {
  Environment env;
  std::ostream* out = nullptr;  // required
  std::ostream* err = nullptr;  // required
  bool stderr_is_tty = false;   // live waiter progress
  int terminal_width = 80;      // table output (80 when stdout is not a terminal)
  // Builds the transport once the timeouts are known; unset = libcurl.
  std::function<std::unique_ptr<Transport>(const http::ClientOptions&)> make_transport;
  const Clock* clock = nullptr;    // unset = RealClock
  Sleeper* sleeper = nullptr;      // unset = RealSleeper
  std::function<double()> random;  // backoff jitter; unset = seeded PRNG

  // start-session: the local terminal side (fds 0 and 1 unless a test gives pipes)
  // and how the session stream is opened, given the connect timeout. Unset, the
  // command fails: Main() installs the WebSocket one (RealSessionConnector).
  int stdin_fd = 0;
  int stdout_fd = 1;
  bool stdin_is_tty = false;
  // Dials a session's StreamUrl with the API calls' connect timeout and CA bundle.
  std::function<SessionConnector(const http::ClientOptions& options)> make_session_connector;
  std::chrono::milliseconds session_poll_interval{500};
  // logs --follow: stop after this many calls (a test seam; unset = until Ctrl-C).
  std::optional<int64_t> logs_max_calls;
};

// Runs `hpod <args...>` (args exclude the program name); returns the exit code.
int Run(const std::vector<std::string>& args, const Runtime& runtime);

// The production entry point (entry.cc, so that tests need not link the WebSocket
// client): the real environment (`envp`), terminal detection on file descriptors
// 0, 1 and 2, libcurl, WebSockets, the real clock.
int Main(int argc, const char* const* argv, const char* const* envp, std::ostream& out,
         std::ostream& err);

// "hpod-cli/0.1.0 (SageMaker 2017-07-24, model from botocore 1.43.11)".
std::string VersionString();

}  // namespace hpod::cli
