#include "hpod/train/model/ops/cpu/thread_pool.h"

namespace hpod::train::model::cpu {

ThreadPool::ThreadPool(int threads) : threads_(threads < 1 ? 1 : threads) {
  for (int t = 1; t < threads_; ++t) workers_.emplace_back([this, t] { WorkerLoop(t); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  work_cv_.notify_all();
  for (auto& w : workers_) w.join();
}

void ThreadPool::ParallelFor(int64_t n, const std::function<void(int, int64_t, int64_t)>& fn) {
  if (threads_ == 1) {
    fn(0, 0, n);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    n_ = n;
    fn_ = &fn;
    pending_ = threads_ - 1;
    ++generation_;
  }
  work_cv_.notify_all();
  fn(0, 0, n / threads_);
  std::unique_lock<std::mutex> lock(mu_);
  done_cv_.wait(lock, [this] { return pending_ == 0; });
  fn_ = nullptr;
}

void ThreadPool::WorkerLoop(int tid) {
  uint64_t seen = 0;
  for (;;) {
    int64_t n;
    const std::function<void(int, int64_t, int64_t)>* fn;
    {
      std::unique_lock<std::mutex> lock(mu_);
      work_cv_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
      n = n_;
      fn = fn_;
    }
    (*fn)(tid, n * tid / threads_, n * (tid + 1) / threads_);
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (--pending_ == 0) done_cv_.notify_one();
    }
  }
}

}  // namespace hpod::train::model::cpu
