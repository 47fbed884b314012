#pragma once

// Opening files and directories under a root (the cluster's /fsx) so that nothing
// outside it can be reached, even while others rename, replace or symlink paths
// under it (training_metrics.h reads what users write there).
//
// Checking a path first (realpath) and opening it afterwards re-resolves it: a
// component swapped for a symlink in between is followed out of the root. So every
// component is opened relative to the fd of its parent, starting at the root's fd,
// with O_NOFOLLOW: what is opened is always the thing under the directory already
// held. `..` returns to the parent fd held on a stack, never the kernel's `..`, so
// it cannot climb out either.
//
// Symlinks (the choice, pinned by training_metrics_test.cc and training_read_test.cc): with
// Symlinks::kFollowInside a symlink met on the way is read (readlinkat) and its
// target resolved the same way, component by component: a relative target from
// the link's directory, an absolute one only when it names a path under the root
// (by the root's configured name or its realpath); a target that leaves the root is
// kInvalidArgument ("... is outside <root> (after resolving symlinks)"), at most 40
// links per path. With Symlinks::kNever any symlink is refused (ListRuns, which
// never follows them, opens what it listed this way).
//
// Files are opened O_NONBLOCK|O_NOFOLLOW|O_NOCTTY and checked with fstat on the fd,
// so a FIFO or device swapped in after a listing is refused without blocking in
// open; O_NONBLOCK is then cleared for the regular file's reads.
//
// Thread contract: ScopedFd is a value owned by one thread at a time; the functions
// are safe from any thread.

#include <sys/stat.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "hpod/base/status.h"

namespace hpod::agent {

// Owns one file descriptor (closed on destruction); -1 when empty.
class ScopedFd {
 public:
  ScopedFd() = default;
  explicit ScopedFd(int fd) : fd_(fd) {}
  ~ScopedFd() { Reset(); }
  ScopedFd(ScopedFd&& other) noexcept : fd_(other.Release()) {}
  ScopedFd& operator=(ScopedFd&& other) noexcept;
  ScopedFd(const ScopedFd&) = delete;
  ScopedFd& operator=(const ScopedFd&) = delete;

  int get() const { return fd_; }
  int Release();
  void Reset();

 private:
  int fd_ = -1;
};

enum class Symlinks { kFollowInside, kNever };

// What OpenBeneath or OpenRegularAt opened: its fd (O_RDONLY), its fstat, and the name of the last
// component after symlinks were resolved (a run's kind is told by it: "metrics.jsonl").
struct OpenedPath {
  ScopedFd fd;
  struct stat st {};
  std::string name;
};

// The root directory itself (its own path may hold symlinks: /fsx is configured by
// the administrator). kFailedPrecondition when it cannot be opened as a directory
// ("not available on this node").
StatusOr<ScopedFd> OpenRoot(const std::string& root);

// Opens `relative` (components split at '/'; "", "." and ".." handled as above)
// beneath `root_fd`, whose path is `root` (for absolute symlink targets and
// messages). The result is a directory or a regular file (opened O_RDONLY, the
// file without O_NONBLOCK), else kInvalidArgument. kNotFound when a component is
// missing or not a directory; kInvalidArgument when a symlink leads outside root
// (or with kNever, when there is one); errno's status otherwise.
StatusOr<OpenedPath> OpenBeneath(int root_fd, const std::string& root, std::string_view relative,
                                 Symlinks symlinks);

// Opens the regular file `name` of the directory `dir_fd` for reading (never a
// symlink, FIFO, socket or device: kFailedPrecondition, at once).
StatusOr<OpenedPath> OpenRegularAt(int dir_fd, const std::string& name);

// `path` (absolute, or relative to `root`) as a path relative to `root` ("." for
// root itself), judged by name only (lexically, ".." resolved): nullopt when it
// names something outside root. Nothing is looked up, so a refusal never tells
// whether something exists outside.
std::optional<std::string> RelativeUnder(const std::string& root, const std::string& path);

// One entry of a directory listing, with its lstat.
struct DirEntry {
  std::string name;
  struct stat st {};
};

// The entries of the directory `dir_fd` (not consumed; "." and ".." left out, an
// entry that vanished meanwhile too). At most `max_entries`; `*truncated` says
// whether more were left. `budget`, when set, is decremented per entry and the
// listing also stops when it reaches 0.
StatusOr<std::vector<DirEntry>> ListDirAt(int dir_fd, int64_t max_entries, bool* truncated,
                                          int64_t* budget = nullptr);

}  // namespace hpod::agent
