#include "hpod/agent/health/node_checks.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

namespace hpod::agent::health {
namespace {

std::string Mib(uint64_t bytes) { return std::to_string(bytes >> 20) + " MiB"; }

std::string Errno(const std::string& what) { return what + ": " + strerror(errno); }

// Creates, writes, fsyncs and unlinks a 4 KiB temp file in `dir`; "" on success.
std::string WriteTest(const std::string& dir) {
  std::string name = dir + (dir.back() == '/' ? "" : "/") + ".hpod-health-XXXXXX";
  int fd = ::mkostemp(name.data(), O_CLOEXEC);
  if (fd < 0) return Errno("cannot create a file in " + dir);
  std::string error;
  char block[4096];
  memset(block, 'h', sizeof(block));
  ssize_t n = ::write(fd, block, sizeof(block));
  if (n != static_cast<ssize_t>(sizeof(block))) {
    error = n < 0 ? Errno("cannot write to " + dir) : "short write to " + dir;
  } else if (::fsync(fd) != 0) {
    error = Errno("cannot fsync a file in " + dir);
  }
  ::close(fd);
  if (::unlink(name.c_str()) != 0 && error.empty()) error = Errno("cannot unlink " + name);
  return error;
}

}  // namespace

Outcome DiskCheck::Run() {
  struct statvfs st;
  if (::statvfs(options_.path.c_str(), &st) != 0) {
    return Outcome::Fail(options_.verdict, Errno("statvfs " + options_.path));
  }
  // f_bavail/f_favail: what an unprivileged job can still use (root's reserve
  // does not help it).
  uint64_t free_bytes = static_cast<uint64_t>(st.f_bavail) * st.f_frsize;
  if (free_bytes < options_.min_free_bytes) {
    return Outcome::Fail(options_.verdict, options_.path + " has less than " +
                                               Mib(options_.min_free_bytes) + " free");
  }
  // Filesystems without inode accounting (btrfs, some FUSE) report 0 files.
  if (st.f_files > 0 && st.f_favail < options_.min_free_inodes) {
    return Outcome::Fail(options_.verdict, options_.path + " has fewer than " +
                                               std::to_string(options_.min_free_inodes) +
                                               " free inodes");
  }
  std::string error =
      WriteTest(options_.writable_dir.empty() ? options_.path : options_.writable_dir);
  if (!error.empty()) return Outcome::Fail(options_.verdict, error);
  return Outcome::Ok();
}

Outcome MemoryCheck::Run() {
  std::ifstream in(meminfo_);
  if (!in) return Outcome::Skipped("cannot read " + meminfo_);
  std::string line;
  uint64_t total = 0, available = 0;
  bool have_available = false;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string key;
    uint64_t kb = 0;
    fields >> key >> kb;
    if (key == "MemTotal:") total = kb;
    if (key == "MemAvailable:") available = kb, have_available = true;
  }
  if (total == 0 || !have_available) {
    return Outcome::Skipped(meminfo_ + " has no MemTotal/MemAvailable");
  }
  if (static_cast<double>(available) >= min_available_ * static_cast<double>(total)) {
    low_runs_ = 0;
    return Outcome::Ok();
  }
  if (++low_runs_ < runs_) return Outcome::Ok();
  return Outcome::Fail(Verdict::kReboot,
                       "MemAvailable below " +
                           std::to_string(static_cast<int>(min_available_ * 100 + 0.5)) +
                           "% of MemTotal on " + std::to_string(runs_) + " consecutive checks");
}

Outcome SlurmCheck::Run() {
  api::agentproto::SlurmStatus s = state_();
  if (s.daemon != "restarting") restarting_since_.reset();
  if (s.daemon == "failed") {
    return Outcome::Fail(Verdict::kReboot,
                         "the Slurm daemon failed" + (s.message.empty() ? "" : ": " + s.message));
  }
  if (s.daemon == "restarting") {
    auto now = clock_.SteadyNow();
    if (!restarting_since_) restarting_since_ = now;
    if (now - *restarting_since_ >= restarting_limit_) {
      return Outcome::Fail(
          Verdict::kReboot,
          "the Slurm daemon has been restarting for " +
              std::to_string(
                  std::chrono::duration_cast<std::chrono::seconds>(restarting_limit_).count()) +
              " s or more");
    }
  }
  return Outcome::Ok();
}

Outcome FlagFileCheck::Run() {
  struct stat st;
  if (::stat(path_.c_str(), &st) != 0 || st.st_size == 0) return Outcome::Ok();
  return Outcome::Fail(Verdict::kReplace, "HyperPod's fault flag file " + path_ + " is set");
}

KernelLogCheck::KernelLogCheck(std::string path) : path_(std::move(path)) { Open(true); }

KernelLogCheck::~KernelLogCheck() {
  if (fd_ >= 0) ::close(fd_);
}

bool KernelLogCheck::Open(bool at_end) {
  fd_ = ::open(path_.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd_ < 0) {
    open_error_ = Errno("cannot open " + path_);
    return false;
  }
  struct stat st;
  kmsg_ = ::fstat(fd_, &st) == 0 && S_ISCHR(st.st_mode);
  if (kmsg_) {
    ::lseek(fd_, 0, SEEK_END);  // /dev/kmsg: the next record logged from now on
  } else {
    offset_ = at_end ? static_cast<uint64_t>(st.st_size) : 0;
  }
  open_error_.clear();
  return true;
}

void KernelLogCheck::ReadKmsg() {
  // One record per read: "prio,seq,usec,flags;message\n" plus " KEY=value" lines.
  char record[8192];
  for (int i = 0; i < 10000; ++i) {  // bounded: a log storm must not hold the check
    ssize_t n = ::read(fd_, record, sizeof(record) - 1);
    if (n < 0 && errno == EPIPE) continue;  // records were overwritten; go on
    if (n <= 0) return;                     // EAGAIN: nothing new
    std::string_view text(record, static_cast<size_t>(n));
    size_t semi = text.find(';');
    if (semi != std::string_view::npos) text.remove_prefix(semi + 1);
    text = text.substr(0, text.find('\n'));
    if (auto xid = ParseXidLine(text)) xids_.Add(*xid);
  }
}

void KernelLogCheck::ReadFile() {
  struct stat st;
  if (::fstat(fd_, &st) != 0) return;
  uint64_t size = static_cast<uint64_t>(st.st_size);
  if (size < offset_) offset_ = 0, partial_.clear();  // truncated or rotated in place
  char buf[65536];
  for (int i = 0; i < 64 && offset_ < size; ++i) {  // at most 4 MiB a run
    ssize_t n = ::pread(fd_, buf, sizeof(buf), static_cast<off_t>(offset_));
    if (n <= 0) return;
    offset_ += static_cast<uint64_t>(n);
    partial_.append(buf, static_cast<size_t>(n));
    size_t start = 0, nl;
    while ((nl = partial_.find('\n', start)) != std::string::npos) {
      if (auto xid = ParseXidLine(std::string_view(partial_).substr(start, nl - start))) {
        xids_.Add(*xid);
      }
      start = nl + 1;
    }
    partial_.erase(0, start);
    if (partial_.size() > 65536) partial_.clear();  // not a log of lines
  }
}

Outcome KernelLogCheck::Run() {
  // A file that did not exist at start holds only lines written since.
  if (fd_ < 0 && !Open(false)) return Outcome::Skipped(open_error_);
  if (kmsg_) {
    ReadKmsg();
  } else {
    ReadFile();
  }
  return xids_.Judge();
}

}  // namespace hpod::agent::health
