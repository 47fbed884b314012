// Asynchronous signals without signal handlers: the one way hpod processes
// take SIGTERM, SIGINT and the like.
//
// Why no handlers: a handler runs on whichever thread the kernel picks, and
// its frame is pushed below that thread's stack pointer, wherever it points.
// Library code may point it at memory that is not a stack. Debian 12's
// oneDNN 2.6.3 does: its JIT f32 GEMM kernels set rsp to a malloc'd workspace
// for large K (uxlfoundation/oneDNN#4845, fixed upstream by #4855 in 3.11.2,
// not in any Debian package). A signal delivered to a thread inside such a
// kernel writes its frame over a heap chunk header and glibc aborts later
// ("corrupted size vs. prev_size", "free(): invalid pointer"); one SIGTERM in
// five lost hpod-train's final checkpoint that way. ASan builds hide it.
//
// The rule, so nobody "simplifies" it back into a sigaction():
//   - the signals a process acts on are blocked in every thread, from before
//     the first thread exists (threads inherit the mask of their creator, so
//     blocking in main before any thread, or in the executable's
//     .preinit_array before any library constructor, covers every thread a
//     library starts later: OpenMP, OpenBLAS, gloo, our pools);
//   - one SignalWatcher thread reads them synchronously (signalfd): no frame
//     is ever pushed, no thread is ever interrupted;
//   - signals the process does not act on keep their default disposition
//     (default-ignored ones such as SIGWINCH never reach a thread; SIGPIPE is
//     set to SIG_IGN where writes to closed pipes must fail with EPIPE);
//   - children get an empty mask and default dispositions before exec
//     (ResetSignalsForExec), or a blocked SIGTERM would make them unkillable.
#pragma once

#include <signal.h>

#include <functional>
#include <initializer_list>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "hpod/base/status.h"

namespace hpod {

// Blocks `signals` in the calling thread; threads it creates afterwards
// inherit the mask. Call from main (or a .preinit_array entry, see
// HPOD_BLOCK_SIGNALS_AT_LOAD) before any thread is started. Async-signal-safe.
void BlockSignals(std::initializer_list<int> signals);
void BlockSignals(const std::vector<int>& signals);

// In a child between fork and exec: empties the signal mask and restores every
// disposition to SIG_DFL, so the program starts as a shell would start it.
// Async-signal-safe (sigprocmask and sigaction only).
void ResetSignalsForExec();

// "SIGTERM" for SIGTERM; "signal 42" for a number without a name.
std::string SignalName(int signal);

// Reads a set of blocked signals on its own thread and calls `on_signal` for
// each arrival, in arrival order. Two arrivals of one standard signal before
// the thread reads them count as one, as POSIX allows.
//
// Thread contract: Start() and the destructor are called from one thread
// (main). `on_signal` runs on the watcher's thread only, never in a signal
// handler, so it may lock, log, write files or call _exit; while it runs,
// further signals wait (pending, blocked), so it must not block for long.
class SignalWatcher {
 public:
  using Callback = std::function<void(int signal)>;

  // Blocks `signals` in the calling thread (see BlockSignals: every other
  // thread must already block them, i.e. call this before starting threads or
  // block them earlier) and starts the watcher thread. Signals that arrived
  // while blocked and before Start are delivered first. InvalidArgument for an
  // empty set, SIGKILL or SIGSTOP; Internal if signalfd/eventfd/the thread
  // cannot be created.
  static StatusOr<std::unique_ptr<SignalWatcher>> Start(std::vector<int> signals,
                                                        Callback on_signal);

  // Stops and joins the watcher thread; `on_signal` is not called afterwards.
  // The signals stay blocked: one arriving later stays pending, it never
  // takes its default action (hpodd shutting down must not die half-way).
  ~SignalWatcher();

  SignalWatcher(const SignalWatcher&) = delete;
  SignalWatcher& operator=(const SignalWatcher&) = delete;

 private:
  SignalWatcher(int signal_fd, int wake_fd, Callback on_signal);
  void Loop();

  const int signal_fd_;  // signalfd over the watched set
  const int wake_fd_;    // eventfd: the destructor's stop request
  const Callback on_signal_;
  std::thread thread_;
};

}  // namespace hpod

// Adds an entry to the executable's .preinit_array that blocks the listed
// signals before any shared library's constructor runs: a library may start
// threads while it loads (Debian's OpenBLAS does), and a thread keeps the mask
// it was created with. Use once per binary, at namespace scope in the file
// holding main() (no semicolon after it):
//   HPOD_BLOCK_SIGNALS_AT_LOAD(SIGTERM, SIGINT, SIGUSR1)
// Only executables have a .preinit_array; in a shared object it is ignored.
#define HPOD_BLOCK_SIGNALS_AT_LOAD(...)                                                       \
  namespace {                                                                                 \
  void HpodBlockSignalsAtLoad(int, char**, char**) { ::hpod::BlockSignals({__VA_ARGS__}); }   \
  using HpodPreinitFunction = void (*)(int, char**, char**);                                  \
  [[gnu::section(".preinit_array"), gnu::used]] HpodPreinitFunction kHpodBlockSignalsAtLoad = \
      &HpodBlockSignalsAtLoad;                                                                \
  }
