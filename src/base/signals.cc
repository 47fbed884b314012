#include "hpod/base/signals.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace hpod {
namespace {

template <typename Range>
sigset_t MakeSet(const Range& signals) {
  sigset_t set;
  sigemptyset(&set);
  for (int sig : signals) sigaddset(&set, sig);
  return set;
}

}  // namespace

void BlockSignals(std::initializer_list<int> signals) {
  sigset_t set = MakeSet(signals);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

void BlockSignals(const std::vector<int>& signals) {
  sigset_t set = MakeSet(signals);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

void ResetSignalsForExec() {
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  struct sigaction dfl;
  std::memset(&dfl, 0, sizeof(dfl));
  dfl.sa_handler = SIG_DFL;
  // Fails harmlessly for SIGKILL, SIGSTOP and glibc's internal signals.
  for (int sig = 1; sig < NSIG; ++sig) sigaction(sig, &dfl, nullptr);
}

std::string SignalName(int signal) {
  const char* abbrev = sigabbrev_np(signal);
  return abbrev != nullptr ? std::string("SIG") + abbrev : "signal " + std::to_string(signal);
}

StatusOr<std::unique_ptr<SignalWatcher>> SignalWatcher::Start(std::vector<int> signals,
                                                              Callback on_signal) {
  if (signals.empty()) return InvalidArgumentError("SignalWatcher: no signals to watch");
  for (int sig : signals) {
    if (sig == SIGKILL || sig == SIGSTOP || sig <= 0 || sig >= NSIG) {
      return InvalidArgumentError("SignalWatcher: cannot watch " + SignalName(sig));
    }
  }
  // Blocked before the descriptor exists, so none of them can take its
  // default action (or a handler) in between.
  BlockSignals(signals);
  sigset_t set = MakeSet(signals);
  int signal_fd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
  if (signal_fd < 0) return InternalError(std::string("signalfd: ") + std::strerror(errno));
  int wake_fd = eventfd(0, EFD_CLOEXEC);
  if (wake_fd < 0) {
    const int err = errno;
    close(signal_fd);
    return InternalError(std::string("eventfd: ") + std::strerror(err));
  }
  std::unique_ptr<SignalWatcher> watcher(
      new SignalWatcher(signal_fd, wake_fd, std::move(on_signal)));
  watcher->thread_ = std::thread([w = watcher.get()] { w->Loop(); });
  return watcher;
}

SignalWatcher::SignalWatcher(int signal_fd, int wake_fd, Callback on_signal)
    : signal_fd_(signal_fd), wake_fd_(wake_fd), on_signal_(std::move(on_signal)) {}

SignalWatcher::~SignalWatcher() {
  const uint64_t one = 1;
  ssize_t n = write(wake_fd_, &one, sizeof(one));
  (void)n;  // an eventfd write of 1 cannot fail short of overflow
  if (thread_.joinable()) thread_.join();
  close(signal_fd_);
  close(wake_fd_);
}

void SignalWatcher::Loop() {
  pollfd fds[2] = {{signal_fd_, POLLIN, 0}, {wake_fd_, POLLIN, 0}};
  for (;;) {
    // No timeout: both descriptors are ours, and the destructor always writes
    // wake_fd_, so this wait ends.
    if (poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      return;  // only EFAULT/EINVAL/ENOMEM: nothing to watch with
    }
    if (fds[1].revents != 0) return;
    if (fds[0].revents == 0) continue;
    signalfd_siginfo info;
    ssize_t n = read(signal_fd_, &info, sizeof(info));
    if (n != static_cast<ssize_t>(sizeof(info))) continue;  // EAGAIN: another reader took it
    on_signal_(static_cast<int>(info.ssi_signo));
  }
}

}  // namespace hpod
