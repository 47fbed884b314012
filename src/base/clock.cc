#include "hpod/base/clock.h"

#include <cmath>

namespace hpod {

double Clock::NowEpochSeconds() const {
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(Now().time_since_epoch());
  return static_cast<double>(ms.count()) / 1000.0;
}

RealClock& RealClock::Get() {
  static RealClock clock;
  return clock;
}

}  // namespace hpod
