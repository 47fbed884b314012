#include "hpod/base/file_util.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

namespace hpod {
namespace {

Status WriteAll(int fd, std::string_view bytes, const std::string& path) {
  while (!bytes.empty()) {
    ssize_t n = ::write(fd, bytes.data(), bytes.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus(errno, "writing " + path);
    }
    bytes.remove_prefix(static_cast<size_t>(n));
  }
  return OkStatus();
}

}  // namespace

Status ErrnoStatus(int err, std::string_view what) {
  std::string message = std::string(what) + ": " + std::strerror(err);
  switch (err) {
    case ENOENT:
      return NotFoundError(std::move(message));
    case EACCES:
    case EPERM:
      return PermissionDeniedError(std::move(message));
    case ENOSPC:
    case EDQUOT:
      return ResourceExhaustedError(std::move(message));
    case ENOTDIR:
    case EISDIR:
    case EEXIST:
    case EROFS:
      return FailedPreconditionError(std::move(message));
    default:
      return InternalError(std::move(message));
  }
}

StatusOr<std::string> ReadFile(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus(errno, "opening " + path);
  std::string out;
  char buf[1 << 16];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n < 0) {
      if (errno == EINTR) continue;
      Status s = ErrnoStatus(errno, "reading " + path);
      ::close(fd);
      return s;
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return out;
}

Status WriteFileAtomic(const std::string& path, std::string_view bytes, mode_t mode) {
  const std::string tmp = path + ".tmp";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
  if (fd < 0) return ErrnoStatus(errno, "creating " + tmp);
  Status s = OkStatus();
  // The umask may have narrowed `mode` (and O_TRUNC kept an old temp file's
  // mode); the caller's mode is the contract.
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    s = ErrnoStatus(errno, "stat " + tmp);
  } else if ((st.st_mode & 07777) != mode && ::fchmod(fd, mode) != 0) {
    s = ErrnoStatus(errno, "chmod " + tmp);
  }
  if (s.ok()) s = WriteAll(fd, bytes, tmp);
  if (s.ok() && ::fsync(fd) != 0) s = ErrnoStatus(errno, "fsync " + tmp);
  if (::close(fd) != 0 && s.ok()) s = ErrnoStatus(errno, "closing " + tmp);
  if (s.ok() && ::rename(tmp.c_str(), path.c_str()) != 0) {
    s = ErrnoStatus(errno, "renaming " + tmp + " to " + path);
  }
  if (!s.ok()) {
    ::unlink(tmp.c_str());
    return s;
  }
  // The rename is durable only once the directory entry is. Best effort: the
  // new file is already in place, and some file systems refuse a directory fsync.
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  const std::string dir = parent.empty() ? std::string(".") : parent.string();
  int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
  return OkStatus();
}

Status WriteFileInPlace(const std::string& path, std::string_view bytes) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return InternalError("writing " + path + ": " + std::strerror(errno));
  bool ok = ::write(fd, bytes.data(), bytes.size()) == static_cast<ssize_t>(bytes.size());
  ::close(fd);
  return ok ? OkStatus() : InternalError("writing " + path + ": short write");
}

}  // namespace hpod
