// hpod-train checkpoints: an on-disk format with per-tensor checksums, an
// asynchronous writer that keeps the training stall to one memcpy, and loading
// that verifies and falls back to the previous checkpoint.
//
// Format, version 1 (all integers little-endian):
//
//   <dir>/step_<step:09d>/            one checkpoint; exists for readers only
//     tensors.bin                     once manifest.json is inside it
//       [0, 8)    magic "HPODCKPT"
//       [8, 12)   u32 format version (1)
//       [12, 16)  u32 tensor count
//       [16, 24)  u64 file size in bytes (header, tensors and padding)
//       [24, 32)  i64 step
//       [32, 36)  u32 crc32c of bytes [0, 32)
//       [36, 64)  zero
//       then every tensor's raw fp32 bytes, in the caller's order, each at a
//       64-byte-aligned offset; the gaps are zero.
//     manifest.json                   written last:
//       {"format": "hpod-checkpoint", "format_version": 1, "step": N,
//        "created_unix": <seconds>, "created": "<UTC ISO 8601>", "meta": <caller's>,
//        "tensors_file": {"name": "tensors.bin", "size": S, "magic": "HPODCKPT",
//                         "version": 1, "tensor_count": K, "header_crc32c": C},
//        "tensors": [{"name", "dtype": "F32", "shape", "offset", "nbytes", "crc32c"}, ...]}
//
// Commit protocol (one save): write everything into `<dir>/step_<step>.tmp-<pid>-<seq>/`;
// tensors.bin with large writes, then fdatasync; manifest.json.tmp, fsync, rename to
// manifest.json, fsync the directory; rename the directory to `step_<step>`, fsync
// <dir>. A crash at any point leaves either the previous state or the new checkpoint
// plus a `*.tmp-*` directory, which readers ignore and AsyncCheckpointer::Create removes.
// Saving a step that already exists replaces it atomically: the new directory is
// swapped with the old one (renameat2 RENAME_EXCHANGE; on file systems without it the
// old one is renamed aside first, and a crash in between leaves the step absent, so
// readers fall back to the previous step), then the old one is deleted.
//
// Thread contract: the free functions are safe from any thread (they share no state);
// AsyncCheckpointer is driven by one thread (see the class).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "hpod/base/status.h"
#include "hpod/base/thread_annotations.h"
#include "hpod/train/ckpt/format.h"
#include "hpod/train/ckpt/sharded.h"

namespace hpod::train::ckpt {

// One tensor to save. `data` is borrowed for the duration of the Save() call only.
// Invariant checked by Save(): numel == product(shape) (1 for shape {}), numel >= 0.
struct TensorView {
  std::string name;
  std::vector<int64_t> shape;
  const float* data = nullptr;
  int64_t numel = 0;
};

struct SaveStats {
  int64_t step = 0;
  double stall_s = 0;     // time Save() blocked the caller (wait for the previous save + copy)
  double snapshot_s = 0;  // of which the copy into the staging buffer
  double write_s = 0;     // writer: tensors.bin + manifest until durable (0 until completed)
  int64_t bytes = 0;      // size of tensors.bin
};

struct CheckpointerOptions {
  // After a save is durable, delete the oldest complete checkpoints so that at most
  // keep_last remain (the one just written always stays). <= 0 keeps everything.
  int keep_last = 3;
  // fdatasync/fsync files and directories. Only tests and throwaway runs turn it off:
  // without it a power loss may leave a committed checkpoint with lost data (which
  // loading then detects by its checksums and skips).
  bool fsync = true;
  // Test seam: when set, called on the writer thread with the step before it writes
  // anything. Tests block in it to observe a save in flight.
  std::function<void(int64_t step)> before_write_hook = nullptr;
  // Set: every save is this rank's part of a sharded checkpoint (sharded.h, format
  // 2); rank 0 commits it, prunes, and alone removes stale temp directories in
  // Create. Unset: format 1, one directory per save from this process.
  std::optional<ShardingOptions> sharding;
};

// Persists checkpoints in the background so that training only pays for a memcpy.
//
// Thread contract: Save/Reserve/Wait/Close/completed are called from ONE thread (the
// training loop); a private writer thread persists. At most one save is in flight:
// Save() first waits for the previous one (that wait counts as stall), then copies the
// tensors into a staging buffer it owns and reuses across saves, hands it to the writer
// and returns. The caller may modify its tensors as soon as Save() returns.
class AsyncCheckpointer {
 public:
  // Creates `dir` (mkdir -p) and removes stale `step_*.tmp*` entries left by a crashed
  // writer. Precondition: no other process writes checkpoints into `dir` (sharded:
  // only the ranks of this run, none of which has started a save yet).
  static StatusOr<std::unique_ptr<AsyncCheckpointer>> Create(std::string dir,
                                                             CheckpointerOptions options);
  ~AsyncCheckpointer();  // Close(), error ignored (call Close() to see it)
  AsyncCheckpointer(const AsyncCheckpointer&) = delete;
  AsyncCheckpointer& operator=(const AsyncCheckpointer&) = delete;

  // Snapshots `tensors` and `meta` and queues them as checkpoint `step`. When the
  // previous save failed, returns its error (once) and does not start this one; call
  // again to retry. InvalidArgumentError for malformed views (duplicate or empty names,
  // numel != product(shape), null data). stall_s/snapshot_s/bytes are filled.
  StatusOr<SaveStats> Save(int64_t step, const nlohmann::json& meta,
                           std::span<const TensorView> tensors);

  // Grows the staging buffer to at least `bytes` of tensors.bin and touches it, so the
  // first Save() does not pay first-touch page faults (slow on this VM). Optional;
  // waits for an in-flight save.
  Status Reserve(int64_t bytes);

  // Blocks until the in-flight save (if any) is durable; returns its error (once).
  Status Wait();
  // Wait() and stop the writer thread. Idempotent; Save() fails afterwards.
  Status Close();

  // Stats of the saves that completed successfully, oldest first, with write_s filled.
  std::vector<SaveStats> completed() const;

  // Bytes of tensors.bin for these tensors (header, data, padding).
  static int64_t FileBytes(std::span<const TensorView> tensors);

 private:
  struct Job {
    int64_t step = 0;
    nlohmann::json meta;
    std::vector<TensorLayout> layout;
    int64_t file_bytes = 0;
    SaveStats stats;
  };

  AsyncCheckpointer(std::string dir, CheckpointerOptions options);
  Status GrowStaging(int64_t bytes);
  void WriterLoop();

  const std::string dir_;
  const CheckpointerOptions options_;

  // The staging buffer holds the exact image of tensors.bin. Written by the training
  // thread only while no job is in flight; read by the writer only while one is.
  char* staging_ = nullptr;
  int64_t staging_capacity_ = 0;

  mutable Mutex mu_;
  std::condition_variable cv_;
  bool busy_ GUARDED_BY(mu_) = false;  // job_ is in flight
  bool stop_ GUARDED_BY(mu_) = false;
  bool closed_ = false;  // training thread only
  // Filled by Save while !busy_; the writer moves it out when it takes the job.
  Job job_ GUARDED_BY(mu_);
  Status error_ GUARDED_BY(mu_);  // first unreported writer error
  std::vector<SaveStats> completed_ GUARDED_BY(mu_);
  std::thread writer_;  // last: starts after the members above exist
};

// A checkpoint read back and verified.
struct LoadedCheckpoint {
  int64_t step = 0;
  std::string path;  // the checkpoint directory
  nlohmann::json meta;
  // Verified against their crc32c. Tensors a TensorSink took are not here.
  std::map<std::string, std::vector<float>> tensors;
  std::map<std::string, std::vector<int64_t>> shapes;  // same keys as tensors
  std::vector<std::string> names;                      // in file order
  int64_t bytes = 0;                                   // size of tensors.bin

  // The shape of tensor `name`; empty when there is no such tensor.
  std::vector<int64_t> shape(const std::string& name) const;
  bool has(const std::string& name) const { return tensors.count(name) != 0; }
};

struct LoadStats {
  double load_s = 0;
  int64_t bytes = 0;
};

// Loads and verifies one checkpoint directory: manifest fields, tensors.bin size and
// header (magic, version, step, count, header crc), every tensor's layout, shape and
// crc32c. NotFoundError when it has no manifest.json (it does not exist for readers);
// DataLossError naming the checkpoint, the tensor and what mismatched otherwise.
StatusOr<LoadedCheckpoint> Load(const std::string& checkpoint_path);

// The newest checkpoint in `dir` that verifies. Every newer `step_*` directory that
// is incomplete (no manifest) or fails verification is skipped with a warning naming it
// and why, appended to `warnings` (may be null) and logged. NotFoundError when `dir`
// holds no complete checkpoint; DataLossError when every complete one is corrupt.
StatusOr<LoadedCheckpoint> LoadLatest(const std::string& dir, std::vector<std::string>* warnings,
                                      LoadStats* stats = nullptr);

// Where Load/LoadLatest put a tensor's data instead of LoadedCheckpoint::tensors.
// Returns a pointer to room for 4 * product(shape) bytes (e.g. into the trainer's
// parameter and optimizer arenas, already touched: fresh memory costs first-touch page
// faults, several times the read itself on this VM), nullptr to keep the tensor in
// `tensors` as usual, or an error (e.g. a shape that does not fit the model), which
// ends the load at once without falling back. Called once per tensor, in file order,
// after the manifest and header verified and before the tensor's checksum is checked;
// a destination may thus be written by a checkpoint that then fails and is skipped.
// On success every tensor of the returned checkpoint (see `names`) holds its verified
// values; a destination the returned checkpoint lacks may hold a skipped one's bytes.
using TensorSink =
    std::function<StatusOr<float*>(const std::string& name, const std::vector<int64_t>& shape)>;
StatusOr<LoadedCheckpoint> Load(const std::string& checkpoint_path, const TensorSink& sink);
StatusOr<LoadedCheckpoint> LoadLatest(const std::string& dir, const TensorSink& sink,
                                      std::vector<std::string>* warnings,
                                      LoadStats* stats = nullptr);

// Paths of the complete checkpoints (named step_<9 digits>, holding manifest.json)
// in `dir`, newest first. Not verified. Empty when `dir` does not exist.
std::vector<std::string> ListComplete(const std::string& dir);
// Paths of every directory named step_<9 digits> in `dir`, complete or not
// (temp and set-aside names excluded), newest first.
std::vector<std::string> ListCheckpointDirs(const std::string& dir);

}  // namespace hpod::train::ckpt
