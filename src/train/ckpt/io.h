// Small POSIX file helpers for the checkpoint writer and reader: an owning file
// descriptor and loops that turn short reads/writes and EINTR into Status values.
//
// Thread contract: functions are safe from any thread; an Fd is owned by one thread.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "hpod/base/file_util.h"  // ErrnoStatus
#include "hpod/base/status.h"

namespace hpod::train::ckpt {

class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  Fd(Fd&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
  Fd& operator=(Fd&& o) noexcept;
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd();
  int get() const { return fd_; }
  // close(2) with its error (a write error can surface only here on some file systems).
  Status Close(std::string_view path);

 private:
  int fd_ = -1;
};

StatusOr<Fd> OpenFile(const std::string& path, int flags, int mode = 0);
Status PwriteAll(int fd, const char* data, int64_t size, int64_t offset, std::string_view path);
Status PreadAll(int fd, char* data, int64_t size, int64_t offset, std::string_view path);
// Asks the kernel to start writing [offset, offset+size) back now (no wait).
void StartWriteback(int fd, int64_t offset, int64_t size);
Status DataSync(int fd, std::string_view path);
// Creates/truncates `path`, writes `contents`, fsyncs when asked.
Status WriteWholeFile(const std::string& path, std::string_view contents, bool fsync);
StatusOr<std::string> ReadWholeFile(const std::string& path);
// fsync of a directory, so renames and creations inside it are durable.
Status SyncDirectory(const std::string& path);

}  // namespace hpod::train::ckpt
