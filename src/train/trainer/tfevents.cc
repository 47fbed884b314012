#include "hpod/train/trainer/tfevents.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "hpod/base/crc32c.h"

namespace hpod::train {
namespace {

// Protobuf wire types.
constexpr uint32_t kVarint = 0, kFixed64 = 1, kLengthDelimited = 2, kFixed32 = 5;

void PutVarint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out += static_cast<char>((v & 0x7F) | 0x80);
    v >>= 7;
  }
  out += static_cast<char>(v);
}

void PutTag(std::string& out, uint32_t field, uint32_t wire_type) {
  PutVarint(out, (field << 3) | wire_type);
}

void PutFixed32(std::string& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out += static_cast<char>((v >> (8 * i)) & 0xFF);
}

void PutFixed64(std::string& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out += static_cast<char>((v >> (8 * i)) & 0xFF);
}

void PutBytes(std::string& out, uint32_t field, std::string_view bytes) {
  PutTag(out, field, kLengthDelimited);
  PutVarint(out, bytes.size());
  out += bytes;
}

void PutDouble(std::string& out, uint32_t field, double v) {
  uint64_t bits;
  std::memcpy(&bits, &v, sizeof(bits));
  PutTag(out, field, kFixed64);
  PutFixed64(out, bits);
}

void PutFloat(std::string& out, uint32_t field, float v) {
  uint32_t bits;
  std::memcpy(&bits, &v, sizeof(bits));
  PutTag(out, field, kFixed32);
  PutFixed32(out, bits);
}

// Field numbers (tensorboard/compat/proto/event.proto, summary.proto).
constexpr uint32_t kEventWallTime = 1, kEventStep = 2, kEventFileVersion = 3, kEventSummary = 5;
constexpr uint32_t kSummaryValue = 1;
constexpr uint32_t kValueTag = 1, kValueSimpleValue = 2;

bool IsValidUtf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    auto b = static_cast<unsigned char>(s[i]);
    size_t len;
    uint32_t cp;
    if (b < 0x80) {
      ++i;
      continue;
    } else if ((b >> 5) == 0x6) {
      len = 2;
      cp = b & 0x1F;
    } else if ((b >> 4) == 0xE) {
      len = 3;
      cp = b & 0x0F;
    } else if ((b >> 3) == 0x1E) {
      len = 4;
      cp = b & 0x07;
    } else {
      return false;
    }
    if (i + len > s.size()) return false;
    for (size_t k = 1; k < len; ++k) {
      auto c = static_cast<unsigned char>(s[i + k]);
      if ((c & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (c & 0x3F);
    }
    // Overlong forms, surrogates and values past U+10FFFF are not UTF-8.
    static constexpr uint32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < kMin[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += len;
  }
  return true;
}

Status CheckTag(std::string_view tag) {
  if (tag.empty()) return InvalidArgumentError("tfevents: empty scalar tag");
  if (!IsValidUtf8(tag)) {
    return InvalidArgumentError("tfevents: scalar tag is not UTF-8: " + std::string(tag));
  }
  return OkStatus();
}

Status ErrnoError(const std::string& what, int err) {
  std::string message = what + ": " + std::strerror(err);
  if (err == ENOSPC || err == EDQUOT) return ResourceExhaustedError(std::move(message));
  if (err == EACCES || err == EPERM || err == EROFS) {
    return PermissionDeniedError(std::move(message));
  }
  if (err == ENOENT || err == ENOTDIR) return NotFoundError(std::move(message));
  return InternalError(std::move(message));
}

std::atomic<int> g_writer_count{0};

}  // namespace

std::string EncodeFileVersionEvent(double wall_time_s, std::string_view file_version) {
  std::string event;
  PutDouble(event, kEventWallTime, wall_time_s);
  PutBytes(event, kEventFileVersion, file_version);
  return event;
}

std::string EncodeScalarsEvent(double wall_time_s, int64_t step,
                               std::span<const std::pair<std::string, float>> values) {
  std::string summary;
  for (const auto& [tag, value] : values) {
    std::string v;
    PutBytes(v, kValueTag, tag);
    PutFloat(v, kValueSimpleValue, value);
    PutBytes(summary, kSummaryValue, v);
  }
  std::string event;
  PutDouble(event, kEventWallTime, wall_time_s);
  PutTag(event, kEventStep, kVarint);
  PutVarint(event, static_cast<uint64_t>(step));  // int64: two's complement, 10 bytes if < 0
  PutBytes(event, kEventSummary, summary);
  return event;
}

std::string FrameRecord(std::string_view data) {
  std::string record;
  record.reserve(data.size() + 16);
  PutFixed64(record, data.size());
  PutFixed32(record, MaskCrc32c(Crc32c(record.data(), 8)));
  record += data;
  PutFixed32(record, MaskCrc32c(Crc32c(data)));
  return record;
}

StatusOr<std::unique_ptr<EventWriter>> EventWriter::Create(const std::string& logdir,
                                                           const Clock& clock) {
  std::error_code ec;
  std::filesystem::create_directories(logdir, ec);
  if (ec) return ErrnoError("tfevents: creating " + logdir, ec.value());

  char host[256] = {};
  if (gethostname(host, sizeof(host) - 1) != 0 || host[0] == '\0') {
    std::snprintf(host, sizeof(host), "localhost");
  }
  const double now = std::chrono::duration<double>(clock.Now().time_since_epoch()).count();
  char name[512];
  std::snprintf(name, sizeof(name), "events.out.tfevents.%010lld.%s.%d.%d",
                static_cast<long long>(now), host, static_cast<int>(getpid()),
                g_writer_count.fetch_add(1));
  std::string path = (std::filesystem::path(logdir) / name).string();
  // O_EXCL: two writers never share a file (the counter makes the name unique
  // within this process; pid and host across processes).
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return ErrnoError("tfevents: creating " + path, errno);

  std::unique_ptr<EventWriter> writer(new EventWriter(fd, std::move(path)));
  HPOD_RETURN_IF_ERROR(writer->WriteRecord(EncodeFileVersionEvent(now, "brain.Event:2")));
  return writer;
}

EventWriter::~EventWriter() { ::close(fd_); }

Status EventWriter::AddScalar(std::string_view tag, int64_t step, float value, double wall_time_s) {
  const std::pair<std::string, float> one[] = {{std::string(tag), value}};
  return AddScalars(step, wall_time_s, one);
}

Status EventWriter::AddScalars(int64_t step, double wall_time_s,
                               std::span<const std::pair<std::string, float>> tags) {
  for (const auto& [tag, value] : tags) HPOD_RETURN_IF_ERROR(CheckTag(tag));
  return WriteRecord(EncodeScalarsEvent(wall_time_s, step, tags));
}

Status EventWriter::Flush() {
  std::lock_guard<std::mutex> lock(mu_);
  if (::fdatasync(fd_) != 0) return ErrnoError("tfevents: fdatasync " + path_, errno);
  return OkStatus();
}

Status EventWriter::WriteRecord(std::string_view data) {
  const std::string record = FrameRecord(data);
  std::lock_guard<std::mutex> lock(mu_);
  size_t done = 0;
  while (done < record.size()) {
    ssize_t n = ::write(fd_, record.data() + done, record.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      // Roll back a partial record so that later records stay readable (a reader
      // stops at the first bad record). Best effort: the write error is reported.
      if (::ftruncate(fd_, size_) == 0) (void)::lseek(fd_, size_, SEEK_SET);
      return ErrnoError("tfevents: writing " + path_, err);
    }
    done += static_cast<size_t>(n);
  }
  size_ += static_cast<off_t>(record.size());
  return OkStatus();
}

}  // namespace hpod::train
