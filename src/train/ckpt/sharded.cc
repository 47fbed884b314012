// Writing sharded checkpoints (format in sharded.h).
#include "hpod/train/ckpt/sharded.h"

#include <sys/stat.h>

#include <cerrno>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <map>

#include "fmt/format.h"
#include "hpod/base/crc32c.h"
#include "hpod/base/thread_annotations.h"
#include "hpod/train/ckpt/io.h"

namespace hpod::train::ckpt {
namespace fs = std::filesystem;
namespace {

// Reports in memory, for one process: a single-process run, or ranks as
// threads in tests.
class LocalPartExchange : public PartExchange {
 public:
  Status Report(int64_t step, int rank, const std::string& report) override {
    MutexLock l(mu_);
    reports_[{step, rank}] = report;
    cv_.notify_all();
    return OkStatus();
  }
  StatusOr<std::vector<std::string>> Collect(int64_t step, int world,
                                             std::chrono::milliseconds timeout) override {
    MutexLock l(mu_);
    auto all = [&]() REQUIRES(mu_) {
      for (int r = 0; r < world; ++r) {
        if (reports_.count({step, r}) == 0) return false;
      }
      return true;
    };
    if (!l.WaitFor(cv_, timeout, all)) {
      std::string missing;
      for (int r = 0; r < world; ++r) {
        if (reports_.count({step, r}) == 0)
          missing += (missing.empty() ? "" : ", ") + std::to_string(r);
      }
      return DeadlineExceededError(
          fmt::format("checkpoint step {}: no part from rank(s) {} within {:g} s", step, missing,
                      timeout.count() / 1000.0));
    }
    std::vector<std::string> out;
    for (int r = 0; r < world; ++r) {
      auto it = reports_.find({step, r});
      out.push_back(std::move(it->second));
      reports_.erase(it);
    }
    return out;
  }

 private:
  Mutex mu_;
  std::condition_variable cv_;
  std::map<std::pair<int64_t, int>, std::string> reports_ GUARDED_BY(mu_);
};

nlohmann::json PartReport(const ShardingOptions& o, std::span<const TensorLayout> layout,
                          const std::vector<uint32_t>& crcs, const char* header,
                          int64_t file_bytes) {
  return {{"rank", o.rank},
          {"file", PartFileName(o.rank, o.world)},
          {"size", file_bytes},
          {"header_crc32c", HeaderCrc(header)},
          {"begin", o.begin},
          {"count", o.count},
          {"tensors", TensorsJson(layout, crcs)}};
}

// Rank 0, once its own part is down: collect every report, check every part is
// in the directory it is about to commit, write the manifest, install.
Status CommitAll(const std::string& dir, const std::string& tmp, int64_t step,
                 const nlohmann::json& meta, const ShardingOptions& o, bool fsync) {
  HPOD_ASSIGN_OR_RETURN(std::vector<std::string> reports,
                        o.exchange->Collect(step, o.world, o.commit_timeout));
  nlohmann::json parts = nlohmann::json::array();
  for (int r = 0; r < o.world; ++r) {
    nlohmann::json p = nlohmann::json::parse(reports[r], nullptr, false);
    if (p.is_discarded() || !p.is_object()) {
      return InternalError(fmt::format("rank {}'s part report is not JSON", r));
    }
    if (p.contains("error")) {
      return UnavailableError(
          fmt::format("rank {} could not write its part: {}", r, p["error"].get<std::string>()));
    }
    const std::string file = p.value("file", "");
    std::error_code ec;
    const auto size = fs::file_size(fs::path(tmp) / file, ec);
    if (ec || static_cast<int64_t>(size) != p.value("size", int64_t{-1})) {
      return FailedPreconditionError(fmt::format(
          "rank {} wrote {} but rank 0 does not see it in {}: --checkpoint-dir must be a "
          "directory every rank shares (e.g. under /fsx)",
          r, file, tmp));
    }
    parts.push_back(std::move(p));
  }
  const std::time_t now = std::time(nullptr);
  nlohmann::json manifest = {{"format", "hpod-checkpoint"},
                             {"format_version", kShardedFormatVersion},
                             {"step", step},
                             {"created_unix", static_cast<int64_t>(now)},
                             {"created", IsoTime(now)},
                             {"meta", meta},
                             {"meta_crc32c", Crc32c(meta.dump())},
                             {"world_size", o.world},
                             {"num_params", o.num_params},
                             {"parts", std::move(parts)}};
  std::string text;
  try {
    text = manifest.dump(1);
  } catch (const nlohmann::json::exception& e) {  // e.g. invalid UTF-8 in the caller's meta
    return InvalidArgumentError(std::string("checkpoint meta: ") + e.what());
  }
  const std::string manifest_tmp = tmp + "/" + kManifestFile + ".tmp";
  HPOD_RETURN_IF_ERROR(WriteWholeFile(manifest_tmp, text, fsync));
  if (std::rename(manifest_tmp.c_str(), (tmp + "/" + kManifestFile).c_str()) != 0) {
    return ErrnoStatus(errno, "rename " + manifest_tmp);
  }
  if (fsync) HPOD_RETURN_IF_ERROR(SyncDirectory(tmp));
  HPOD_RETURN_IF_ERROR(InstallDirectory(tmp, (fs::path(dir) / CheckpointDirName(step)).string()));
  if (fsync) HPOD_RETURN_IF_ERROR(SyncDirectory(dir));
  return OkStatus();
}

}  // namespace

std::unique_ptr<PartExchange> MakeLocalPartExchange() {
  return std::make_unique<LocalPartExchange>();
}

std::string PartFileName(int rank, int world) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "part-%05d-of-%05d.bin", rank, world);
  return buf;
}

Status CommitPart(const std::string& dir, int64_t step, const nlohmann::json& meta,
                  std::span<const TensorLayout> layout, const char* image, int64_t image_bytes,
                  bool fsync, const ShardingOptions& o) {
  if (o.exchange == nullptr) return InvalidArgumentError("sharded checkpoint without an exchange");
  const std::string tmp = (fs::path(dir) / (CheckpointDirName(step) + ".tmp-" + o.run_id)).string();
  auto fail = [&](Status s) {
    // Tell rank 0 (it would wait for this part until its timeout), and on
    // rank 0 leave no half-made directory behind.
    if (o.rank != 0) {
      (void)o.exchange->Report(step, o.rank, nlohmann::json{{"error", s.message()}}.dump());
    } else {
      std::error_code ec;
      fs::remove_all(tmp, ec);
    }
    return s;
  };
  if (mkdir(tmp.c_str(), 0755) != 0 && errno != EEXIST) {
    return fail(ErrnoStatus(errno, "mkdir " + tmp));
  }
  auto crcs = WriteTensorsFile(tmp + "/" + PartFileName(o.rank, o.world), layout, image,
                               image_bytes, fsync);
  if (!crcs.ok()) return fail(crcs.status());
  const std::string report = PartReport(o, layout, *crcs, image, image_bytes).dump();
  if (o.rank != 0) return o.exchange->Report(step, o.rank, report);
  HPOD_RETURN_IF_ERROR(o.exchange->Report(step, 0, report));
  Status s = CommitAll(dir, tmp, step, meta, o, fsync);
  return s.ok() ? s : fail(s);
}

}  // namespace hpod::train::ckpt
