#pragma once

// The one subprocess runner of hpod: spawn a program with argv/env/cwd, stream or
// capture its output, enforce a timeout, and kill its whole process group. Used by
// the local provider (`ip`, `mount`), the agent (lifecycle scripts, commands) and
// tests.
//
// Every child runs in its own process group (setsid), so a timeout or Kill() takes
// down the grandchildren a shell script started too. Descriptors other than
// stdin/stdout/stderr are closed in the child.
//
// Linking this file makes the process ignore SIGPIPE (set once at startup), so
// that writing stdin_data to a child that already exited fails with EPIPE instead
// of killing the daemon. Children get default signal dispositions and an empty mask.
//
// Thread contract: RunCommand is thread-safe. A Subprocess object is not: one owner
// thread calls its methods (Kill() may also be called from another thread).

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "hpod/base/status.h"

namespace hpod {

struct SubprocessOptions {
  std::vector<std::string> argv;  // argv[0] is looked up in PATH when it has no '/'
  // Environment: when `clear_env` is false the child inherits ours with `env`
  // applied on top (an empty value still sets the variable).
  std::map<std::string, std::string> env;
  bool clear_env = false;
  std::string cwd;  // empty: inherit
  // Written to the child's stdin, which is then closed. Without it stdin is /dev/null.
  std::optional<std::string> stdin_data;
  // After this the process group gets SIGTERM, then SIGKILL after `kill_grace`.
  // Zero means no limit.
  std::chrono::milliseconds timeout{0};
  std::chrono::milliseconds kill_grace{2000};
  // Called from the waiting thread with output chunks as they arrive (not split at
  // lines). When set, output is not accumulated in SubprocessResult.
  std::function<void(std::string_view chunk)> on_stdout;
  std::function<void(std::string_view chunk)> on_stderr;
  // Merge stderr into stdout (one stream, as a terminal shows it).
  bool merge_stderr = false;
  // Output kept in SubprocessResult per stream beyond which the rest is dropped
  // (`truncated` is set); protects the daemon from a chatty child.
  size_t max_captured_bytes = 16 * 1024 * 1024;
  // Subprocess::Start without a PTY only: stdout and stderr are appended to this
  // file (created 0644). Empty: both are inherited from us.
  std::string output_file;
  // Non-empty: the child gets a UTS namespace of its own with this hostname
  // (needs CAP_SYS_ADMIN), which it and everything it starts see as the
  // machine's name; the machine keeps its own.
  std::string uts_hostname;
};

struct SubprocessResult {
  // Exit status as a shell reports it: the exit code, or 128 + signal number.
  int exit_code = 0;
  bool signaled = false;
  bool timed_out = false;
  bool truncated = false;
  std::string stdout_data;
  std::string stderr_data;
  std::chrono::milliseconds elapsed{0};
};

// Runs to completion. Fails only when the program cannot be started (kNotFound for
// a missing executable, naming it; kInternal otherwise); a non-zero exit or a
// timeout is a successful run whose result says so.
StatusOr<SubprocessResult> RunCommand(const SubprocessOptions& options);

// Convenience: runs argv with a timeout; non-zero exit → kInternal (kDeadlineExceeded
// on timeout) whose message is "<argv joined>: <last line of stderr or stdout>".
// Returns stdout.
StatusOr<std::string> RunChecked(const std::vector<std::string>& argv,
                                 std::chrono::milliseconds timeout = std::chrono::seconds(30));

// A started child the caller waits for (used for long-lived children such as an
// interactive shell on a PTY, where the caller owns the descriptors).
class Subprocess {
 public:
  // Starts the child. When `pty_master` is non-null the child gets a new pseudo-
  // terminal as its controlling terminal and stdin/stdout/stderr and *pty_master
  // receives the master descriptor (owned by the caller, O_CLOEXEC). `rows`/`cols`
  // set its size. Without a PTY, stdin is /dev/null and stdout/stderr go to
  // `output_file` (or are inherited). The output callbacks, stdin_data and timeout
  // are ignored here: the caller waits with Wait().
  static StatusOr<std::unique_ptr<Subprocess>> Start(const SubprocessOptions& options,
                                                     int* pty_master = nullptr,
                                                     unsigned short rows = 24,
                                                     unsigned short cols = 80);
  ~Subprocess();  // kills the process group if still running, then reaps
  pid_t pid() const { return pid_; }
  // Waits up to `timeout` (negative = forever); nullopt if still running.
  std::optional<int> Wait(std::chrono::milliseconds timeout);
  // SIGKILL to the process group (no-op once the child was reaped).
  void Kill();
  // Lets the child outlive this object: the destructor then neither kills nor
  // waits for it (a detached daemon such as a local node's namespace holder; once
  // we exit, init reaps it). Wait() still works until then.
  void Release() { released_ = true; }

 private:
  Subprocess(pid_t pid, int pidfd) : pid_(pid), pidfd_(pidfd) {}
  pid_t pid_;
  int pidfd_;  // -1 when pidfd_open is unavailable (then Wait polls)
  bool released_ = false;
  std::atomic<bool> reaped_{false};
  std::optional<int> exit_code_;
};

}  // namespace hpod
