// Reading and verifying checkpoints (format in checkpoint.h).
#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <set>
#include <thread>

#include "hpod/base/crc32c.h"
#include "hpod/train/ckpt/checkpoint.h"
#include "hpod/train/ckpt/io.h"
#include "hpod/train/ckpt/sharded.h"

namespace hpod::train::ckpt {
namespace fs = std::filesystem;

namespace {

// Larger than any real tensor's rank; rejects absurd manifests early.
constexpr int64_t kMaxDims = 16;
constexpr int64_t kReadChunk = 256 << 10;  // fits L2, so crc32c reads what pread just wrote
// Loads spread over up to kMaxLoadThreads threads, one per kBytesPerLoadThread of data.
constexpr int64_t kMaxLoadThreads = 8;
constexpr int64_t kBytesPerLoadThread = 8 << 20;

// Steps of the entries in `dir` named exactly step_<digits> that are directories,
// with their paths, newest first.
std::vector<std::pair<int64_t, std::string>> CheckpointDirs(const std::string& dir) {
  std::vector<std::pair<int64_t, std::string>> out;
  std::error_code ec;
  fs::directory_iterator it(dir, ec);
  if (ec) return out;
  // increment(ec), not range-for: a directory changing under us must not throw.
  for (; it != fs::directory_iterator(); it.increment(ec)) {
    if (ec) break;
    const auto step = ParseCheckpointDirName(it->path().filename().string());
    std::error_code type_ec;
    if (step && it->is_directory(type_ec)) out.emplace_back(*step, it->path().string());
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  return out;
}

// Everything that can be wrong with a checkpoint is reported through this, so every
// message names the checkpoint.
Status Corrupt(const std::string& path, const std::string& what) {
  return DataLossError("checkpoint " + path + ": " + what);
}

// Checks the manifest's own fields: format, version (`want_version`), step
// (also against the directory name) and the meta checksum; fills step and meta.
// Throws nlohmann::json::exception on wrongly typed fields (callers turn it
// into DataLoss).
Status CheckManifestTop(const std::string& path, const nlohmann::json& m, int64_t want_version,
                        int64_t* step, nlohmann::json* meta) {
  if (m.value("format", std::string()) != "hpod-checkpoint") {
    return Corrupt(path, "manifest.json: format is not \"hpod-checkpoint\"");
  }
  const auto version = m.at("format_version").get<int64_t>();
  if (version != want_version) {
    return Corrupt(path, "manifest.json: format_version " + std::to_string(version) +
                             ", expected " + std::to_string(want_version));
  }
  *step = m.at("step").get<int64_t>();
  const auto dir_step = ParseCheckpointDirName(fs::path(path).filename().string());
  if (dir_step && *dir_step != *step) {
    return Corrupt(path, "manifest.json says step " + std::to_string(*step));
  }
  *meta = m.value("meta", nlohmann::json::object());
  if (auto it = m.find("meta_crc32c");
      it == m.end() || !it->is_number_unsigned() || it->get<uint32_t>() != Crc32c(meta->dump())) {
    return Corrupt(path, "manifest.json: meta does not match its meta_crc32c");
  }
  return OkStatus();
}

// Checks one tensors file (format 1's tensors.bin, or a format-2 part) named
// `file`: its size and header against `tf` (its manifest entry: size,
// header_crc32c) and the layout of `tensors`. Throws like CheckManifestTop.
Status CheckTensorsFile(const std::string& path, const std::string& file, const nlohmann::json& tf,
                        const nlohmann::json& tensors, int64_t step, int64_t file_size,
                        const char* header, std::vector<TensorLayout>* layout,
                        std::vector<uint32_t>* crcs) {
  const auto size = tf.at("size").get<int64_t>();
  if (size != file_size) {
    return Corrupt(path, file + " is " + std::to_string(file_size) + " bytes, manifest.json says " +
                             std::to_string(size));
  }
  if (!tensors.is_array()) return Corrupt(path, "manifest.json: tensors is not an array");

  // The file's header must agree with itself and with the manifest.
  uint32_t h_version, h_count, h_crc;
  uint64_t h_size;
  int64_t h_step;
  std::memcpy(&h_version, header + 8, 4);
  std::memcpy(&h_count, header + 12, 4);
  std::memcpy(&h_size, header + 16, 8);
  std::memcpy(&h_step, header + 24, 8);
  std::memcpy(&h_crc, header + 32, 4);
  if (std::memcmp(header, kMagic, 8) != 0) return Corrupt(path, file + ": bad magic");
  if (h_crc != Crc32c(header, 32)) return Corrupt(path, file + ": header crc32c mismatch");
  if (h_version != kFormatVersion) {
    return Corrupt(path, file + ": version " + std::to_string(h_version));
  }
  if (static_cast<int64_t>(h_size) != file_size || h_step != step || h_count != tensors.size() ||
      tf.at("header_crc32c").get<uint32_t>() != h_crc) {
    return Corrupt(path, file + ": header (size/step/count/crc) disagrees with manifest.json");
  }

  int64_t prev_end = kHeaderBytes;
  std::set<std::string> seen;
  for (const auto& t : tensors) {
    TensorLayout l;
    l.name = t.at("name").get<std::string>();
    const std::string where = "tensor \"" + l.name + "\": ";
    if (l.name.empty() || !seen.insert(l.name).second) {
      return Corrupt(path, where + "empty or duplicate name");
    }
    if (t.at("dtype").get<std::string>() != "F32") {
      return Corrupt(path, where + "dtype " + t.at("dtype").dump() + ", expected \"F32\"");
    }
    l.shape = t.at("shape").get<std::vector<int64_t>>();
    l.offset = t.at("offset").get<int64_t>();
    l.nbytes = t.at("nbytes").get<int64_t>();
    if (static_cast<int64_t>(l.shape.size()) > kMaxDims) return Corrupt(path, where + "rank > 16");
    int64_t numel = 1;
    for (int64_t d : l.shape) {
      if (d < 0 || (d > 0 && numel > file_size / d)) {
        return Corrupt(path, where + "shape " + t.at("shape").dump() + " is negative or too big");
      }
      numel *= d;
    }
    if (l.nbytes != numel * 4) {
      return Corrupt(path, where + "nbytes " + std::to_string(l.nbytes) + " != 4 * product(shape " +
                               t.at("shape").dump() + ")");
    }
    if (l.offset % kTensorAlignment != 0 || l.offset < prev_end || l.offset > file_size ||
        l.nbytes > file_size - l.offset) {
      return Corrupt(path, where + "offset " + std::to_string(l.offset) + " + nbytes " +
                               std::to_string(l.nbytes) + " misaligned, overlapping or past the " +
                               std::to_string(file_size) + "-byte file");
    }
    prev_end = l.offset + l.nbytes;
    crcs->push_back(t.at("crc32c").get<uint32_t>());
    layout->push_back(std::move(l));
  }
  return OkStatus();
}

StatusOr<nlohmann::json> ReadManifest(const std::string& path) {
  auto manifest_text = ReadWholeFile(path + "/" + kManifestFile);
  if (!manifest_text.ok()) {
    if (manifest_text.status().code() == StatusCode::kNotFound) {
      return NotFoundError("checkpoint " + path + ": no manifest.json (incomplete checkpoint)");
    }
    return Corrupt(path, manifest_text.status().message());
  }
  nlohmann::json manifest =
      nlohmann::json::parse(*manifest_text, nullptr, /*allow_exceptions=*/false);
  if (manifest.is_discarded() || !manifest.is_object()) {
    return Corrupt(path, "manifest.json is not a valid JSON object");
  }
  return manifest;
}

// An open tensors file with its size and header.
struct OpenedFile {
  Fd fd;
  int64_t size = 0;
  char header[kHeaderBytes] = {};
};

StatusOr<OpenedFile> OpenTensorsFile(const std::string& path, const std::string& file) {
  const std::string bin_path = path + "/" + file;
  OpenedFile f;
  auto fd = OpenFile(bin_path, O_RDONLY);
  if (!fd.ok()) return Corrupt(path, fd.status().message());
  f.fd = std::move(*fd);
  struct stat st;
  if (fstat(f.fd.get(), &st) != 0) return Corrupt(path, ErrnoStatus(errno, "stat").message());
  f.size = st.st_size;
  if (st.st_size < kHeaderBytes) {
    return Corrupt(path,
                   file + " is " + std::to_string(st.st_size) + " bytes, shorter than its header");
  }
  if (Status s = PreadAll(f.fd.get(), f.header, kHeaderBytes, 0, bin_path); !s.ok()) {
    return Corrupt(path, s.message());
  }
  posix_fadvise(f.fd.get(), 0, 0, POSIX_FADV_SEQUENTIAL);
  return f;
}

// Where one tensor goes: `dst`, or (dst null and !skip) `data`.
struct Slot {
  float* dst = nullptr;
  bool skip = false;
  std::vector<float> data;
  Status status;
};

// Reads and checksums whole tensors on a few threads: a single thread spends
// about as long on crc32c as on the page-cache copy, and fresh vectors'
// first-touch faults also go in parallel. Each tensor is read in chunks,
// checksummed while in cache. Returns the first failure, naming the tensor.
Status ReadTensors(const std::string& path, const std::string& file, int fd,
                   const std::vector<TensorLayout>& layout, const std::vector<uint32_t>& crcs,
                   std::vector<Slot>& slots) {
  const std::string bin_path = path + "/" + file;
  int64_t total = 0;
  for (size_t i = 0; i < layout.size(); ++i) total += slots[i].skip ? 0 : layout[i].nbytes;
  std::atomic<size_t> next{0};
  std::atomic<bool> failed{false};
  auto work = [&] {
    for (size_t i = 0; !failed && (i = next++) < layout.size();) {
      const TensorLayout& l = layout[i];
      Slot& slot = slots[i];
      if (slot.skip) continue;
      if (slot.dst == nullptr) slot.data.resize(static_cast<size_t>(l.nbytes / 4));
      char* bytes = reinterpret_cast<char*>(slot.dst ? slot.dst : slot.data.data());
      uint32_t crc = 0;
      for (int64_t off = 0; off < l.nbytes && slot.status.ok(); off += kReadChunk) {
        const int64_t n = std::min(kReadChunk, l.nbytes - off);
        slot.status = PreadAll(fd, bytes + off, n, l.offset + off, bin_path);
        if (slot.status.ok()) crc = Crc32cExtend(crc, bytes + off, static_cast<size_t>(n));
      }
      if (slot.status.ok() && crc != crcs[i]) {
        slot.status = DataLossError("crc32c " + std::to_string(crc) +
                                    " != " + std::to_string(crcs[i]) + " in manifest.json");
      }
      if (!slot.status.ok()) failed = true;
    }
  };
  const int threads = static_cast<int>(std::clamp<int64_t>(
      std::min<int64_t>(std::thread::hardware_concurrency(), total / kBytesPerLoadThread), 1,
      kMaxLoadThreads));
  std::vector<std::thread> helpers;
  for (int t = 1; t < threads; ++t) helpers.emplace_back(work);
  work();
  for (auto& h : helpers) h.join();
  // Workers claim tensors in file order and finish what they claim, so every
  // tensor before the first failure was read.
  for (size_t i = 0; i < layout.size(); ++i) {
    if (!slots[i].status.ok()) {
      return Corrupt(path, (file == kTensorsFile ? "" : file + ": ") + "tensor \"" +
                               layout[i].name + "\": " + slots[i].status.message());
    }
  }
  return OkStatus();
}

}  // namespace

std::vector<int64_t> LoadedCheckpoint::shape(const std::string& name) const {
  auto it = shapes.find(name);
  return it == shapes.end() ? std::vector<int64_t>{} : it->second;
}

std::vector<std::string> ListComplete(const std::string& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (auto& [step, path] : CheckpointDirs(dir)) {
    if (fs::is_regular_file(fs::path(path) / kManifestFile, ec)) out.push_back(std::move(path));
  }
  return out;
}

std::vector<std::string> ListCheckpointDirs(const std::string& dir) {
  std::vector<std::string> out;
  for (auto& [step, path] : CheckpointDirs(dir)) out.push_back(std::move(path));
  return out;
}

StatusOr<LoadedCheckpoint> Load(const std::string& checkpoint_path) {
  return Load(checkpoint_path, TensorSink());
}

StatusOr<LoadedCheckpoint> Load(const std::string& checkpoint_path, const TensorSink& sink) {
  std::string path = checkpoint_path;
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  HPOD_ASSIGN_OR_RETURN(nlohmann::json manifest, ReadManifest(path));
  HPOD_ASSIGN_OR_RETURN(OpenedFile file, OpenTensorsFile(path, kTensorsFile));

  LoadedCheckpoint out;
  out.path = path;
  out.bytes = file.size;
  std::vector<TensorLayout> layout;
  std::vector<uint32_t> crcs;
  try {
    HPOD_RETURN_IF_ERROR(CheckManifestTop(path, manifest, kFormatVersion, &out.step, &out.meta));
    HPOD_RETURN_IF_ERROR(CheckTensorsFile(path, kTensorsFile, manifest.at("tensors_file"),
                                          manifest.at("tensors"), out.step, file.size, file.header,
                                          &layout, &crcs));
  } catch (const nlohmann::json::exception& e) {
    return Corrupt(path, std::string("manifest.json: ") + e.what());
  }

  // Destinations first (the sink runs on this thread, in file order).
  std::vector<Slot> slots(layout.size());
  for (size_t i = 0; i < layout.size() && sink; ++i) {
    auto d = sink(layout[i].name, layout[i].shape);
    if (!d.ok()) {
      // Keep the codes that mean "skip this checkpoint" for the checkpoint's own faults.
      Status e = d.status();
      if (e.code() == StatusCode::kDataLoss || e.code() == StatusCode::kNotFound) {
        e = FailedPreconditionError(e.message());
      }
      return e.Annotate("loading checkpoint " + path);
    }
    slots[i].dst = *d;
  }
  HPOD_RETURN_IF_ERROR(ReadTensors(path, kTensorsFile, file.fd.get(), layout, crcs, slots));
  for (size_t i = 0; i < layout.size(); ++i) {
    const TensorLayout& l = layout[i];
    out.names.push_back(l.name);
    out.shapes[l.name] = l.shape;
    if (slots[i].dst == nullptr) out.tensors[l.name] = std::move(slots[i].data);
  }
  return out;
}

StatusOr<LoadedCheckpoint> LoadLatest(const std::string& dir, std::vector<std::string>* warnings,
                                      LoadStats* stats) {
  return LoadLatest(dir, TensorSink(), warnings, stats);
}

StatusOr<LoadedCheckpoint> LoadLatest(const std::string& dir, const TensorSink& sink,
                                      std::vector<std::string>* warnings, LoadStats* stats) {
  const auto t0 = std::chrono::steady_clock::now();
  std::string skipped;  // every skipped checkpoint and why, for the final error
  bool any_complete = false;
  for (const auto& [step, path] : CheckpointDirs(dir)) {
    auto loaded = Load(path, sink);
    const StatusCode code = loaded.status().code();
    if (!loaded.ok() && code != StatusCode::kDataLoss && code != StatusCode::kNotFound) {
      return loaded.status();  // the sink refused: not the checkpoint's fault
    }
    if (loaded.ok()) {
      if (stats) {
        stats->load_s =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        stats->bytes = loaded->bytes;
      }
      return loaded;
    }
    if (loaded.status().code() != StatusCode::kNotFound) any_complete = true;
    std::string warning = "skipping " + loaded.status().message();
    spdlog::warn("{}", warning);
    skipped += "; " + warning;
    if (warnings) warnings->push_back(std::move(warning));
  }
  if (any_complete) return DataLossError("no valid checkpoint in " + dir + skipped);
  return NotFoundError("no complete checkpoint in " + dir + skipped);
}

StatusOr<int> ReadFormatVersion(const std::string& checkpoint_path) {
  HPOD_ASSIGN_OR_RETURN(nlohmann::json m, ReadManifest(checkpoint_path));
  auto it = m.find("format_version");
  if (it == m.end() || !it->is_number_integer()) {
    return Corrupt(checkpoint_path, "manifest.json has no integer format_version");
  }
  return it->get<int>();
}

StatusOr<ShardedCheckpoint> LoadSharded(const std::string& checkpoint_path, const SliceSink& sink) {
  std::string path = checkpoint_path;
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  HPOD_ASSIGN_OR_RETURN(nlohmann::json manifest, ReadManifest(path));
  ShardedCheckpoint out;
  out.path = path;
  nlohmann::json parts;
  try {
    HPOD_RETURN_IF_ERROR(
        CheckManifestTop(path, manifest, kShardedFormatVersion, &out.step, &out.meta));
    out.world = manifest.at("world_size").get<int>();
    out.num_params = manifest.at("num_params").get<int64_t>();
    parts = manifest.at("parts");
    if (!parts.is_array() || static_cast<int>(parts.size()) != out.world || out.world < 1) {
      return Corrupt(path,
                     "manifest.json: parts do not match world_size " + std::to_string(out.world));
    }
    // The parts tile [0, num_params) in rank order.
    int64_t next = 0;
    for (int r = 0; r < out.world; ++r) {
      PartInfo p;
      p.rank = parts[r].at("rank").get<int>();
      p.file = parts[r].at("file").get<std::string>();
      p.begin = parts[r].at("begin").get<int64_t>();
      p.count = parts[r].at("count").get<int64_t>();
      if (p.rank != r || p.file != PartFileName(r, out.world) || p.begin != next || p.count < 0) {
        return Corrupt(path, "manifest.json: part " + std::to_string(r) +
                                 " is out of order or does not continue at element " +
                                 std::to_string(next));
      }
      next += p.count;
      out.parts.push_back(std::move(p));
    }
    if (next != out.num_params) {
      return Corrupt(path, "manifest.json: parts cover " + std::to_string(next) + " of " +
                               std::to_string(out.num_params) + " parameters");
    }
  } catch (const nlohmann::json::exception& e) {
    return Corrupt(path, std::string("manifest.json: ") + e.what());
  }

  for (int r = 0; r < out.world; ++r) {
    const PartInfo& part = out.parts[r];
    // Destinations first: a part nobody here needs is not even opened.
    std::vector<float*> dsts;
    bool any = false;
    for (const char* name : {"params", "exp_avg", "exp_avg_sq"}) {
      HPOD_ASSIGN_OR_RETURN(float* d, sink(part, name));
      dsts.push_back(d);
      any = any || d != nullptr;
    }
    if (!any) continue;
    HPOD_ASSIGN_OR_RETURN(OpenedFile file, OpenTensorsFile(path, part.file));
    std::vector<TensorLayout> layout;
    std::vector<uint32_t> crcs;
    try {
      HPOD_RETURN_IF_ERROR(CheckTensorsFile(path, part.file, parts[r], parts[r].at("tensors"),
                                            out.step, file.size, file.header, &layout, &crcs));
    } catch (const nlohmann::json::exception& e) {
      return Corrupt(path, part.file + ": " + e.what());
    }
    std::vector<Slot> slots(layout.size());
    for (size_t i = 0; i < layout.size(); ++i) {
      const auto& l = layout[i];
      const int which = l.name == "params"       ? 0
                        : l.name == "exp_avg"    ? 1
                        : l.name == "exp_avg_sq" ? 2
                                                 : -1;
      if (which < 0 || l.shape != std::vector<int64_t>{part.count}) {
        return Corrupt(path, part.file + ": unexpected tensor \"" + l.name + "\" of shape " +
                                 nlohmann::json(l.shape).dump());
      }
      slots[i].dst = dsts[which];
      slots[i].skip = dsts[which] == nullptr;
      if (!slots[i].skip) out.bytes_read += l.nbytes;
    }
    if (layout.size() != 3) return Corrupt(path, part.file + ": expected 3 tensors");
    HPOD_RETURN_IF_ERROR(ReadTensors(path, part.file, file.fd.get(), layout, crcs, slots));
  }
  return out;
}

}  // namespace hpod::train::ckpt
