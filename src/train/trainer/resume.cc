// Where a run continues from (run.h): the newest checkpoint every rank can
// verify, in either format, at any world size.
#include <deque>
#include <filesystem>
#include <map>
#include <set>

#include "fmt/format.h"
#include "fmt/ranges.h"
#include "hpod/train/ckpt/sharded.h"
#include "hpod/train/trainer/run.h"

namespace hpod::train {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

// Format 1 names its tensors (HF names, AdamW moments under PyTorch's).
constexpr char kExpAvg[] = "optimizer.exp_avg.";
constexpr char kExpAvgSq[] = "optimizer.exp_avg_sq.";

std::string ShapeString(const std::vector<int64_t>& shape) {
  return fmt::format("[{}]", fmt::join(shape, ", "));
}

// What a checkpoint's meta must match for the run to continue it; anything
// else is another run's checkpoint (fatal, not a fallback).
Status CheckCompatible(const TrainOptions& o, const Run& r, const std::string& path,
                       const nlohmann::json& m) {
  if (m.value("format", "") != "hpod-train") {
    return DataLossError(fmt::format("{} is not an hpod-train checkpoint", path));
  }
  auto want = model::ConfigToJson(r.config);
  if (m.value("config", nlohmann::json()) != want) {
    return FailedPreconditionError(
        fmt::format("checkpoint {} was written for model {} but this run has {}; use another "
                    "--checkpoint-dir or --no-resume",
                    path, m.value("config", nlohmann::json()).dump(), want.dump()));
  }
  int64_t seq_len = m.value("data", nlohmann::json::object()).value("seq_len", int64_t{0});
  if (seq_len != o.seq_len) {
    return FailedPreconditionError(
        fmt::format("checkpoint {} was trained with --seq-len {}, this run has {}; the data "
                    "position would not match",
                    path, seq_len, o.seq_len));
  }
  auto ck_seed = m.value("rng", nlohmann::json::object()).value("seed", uint64_t{0});
  if (ck_seed != o.seed) {
    return FailedPreconditionError(
        fmt::format("checkpoint {} was trained with --seed {}, this run has {}; the data order "
                    "would not match",
                    path, ck_seed, o.seed));
  }
  const auto data = m.value("data", nlohmann::json::object());
  const std::string fp = data.value("fingerprint", "");
  if (fp != r.source->fingerprint()) {
    return FailedPreconditionError(
        fmt::format("checkpoint {} was trained on other data ({}; this run's --data is {}): its "
                    "consumed_samples would point elsewhere; use the same shards, another "
                    "--checkpoint-dir, or --no-resume",
                    path, fp.empty() ? std::string("unknown") : fp, r.source->fingerprint()));
  }
  std::string tok = m.value("tokenizer_id", "");
  if (!tok.empty() && !r.tokenizer_id.empty() && tok != r.tokenizer_id) {
    return FailedPreconditionError(
        fmt::format("checkpoint {} was trained with tokenizer {}, this run's is {}", path, tok,
                    r.tokenizer_id));
  }
  return OkStatus();
}

// Changed schedule settings are warnings: extending or tuning a run is
// legitimate, but the result is then not the run that was checkpointed.
std::vector<std::string> ScheduleChanges(const TrainOptions& o, const Run& r,
                                         const std::string& path, const nlohmann::json& meta) {
  std::vector<std::string> out;
  const auto before = meta.value("schedule", nlohmann::json::object());
  const auto now = ScheduleJson(o, r.world_size());
  for (const auto& [key, value] : now.items()) {
    auto it = before.find(key);
    if (it != before.end() && *it != value) {
      out.push_back(fmt::format("{} was {} in {}, is {} now", key, it->dump(), path, value.dump()));
    }
  }
  return out;
}

struct Candidate {
  nlohmann::json meta;
  int64_t bytes = 0;
};

// Copies the overlap of a slice [from_begin, +n) into this rank's shard arena.
void CopyOverlap(const float* from, int64_t from_begin, int64_t n, float* shard,
                 int64_t shard_begin, int64_t shard_count) {
  const int64_t lo = std::max(from_begin, shard_begin);
  const int64_t hi = std::min(from_begin + n, shard_begin + shard_count);
  if (lo < hi) {
    std::copy(from + (lo - from_begin), from + (hi - from_begin), shard + (lo - shard_begin));
  }
}

// Format 2: every part's parameters, and the moments of the parts that
// overlap this rank's shard (straight into the arena when the part is the
// shard, as when the world size did not change).
StatusOr<Candidate> LoadSharded(const std::string& path, Run& r) {
  // Slices that only partly overlap the shard (a deque: the sink hands out
  // pointers into earlier elements while adding later ones).
  std::deque<std::pair<ckpt::PartInfo, std::vector<float>>> partial;  // per part: m, then v
  const int64_t n = r.model->num_params();
  auto got = ckpt::LoadSharded(
      path, [&](const ckpt::PartInfo& part, const std::string& name) -> StatusOr<float*> {
        if (part.begin + part.count > n) {
          return FailedPreconditionError(
              fmt::format("checkpoint {} holds {} parameters, this run's model has {}", path,
                          part.begin + part.count, n));
        }
        if (name == "params") return r.model->params() + part.begin;
        const int64_t lo = std::max(part.begin, r.shard_begin);
        const int64_t hi = std::min(part.begin + part.count, r.shard_begin + r.shard_count);
        if (lo >= hi) return nullptr;
        if (part.begin == r.shard_begin && part.count == r.shard_count) {
          return name == "exp_avg" ? r.adam->m() : r.adam->v();
        }
        partial.emplace_back(part, std::vector<float>(part.count));
        return partial.back().second.data();
      });
  if (!got.ok()) return got.status();
  if (got->num_params != n) {
    return FailedPreconditionError(fmt::format(
        "checkpoint {} holds {} parameters, this run's model has {}", path, got->num_params, n));
  }
  // The sink saw exp_avg before exp_avg_sq for each part.
  for (size_t i = 0; i < partial.size(); ++i) {
    float* dst = i % 2 == 0 ? r.adam->m() : r.adam->v();
    const auto& [part, data] = partial[i];
    CopyOverlap(data.data(), part.begin, part.count, dst, r.shard_begin, r.shard_count);
  }
  return Candidate{got->meta, got->bytes_read};
}

// Format 1 (before distributed training): named tensors of the whole model.
StatusOr<Candidate> LoadNamed(const std::string& path, const TrainOptions& o, Run& r) {
  const int64_t n = r.model->num_params();
  std::vector<float> m(n), v(n);  // whole moments; this rank keeps its shard
  std::map<std::string, std::pair<float*, const model::ParamSpec*>> targets;
  for (const auto& s : r.specs) {
    targets[s.name] = {r.model->params() + s.offset, &s};
    targets[kExpAvg + s.name] = {m.data() + s.offset, &s};
    targets[kExpAvgSq + s.name] = {v.data() + s.offset, &s};
  }
  auto loaded = ckpt::Load(
      path, [&](const std::string& name, const std::vector<int64_t>& shape) -> StatusOr<float*> {
        auto it = targets.find(name);
        if (it == targets.end()) return nullptr;  // not ours: kept aside, ignored
        if (shape != it->second.second->shape) {
          return FailedPreconditionError(fmt::format(
              "checkpoint tensor {} has shape {}, this run's model needs {}: the checkpoints in {} "
              "are for another model (use another --checkpoint-dir or --no-resume)",
              name, ShapeString(shape), ShapeString(it->second.second->shape), o.checkpoint_dir));
        }
        return it->second.first;
      });
  if (!loaded.ok()) return loaded.status();
  std::set<std::string> present(loaded->names.begin(), loaded->names.end());
  for (const auto& [name, target] : targets) {
    if (!present.contains(name)) {
      return DataLossError(fmt::format("checkpoint {} lacks tensor {}", loaded->path, name));
    }
  }
  CopyOverlap(m.data(), 0, n, r.adam->m(), r.shard_begin, r.shard_count);
  CopyOverlap(v.data(), 0, n, r.adam->v(), r.shard_begin, r.shard_count);
  return Candidate{loaded->meta, loaded->bytes};
}

// One rank's attempt at one checkpoint: "" when it loaded and fits this run,
// "skip:<why>" for damage (fall back), "fatal:<why>" for anything else.
std::string TryLoad(const std::string& path, const TrainOptions& o, Run& r, Candidate* out) {
  auto version = ckpt::ReadFormatVersion(path);
  StatusOr<Candidate> c = version.status();
  if (version.ok()) {
    c = *version == 2 ? LoadSharded(path, r) : LoadNamed(path, o, r);
  }
  if (c.ok()) {
    Status fits = CheckCompatible(o, r, path, c->meta);
    if (!fits.ok()) c = fits;
  }
  if (c.ok()) {
    *out = std::move(*c);
    return "";
  }
  const StatusCode code = c.status().code();
  const bool damage = code == StatusCode::kDataLoss || code == StatusCode::kNotFound;
  return (damage ? "skip:" : "fatal:") + c.status().message();
}

}  // namespace

StatusOr<Resumed> Resume(const TrainOptions& o, Run& r, const Warn& warn, std::FILE* err) {
  Resumed res;
  if (o.checkpoint_dir.empty()) return res;
  comm::Communicator& comm = *r.world.comm;
  // Rank 0's listing is the one every rank walks (a shared file system may
  // show a fresh directory to one node before another).
  std::vector<std::string> listed;
  if (r.lead()) listed = ckpt::ListCheckpointDirs(o.checkpoint_dir);
  HPOD_ASSIGN_OR_RETURN(
      auto lists, comm.AllGatherBytes(nlohmann::json(listed).dump(), {.what = "checkpoint list"}));
  listed = nlohmann::json::parse(lists[0]).get<std::vector<std::string>>();

  if (!o.resume) {
    // A new run among an old run's checkpoints would be resumed from the old
    // ones after a requeue, and pruning would count them against keep_last.
    // (Every rank decides on rank 0's listing, so all of them refuse.)
    if (!listed.empty()) {
      return FailedPreconditionError(
          fmt::format("--no-resume, but {} already holds checkpoints (newest {}); a requeued run "
                      "would resume from them: use an empty --checkpoint-dir or remove them",
                      o.checkpoint_dir, listed.front()));
    }
    return res;
  }

  const auto t0 = Clock::now();
  std::string skipped;  // every checkpoint skipped and why, for the final error
  for (size_t i = 0; i < listed.size(); ++i) {
    const std::string& path = listed[i];
    Candidate c;
    const std::string mine = TryLoad(path, o, r, &c);
    HPOD_ASSIGN_OR_RETURN(auto verdicts,
                          comm.AllGatherBytes(mine, {.what = "checkpoint verification"}));
    for (int k = 0; k < r.world_size(); ++k) {
      if (verdicts[k].rfind("fatal:", 0) == 0) {
        const std::string why = verdicts[k].substr(6);
        return FailedPreconditionError(r.world_size() == 1 ? why
                                                           : fmt::format("rank {}: {}", k, why));
      }
    }
    std::vector<std::string> why;
    for (int k = 0; k < r.world_size(); ++k) {
      if (verdicts[k].empty()) continue;
      const std::string reason = verdicts[k].substr(5);
      why.push_back(r.world_size() == 1 ? reason : fmt::format("rank {}: {}", k, reason));
    }
    if (!why.empty()) {
      // Every rank falls back together, to the same older checkpoint.
      const std::string w = fmt::format("skipping {}", fmt::join(why, "; "));
      warn(w);
      skipped += "; " + w;
      continue;
    }
    for (const auto& change : ScheduleChanges(o, r, path, c.meta)) {
      warn("resuming with a changed schedule: " + change);
    }
    r.step = c.meta.value("step", int64_t{0});
    r.consumed_samples = c.meta.value("consumed_samples", int64_t{0});
    r.adam->set_step(c.meta.value("optimizer_step", r.step));
    if (auto it = c.meta.find("loss"); it != c.meta.end() && it->is_number()) {
      res.last_loss = it->get<float>();
    }
    res.resumed = true;
    res.load = {path, r.step, std::chrono::duration<double>(Clock::now() - t0).count(), c.bytes};
    // Checkpoints newer than the one loaded failed verification. Set them
    // aside (kept for a post-mortem): left in place they would hold keep_last
    // slots and be tried, and warned about, on every start. Rank 0 alone.
    if (r.lead()) {
      for (size_t k = 0; k < i; ++k) {
        const std::string aside = listed[k] + ".corrupt";
        std::error_code ec;
        fs::rename(listed[k], aside, ec);
        warn(ec ? fmt::format("could not set aside {}: {}", listed[k], ec.message())
                : fmt::format("set aside {} as {}", listed[k], aside));
      }
      const int was = c.meta.value("world_size", 1);
      std::fprintf(
          err,
          "hpod-train: resumed from %s (step %lld, consumed_samples %lld%s) in %.2f s, "
          "%.0f MB/s\n",
          path.c_str(), static_cast<long long>(r.step), static_cast<long long>(r.consumed_samples),
          was == r.world_size()
              ? ""
              : fmt::format("; written by {} ranks, continued by {}", was, r.world_size()).c_str(),
          res.load.load_s, res.load.load_s > 0 ? c.bytes / res.load.load_s / 1e6 : 0.0);
    }
    return res;
  }
  if (!listed.empty()) {
    // Checkpoints exist but none verifies: starting over would silently
    // discard progress the user expects to keep.
    return DataLossError(
        fmt::format("no valid checkpoint in {}{}; move the checkpoints aside or "
                    "pass --no-resume",
                    o.checkpoint_dir, skipped));
  }
  return res;
}

}  // namespace hpod::train
