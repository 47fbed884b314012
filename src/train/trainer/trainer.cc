#include "hpod/train/trainer/trainer.h"

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <map>
#include <set>

#include "fmt/format.h"
#include "fmt/ranges.h"
#include "hpod/base/clock.h"
#include "hpod/base/signals.h"
#include "hpod/train/ckpt/checkpoint.h"
#include "hpod/train/data/loader.h"
#include "hpod/train/data/tokenizer.h"
#include "hpod/train/model/hf.h"
#include "hpod/train/model/llama.h"
#include "hpod/train/model/optim.h"
#include "hpod/train/trainer/plan.h"
#include "hpod/train/trainer/progress.h"
#include "hpod/train/trainer/summary.h"
#include "hpod/train/trainer/tfevents.h"

namespace hpod::train {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

double WallNow() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// Checkpoint tensor names: parameters under their HF names, AdamW moments
// under PyTorch's state names.
constexpr char kExpAvg[] = "optimizer.exp_avg.";
constexpr char kExpAvgSq[] = "optimizer.exp_avg_sq.";

model::DType ExportDType(const std::string& s) {
  if (s == "bf16") return model::DType::kBF16;
  if (s == "f16") return model::DType::kF16;
  return model::DType::kF32;
}

// Everything the loop owns, built by Setup().
struct Run {
  model::Config config;
  std::unique_ptr<data::TokenSource> source;
  std::string tokenizer_id;
  std::unique_ptr<model::Llama> model;
  std::unique_ptr<model::AdamW> adam;
  std::unique_ptr<ckpt::AsyncCheckpointer> checkpointer;
  std::unique_ptr<EventWriter> events;
  std::FILE* metrics = nullptr;
  int64_t step = 0;              // optimizer steps done
  int64_t consumed_samples = 0;  // samples consumed by those steps
  std::vector<model::ParamSpec> specs;
};

StatusOr<std::unique_ptr<data::TokenSource>> OpenSource(const TrainOptions& o,
                                                        const model::Config& c) {
  if (o.data.size() == 1 && o.data[0] == "synthetic") {
    return data::SyntheticTokens(static_cast<uint32_t>(c.vocab_size), o.seq_len, o.seed);
  }
  HPOD_ASSIGN_OR_RETURN(auto source, data::OpenShards(o.data, o.seq_len, o.seed));
  if (source->vocab_size() > c.vocab_size) {
    return InvalidArgumentError(
        fmt::format("the data's vocabulary ({} tokens) is larger than the model's vocab_size "
                    "{}; set model.vocab_size",
                    source->vocab_size(), c.vocab_size));
  }
  if (source->num_samples() < 1) {
    return InvalidArgumentError(
        fmt::format("the data holds fewer than seq_len + 1 = {} tokens", o.seq_len + 1));
  }
  return source;
}

// What decides each step's update besides the checkpointed state. A resume
// that changes any of it is no longer the run that was checkpointed: allowed
// (extending a run is common) but said.
nlohmann::json ScheduleJson(const TrainOptions& o) {
  return nlohmann::json{
      {"lr", o.lr},
      {"min_lr", o.min_lr},
      {"warmup_steps", o.warmup_steps},
      {"lr_decay_steps", o.lr_decay_steps > 0 ? o.lr_decay_steps : o.max_steps},
      {"beta1", o.beta1},
      {"beta2", o.beta2},
      {"weight_decay", o.weight_decay},
      {"grad_clip", o.grad_clip},
      {"samples_per_step", o.batch_size * o.grad_accum},
  };
}

nlohmann::json CheckpointMeta(const TrainOptions& o, const Run& r, float loss) {
  return nlohmann::json{
      {"format", "hpod-train"},
      {"step", r.step},
      {"consumed_samples", r.consumed_samples},
      {"optimizer_step", r.adam->step()},
      {"loss", loss},
      {"config", model::ConfigToJson(r.config)},
      {"tokenizer_id", r.tokenizer_id},
      // The data order and init are pure functions of these: the "RNG state".
      {"rng", {{"seed", o.seed}, {"data_order", "splitmix64 Fisher-Yates per epoch"}}},
      {"data",
       {{"sources", o.data},
        {"fingerprint", r.source->fingerprint()},
        {"seq_len", o.seq_len},
        {"samples_per_epoch", r.source->num_samples()}}},
      {"schedule", ScheduleJson(o)},
      {"options", OptionsToJson(o)},
  };
}

std::vector<ckpt::TensorView> CheckpointTensors(Run& r) {
  std::vector<ckpt::TensorView> views;
  views.reserve(r.specs.size() * 3);
  for (const auto& s : r.specs) {
    views.push_back({s.name, s.shape, r.model->params() + s.offset, s.numel});
  }
  for (const auto& s : r.specs) {
    views.push_back({kExpAvg + s.name, s.shape, r.adam->m() + s.offset, s.numel});
  }
  for (const auto& s : r.specs) {
    views.push_back({kExpAvgSq + s.name, s.shape, r.adam->v() + s.offset, s.numel});
  }
  return views;
}

// Where each checkpoint tensor lands: straight into the model's and AdamW's
// arenas (already touched, so no first-touch cost on resume).
std::map<std::string, std::pair<float*, const model::ParamSpec*>> ArenaTargets(Run& r) {
  std::map<std::string, std::pair<float*, const model::ParamSpec*>> targets;
  for (const auto& s : r.specs) {
    targets[s.name] = {r.model->params() + s.offset, &s};
    targets[kExpAvg + s.name] = {r.adam->m() + s.offset, &s};
    targets[kExpAvgSq + s.name] = {r.adam->v() + s.offset, &s};
  }
  return targets;
}

std::string ShapeString(const std::vector<int64_t>& shape) {
  return fmt::format("[{}]", fmt::join(shape, ", "));
}

// Changed schedule settings are warnings: extending or tuning a run is
// legitimate, but the result is then not the run that was checkpointed.
std::vector<std::string> ScheduleChanges(const TrainOptions& o, const ckpt::LoadedCheckpoint& ck) {
  std::vector<std::string> out;
  const auto before = ck.meta.value("schedule", nlohmann::json::object());
  const auto now = ScheduleJson(o);
  for (const auto& [key, value] : now.items()) {
    auto it = before.find(key);
    if (it != before.end() && *it != value) {
      out.push_back(
          fmt::format("{} was {} in {}, is {} now", key, it->dump(), ck.path, value.dump()));
    }
  }
  return out;
}

Status CheckCompatible(const TrainOptions& o, const Run& r, const ckpt::LoadedCheckpoint& ck) {
  const auto& m = ck.meta;
  if (m.value("format", "") != "hpod-train") {
    return DataLossError(fmt::format("{} is not an hpod-train checkpoint", ck.path));
  }
  auto want = model::ConfigToJson(r.config);
  if (m.value("config", nlohmann::json()) != want) {
    return FailedPreconditionError(
        fmt::format("checkpoint {} was written for model {} but this run has {}; use another "
                    "--checkpoint-dir or --no-resume",
                    ck.path, m.value("config", nlohmann::json()).dump(), want.dump()));
  }
  int64_t seq_len = m.value("data", nlohmann::json::object()).value("seq_len", int64_t{0});
  if (seq_len != o.seq_len) {
    return FailedPreconditionError(
        fmt::format("checkpoint {} was trained with --seq-len {}, this run has {}; the data "
                    "position would not match",
                    ck.path, seq_len, o.seq_len));
  }
  auto ck_seed = m.value("rng", nlohmann::json::object()).value("seed", uint64_t{0});
  if (ck_seed != o.seed) {
    return FailedPreconditionError(
        fmt::format("checkpoint {} was trained with --seed {}, this run has {}; the data order "
                    "would not match",
                    ck.path, ck_seed, o.seed));
  }
  const auto data = m.value("data", nlohmann::json::object());
  const std::string fp = data.value("fingerprint", "");
  if (fp != r.source->fingerprint()) {
    return FailedPreconditionError(
        fmt::format("checkpoint {} was trained on other data ({}; this run's --data is {}): its "
                    "consumed_samples would point elsewhere; use the same shards, another "
                    "--checkpoint-dir, or --no-resume",
                    ck.path, fp.empty() ? std::string("unknown") : fp, r.source->fingerprint()));
  }
  std::string tok = m.value("tokenizer_id", "");
  if (!tok.empty() && !r.tokenizer_id.empty() && tok != r.tokenizer_id) {
    return FailedPreconditionError(
        fmt::format("checkpoint {} was trained with tokenizer {}, this run's is {}", ck.path, tok,
                    r.tokenizer_id));
  }
  return OkStatus();
}

}  // namespace

Status Trainer::PrintPlan(std::FILE* out) {
  model::Config c = options_.model_config;
  if (!options_.init_from_hf.empty()) {
    // Only the shape: reading the weights is the run's job.
    HPOD_ASSIGN_OR_RETURN(c, ReadModelConfig(options_.init_from_hf + "/config.json"));
  }
  std::string plan = FormatPlan(options_, c);
  std::fputs(plan.c_str(), out);
  return OkStatus();
}

int Trainer::Run(std::FILE* out, std::FILE* err) {
  Status s = RunImpl(out, err);
  if (!s.ok()) {
    std::fprintf(err, "hpod-train: error: %s\n", s.message().c_str());
    return kExitError;
  }
  int sig = stop_signal_.load();
  return sig != 0 ? kExitSignalBase + sig : kExitOk;
}

Status Trainer::RunImpl(std::FILE* out, std::FILE* err) {
  const TrainOptions& o = options_;
  struct Run r;
  Summary summary;
  summary.start_wall_time = WallNow();
  auto warn = [&](std::string w) {
    std::fprintf(err, "hpod-train: warning: %s\n", w.c_str());
    summary.warnings.push_back(std::move(w));
  };
  const auto t_start = Clock::now();

  // Model shape and, for --init-from-hf, the initial weights.
  std::optional<model::HfModel> hf;
  r.config = o.model_config;
  if (!o.init_from_hf.empty()) {
    HPOD_ASSIGN_OR_RETURN(auto imported, model::ImportHf(o.init_from_hf));
    for (const auto& w : imported.warnings) warn(w);
    r.config = imported.config;
    if (o.seq_len > r.config.max_seq_len) {
      return InvalidArgumentError(
          fmt::format("--seq-len = {} exceeds {}'s max_position_embeddings {}", o.seq_len,
                      o.init_from_hf, r.config.max_seq_len));
    }
    hf = std::move(imported);
  }
  r.specs = model::ParamSpecs(r.config);
  HPOD_ASSIGN_OR_RETURN(r.source, OpenSource(o, r.config));
  if (!o.tokenizer.empty()) {
    HPOD_ASSIGN_OR_RETURN(auto tok, data::Tokenizer::Load(o.tokenizer));
    r.tokenizer_id = tok.id();
  }

  model::ModelOptions mo;
  mo.threads = o.threads;
  mo.matmul =
      o.matmul == "openblas" ? model::MatmulBackend::kOpenBlas : model::MatmulBackend::kOneDnn;
  HPOD_ASSIGN_OR_RETURN(r.model, model::Llama::Create(r.config, {o.batch_size, o.seq_len}, mo));
  model::AdamWOptions ao;
  ao.beta1 = static_cast<float>(o.beta1);
  ao.beta2 = static_cast<float>(o.beta2);
  ao.weight_decay = static_cast<float>(o.weight_decay);
  r.adam = std::make_unique<model::AdamW>(r.config, ao);

  // Resume, else HF weights, else a fresh init.
  bool resumed = false;
  float last_loss = NAN;
  if (!o.checkpoint_dir.empty() && !o.resume) {
    // A new run among an old run's checkpoints would be resumed from the old
    // ones after a requeue, and pruning would count them against keep_last.
    auto existing = ckpt::ListComplete(o.checkpoint_dir);
    if (!existing.empty()) {
      return FailedPreconditionError(
          fmt::format("--no-resume, but {} already holds checkpoints (newest {}); a requeued run "
                      "would resume from them: use an empty --checkpoint-dir or remove them",
                      o.checkpoint_dir, existing.front()));
    }
  }
  if (!o.checkpoint_dir.empty() && o.resume) {
    std::vector<std::string> warnings;
    ckpt::LoadStats ls;
    auto targets = ArenaTargets(r);
    ckpt::TensorSink sink = [&](const std::string& name,
                                const std::vector<int64_t>& shape) -> StatusOr<float*> {
      auto it = targets.find(name);
      if (it == targets.end()) return nullptr;  // not ours: kept aside, ignored
      if (shape != it->second.second->shape) {
        return FailedPreconditionError(fmt::format(
            "checkpoint tensor {} has shape {}, this run's model needs {}: the "
            "checkpoints in {} are for another model (use another --checkpoint-dir "
            "or --no-resume)",
            name, ShapeString(shape), ShapeString(it->second.second->shape), o.checkpoint_dir));
      }
      return it->second.first;
    };
    auto loaded = ckpt::LoadLatest(o.checkpoint_dir, sink, &warnings, &ls);
    for (const auto& w : warnings) warn(w);
    if (loaded.ok()) {
      HPOD_RETURN_IF_ERROR(CheckCompatible(o, r, *loaded));
      for (const auto& change : ScheduleChanges(o, *loaded)) {
        warn("resuming with a changed schedule: " + change);
      }
      std::set<std::string> present(loaded->names.begin(), loaded->names.end());
      for (const auto& [name, target] : targets) {
        if (!present.contains(name)) {
          return DataLossError(fmt::format("checkpoint {} lacks tensor {}", loaded->path, name));
        }
      }
      r.step = loaded->meta.value("step", int64_t{0});
      r.consumed_samples = loaded->meta.value("consumed_samples", int64_t{0});
      r.adam->set_step(loaded->meta.value("optimizer_step", r.step));
      if (auto it = loaded->meta.find("loss"); it != loaded->meta.end() && it->is_number()) {
        last_loss = it->get<float>();
      }
      summary.loads.push_back({loaded->path, r.step, ls.load_s, ls.bytes});
      summary.resumed_from_step = r.step;
      // Checkpoints newer than the one loaded failed verification. Set them
      // aside (kept for a post-mortem): left in place they would hold
      // keep_last slots and be tried, and warned about, on every start.
      for (const std::string& path : ckpt::ListComplete(o.checkpoint_dir)) {
        if (path == loaded->path) break;  // newest first: the rest are older
        const std::string aside = path + ".corrupt";
        std::error_code ec;
        std::filesystem::rename(path, aside, ec);
        warn(ec ? fmt::format("could not set aside {}: {}", path, ec.message())
                : fmt::format("set aside {} as {}", path, aside));
      }
      resumed = true;
      std::fprintf(err,
                   "hpod-train: resumed from %s (step %lld, consumed_samples %lld) "
                   "in %.2f s, %.0f MB/s\n",
                   loaded->path.c_str(), static_cast<long long>(r.step),
                   static_cast<long long>(r.consumed_samples), ls.load_s,
                   ls.load_s > 0 ? ls.bytes / ls.load_s / 1e6 : 0.0);
    } else if (loaded.status().code() == StatusCode::kDataLoss) {
      // Checkpoints exist but none verifies: starting over would silently
      // discard progress the user expects to keep.
      return Status(loaded.status().code(),
                    loaded.status().message() + "; move the checkpoints aside or pass --no-resume");
    } else if (loaded.status().code() != StatusCode::kNotFound) {
      return loaded.status();
    }
  }
  if (!resumed) {
    // A checkpoint that failed verification may have been read partly into
    // the arenas before it was skipped.
    std::fill_n(r.adam->m(), r.model->num_params(), 0.0f);
    std::fill_n(r.adam->v(), r.model->num_params(), 0.0f);
    r.adam->set_step(0);
    if (hf) {
      std::copy(hf->params.begin(), hf->params.end(), r.model->params());
    } else {
      r.model->InitWeights(o.seed);
    }
  }
  hf.reset();
  if (r.step >= o.max_steps) {
    std::fprintf(err, "hpod-train: step %lld already reached --max-steps %lld; nothing to do\n",
                 static_cast<long long>(r.step), static_cast<long long>(o.max_steps));
  }

  if (!o.checkpoint_dir.empty()) {
    ckpt::CheckpointerOptions co;
    co.keep_last = o.keep_last;
    HPOD_ASSIGN_OR_RETURN(r.checkpointer, ckpt::AsyncCheckpointer::Create(o.checkpoint_dir, co));
    // Touch the staging buffer now, so the first save's stall is a memcpy.
    HPOD_RETURN_IF_ERROR(
        r.checkpointer->Reserve(ckpt::AsyncCheckpointer::FileBytes(CheckpointTensors(r))));
  }
  if (!o.tensorboard_dir.empty()) {
    HPOD_ASSIGN_OR_RETURN(r.events, EventWriter::Create(o.tensorboard_dir));
  }
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> metrics(nullptr, &std::fclose);
  if (!o.metrics_jsonl.empty()) {
    metrics.reset(std::fopen(o.metrics_jsonl.c_str(), "a"));
    if (!metrics) {
      return InvalidArgumentError(
          fmt::format("cannot open --metrics-jsonl {}: {}", o.metrics_jsonl, std::strerror(errno)));
    }
  }
  std::optional<ProgressBar> bar;
  if (o.progress != "none") {
    ProgressBarOptions po;
    po.desc = "Epoch 0";
    po.total = o.max_steps;
    po.initial = r.step;
    if (o.progress == "tty") po.is_tty = true;
    if (o.progress == "lines") po.is_tty = false;
    bar.emplace(err, RealClock::Get(), po);  // stderr, as tqdm
  }

  const int64_t decay_steps = o.lr_decay_steps > 0 ? o.lr_decay_steps : o.max_steps;
  const int64_t samples_per_step = o.batch_size * o.grad_accum;
  const int64_t tokens_per_step = samples_per_step * o.seq_len;
  std::vector<int32_t> x(o.batch_size * o.seq_len), y(o.batch_size * o.seq_len);
  const int64_t n = r.model->num_params();
  float* params = r.model->params();
  float* grads = r.model->grads();
  const int64_t first_step = r.step;
  int64_t last_saved_step = resumed ? r.step : -1;
  double reduced_sum = 0;
  int64_t reduced_count = 0;
  bool warned_no_checkpoint_dir = false;
  summary.start_step = r.step;

  // Starts an async save of the current state. A failed earlier save comes
  // back from Save() (which then has not started this one): training goes on
  // and this save is retried at once, so one bad write never ends a run; the
  // newest good checkpoint is still on disk.
  auto save = [&]() -> StatusOr<double> {
    auto tensors = CheckpointTensors(r);
    auto meta = CheckpointMeta(o, r, last_loss);
    auto stats = r.checkpointer->Save(r.step, meta, tensors);
    if (!stats.ok()) {
      summary.save_errors += 1;
      warn(fmt::format("checkpoint save failed, training goes on: {}", stats.status().message()));
      stats = r.checkpointer->Save(r.step, meta, tensors);
      if (!stats.ok()) return stats.status();
    }
    last_saved_step = r.step;
    return stats->stall_s;
  };

  // TensorBoard is for people: a full log disk warns once and stops the
  // events, it never stops training.
  auto log_events = [&](int64_t step, std::vector<std::pair<std::string, float>> scalars) {
    if (Status st = r.events->AddScalars(step, WallNow(), scalars); !st.ok()) {
      warn(fmt::format("TensorBoard events disabled: {}", st.message()));
      r.events.reset();
    }
  };

  while (r.step < o.max_steps && stop_signal_.load() == 0) {
    const auto t0 = Clock::now();
    r.model->ZeroGrad();
    double loss_sum = 0;
    bool interrupted = false;
    for (int64_t micro = 0; micro < o.grad_accum; ++micro) {
      // A stop between micro-batches drops the partial step: the state stays
      // that of r.step, which the final save writes (Slurm's KillWait is short).
      if (micro > 0 && stop_signal_.load() != 0) {
        interrupted = true;
        break;
      }
      data::FillBatch(*r.source, r.consumed_samples + micro * o.batch_size, o.batch_size, x.data(),
                      y.data());
      loss_sum += r.model->Forward(x.data(), y.data());
      r.model->Backward(1.0f / static_cast<float>(o.grad_accum));
    }
    if (interrupted) break;
    const float loss = static_cast<float>(loss_sum / static_cast<double>(o.grad_accum));
    if (!std::isfinite(loss)) {
      return InternalError(
          fmt::format("loss is {} at step {}; lower --lr or check the data (the last checkpoint "
                      "is intact)",
                      loss, r.step + 1));
    }
    const double grad_norm = model::GlobalNorm(grads, n);
    if (o.grad_clip > 0) model::ClipByGlobalNorm(grads, n, grad_norm, o.grad_clip);
    const double lr = model::LearningRate(r.step, o.warmup_steps, decay_steps, o.lr, o.min_lr);
    r.adam->Step(params, grads, static_cast<float>(lr));
    r.step += 1;
    r.consumed_samples += samples_per_step;
    last_loss = loss;
    const auto t1 = Clock::now();
    const double step_s = Seconds(t0, t1);
    summary.AddStep(r.step - first_step, step_s, tokens_per_step, o.timing_warmup_steps);
    reduced_sum += loss;
    reduced_count += 1;

    double stall_s = 0;
    const int requested_by = checkpoint_signal_.exchange(0);
    if (requested_by != 0 && !r.checkpointer && !warned_no_checkpoint_dir) {
      warn(fmt::format("{} asks for a checkpoint, but this run has no --checkpoint-dir",
                       SignalName(requested_by)));
      warned_no_checkpoint_dir = true;
    }
    const bool save_now =
        r.checkpointer && r.step < o.max_steps &&
        (requested_by != 0 || (o.save_interval > 0 && r.step % o.save_interval == 0));
    if (save_now && requested_by != 0) {
      std::fprintf(err, "hpod-train: checkpoint requested by %s: saving step %lld\n",
                   SignalName(requested_by).c_str(), static_cast<long long>(r.step));
    }
    if (save_now) {
      const auto s0 = Clock::now();
      if (auto saved = save(); !saved.ok()) {
        warn(fmt::format("checkpoint at step {} not started, retrying at the next interval: {}",
                         r.step, saved.status().message()));
      }
      stall_s = Seconds(s0, Clock::now());
      summary.stall_s_total += stall_s;
      summary.in_loop_saves += 1;
    }

    const bool log_now = r.step % o.log_interval == 0 || r.step == o.max_steps;
    double param_norm = NAN;
    if (log_now || metrics) param_norm = model::GlobalNorm(params, n);
    const double tokens_per_s = tokens_per_step / step_s;
    if (metrics) {
      nlohmann::json line = {{"step", r.step},
                             {"loss", loss},
                             {"lr", lr},
                             {"grad_norm", grad_norm},
                             {"param_norm", param_norm},
                             {"consumed_samples", r.consumed_samples},
                             {"step_time_s", step_s},
                             {"tokens_per_s", tokens_per_s},
                             {"checkpoint_stall_s", stall_s}};
      std::fprintf(metrics.get(), "%s\n", line.dump().c_str());
      std::fflush(metrics.get());
    }
    if (log_now) {
      const double reduced = reduced_sum / static_cast<double>(reduced_count);
      reduced_sum = 0;
      reduced_count = 0;
      const int64_t epoch = (r.consumed_samples - 1) / r.source->num_samples();
      // NeMo's keys and order; doubles, so Lightning's padding formats them
      // as the seed's line shows (global_step=4512.0, reduced_train_loss=2.470).
      if (bar) {
        bar->SetDescription(fmt::format("Epoch {}", epoch));
        bar->SetPostfix({
            {"loss", static_cast<double>(loss)},
            {"reduced_train_loss", reduced},
            {"gradient_norm", grad_norm},
            {"parameter_norm", param_norm},
            {"global_step", static_cast<double>(r.step)},
            {"consumed_samples", static_cast<double>(r.consumed_samples)},
            {"iteration_time", step_s},
        });
        bar->SetN(r.step);
      }
      if (r.events) {
        std::vector<std::pair<std::string, float>> scalars = {
            {"train/loss", loss},
            {"train/reduced_train_loss", static_cast<float>(reduced)},
            {"train/lr", static_cast<float>(lr)},
            {"train/gradient_norm", static_cast<float>(grad_norm)},
            {"train/parameter_norm", static_cast<float>(param_norm)},
            {"train/tokens_per_s", static_cast<float>(tokens_per_s)},
            {"train/iteration_time", static_cast<float>(step_s)},
            {"train/consumed_samples", static_cast<float>(r.consumed_samples)},
            {"checkpoint/stall_s", static_cast<float>(stall_s)},
        };
        log_events(r.step, scalars);
      }
    } else if (save_now && r.events) {
      // Every save's stall is logged, not only those that fall on a log step.
      log_events(r.step, {{"checkpoint/stall_s", static_cast<float>(stall_s)}});
    }
  }
  if (bar) bar->Close();

  // A final checkpoint at the end or on a stop signal (synchronous: the
  // process is about to exit, and Slurm's KillWait bounds the time).
  if (r.checkpointer) {
    const auto s0 = Clock::now();
    Status final_status = OkStatus();
    if (last_saved_step != r.step) {
      auto saved = save();
      final_status = saved.ok() ? r.checkpointer->Wait() : saved.status();
    } else {
      final_status = r.checkpointer->Wait();
    }
    summary.final_save_s = Seconds(s0, Clock::now());
    if (!final_status.ok()) {
      auto done = ckpt::ListComplete(o.checkpoint_dir);
      return DataLossError(fmt::format(
          "the final checkpoint (step {}) failed: {}; the newest complete one is {}", r.step,
          final_status.message(), done.empty() ? std::string("none") : done.front()));
    }
    HPOD_RETURN_IF_ERROR(r.checkpointer->Close());
    for (const auto& s : r.checkpointer->completed()) {
      summary.saves.push_back({s.step, s.stall_s, s.snapshot_s, s.write_s, s.bytes});
    }
  }
  if (r.events) {
    if (Status st = r.events->Flush(); !st.ok()) warn("TensorBoard events: " + st.message());
  }

  if (!o.export_hf.empty()) {
    HPOD_RETURN_IF_ERROR(
        model::ExportHf(o.export_hf, r.config, params, ExportDType(o.export_dtype), o.tokenizer));
    std::fprintf(err, "hpod-train: exported %s (%s)\n", o.export_hf.c_str(),
                 o.export_dtype.c_str());
  }

  summary.end_step = r.step;
  summary.consumed_samples = r.consumed_samples;
  summary.final_loss = last_loss;
  summary.elapsed_s = Seconds(t_start, Clock::now());
  summary.stop_signal = stop_signal_.load();
  summary.num_params = n;
  summary.flops_per_token = model::FlopsPerToken(r.config, o.seq_len);
  if (!o.summary_json.empty()) {
    HPOD_RETURN_IF_ERROR(WriteSummary(o.summary_json, summary));
  }
  if (summary.stop_signal != 0) {
    std::fprintf(err, "hpod-train: stopped by signal %d at step %lld; %s\n", summary.stop_signal,
                 static_cast<long long>(r.step),
                 r.checkpointer ? "checkpoint saved"
                                : "no --checkpoint-dir, so this run's progress is not kept");
  }
  return OkStatus();
}

}  // namespace hpod::train
