// The checkpoint format's building blocks (layout, header, directory names) and the
// synchronous commit of one checkpoint directory. checkpoint.h documents the format;
// this header is what AsyncCheckpointer and the loader share, and what tests use to
// build or inspect checkpoints directly.
//
// Thread contract: pure functions and functions on distinct paths; no shared state.
#pragma once

#include <cstdint>
#include <ctime>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "hpod/base/status.h"

namespace hpod::train::ckpt {

inline constexpr char kMagic[] = "HPODCKPT";  // 8 bytes on disk, no NUL
inline constexpr uint32_t kFormatVersion = 1;
inline constexpr int64_t kHeaderBytes = 64;
inline constexpr int64_t kTensorAlignment = 64;
inline constexpr char kTensorsFile[] = "tensors.bin";
inline constexpr char kManifestFile[] = "manifest.json";

// Where one tensor lives in tensors.bin.
struct TensorLayout {
  std::string name;
  std::vector<int64_t> shape;
  int64_t offset = 0;  // multiple of kTensorAlignment, >= kHeaderBytes
  int64_t nbytes = 0;  // 4 * numel
};

// "step_000000042".
std::string CheckpointDirName(int64_t step);
// The step of a directory named exactly step_<at least 9 digits>; nullopt for
// anything else (temp dirs, foreign names).
std::optional<int64_t> ParseCheckpointDirName(std::string_view name);

// The 64-byte header of tensors.bin.
void EncodeHeader(int64_t step, uint32_t tensor_count, int64_t file_bytes, char out[kHeaderBytes]);

// Writes `image` (the exact bytes of tensors.bin, header included) and the manifest
// into a temp directory and commits it as <dir>/step_<step> (protocol in
// checkpoint.h), replacing an existing one. The per-tensor crc32c is computed here
// from `image`. `fsync` = false skips every fsync/fdatasync.
Status CommitCheckpoint(const std::string& dir, int64_t step, const nlohmann::json& meta,
                        std::span<const TensorLayout> layout, const char* image,
                        int64_t image_bytes, bool fsync);

// Deletes the oldest complete checkpoints in `dir` beyond `keep_last`, never
// `just_written` (the newest keep_last - 1 others stay beside it) and never anything
// not named step_<digits>. Each victim is renamed to a temp name first, so a crash
// mid-delete leaves a temp directory, not a half-deleted checkpoint.
Status PruneCheckpoints(const std::string& dir, int keep_last, int64_t just_written);

// Removes `step_*.tmp*` entries in `dir` (leftovers of a crashed writer).
Status RemoveStaleTemps(const std::string& dir);

// The pieces CommitCheckpoint and the sharded writer (sharded.h) share.
// Writes a tensors.bin-format file from `image` in large chunks on two
// threads (starting writeback after each, fdatasync at the end when `fsync`)
// and returns the per-tensor crc32c, computed from `image` first.
StatusOr<std::vector<uint32_t>> WriteTensorsFile(const std::string& path,
                                                 std::span<const TensorLayout> layout,
                                                 const char* image, int64_t image_bytes,
                                                 bool fsync);
// Moves the committed temp directory `tmp` to `final_path`, replacing an
// existing checkpoint atomically where the file system can swap directories.
Status InstallDirectory(const std::string& tmp, const std::string& final_path);
// "2026-12-01T09:36:43Z".
std::string IsoTime(std::time_t t);
// The manifest's "tensors" array for a file with this layout and checksums.
nlohmann::json TensorsJson(std::span<const TensorLayout> layout, const std::vector<uint32_t>& crcs);
// The header_crc32c a header carries (bytes [32, 36)).
uint32_t HeaderCrc(const char* header);

}  // namespace hpod::train::ckpt
