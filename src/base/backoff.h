#pragma once

// Exponential backoff: the n-th wait since the last Reset is
// min(max, initial * 2^n), optionally with full jitter (a uniform draw from
// [0, that]). hpod's one retry pacing: the agent's reconnects (jittered, so a
// thousand agents restarted together do not reconnect together) and its Slurm
// daemon restarts (not jittered: the wait is reported to the user) both use it.
//
//   Backoff backoff({.initial = 100ms, .max = 10s, .jitter = true});
//   while (!TryOnce().ok()) Sleep(backoff.Next());
//   backoff.Reset();  // on success: the next failure waits the shortest time again
//
// Thread contract: not thread-safe; one owner calls it (copyable, e.g. one per
// supervised daemon).

#include <chrono>
#include <cstdint>
#include <random>

namespace hpod {

struct BackoffOptions {
  // The first wait (the upper bound of the first draw with jitter).
  std::chrono::milliseconds initial{100};
  // No wait is longer than this.
  std::chrono::milliseconds max{10000};
  // Full jitter: each wait is drawn uniformly from [0, the exponential bound].
  bool jitter = false;
  // Seeds the jitter's generator; 0 seeds it from std::random_device. Tests pass a
  // fixed seed for a reproducible sequence.
  uint64_t seed = 0;
};

class Backoff {
 public:
  explicit Backoff(BackoffOptions options = {});

  // The wait before the next attempt; each call doubles the bound (up to max).
  std::chrono::milliseconds Next();
  // The bound the next call to Next draws under (its exact value without jitter).
  std::chrono::milliseconds Peek() const;
  // After a success: the next wait is the shortest one again.
  void Reset() { failures_ = 0; }
  // Calls to Next since the last Reset.
  int failures() const { return failures_; }

 private:
  BackoffOptions options_;
  int failures_ = 0;
  std::mt19937_64 rng_;
};

}  // namespace hpod
