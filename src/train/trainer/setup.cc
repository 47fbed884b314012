// What a run records about itself and agrees on (run.h).
#include "fmt/format.h"
#include "hpod/train/trainer/run.h"

namespace hpod::train {
namespace {

// Sharded checkpoint reports under the run's store: "<prefix>/ckpt/<step>/<rank>".
class StorePartExchange : public ckpt::PartExchange {
 public:
  StorePartExchange(comm::Store& store, std::string prefix)
      : store_(store), prefix_(std::move(prefix)) {}

  Status Report(int64_t step, int rank, const std::string& report) override {
    return store_.Set(Key(step, rank), report);
  }

  StatusOr<std::vector<std::string>> Collect(int64_t step, int world,
                                             std::chrono::milliseconds timeout) override {
    std::vector<std::string> keys, missing;
    for (int r = 0; r < world; ++r) keys.push_back(Key(step, r));
    Status st = store_.Wait(keys, timeout, &missing, CheckpointAbortKey(prefix_));
    if (st.code() == StatusCode::kAborted) {
      return AbortedError(fmt::format("checkpoint step {} abandoned: {}", step, st.message()));
    }
    if (st.code() == StatusCode::kDeadlineExceeded) {
      std::vector<std::string> ranks;
      for (const auto& k : missing) ranks.push_back(k.substr(k.rfind('/') + 1));
      return DeadlineExceededError(
          fmt::format("checkpoint step {}: no part from rank(s) {} within {:g} s", step,
                      fmt::join(ranks, ", "), timeout.count() / 1000.0));
    }
    HPOD_RETURN_IF_ERROR(st);
    std::vector<std::string> out;
    for (const auto& k : keys) {
      HPOD_ASSIGN_OR_RETURN(std::string v, store_.Get(k, timeout));
      out.push_back(std::move(v));
    }
    return out;
  }

 private:
  std::string Key(int64_t step, int rank) const {
    return comm::PrefixedKey(prefix_, fmt::format("ckpt/{}/{}", step, rank));
  }

  comm::Store& store_;
  const std::string prefix_;
};

}  // namespace

nlohmann::json ScheduleJson(const TrainOptions& o, int world_size) {
  return nlohmann::json{
      {"lr", o.lr},
      {"min_lr", o.min_lr},
      {"warmup_steps", o.warmup_steps},
      {"lr_decay_steps", o.lr_decay_steps > 0 ? o.lr_decay_steps : o.max_steps},
      {"beta1", o.beta1},
      {"beta2", o.beta2},
      {"weight_decay", o.weight_decay},
      {"grad_clip", o.grad_clip},
      {"samples_per_step", o.batch_size * o.grad_accum * world_size},
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
      {"schedule", ScheduleJson(o, r.world_size())},
      {"world_size", r.world_size()},
      // Names and places of the tensors in the flat arena the parts slice.
      {"params",
       [&] {
         nlohmann::json a = nlohmann::json::array();
         for (const auto& s : r.specs) {
           a.push_back({{"name", s.name}, {"shape", s.shape}, {"offset", s.offset}});
         }
         return a;
       }()},
      {"options", OptionsToJson(o)},
  };
}

std::vector<ckpt::TensorView> CheckpointTensors(Run& r) {
  const int64_t n = r.shard_count;
  return {{"params", {n}, r.model->params() + r.shard_begin, n},
          {"exp_avg", {n}, r.adam->m(), n},
          {"exp_avg_sq", {n}, r.adam->v(), n}};
}

nlohmann::json AgreeJson(const TrainOptions& o, const Run& r) {
  // Everything that changes which samples a rank reads, what the model is,
  // how it steps, or where and when checkpoints go. Per-rank settings
  // (threads, matmul, progress, output files) may differ.
  return nlohmann::json{
      {"model", model::ConfigToJson(r.config)},
      {"init_from_hf", o.init_from_hf},
      {"data", r.source->fingerprint()},
      {"tokenizer_id", r.tokenizer_id},
      {"seq_len", o.seq_len},
      {"batch_size", o.batch_size},
      {"grad_accum", o.grad_accum},
      {"seed", o.seed},
      {"max_steps", o.max_steps},
      {"schedule", ScheduleJson(o, r.world_size())},
      {"checkpoint_dir", o.checkpoint_dir},
      {"save_interval", o.save_interval},
      {"keep_last", o.keep_last},
      {"resume", o.resume},
  };
}

std::string CheckpointAbortKey(const std::string& prefix) {
  return comm::PrefixedKey(prefix, "ckpt/abort");
}

std::unique_ptr<ckpt::PartExchange> MakeStorePartExchange(comm::Store& store, std::string prefix) {
  return std::make_unique<StorePartExchange>(store, std::move(prefix));
}

}  // namespace hpod::train
