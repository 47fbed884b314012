#pragma once

// Time as a seam: production code takes a Clock&, tests pass a FakeClock whose
// time only advances when AdvanceTime() is called.
//
// Thread contract: RealClock and FakeClock are safe for concurrent use.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>

namespace hpod {

class Clock {
 public:
  virtual ~Clock() = default;
  // Wall-clock time (for timestamps users see, SigV4 skew checks).
  virtual std::chrono::system_clock::time_point Now() const = 0;
  // Monotonic time (for timeouts and intervals).
  virtual std::chrono::steady_clock::time_point SteadyNow() const = 0;

  // Seconds since the Unix epoch with millisecond precision, as AWS JSON timestamps are.
  double NowEpochSeconds() const;
};

// "2026-12-06T01:02:03Z": epoch seconds as a UTC timestamp for messages.
std::string FormatUtc(double epoch_seconds);

class RealClock final : public Clock {
 public:
  std::chrono::system_clock::time_point Now() const override {
    return std::chrono::system_clock::now();
  }
  std::chrono::steady_clock::time_point SteadyNow() const override {
    return std::chrono::steady_clock::now();
  }
  // A process-wide instance for composition roots.
  static RealClock& Get();
};

class FakeClock final : public Clock {
 public:
  explicit FakeClock(std::chrono::system_clock::time_point start =
                         std::chrono::system_clock::time_point(std::chrono::seconds(1700000000)))
      : wall_ns_(start.time_since_epoch().count()) {}
  std::chrono::system_clock::time_point Now() const override {
    return std::chrono::system_clock::time_point(
        std::chrono::system_clock::duration(wall_ns_.load()));
  }
  std::chrono::steady_clock::time_point SteadyNow() const override {
    return std::chrono::steady_clock::time_point(
        std::chrono::steady_clock::duration(steady_ns_.load()));
  }
  void AdvanceTime(std::chrono::nanoseconds d) {
    wall_ns_ += std::chrono::duration_cast<std::chrono::system_clock::duration>(d).count();
    steady_ns_ += std::chrono::duration_cast<std::chrono::steady_clock::duration>(d).count();
  }

 private:
  std::atomic<int64_t> wall_ns_;
  std::atomic<int64_t> steady_ns_{0};
};

}  // namespace hpod
