#include "hpod/agent/confined_open.h"

#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <deque>
#include <filesystem>
#include <memory>
#include <utility>

#include "hpod/base/file_util.h"

namespace hpod::agent {
namespace {

namespace fs = std::filesystem;

constexpr int kMaxSymlinks = 40;  // the kernel's MAXSYMLINKS

std::vector<std::string> Split(std::string_view path) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos <= path.size()) {
    const size_t slash = std::min(path.find('/', pos), path.size());
    if (slash > pos) out.emplace_back(path.substr(pos, slash - pos));
    pos = slash + 1;
  }
  return out;
}

// Lexically normal, without a trailing "/" (which lexically_relative would count
// as a component of its own).
fs::path NormalDir(const fs::path& p) {
  fs::path n = p.lexically_normal();
  if (n.has_relative_path() && n.filename().empty()) n = n.parent_path();
  return n;
}

// The target of the symlink `name` in `dir_fd`; nullopt when it is none.
std::optional<std::string> ReadLinkAt(int dir_fd, const std::string& name) {
  char buf[PATH_MAX];
  const ssize_t n = ::readlinkat(dir_fd, name.c_str(), buf, sizeof(buf));
  if (n < 0 || static_cast<size_t>(n) >= sizeof(buf)) return std::nullopt;
  return std::string(buf, static_cast<size_t>(n));
}

// Clears O_NONBLOCK (set only so that opening a FIFO could not block).
Status Blocking(int fd, const std::string& what) {
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags < 0 || ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) < 0) {
    return ErrnoStatus(errno, "opening " + what);
  }
  return OkStatus();
}

constexpr int kFileFlags = O_RDONLY | O_NONBLOCK | O_NOCTTY | O_NOFOLLOW | O_CLOEXEC;

}  // namespace

ScopedFd& ScopedFd::operator=(ScopedFd&& other) noexcept {
  if (this != &other) {
    Reset();
    fd_ = other.Release();
  }
  return *this;
}

int ScopedFd::Release() { return std::exchange(fd_, -1); }

void ScopedFd::Reset() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

std::optional<std::string> RelativeUnder(const std::string& root, const std::string& path) {
  const fs::path r = NormalDir(root);
  const fs::path given = fs::path(path).is_absolute() ? fs::path(path) : r / path;
  const fs::path rel = NormalDir(given).lexically_relative(r);
  if (rel.empty() || *rel.begin() == "..") return std::nullopt;
  return rel.string();
}

StatusOr<ScopedFd> OpenRoot(const std::string& root) {
  ScopedFd fd(::open(root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (fd.get() < 0) {
    return FailedPreconditionError(root +
                                   " is not available on this node: " + std::strerror(errno));
  }
  return fd;
}

StatusOr<OpenedPath> OpenBeneath(int root_fd, const std::string& root, std::string_view relative,
                                 Symlinks symlinks) {
  const std::string shown = (NormalDir(root) / std::string(relative)).lexically_normal().string();
  const std::string outside =
      "path " + shown + " is outside " + root + " (after resolving symlinks)";
  // The directories held below root_fd, innermost last: ".." pops one.
  std::vector<ScopedFd> held;
  auto current = [&] { return held.empty() ? root_fd : held.back().get(); };
  std::deque<std::string> todo;
  for (std::string& c : Split(relative)) todo.push_back(std::move(c));
  int links = 0;
  while (!todo.empty()) {
    std::string c = std::move(todo.front());
    todo.pop_front();
    if (c == ".") continue;
    if (c == "..") {
      if (held.empty()) return InvalidArgumentError(outside);
      held.pop_back();
      continue;
    }
    const bool last = todo.empty();
    // On the way: O_PATH needs no read permission; O_DIRECTORY|O_NOFOLLOW fails
    // with ENOTDIR on a symlink, which is then read.
    const int fd = ::openat(current(), c.c_str(),
                            last ? kFileFlags : O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
      const int err = errno;
      std::optional<std::string> target;
      if (err == ELOOP || err == ENOTDIR) target = ReadLinkAt(current(), c);
      if (!target) {
        if (err == ENOENT || err == ENOTDIR) return NotFoundError("no such path: " + shown);
        return ErrnoStatus(err, "opening " + shown);
      }
      if (symlinks == Symlinks::kNever) {
        return InvalidArgumentError(shown + ": " + c + " is a symlink, which is not followed");
      }
      if (++links > kMaxSymlinks) {
        return InvalidArgumentError(shown + ": too many levels of symbolic links");
      }
      std::vector<std::string> parts;
      if (!target->empty() && target->front() == '/') {
        std::optional<std::string> under = RelativeUnder(root, *target);
        if (!under) {
          // Under root's real path, when /fsx itself is a symlink to the mount.
          char real[PATH_MAX];
          if (::realpath(root.c_str(), real) != nullptr) under = RelativeUnder(real, *target);
        }
        if (!under) return InvalidArgumentError(outside);
        held.clear();
        parts = Split(*under);
      } else {
        parts = Split(*target);
      }
      todo.insert(todo.begin(), parts.begin(), parts.end());
      continue;
    }
    if (!last) {
      held.emplace_back(fd);
      continue;
    }
    OpenedPath out;
    out.fd = ScopedFd(fd);
    out.name = c;
    if (::fstat(fd, &out.st) != 0) return ErrnoStatus(errno, "opening " + shown);
    if (S_ISREG(out.st.st_mode)) {
      HPOD_RETURN_IF_ERROR(Blocking(fd, shown));
    } else if (!S_ISDIR(out.st.st_mode)) {
      return InvalidArgumentError(shown + " is neither a directory nor a regular file");
    }
    return out;
  }
  // Nothing left to open (root itself, or a path ending in ".."): the directory held.
  OpenedPath out;
  out.fd = ScopedFd(::openat(current(), ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (out.fd.get() < 0 || ::fstat(out.fd.get(), &out.st) != 0) {
    return ErrnoStatus(errno, "opening " + shown);
  }
  out.name = held.empty() ? NormalDir(root).filename().string() : shown;
  return out;
}

StatusOr<OpenedPath> OpenRegularAt(int dir_fd, const std::string& name) {
  OpenedPath out;
  out.name = name;
  out.fd = ScopedFd(::openat(dir_fd, name.c_str(), kFileFlags));
  if (out.fd.get() < 0) {
    if (errno == ELOOP) return FailedPreconditionError(name + " is a symlink (not followed)");
    return ErrnoStatus(errno, "opening " + name);
  }
  if (::fstat(out.fd.get(), &out.st) != 0) return ErrnoStatus(errno, "opening " + name);
  if (!S_ISREG(out.st.st_mode)) return FailedPreconditionError(name + " is not a regular file");
  HPOD_RETURN_IF_ERROR(Blocking(out.fd.get(), name));
  return out;
}

StatusOr<std::vector<DirEntry>> ListDirAt(int dir_fd, int64_t max_entries, bool* truncated,
                                          int64_t* budget) {
  if (truncated != nullptr) *truncated = false;
  // A DIR of its own (closedir closes the duplicate, not dir_fd). The duplicate
  // shares dir_fd's offset: rewind.
  const int dup_fd = ::fcntl(dir_fd, F_DUPFD_CLOEXEC, 0);
  if (dup_fd < 0) return ErrnoStatus(errno, "listing a directory");
  std::unique_ptr<DIR, int (*)(DIR*)> d(::fdopendir(dup_fd), &::closedir);
  if (!d) {
    const int err = errno;
    ::close(dup_fd);
    return ErrnoStatus(err, "listing a directory");
  }
  ::rewinddir(d.get());
  std::vector<DirEntry> out;
  while (struct dirent* e = ::readdir(d.get())) {
    const std::string_view name = e->d_name;
    if (name == "." || name == "..") continue;
    if (static_cast<int64_t>(out.size()) >= max_entries) {
      if (truncated != nullptr) *truncated = true;
      break;
    }
    if (budget != nullptr && (*budget)-- <= 0) break;
    DirEntry entry{std::string(name), {}};
    if (::fstatat(::dirfd(d.get()), e->d_name, &entry.st, AT_SYMLINK_NOFOLLOW) != 0) continue;
    out.push_back(std::move(entry));
  }
  return out;
}

}  // namespace hpod::agent
