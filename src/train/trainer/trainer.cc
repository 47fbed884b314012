#include "hpod/train/trainer/trainer.h"

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <map>

#include "fmt/format.h"
#include "hpod/base/clock.h"
#include "hpod/base/signals.h"
#include "hpod/train/data/tokenizer.h"
#include "hpod/train/model/hf.h"
#include "hpod/train/trainer/plan.h"
#include "hpod/train/trainer/progress.h"
#include "hpod/train/trainer/run.h"

namespace hpod::train {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

double WallNow() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::chrono::milliseconds Millis(double seconds) {
  return std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000));
}

model::DType ExportDType(const std::string& s) {
  if (s == "bf16") return model::DType::kBF16;
  if (s == "f16") return model::DType::kF16;
  return model::DType::kF32;
}

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

// The per-step numbers every rank contributes, exchanged in one small
// allgather after the gradients are reduced: they are summed (or, for the
// signals, the first one set wins) in rank order, so every rank computes the
// same loss, norm and decisions.
struct StepScalars {
  double loss_sum = 0;    // of this rank's micro-batch losses
  double grad_sumsq = 0;  // of this rank's shard of the reduced gradients
  int32_t stop_signal = 0;
  int32_t checkpoint_signal = 0;
};

// The world size a --dry-run plans for: --world-size, else an srun step's.
int PlannedWorld(const TrainOptions& o) {
  if (o.world_size > 0) return o.world_size;
  for (const char* var : {"SLURM_STEP_NUM_TASKS", "SLURM_NTASKS"}) {
    const char* v = std::getenv(var);
    if (v != nullptr && std::getenv("SLURM_STEP_ID") != nullptr) return std::max(1, std::atoi(v));
  }
  return 1;
}

}  // namespace

Status Trainer::PrintPlan(std::FILE* out) {
  model::Config c = options_.model_config;
  if (!options_.init_from_hf.empty()) {
    // Only the shape: reading the weights is the run's job.
    HPOD_ASSIGN_OR_RETURN(c, ReadModelConfig(options_.init_from_hf + "/config.json"));
  }
  std::string plan = FormatPlan(options_, c, PlannedWorld(options_));
  std::fputs(plan.c_str(), out);
  return OkStatus();
}

int Trainer::Run(std::FILE* out, std::FILE* err) {
  struct Run r;
  Status s = RunImpl(r, out, err);
  if (!s.ok()) {
    std::fprintf(err, "%s: error: %s\n", log_prefix_.c_str(), s.message().c_str());
    if (r.goodput) r.goodput->End(r.step, GoodputEnd::kFailed);
    // Rank 0's checkpoint writer waits for every rank's part (up to minutes, a
    // large part may be slow to write), and this rank's checkpointer waits for
    // its writer when `r` goes. A failing rank says so in the store first, so
    // that wait ends now, on every rank, instead of at the commit timeout.
    if (r.world_size() > 1 && r.world.store != nullptr) {
      (void)r.world.store->Set(CheckpointAbortKey(r.world.prefix),
                               fmt::format("rank {} stopped: {}", r.rank(), s.message()));
    }
    return kExitError;
  }
  int sig = stop_signal_.load();
  return sig != 0 ? kExitSignalBase + sig : kExitOk;
}

Status Trainer::RunImpl(struct Run& r, std::FILE* out, std::FILE* err) {
  const TrainOptions& o = options_;
  Summary summary;
  summary.start_wall_time = WallNow();
  // Warnings every rank would print alike come from rank 0; a rank's own
  // trouble (a failed save of its part) from that rank, prefixed.
  auto warn = [&](std::string w) {
    if (r.lead()) std::fprintf(err, "%s: warning: %s\n", log_prefix_.c_str(), w.c_str());
    summary.warnings.push_back(std::move(w));
  };
  auto rank_warn = [&](std::string w) {
    std::fprintf(err, "%s: warning: %s\n", log_prefix_.c_str(), w.c_str());
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

  // The world: one process, or every rank of the run, agreed before any step.
  comm::WorldFlags wf;
  wf.rank = o.rank;
  wf.world_size = o.world_size;
  wf.master_addr = o.master_addr;
  wf.master_port = o.master_port;
  HPOD_ASSIGN_OR_RETURN(r.world.world, comm::ResolveWorld(wf));
  if (r.world_size() > 1) log_prefix_ = fmt::format("hpod-train[rank {}]", r.rank());
  comm::JoinOptions jo;
  jo.rendezvous_timeout = Millis(o.rendezvous_timeout_s);
  jo.collective_timeout = Millis(o.collective_timeout_s);
  jo.backend = o.comm;
  const auto t_join = Clock::now();
  HPOD_ASSIGN_OR_RETURN(r.world, comm::JoinWorld(r.world.world, AgreeJson(o, r), jo));
  const double rendezvous_s = Seconds(t_join, Clock::now());
  if (r.world_size() > 1 && r.lead()) {
    std::fprintf(err, "hpod-train: %d ranks (%s), master %s:%u, %s; rendezvous took %.2f s\n",
                 r.world_size(), r.world.world.source.c_str(), r.world.world.master_addr.c_str(),
                 static_cast<unsigned>(r.world.world.master_port), r.world.comm->backend().c_str(),
                 rendezvous_s);
  }
  comm::Communicator& comm = *r.world.comm;

  // ZeRO-1: this rank's slice of the flat arena (optimizer state, updates).
  const int64_t n = model::NumParams(r.config);
  r.shard_counts = comm::ShardCounts(n, r.world_size());
  r.shard_begin = comm::ShardOffset(r.shard_counts, r.rank());
  r.shard_count = r.shard_counts[r.rank()];

  model::ModelOptions mo;
  mo.threads = o.threads;
  mo.matmul =
      o.matmul == "openblas" ? model::MatmulBackend::kOpenBlas : model::MatmulBackend::kOneDnn;
  HPOD_ASSIGN_OR_RETURN(r.model, model::Llama::Create(r.config, {o.batch_size, o.seq_len}, mo));
  model::AdamWOptions ao;
  ao.beta1 = static_cast<float>(o.beta1);
  ao.beta2 = static_cast<float>(o.beta2);
  ao.weight_decay = static_cast<float>(o.weight_decay);
  r.adam =
      std::make_unique<model::AdamW>(r.config, ao, r.shard_begin, r.shard_begin + r.shard_count);

  // Resume, else HF weights, else a fresh init (the same on every rank).
  const auto t_resume = Clock::now();
  HPOD_ASSIGN_OR_RETURN(Resumed resumed, Resume(o, r, warn, err));
  const double checkpoint_load_s = Seconds(t_resume, Clock::now());
  float last_loss = resumed.resumed ? resumed.last_loss : NAN;
  if (resumed.resumed) {
    summary.loads.push_back(resumed.load);
    summary.resumed_from_step = r.step;
  } else {
    // A checkpoint that failed verification may have been read partly into
    // the arenas before it was skipped.
    std::fill_n(r.adam->m(), r.adam->num_params(), 0.0f);
    std::fill_n(r.adam->v(), r.adam->num_params(), 0.0f);
    r.adam->set_step(0);
    if (hf) {
      std::copy(hf->params.begin(), hf->params.end(), r.model->params());
    } else {
      r.model->InitWeights(o.seed);
    }
  }
  hf.reset();
  if (r.step >= o.max_steps && r.lead()) {
    std::fprintf(err, "hpod-train: step %lld already reached --max-steps %lld; nothing to do\n",
                 static_cast<long long>(r.step), static_cast<long long>(o.max_steps));
  }

  if (!o.checkpoint_dir.empty()) {
    ckpt::CheckpointerOptions co;
    co.keep_last = o.keep_last;
    if (r.world_size() == 1) {
      r.exchange = ckpt::MakeLocalPartExchange();
    } else {
      // The writer thread gets its own connection: it may wait on the store
      // (rank 0 collecting parts) while this thread keeps training.
      HPOD_ASSIGN_OR_RETURN(r.ckpt_store, r.world.ConnectStore());
      r.exchange = MakeStorePartExchange(*r.ckpt_store, r.world.prefix);
    }
    ckpt::ShardingOptions so;
    so.rank = r.rank();
    so.world = r.world_size();
    so.begin = r.shard_begin;
    so.count = r.shard_count;
    so.num_params = n;
    so.run_id = r.world.world.run_id;
    so.exchange = r.exchange.get();
    so.commit_timeout = std::max(Millis(o.collective_timeout_s), std::chrono::milliseconds(600000));
    co.sharding = so;
    HPOD_ASSIGN_OR_RETURN(r.checkpointer, ckpt::AsyncCheckpointer::Create(o.checkpoint_dir, co));
    // Touch the staging buffer now, so the first save's stall is a memcpy.
    HPOD_RETURN_IF_ERROR(
        r.checkpointer->Reserve(ckpt::AsyncCheckpointer::FileBytes(CheckpointTensors(r))));
  }
  if (!o.tensorboard_dir.empty() && r.lead()) {
    HPOD_ASSIGN_OR_RETURN(r.events, EventWriter::Create(o.tensorboard_dir));
  }
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> metrics(nullptr, &std::fclose);
  if (!o.metrics_jsonl.empty() && r.lead()) {
    metrics.reset(std::fopen(o.metrics_jsonl.c_str(), "a"));
    if (!metrics) {
      return InvalidArgumentError(
          fmt::format("cannot open --metrics-jsonl {}: {}", o.metrics_jsonl, std::strerror(errno)));
    }
  }
  std::optional<ProgressBar> bar;
  if (o.progress != "none" && r.lead()) {
    ProgressBarOptions po;
    po.desc = "Epoch 0";
    po.total = o.max_steps;
    po.initial = r.step;
    if (o.progress == "tty") po.is_tty = true;
    if (o.progress == "lines") po.is_tty = false;
    po.noninteractive_interval_s = o.progress_interval_s;
    bar.emplace(err, RealClock::Get(), po);  // stderr, as tqdm
  }
  // Every rank is set up (rank 0 cleaned stale temp directories before any
  // rank can start a save).
  HPOD_RETURN_IF_ERROR(comm.Barrier({.what = "the start of training"}));
  if (std::string ledger = GoodputLedgerPath(o); !ledger.empty() && r.lead()) {
    r.goodput = GoodputWriter::Open(ledger, RealClock::Get(), err);
  }
  if (r.goodput) {
    GoodputStart gs = GoodputStartFromEnv();
    gs.process_start = o.process_start_time > 0 ? o.process_start_time : summary.start_wall_time;
    gs.world_size = r.world_size();
    gs.resumed_step = resumed.resumed ? r.step : 0;
    gs.checkpoint_load_s = checkpoint_load_s;
    gs.rendezvous_s = rendezvous_s;
    r.goodput->Start(gs);
  }

  const int world = r.world_size();
  const int64_t decay_steps = o.lr_decay_steps > 0 ? o.lr_decay_steps : o.max_steps;
  const int64_t samples_per_step = o.batch_size * o.grad_accum * world;
  const int64_t tokens_per_step = samples_per_step * o.seq_len;
  // Each rank's micro-batches are its share of the global mean loss.
  const float micro_scale = 1.0f / static_cast<float>(o.grad_accum * world);
  std::vector<int32_t> x(o.batch_size * o.seq_len), y(o.batch_size * o.seq_len);
  float* params = r.model->params();
  float* grads = r.model->grads();
  const int64_t first_step = r.step;
  int64_t last_saved_step = resumed.resumed ? r.step : -1;
  double reduced_sum = 0;
  int64_t reduced_count = 0;
  bool warned_no_checkpoint_dir = false;
  bool stop_agreed = false;
  summary.start_step = r.step;
  summary.world_size = world;

  // Starts an async save of the current state (this rank's part). A failed
  // earlier save comes back from Save() (which then has not started this
  // one): training goes on and this save is retried at once, so one bad write
  // never ends a run; the newest good checkpoint is still on disk.
  auto save = [&]() -> StatusOr<double> {
    auto tensors = CheckpointTensors(r);
    auto meta = CheckpointMeta(o, r, last_loss);
    auto stats = r.checkpointer->Save(r.step, meta, tensors);
    if (!stats.ok()) {
      summary.save_errors += 1;
      if (r.goodput) r.goodput->SaveFailed();  // the previous save never completes
      rank_warn(
          fmt::format("checkpoint save failed, training goes on: {}", stats.status().message()));
      stats = r.checkpointer->Save(r.step, meta, tensors);
      if (!stats.ok()) return stats.status();
    }
    last_saved_step = r.step;
    if (r.goodput) r.goodput->SaveStarted();
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

  while (r.step < o.max_steps && !(world == 1 ? stop_signal_.load() != 0 : stop_agreed)) {
    const auto t0 = Clock::now();
    r.model->ZeroGrad();
    double loss_sum = 0;
    bool interrupted = false;
    for (int64_t micro = 0; micro < o.grad_accum; ++micro) {
      // A stop between micro-batches drops the partial step: the state stays
      // that of r.step, which the final save writes (Slurm's KillWait is
      // short). Ranks cannot do that alone: they stop together, at a step's end.
      if (world == 1 && micro > 0 && stop_signal_.load() != 0) {
        interrupted = true;
        break;
      }
      // Rank r's micro-batches are the r-th run of grad_accum micro-batches
      // of the global batch: N ranks see exactly the samples one rank would
      // with N times the accumulation.
      const int64_t first = r.consumed_samples + (r.rank() * o.grad_accum + micro) * o.batch_size;
      data::FillBatch(*r.source, first, o.batch_size, x.data(), y.data());
      loss_sum += r.model->Forward(x.data(), y.data());
      r.model->Backward(micro_scale);
    }
    if (interrupted) break;

    // Gradients summed into this rank's shard, then the step's scalars.
    const auto c0 = Clock::now();
    const std::string at = fmt::format("step {}", r.step + 1);
    const std::string grads_what = "gradients (" + at + ")";
    HPOD_RETURN_IF_ERROR(comm.ReduceScatterSum(grads, r.shard_counts, {.what = grads_what}));
    double comm_s = Seconds(c0, Clock::now());
    StepScalars mine;
    mine.loss_sum = loss_sum;
    mine.grad_sumsq = model::SumSquares(grads + r.shard_begin, r.shard_count);
    const auto c_scalars = Clock::now();
    mine.stop_signal = stop_signal_.load();
    mine.checkpoint_signal = checkpoint_signal_.exchange(0);
    const std::string scalars_what = "the loss and norms (" + at + ")";
    HPOD_ASSIGN_OR_RETURN(
        auto all,
        comm.AllGatherBytes(std::string(reinterpret_cast<const char*>(&mine), sizeof(mine)),
                            {.what = scalars_what}));
    StepScalars total;
    for (const std::string& s : all) {
      StepScalars one;
      if (s.size() != sizeof(one)) return InternalError("a rank sent malformed step scalars");
      std::memcpy(&one, s.data(), sizeof(one));
      total.loss_sum += one.loss_sum;
      total.grad_sumsq += one.grad_sumsq;
      if (total.stop_signal == 0) total.stop_signal = one.stop_signal;
      if (total.checkpoint_signal == 0) total.checkpoint_signal = one.checkpoint_signal;
    }
    comm_s += Seconds(c_scalars, Clock::now());

    const float loss =
        static_cast<float>(total.loss_sum / static_cast<double>(o.grad_accum * world));
    if (!std::isfinite(loss)) {
      return InternalError(
          fmt::format("loss is {} at step {}; lower --lr or check the data (the last checkpoint "
                      "is intact)",
                      loss, r.step + 1));
    }
    const double grad_norm = std::sqrt(total.grad_sumsq);
    if (o.grad_clip > 0) {
      model::ClipByGlobalNorm(grads + r.shard_begin, r.shard_count, grad_norm, o.grad_clip);
    }
    const double lr = model::LearningRate(r.step, o.warmup_steps, decay_steps, o.lr, o.min_lr);
    r.adam->Step(params, grads, static_cast<float>(lr));
    const auto c1 = Clock::now();
    const std::string params_what = "parameters (" + at + ")";
    HPOD_RETURN_IF_ERROR(comm.AllGather(params, r.shard_counts, {.what = params_what}));
    comm_s += Seconds(c1, Clock::now());
    r.step += 1;
    r.consumed_samples += samples_per_step;
    last_loss = loss;
    if (total.stop_signal != 0) {
      // Every rank stops after this step, exiting as the signalled one does.
      stop_agreed = true;
      int expected = 0;
      stop_signal_.compare_exchange_strong(expected, total.stop_signal);
    }
    const auto t1 = Clock::now();
    const double step_s = Seconds(t0, t1);
    summary.AddStep(r.step - first_step, step_s, tokens_per_step, o.timing_warmup_steps);
    if (r.goodput) r.goodput->Step(r.step, step_s);
    if (r.step - first_step > o.timing_warmup_steps) summary.comm_s_timed += comm_s;
    reduced_sum += loss;
    reduced_count += 1;

    double stall_s = 0;
    const int requested_by = total.checkpoint_signal;
    if (requested_by != 0 && !r.checkpointer && !warned_no_checkpoint_dir) {
      warn(fmt::format("{} asks for a checkpoint, but this run has no --checkpoint-dir",
                       SignalName(requested_by)));
      warned_no_checkpoint_dir = true;
    }
    const bool save_now =
        r.checkpointer && r.step < o.max_steps &&
        (requested_by != 0 || (o.save_interval > 0 && r.step % o.save_interval == 0));
    if (save_now && requested_by != 0 && r.lead()) {
      std::fprintf(err, "hpod-train: checkpoint requested by %s: saving step %lld\n",
                   SignalName(requested_by).c_str(), static_cast<long long>(r.step));
    }
    if (save_now) {
      const auto s0 = Clock::now();
      if (auto saved = save(); !saved.ok()) {
        rank_warn(
            fmt::format("checkpoint at step {} not started, retrying at the next interval: {}",
                        r.step, saved.status().message()));
      }
      stall_s = Seconds(s0, Clock::now());
      summary.stall_s_total += stall_s;
      summary.in_loop_saves += 1;
    }
    if (r.goodput && r.checkpointer) r.goodput->PollSaves(*r.checkpointer);
    if (!r.lead()) continue;  // the rest is what rank 0 shows and logs

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
                             {"comm_s", comm_s},
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
        if (world > 1) scalars.push_back({"train/comm_s", static_cast<float>(comm_s)});
        log_events(r.step, scalars);
      }
    } else if (save_now && r.events) {
      // Every save's stall is logged, not only those that fall on a log step.
      log_events(r.step, {{"checkpoint/stall_s", static_cast<float>(stall_s)}});
    }
  }
  if (bar) bar->Close();

  // A final checkpoint at the end or on a stop signal (synchronous: the
  // process is about to exit, and Slurm's KillWait bounds the time). Every
  // rank writes its part; rank 0's Wait() returns once it committed them all.
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
    if (r.goodput) r.goodput->PollSaves(*r.checkpointer);
    for (const auto& s : r.checkpointer->completed()) {
      summary.saves.push_back({s.step, s.stall_s, s.snapshot_s, s.write_s, s.bytes});
    }
  }
  if (!r.lead()) return OkStatus();
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
  if (r.goodput) {
    // Ended before it is read back, so the summary covers this process to its end.
    r.goodput->End(r.step,
                   summary.stop_signal != 0 ? GoodputEnd::kInterrupted : GoodputEnd::kCompleted);
    if (!o.summary_json.empty()) {
      auto g = r.goodput->Summarize();
      if (g.ok()) {
        summary.goodput = goodput::ToJson(*g);
      } else {
        warn("goodput ledger " + r.goodput->path() + ": " + g.status().message());
      }
    }
  }
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
