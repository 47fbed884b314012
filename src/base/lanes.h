#pragma once

// Lanes: tasks run on a few threads of their own, in order within each lane and
// one at a time per lane, the lanes with work taking turns (one task each). hpodd
// gives each agent connection a lane, so that what a message costs (a store write
// waiting behind a reconciler's, a config read of 10,000 nodes) is paid here and
// never by the I/O threads that accept and read every connection: at 10,000
// agents those threads, busy with that work, left new connections unaccepted
// until the kernel's backlog overflowed.
//
// Thread contract: thread-safe. Tasks run on the executor's threads; a task may
// Post (to any lane). Shutdown (and the destructor) must not run on one of them.

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "hpod/base/thread_annotations.h"

namespace hpod {

class Lanes {
 public:
  class Lane;

  // `threads` ≥ 1.
  explicit Lanes(int threads);
  ~Lanes();  // Shutdown()
  Lanes(const Lanes&) = delete;
  Lanes& operator=(const Lanes&) = delete;

  std::shared_ptr<Lane> NewLane();

  // Queues `task` behind the lane's others. false (nothing queued) once shut down,
  // or when the lane already holds `max_queued` tasks (0: no limit): a lane that
  // far behind is a peer sending faster than it can be served, and the caller
  // decides what that costs it.
  bool Post(const std::shared_ptr<Lane>& lane, std::function<void()> task, size_t max_queued = 0);

  // Runs nothing more (queued tasks are dropped), waits for the running ones and
  // joins the threads. Idempotent.
  void Shutdown();

  // Tasks queued and not yet started, over all lanes.
  size_t queued() const;

 private:
  void Loop();

  mutable Mutex mu_;
  std::condition_variable cv_;
  bool shut_down_ GUARDED_BY(mu_) = false;
  // Lanes with queued tasks and none running, in the order they got work.
  std::deque<std::shared_ptr<Lane>> ready_ GUARDED_BY(mu_);
  size_t queued_ GUARDED_BY(mu_) = 0;
  std::vector<std::thread> threads_;
};

class Lanes::Lane {
 private:
  friend class Lanes;
  // Guarded by the executor's mu_.
  std::deque<std::function<void()>> tasks;
  // Queued in ready_ or running on a thread: never both, never twice.
  bool scheduled = false;
};

}  // namespace hpod
