#include "hpod/train/ckpt/format.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <thread>

#include "hpod/base/crc32c.h"
#include "hpod/train/ckpt/checkpoint.h"
#include "hpod/train/ckpt/io.h"

namespace hpod::train::ckpt {
namespace fs = std::filesystem;

static_assert(std::endian::native == std::endian::little,
              "tensors.bin stores little-endian values; add byte swapping for big-endian hosts");

namespace {

// Writes go out in chunks of this size; after each one the kernel is asked to start
// writeback (sync_file_range), so the disk works while the next chunk is copied and
// the final fdatasync only waits for the tail.
constexpr int64_t kWriteChunk = 8 << 20;
// Parallel writers of one file (see WriteTensorsFile).
constexpr int64_t kWriteStreams = 2;

// Distinguishes temp directories of saves within one process.
std::atomic<uint64_t> temp_seq{0};

std::string TempName(const std::string& base, std::string_view kind) {
  return base + ".tmp-" + std::string(kind) + std::to_string(getpid()) + "-" +
         std::to_string(temp_seq.fetch_add(1));
}

nlohmann::json MakeManifest(int64_t step, const nlohmann::json& meta,
                            std::span<const TensorLayout> layout, const std::vector<uint32_t>& crcs,
                            const char* header, int64_t file_bytes) {
  const uint32_t header_crc = HeaderCrc(header);
  const std::time_t now = std::time(nullptr);
  nlohmann::json tensors = TensorsJson(layout, crcs);
  return {{"format", "hpod-checkpoint"},
          {"format_version", kFormatVersion},
          {"step", step},
          {"created_unix", static_cast<int64_t>(now)},
          {"created", IsoTime(now)},
          {"meta", meta},
          // The meta (step counters, data position) decides where a resume
          // continues, so it is checksummed like the tensors. dump() of parsed
          // JSON reproduces the text (sorted keys, shortest round-trip numbers).
          {"meta_crc32c", Crc32c(meta.dump())},
          {"tensors_file",
           {{"name", kTensorsFile},
            {"size", file_bytes},
            {"magic", std::string(kMagic, 8)},
            {"version", kFormatVersion},
            {"tensor_count", layout.size()},
            {"header_crc32c", header_crc}}},
          {"tensors", std::move(tensors)}};
}

}  // namespace

nlohmann::json TensorsJson(std::span<const TensorLayout> layout,
                           const std::vector<uint32_t>& crcs) {
  nlohmann::json tensors = nlohmann::json::array();
  for (size_t i = 0; i < layout.size(); ++i) {
    tensors.push_back({{"name", layout[i].name},
                       {"dtype", "F32"},
                       {"shape", layout[i].shape},
                       {"offset", layout[i].offset},
                       {"nbytes", layout[i].nbytes},
                       {"crc32c", crcs[i]}});
  }
  return tensors;
}

uint32_t HeaderCrc(const char* header) {
  uint32_t crc;
  std::memcpy(&crc, header + 32, 4);
  return crc;
}

std::string IsoTime(std::time_t t) {
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

StatusOr<std::vector<uint32_t>> WriteTensorsFile(const std::string& path,
                                                 std::span<const TensorLayout> layout,
                                                 const char* image, int64_t image_bytes,
                                                 bool fsync) {
  HPOD_ASSIGN_OR_RETURN(Fd fd, OpenFile(path, O_WRONLY | O_CREAT | O_TRUNC, 0644));
  // Checksums first, from memory (crc32c runs at several GB/s; the image is
  // the writer's own staging buffer, already in cache-friendly order).
  std::vector<uint32_t> crcs(layout.size(), 0);
  for (size_t i = 0; i < layout.size(); ++i) {
    crcs[i] = Crc32c(image + layout[i].offset, static_cast<size_t>(layout[i].nbytes));
  }
  // Then the file, in kWriteStreams contiguous ranges written at once, each in
  // kWriteChunk pieces with writeback started after each. One buffered stream
  // (as dd writes) leaves the device queue half empty: two streams wrote 1.25x
  // faster on the development VM's disk (bench/ckpt_bench.py). The final
  // fdatasync waits for all of it.
  const int64_t chunks = (image_bytes + kWriteChunk - 1) / kWriteChunk;
  const int streams = static_cast<int>(std::clamp<int64_t>(chunks / 2, 1, kWriteStreams));
  std::vector<Status> results(streams);
  auto write_range = [&](int k) {
    const int64_t first = chunks * k / streams, last = chunks * (k + 1) / streams;
    for (int64_t c = first; c < last && results[k].ok(); ++c) {
      const int64_t off = c * kWriteChunk;
      const int64_t len = std::min(kWriteChunk, image_bytes - off);
      results[k] = PwriteAll(fd.get(), image + off, len, off, path);
      if (results[k].ok() && fsync) StartWriteback(fd.get(), off, len);
    }
  };
  std::vector<std::thread> helpers;
  for (int k = 1; k < streams; ++k) helpers.emplace_back(write_range, k);
  write_range(0);
  for (auto& t : helpers) t.join();
  for (const Status& st : results) HPOD_RETURN_IF_ERROR(st);
  if (fsync) HPOD_RETURN_IF_ERROR(DataSync(fd.get(), path));
  HPOD_RETURN_IF_ERROR(fd.Close(path));
  return crcs;
}

Status InstallDirectory(const std::string& tmp, const std::string& final_path) {
  if (renameat2(AT_FDCWD, tmp.c_str(), AT_FDCWD, final_path.c_str(), RENAME_NOREPLACE) == 0) {
    return OkStatus();
  }
  const int e = errno;
  if (e == EEXIST) {
    // Swap: at every instant final_path names a complete checkpoint (old or new).
    if (renameat2(AT_FDCWD, tmp.c_str(), AT_FDCWD, final_path.c_str(), RENAME_EXCHANGE) == 0) {
      std::error_code ec;
      fs::remove_all(tmp, ec);  // now the old checkpoint, under a temp name
      return OkStatus();
    }
    if (errno != EINVAL && errno != ENOSYS) return ErrnoStatus(errno, "exchange " + final_path);
  } else if (e != EINVAL && e != ENOSYS) {
    return ErrnoStatus(e, "rename " + tmp + " to " + final_path);
  }
  // No renameat2 flags here: rename the old one aside first. A crash in between leaves
  // the step absent (readers fall back to the previous one), never half-written.
  std::error_code ec;
  std::string aside;
  if (fs::exists(final_path, ec)) {
    aside = TempName(final_path, "old-");
    if (std::rename(final_path.c_str(), aside.c_str()) != 0) {
      return ErrnoStatus(errno, "rename " + final_path + " aside");
    }
  }
  if (std::rename(tmp.c_str(), final_path.c_str()) != 0) {
    return ErrnoStatus(errno, "rename " + tmp + " to " + final_path);
  }
  if (!aside.empty()) fs::remove_all(aside, ec);
  return OkStatus();
}

std::string CheckpointDirName(int64_t step) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "step_%09lld", static_cast<long long>(step));
  return buf;
}

std::optional<int64_t> ParseCheckpointDirName(std::string_view name) {
  constexpr std::string_view kPrefix = "step_";
  if (!name.starts_with(kPrefix)) return std::nullopt;
  std::string_view digits = name.substr(kPrefix.size());
  if (digits.size() < 9 || digits.size() > 18) return std::nullopt;
  int64_t step = 0;
  for (char c : digits) {
    if (c < '0' || c > '9') return std::nullopt;
    step = step * 10 + (c - '0');
  }
  return step;
}

void EncodeHeader(int64_t step, uint32_t tensor_count, int64_t file_bytes, char out[kHeaderBytes]) {
  std::memset(out, 0, kHeaderBytes);
  std::memcpy(out, kMagic, 8);
  std::memcpy(out + 8, &kFormatVersion, 4);
  std::memcpy(out + 12, &tensor_count, 4);
  const uint64_t size = static_cast<uint64_t>(file_bytes);
  std::memcpy(out + 16, &size, 8);
  std::memcpy(out + 24, &step, 8);
  const uint32_t crc = Crc32c(out, 32);
  std::memcpy(out + 32, &crc, 4);
}

Status CommitCheckpoint(const std::string& dir, int64_t step, const nlohmann::json& meta,
                        std::span<const TensorLayout> layout, const char* image,
                        int64_t image_bytes, bool fsync) {
  const std::string final_path = (fs::path(dir) / CheckpointDirName(step)).string();
  const std::string tmp = TempName(final_path, "");
  if (mkdir(tmp.c_str(), 0755) != 0) return ErrnoStatus(errno, "mkdir " + tmp);
  auto cleanup_on_error = [&](Status s) {
    std::error_code ec;
    fs::remove_all(tmp, ec);
    return s;
  };

  auto crcs = WriteTensorsFile(tmp + "/" + kTensorsFile, layout, image, image_bytes, fsync);
  if (!crcs.ok()) return cleanup_on_error(crcs.status());

  // The manifest goes last: its presence is what makes the checkpoint exist.
  std::string manifest;
  try {
    manifest = MakeManifest(step, meta, layout, *crcs, image, image_bytes).dump(1);
  } catch (const nlohmann::json::exception& e) {  // e.g. invalid UTF-8 in the caller's meta
    return cleanup_on_error(InvalidArgumentError(std::string("checkpoint meta: ") + e.what()));
  }
  const std::string manifest_tmp = tmp + "/" + kManifestFile + ".tmp";
  Status s = WriteWholeFile(manifest_tmp, manifest, fsync);
  if (s.ok() && std::rename(manifest_tmp.c_str(), (tmp + "/" + kManifestFile).c_str()) != 0) {
    s = ErrnoStatus(errno, "rename " + manifest_tmp);
  }
  if (s.ok() && fsync) s = SyncDirectory(tmp);
  if (s.ok()) s = InstallDirectory(tmp, final_path);
  if (!s.ok()) return cleanup_on_error(s);
  if (fsync) HPOD_RETURN_IF_ERROR(SyncDirectory(dir));
  return OkStatus();
}

Status PruneCheckpoints(const std::string& dir, int keep_last, int64_t just_written) {
  if (keep_last <= 0) return OkStatus();
  int kept = 1;  // just_written
  Status result;
  for (const std::string& path : ListComplete(dir)) {
    const auto step = ParseCheckpointDirName(fs::path(path).filename().string());
    if (!step || *step == just_written) continue;
    if (kept < keep_last) {
      ++kept;
      continue;
    }
    const std::string doomed = TempName(path, "del-");
    if (std::rename(path.c_str(), doomed.c_str()) != 0) {
      if (result.ok()) result = ErrnoStatus(errno, "rename " + path + " for deletion");
      continue;
    }
    std::error_code ec;
    fs::remove_all(doomed, ec);
    if (ec && result.ok()) result = InternalError("delete " + doomed + ": " + ec.message());
  }
  return result;
}

Status RemoveStaleTemps(const std::string& dir) {
  std::error_code ec;
  fs::directory_iterator it(dir, ec);
  if (ec) return FailedPreconditionError("list " + dir + ": " + ec.message());
  std::vector<fs::path> stale;
  for (; it != fs::directory_iterator(); it.increment(ec)) {  // no throwing range-for
    if (ec) return FailedPreconditionError("list " + dir + ": " + ec.message());
    const std::string name = it->path().filename().string();
    if (name.starts_with("step_") && name.find(".tmp") != std::string::npos) {
      stale.push_back(it->path());
    }
  }
  for (const auto& p : stale) {
    fs::remove_all(p, ec);
    if (ec) return InternalError("remove stale " + p.string() + ": " + ec.message());
  }
  return OkStatus();
}

}  // namespace hpod::train::ckpt
