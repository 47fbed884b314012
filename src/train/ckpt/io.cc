#include "hpod/train/ckpt/io.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace hpod::train::ckpt {
namespace {
// Linux caps one read/write at ~2 GiB; stay well below.
constexpr int64_t kMaxIo = int64_t{1} << 30;
}  // namespace

Fd& Fd::operator=(Fd&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = o.fd_;
    o.fd_ = -1;
  }
  return *this;
}

Fd::~Fd() {
  if (fd_ >= 0) ::close(fd_);
}

Status Fd::Close(std::string_view path) {
  const int fd = fd_;
  fd_ = -1;
  if (fd >= 0 && ::close(fd) != 0 && errno != EINTR) {
    return ErrnoStatus(errno, "close " + std::string(path));
  }
  return OkStatus();
}

StatusOr<Fd> OpenFile(const std::string& path, int flags, int mode) {
  int fd;
  do {
    fd = ::open(path.c_str(), flags | O_CLOEXEC, mode);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0) return ErrnoStatus(errno, "open " + path);
  return Fd(fd);
}

Status PwriteAll(int fd, const char* data, int64_t size, int64_t offset, std::string_view path) {
  while (size > 0) {
    const ssize_t n = ::pwrite(fd, data, static_cast<size_t>(std::min(size, kMaxIo)), offset);
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus(errno, "write " + std::string(path));
    }
    if (n == 0) {  // never for regular files; guards against spinning forever
      return InternalError("write " + std::string(path) + " made no progress");
    }
    data += n;
    size -= n;
    offset += n;
  }
  return OkStatus();
}

Status PreadAll(int fd, char* data, int64_t size, int64_t offset, std::string_view path) {
  while (size > 0) {
    const ssize_t n = ::pread(fd, data, static_cast<size_t>(std::min(size, kMaxIo)), offset);
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus(errno, "read " + std::string(path));
    }
    if (n == 0) return DataLossError("read " + std::string(path) + ": unexpected end of file");
    data += n;
    size -= n;
    offset += n;
  }
  return OkStatus();
}

void StartWriteback(int fd, int64_t offset, int64_t size) {
  // Best effort: an error here resurfaces from the fdatasync that follows.
  (void)::sync_file_range(fd, offset, size, SYNC_FILE_RANGE_WRITE);
}

Status DataSync(int fd, std::string_view path) {
  if (::fdatasync(fd) != 0) return ErrnoStatus(errno, "fdatasync " + std::string(path));
  return OkStatus();
}

Status WriteWholeFile(const std::string& path, std::string_view contents, bool fsync) {
  HPOD_ASSIGN_OR_RETURN(Fd fd, OpenFile(path, O_WRONLY | O_CREAT | O_TRUNC, 0644));
  HPOD_RETURN_IF_ERROR(PwriteAll(fd.get(), contents.data(), contents.size(), 0, path));
  if (fsync && ::fsync(fd.get()) != 0) return ErrnoStatus(errno, "fsync " + path);
  return fd.Close(path);
}

StatusOr<std::string> ReadWholeFile(const std::string& path) {
  HPOD_ASSIGN_OR_RETURN(Fd fd, OpenFile(path, O_RDONLY));
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) return ErrnoStatus(errno, "stat " + path);
  std::string out(static_cast<size_t>(st.st_size), '\0');
  HPOD_RETURN_IF_ERROR(PreadAll(fd.get(), out.data(), st.st_size, 0, path));
  return out;
}

Status SyncDirectory(const std::string& path) {
  HPOD_ASSIGN_OR_RETURN(Fd fd, OpenFile(path, O_RDONLY | O_DIRECTORY));
  if (::fsync(fd.get()) != 0) return ErrnoStatus(errno, "fsync " + path);
  return fd.Close(path);
}

}  // namespace hpod::train::ckpt
