#include "hpod/controlplane/work_queue.h"

#include <spdlog/spdlog.h>

#include <algorithm>

namespace hpod::controlplane {

WorkQueue::WorkQueue(const Clock& clock, WorkQueueOptions options, Processor processor)
    : clock_(clock), options_(options), processor_(std::move(processor)) {}

WorkQueue::~WorkQueue() { Stop(); }

void WorkQueue::Start() {
  for (int i = 0; i < options_.workers; ++i) threads_.emplace_back([this] { WorkerLoop(); });
}

void WorkQueue::Stop() {
  {
    MutexLock lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  for (auto& t : threads_) t.join();
  threads_.clear();
}

void WorkQueue::Add(const std::string& key) {
  {
    MutexLock lock(mu_);
    if (active_.count(key)) {
      dirty_.insert(key);
      return;
    }
    if (queued_.insert(key).second) order_.push_back(key);
  }
  cv_.notify_one();
}

void WorkQueue::AddAfter(const std::string& key, std::chrono::milliseconds delay) {
  if (delay.count() <= 0) return Add(key);
  {
    MutexLock lock(mu_);
    Delay(key, clock_.SteadyNow() + delay);
  }
  cv_.notify_one();
}

void WorkQueue::Delay(const std::string& key, std::chrono::steady_clock::time_point at) {
  auto [it, fresh] = delayed_at_.try_emplace(key, at);
  if (!fresh) {
    if (it->second <= at) return;
    auto [first, last] = delayed_.equal_range(it->second);
    for (auto d = first; d != last; ++d) {
      if (d->second == key) {
        delayed_.erase(d);
        break;
      }
    }
    it->second = at;
  }
  delayed_.emplace(at, key);
}

size_t WorkQueue::Pending() const {
  MutexLock lock(mu_);
  return queued_.size() + delayed_.size();
}

bool WorkQueue::PopDue(std::string* key) {
  // Move due delayed keys into the queue.
  auto now = clock_.SteadyNow();
  while (!delayed_.empty() && delayed_.begin()->first <= now) {
    std::string k = delayed_.begin()->second;
    delayed_.erase(delayed_.begin());
    delayed_at_.erase(k);
    if (active_.count(k)) {
      dirty_.insert(k);
    } else if (queued_.insert(k).second) {
      order_.push_back(k);
    }
  }
  // First queued key that no worker holds.
  for (auto it = order_.begin(); it != order_.end(); ++it) {
    if (active_.count(*it)) continue;
    *key = *it;
    queued_.erase(*it);
    order_.erase(it);
    active_.insert(*key);
    return true;
  }
  return false;
}

void WorkQueue::Process(const std::string& key) {
  Result r;
  try {
    r = processor_(key);
  } catch (const std::exception& e) {
    // A reconciler must not take the daemon down; treat it as a failure to retry.
    r.status = InternalError(std::string("reconciler threw: ") + e.what());
  }
  MutexLock lock(mu_);
  active_.erase(key);
  if (!r.status.ok()) {
    int n = ++failures_[key];
    auto backoff = options_.base_backoff * (1LL << std::min(n - 1, 20));
    backoff = std::min<std::chrono::milliseconds>(backoff, options_.max_backoff);
    spdlog::warn("reconcile {} failed (attempt {}), retrying in {} ms: {}", key, n, backoff.count(),
                 r.status.ToString());
    Delay(key, clock_.SteadyNow() + backoff);
  } else {
    failures_.erase(key);
    if (r.requeue_after.count() > 0) Delay(key, clock_.SteadyNow() + r.requeue_after);
  }
  if (dirty_.erase(key) && queued_.insert(key).second) order_.push_back(key);
}

void WorkQueue::WorkerLoop() {
  MutexLock lock(mu_);
  while (!stopping_) {
    std::string key;
    if (PopDue(&key)) {
      lock.Unlock();
      Process(key);
      lock.Lock();
      cv_.notify_all();
      continue;
    }
    if (!delayed_.empty()) {
      // Waits until the earliest delayed key is due, re-checking at least every
      // second so a clock that jumps is noticed.
      auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(delayed_.begin()->first -
                                                                        clock_.SteadyNow());
      wait = std::clamp(wait, std::chrono::milliseconds(1), std::chrono::milliseconds(1000));
      lock.WaitFor(cv_, wait);
    } else {
      lock.Wait(cv_);
    }
  }
}

int WorkQueue::RunUntilIdle() {
  int processed = 0;
  MutexLock lock(mu_);
  std::string key;
  while (PopDue(&key)) {
    lock.Unlock();
    Process(key);
    ++processed;
    lock.Lock();
  }
  return processed;
}

void KeyRouter::Route(std::string prefix, WorkQueue::Processor processor) {
  routes_.emplace_back(std::move(prefix), std::move(processor));
}

WorkQueue::Result KeyRouter::operator()(const std::string& key) const {
  for (const auto& [prefix, processor] : routes_) {
    if (key.starts_with(prefix)) return processor(key.substr(prefix.size()));
  }
  return default_(key);
}

}  // namespace hpod::controlplane
