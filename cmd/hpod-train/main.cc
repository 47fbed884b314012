// hpod-train: flags / train.json → TrainOptions → Trainer::Run.
// Exit codes: 0 done, 1 error (one line on stderr), 2 bad usage,
// 128+N stopped by signal N (SIGTERM, SIGINT) after a final checkpoint.

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>

#include "hpod/train/trainer/options.h"
#include "hpod/train/trainer/trainer.h"

namespace {

hpod::train::Trainer* g_trainer = nullptr;

std::atomic<int> g_signals{0};  // lock-free: safe in a handler

// The first signal only sets an atomic flag: the loop finishes its step,
// saves and exits. A second one (an impatient Ctrl-C) exits at once; the
// newest complete checkpoint is still on disk.
extern "C" void OnStopSignal(int sig) {
  if (g_signals.fetch_add(1) > 0) _exit(hpod::train::kExitSignalBase + sig);
  if (g_trainer != nullptr) g_trainer->RequestStop(sig);
}

}  // namespace

int main(int argc, char** argv) {
  auto parsed = hpod::train::ParseArgs(argc, argv);
  if (!parsed.ok()) {
    std::fprintf(stderr, "hpod-train: %s\n", parsed.status().message().c_str());
    return hpod::train::kExitUsage;
  }
  if (parsed->help) {
    std::fputs(parsed->help_text.c_str(), stdout);
    return hpod::train::kExitOk;
  }
  const bool dry_run = parsed->options.dry_run;
  hpod::train::Trainer trainer(std::move(parsed->options));
  if (dry_run) {
    auto s = trainer.PrintPlan(stdout);
    if (!s.ok()) {
      std::fprintf(stderr, "hpod-train: %s\n", s.message().c_str());
      return hpod::train::kExitUsage;
    }
    return hpod::train::kExitOk;
  }
  g_trainer = &trainer;
  struct sigaction sa = {};
  sa.sa_handler = OnStopSignal;
  sa.sa_flags = SA_RESTART;  // writes to a pipe or terminal resume, not fail with EINTR
  sigemptyset(&sa.sa_mask);
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);
  signal(SIGPIPE, SIG_IGN);
  int code = trainer.Run(stdout, stderr);
  g_trainer = nullptr;
  return code;
}
