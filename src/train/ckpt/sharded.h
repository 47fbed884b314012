// Sharded checkpoints (format 2): one checkpoint written by every rank of a
// distributed run in parallel, one part each, committed by rank 0.
//
//   <dir>/step_<step:09d>/
//     part-<rank:05d>-of-<world:05d>.bin   one per rank, tensors.bin's file
//         format (checkpoint.h: header, 64-byte-aligned fp32 tensors) holding
//         "params", "exp_avg" and "exp_avg_sq": the slice [begin, begin+count)
//         of the flat parameter arena (ZeRO-1 makes the optimizer state
//         naturally sharded; parameters are replicated, each rank writes its
//         slice of them so no byte is written twice)
//     manifest.json                        written last, by rank 0:
//       {"format": "hpod-checkpoint", "format_version": 2, "step", "created_unix",
//        "created", "meta", "meta_crc32c", "world_size": W, "num_params": P,
//        "parts": [{"rank", "file", "size", "header_crc32c", "begin", "count",
//                   "tensors": [{"name", "dtype", "shape", "offset", "nbytes",
//                                "crc32c"}, ...]}, ...]}
//
// Commit protocol: every rank writes its part into <dir>/step_<step>.tmp-<run>
// (one name for all ranks of a run attempt), fdatasyncs it and reports its
// size and checksums to rank 0 (PartExchange). Rank 0 waits for every report,
// checks each part is there (a directory the ranks do not share is an error
// saying so), writes manifest.json (tmp, fsync, rename), fsyncs, renames the
// directory into place and fsyncs <dir>, as format 1 does. A crash or a rank
// lost at any point leaves the previous checkpoint and a *.tmp-* directory.
//
// Loading reads what a rank needs: every part's "params" (the whole model) and
// the optimizer slices that overlap its own shard, whatever the world size
// that wrote them, so a run resumes at another world size.
//
// Thread contract: free functions, safe from any thread for distinct paths;
// a PartExchange is used by the checkpoint writer threads of all ranks.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <vector>

#include "hpod/base/status.h"
#include "hpod/train/ckpt/format.h"

namespace hpod::train::ckpt {

inline constexpr uint32_t kShardedFormatVersion = 2;

// How the part reports of one checkpoint reach rank 0. Thread contract: safe
// from any thread.
class PartExchange {
 public:
  virtual ~PartExchange() = default;
  // Publishes rank `rank`'s report (JSON text) for checkpoint `step`.
  virtual Status Report(int64_t step, int rank, const std::string& report) = 0;
  // Every rank's report for `step`, by rank, waiting up to `timeout`.
  // DeadlineExceeded naming the ranks whose report never came.
  virtual StatusOr<std::vector<std::string>> Collect(int64_t step, int world,
                                                     std::chrono::milliseconds timeout) = 0;
};

// An exchange within one process: a single-process run (world 1), or ranks as
// threads in tests.
std::unique_ptr<PartExchange> MakeLocalPartExchange();

struct ShardingOptions {
  int rank = 0;
  int world = 1;
  int64_t begin = 0;  // this rank's slice of the flat arena
  int64_t count = 0;
  int64_t num_params = 0;  // of the whole arena
  // Names the temp directory all ranks of this run attempt write into.
  std::string run_id = "local";
  PartExchange* exchange = nullptr;  // not owned; required
  // How long rank 0 waits for the other ranks' reports.
  std::chrono::milliseconds commit_timeout{std::chrono::minutes(10)};
};

// "part-00002-of-00004.bin".
std::string PartFileName(int rank, int world);

// Writes this rank's part (the image of its part file, header included) and,
// on rank 0, commits the checkpoint once every part reported. On any failure
// this rank reports it (so rank 0 stops waiting) and rank 0 removes the temp
// directory. `fsync` = false skips every fsync/fdatasync (tests only).
Status CommitPart(const std::string& dir, int64_t step, const nlohmann::json& meta,
                  std::span<const TensorLayout> layout, const char* image, int64_t image_bytes,
                  bool fsync, const ShardingOptions& sharding);

struct PartInfo {
  int rank = 0;
  std::string file;
  int64_t begin = 0;
  int64_t count = 0;
};

struct ShardedCheckpoint {
  int64_t step = 0;
  std::string path;
  nlohmann::json meta;
  int world = 1;
  int64_t num_params = 0;
  std::vector<PartInfo> parts;
  int64_t bytes_read = 0;  // of the tensors this load read
};

// Where a part's tensor ("params", "exp_avg", "exp_avg_sq"; `part.count`
// floats for the arena range [part.begin, part.begin + part.count)) is read
// to: a destination with room for part.count floats, or nullptr to skip it
// (neither read nor verified: another rank needs it, not this one).
using SliceSink = std::function<StatusOr<float*>(const PartInfo& part, const std::string& tensor)>;

// Loads a format-2 checkpoint: the manifest (format, step, meta checksum,
// parts covering [0, num_params) exactly once), each part's header, and the
// crc32c of every tensor the sink takes. NotFound without manifest.json;
// DataLoss naming the checkpoint, the part and what mismatched.
StatusOr<ShardedCheckpoint> LoadSharded(const std::string& path, const SliceSink& sink);

// The manifest's format_version (1 or 2), without reading any tensor.
// NotFound without manifest.json; DataLoss for an unreadable one.
StatusOr<int> ReadFormatVersion(const std::string& path);

}  // namespace hpod::train::ckpt
