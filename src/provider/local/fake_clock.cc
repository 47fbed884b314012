#include "hpod/provider/local/fake_clock.h"

#include <errno.h>
#include <fcntl.h>
#include <semaphore.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace hpod::provider::local {
namespace {

std::string SemName(const std::string& prefix) { return "/hpod-" + prefix + "-faketime-sem"; }
std::string ShmName(const std::string& prefix) { return "/hpod-" + prefix + "-faketime-shm"; }

// libfaketime 0.9.10's shared state: one uint64_t tick counter.
constexpr off_t kSharedBytes = 8;

Status Errno(const std::string& what) {
  return InternalError("fake clock: " + what + ": " + strerror(errno));
}

}  // namespace

Status CheckFakeClockSkews(const std::map<std::string, int>& skews, const std::string& library) {
  if (access(library.c_str(), R_OK) != 0) {
    return FailedPreconditionError("skewed node clocks need " + library +
                                   ": install Debian's faketime package");
  }
  for (const auto& [group, seconds] : skews) {
    if (group.empty() || seconds < -86400 || seconds > 86400) {
      return InvalidArgumentError("clock skew '" + group + "=" + std::to_string(seconds) +
                                  "': expected GROUP=SECONDS, within a day");
    }
  }
  return OkStatus();
}

std::string FakeClockShared(const std::string& prefix) {
  return SemName(prefix) + " " + ShmName(prefix);
}

Status EnsureFakeClockShared(const std::string& prefix) {
  // The semaphore is libfaketime's lock: created at 1 (free). fchmod-equivalent
  // after creation, since sem_open's mode goes through the umask.
  sem_t* sem = sem_open(SemName(prefix).c_str(), O_CREAT, 0666, 1);
  if (sem == SEM_FAILED) return Errno("sem_open " + SemName(prefix));
  sem_close(sem);
  if (chmod(("/dev/shm/sem." + SemName(prefix).substr(1)).c_str(), 0666) != 0) {
    return Errno("chmod the semaphore " + SemName(prefix));
  }
  int fd = shm_open(ShmName(prefix).c_str(), O_CREAT | O_RDWR, 0666);
  if (fd < 0) return Errno("shm_open " + ShmName(prefix));
  struct stat st {};
  bool ok = fstat(fd, &st) == 0 &&
            (st.st_size == kSharedBytes || ftruncate(fd, kSharedBytes) == 0) &&
            fchmod(fd, 0666) == 0;
  int saved = errno;
  close(fd);
  errno = saved;
  if (!ok) return Errno("sizing " + ShmName(prefix));
  return OkStatus();
}

void RemoveFakeClockShared(const std::string& prefix) {
  sem_unlink(SemName(prefix).c_str());
  shm_unlink(ShmName(prefix).c_str());
}

std::map<std::string, std::string> FakeClockEnv(const std::string& library, int seconds,
                                                const std::string& shared) {
  if (seconds == 0) return {};
  return {{"LD_PRELOAD", library},
          {"FAKETIME", (seconds > 0 ? "+" : "") + std::to_string(seconds) + "s"},
          // Timeouts and intervals stay true; only the wall clock is off.
          {"FAKETIME_DONT_FAKE_MONOTONIC", "1"},
          {"FAKETIME_SHARED", shared}};
}

}  // namespace hpod::provider::local
