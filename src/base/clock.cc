#include "hpod/base/clock.h"

#include <cmath>
#include <ctime>

namespace hpod {

double Clock::NowEpochSeconds() const {
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(Now().time_since_epoch());
  return static_cast<double>(ms.count()) / 1000.0;
}

std::string FormatUtc(double epoch_seconds) {
  std::time_t t = static_cast<std::time_t>(epoch_seconds);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

RealClock& RealClock::Get() {
  static RealClock clock;
  return clock;
}

}  // namespace hpod
