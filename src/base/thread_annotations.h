#pragma once

// Clang's thread-safety annotations, and a mutex that carries them. With GCC
// the macros are empty; `make test` compiles every file that includes this
// header with clang -Wthread-safety -Werror=thread-safety
// (scripts/check-thread-safety.py), so a GUARDED_BY member read without its
// mutex, or a REQUIRES function called without it, fails the build instead of
// passing review. libstdc++'s std::mutex is not annotated, which is why
// annotated code uses hpod::Mutex and hpod::MutexLock.
//
// Thread contract: Mutex is a mutex; MutexLock is one thread's scoped hold.

#include <condition_variable>
#include <mutex>

#if defined(__clang__)
#define HPOD_TSA(x) __attribute__((x))
#else
#define HPOD_TSA(x)
#endif

#define CAPABILITY(x) HPOD_TSA(capability(x))
#define SCOPED_CAPABILITY HPOD_TSA(scoped_lockable)
#define GUARDED_BY(x) HPOD_TSA(guarded_by(x))
#define PT_GUARDED_BY(x) HPOD_TSA(pt_guarded_by(x))
#define REQUIRES(...) HPOD_TSA(requires_capability(__VA_ARGS__))
#define EXCLUDES(...) HPOD_TSA(locks_excluded(__VA_ARGS__))
#define ACQUIRE(...) HPOD_TSA(acquire_capability(__VA_ARGS__))
#define RELEASE(...) HPOD_TSA(release_capability(__VA_ARGS__))
#define RETURN_CAPABILITY(x) HPOD_TSA(lock_returned(x))
#define NO_THREAD_SAFETY_ANALYSIS HPOD_TSA(no_thread_safety_analysis)

namespace hpod {

class CAPABILITY("mutex") Mutex {
 public:
  void lock() ACQUIRE() { mu_.lock(); }
  void unlock() RELEASE() { mu_.unlock(); }
  // For std::condition_variable, which waits on a std::unique_lock<std::mutex>;
  // see MutexLock::Wait.
  std::mutex& native() { return mu_; }

 private:
  std::mutex mu_;
};

// Holds a Mutex for its scope. Wait() releases it while blocked on `cv`, as
// std::condition_variable::wait does, and holds it again when it returns.
class SCOPED_CAPABILITY MutexLock {
 public:
  explicit MutexLock(Mutex& mu) ACQUIRE(mu) : lock_(mu.native()) {}
  ~MutexLock() RELEASE() {}
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

  void Wait(std::condition_variable& cv) { cv.wait(lock_); }
  template <typename Predicate>
  void Wait(std::condition_variable& cv, Predicate ready) {
    cv.wait(lock_, ready);
  }
  template <typename Duration, typename Predicate>
  bool WaitFor(std::condition_variable& cv, Duration d, Predicate ready) {
    return cv.wait_for(lock_, d, ready);
  }
  template <typename Duration>
  std::cv_status WaitFor(std::condition_variable& cv, Duration d) {
    return cv.wait_for(lock_, d);
  }
  template <typename TimePoint>
  std::cv_status WaitUntil(std::condition_variable& cv, TimePoint t) {
    return cv.wait_until(lock_, t);
  }
  // Lets go for a while (a call that must not run under the lock) and takes
  // the mutex again.
  void Unlock() RELEASE() { lock_.unlock(); }
  void Lock() ACQUIRE() { lock_.lock(); }

 private:
  std::unique_lock<std::mutex> lock_;
};

}  // namespace hpod
