#include "hpod/base/lanes.h"

#include <algorithm>
#include <utility>

namespace hpod {

Lanes::Lanes(int threads) {
  for (int i = 0; i < std::max(threads, 1); ++i) threads_.emplace_back([this] { Loop(); });
}

Lanes::~Lanes() { Shutdown(); }

std::shared_ptr<Lanes::Lane> Lanes::NewLane() { return std::make_shared<Lane>(); }

bool Lanes::Post(const std::shared_ptr<Lane>& lane, std::function<void()> task, size_t max_queued) {
  {
    MutexLock lock(mu_);
    if (shut_down_) return false;
    if (max_queued != 0 && lane->tasks.size() >= max_queued) return false;
    lane->tasks.push_back(std::move(task));
    ++queued_;
    if (lane->scheduled) return true;  // its thread, or its turn, takes it
    lane->scheduled = true;
    ready_.push_back(lane);
  }
  cv_.notify_one();
  return true;
}

void Lanes::Loop() {
  MutexLock lock(mu_);
  for (;;) {
    lock.Wait(cv_, [&]() REQUIRES(mu_) { return shut_down_ || !ready_.empty(); });
    if (shut_down_) return;
    std::shared_ptr<Lane> lane = std::move(ready_.front());
    ready_.pop_front();
    std::function<void()> task = std::move(lane->tasks.front());
    lane->tasks.pop_front();
    --queued_;
    lock.Unlock();
    task();
    task = nullptr;  // what it holds goes outside the lock
    lock.Lock();
    // Its next task waits its turn behind the other lanes'.
    if (lane->tasks.empty()) {
      lane->scheduled = false;
    } else {
      ready_.push_back(std::move(lane));
      cv_.notify_one();
    }
  }
}

void Lanes::Shutdown() {
  std::deque<std::shared_ptr<Lane>> dropped;
  {
    MutexLock lock(mu_);
    if (shut_down_) return;  // the first caller joins
    shut_down_ = true;
    dropped.swap(ready_);
    queued_ = 0;
  }
  cv_.notify_all();
  for (auto& t : threads_) {
    if (t.joinable()) t.join();
  }
  threads_.clear();
  // The tasks (and what they captured) go outside the lock.
  MutexLock lock(mu_);
  for (auto& lane : dropped) lane->tasks.clear();
}

size_t Lanes::queued() const {
  MutexLock lock(mu_);
  return queued_;
}

}  // namespace hpod
