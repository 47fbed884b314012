#include "hpod/base/backoff.h"

#include <algorithm>

namespace hpod {

Backoff::Backoff(BackoffOptions options)
    : options_(options), rng_(options.seed != 0 ? options.seed : std::random_device{}()) {}

std::chrono::milliseconds Backoff::Peek() const {
  const int64_t initial = std::max<int64_t>(options_.initial.count(), 0);
  const int64_t max = std::max<int64_t>(options_.max.count(), 0);
  // Shifts past 2^30 could overflow; the cap is reached long before anyway.
  const int shift = std::min(failures_, 30);
  if (initial > 0 && initial > (max >> shift)) return std::chrono::milliseconds(max);
  return std::chrono::milliseconds(std::min(max, initial << shift));
}

std::chrono::milliseconds Backoff::Next() {
  const std::chrono::milliseconds bound = Peek();
  if (failures_ < 30) ++failures_;
  if (!options_.jitter || bound.count() <= 0) return bound;
  return std::chrono::milliseconds(std::uniform_int_distribution<int64_t>(0, bound.count())(rng_));
}

}  // namespace hpod
