// A fixed-size pool for the model's elementwise kernels.
//
// Work is split statically: ParallelFor(n, fn) gives chunk t the range
// [n*t/T, n*(t+1)/T) on thread t, so a kernel's results depend only on the
// inputs and the thread count (no work stealing, no atomics in sums).
//
// Thread contract: one caller thread drives the pool; ParallelFor blocks until
// every chunk is done. The caller runs chunk 0 itself, so a pool of 1 thread
// starts no threads at all.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace hpod::train::model::cpu {

class ThreadPool {
 public:
  explicit ThreadPool(int threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return threads_; }

  // fn(tid, begin, end) for tid in [0, size()); empty ranges are still called
  // (so per-thread scratch can be cleared). Returns after all calls returned.
  void ParallelFor(int64_t n, const std::function<void(int, int64_t, int64_t)>& fn);

 private:
  void WorkerLoop(int tid);

  const int threads_;
  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable work_cv_;
  std::condition_variable done_cv_;
  // All below guarded by mu_.
  uint64_t generation_ = 0;  // bumped once per ParallelFor
  int pending_ = 0;          // workers still running the current generation
  bool stop_ = false;
  int64_t n_ = 0;
  const std::function<void(int, int64_t, int64_t)>* fn_ = nullptr;
};

}  // namespace hpod::train::model::cpu
