#include "hpod/train/trainer/plan.h"

#include <algorithm>
#include <filesystem>

#include "fmt/format.h"

namespace hpod::train {
namespace {

std::string Bytes(double b) {
  if (b >= 1e9) return fmt::format("{:.2f} GB", b / 1e9);
  if (b >= 1e6) return fmt::format("{:.1f} MB", b / 1e6);
  return fmt::format("{:.1f} kB", b / 1e3);
}

std::string Count(double n) {
  if (n >= 1e9) return fmt::format("{:.2f}B", n / 1e9);
  if (n >= 1e6) return fmt::format("{:.2f}M", n / 1e6);
  if (n >= 1e3) return fmt::format("{:.1f}k", n / 1e3);
  return fmt::format("{:.0f}", n);
}

}  // namespace

int64_t EstimateActivationBytes(const model::Config& c, int64_t batch, int64_t seq_len) {
  const int64_t bt = batch * seq_len;
  const int64_t q_dim = c.n_heads * c.head_dim();
  const int64_t per_layer = bt * (4 * c.dim + q_dim + 2 * c.kv_dim() + q_dim + 3 * c.hidden_dim) +
                            batch * c.n_heads * seq_len * seq_len;
  return 4 * (per_layer * c.n_layers + bt * (2 * c.dim + c.vocab_size));
}

std::string FormatPlan(const TrainOptions& o, const model::Config& c, int world) {
  world = std::max(world, 1);
  const auto specs = model::ParamSpecs(c);
  double embed = 0, attn = 0, mlp = 0, norms = 0, head = 0;
  for (const auto& s : specs) {
    const auto& n = s.name;
    if (n.find("embed_tokens") != std::string::npos) {
      embed += s.numel;
    } else if (n.find("self_attn") != std::string::npos) {
      attn += s.numel;
    } else if (n.find("mlp") != std::string::npos) {
      mlp += s.numel;
    } else if (n.find("lm_head") != std::string::npos) {
      head += s.numel;
    } else {
      norms += s.numel;
    }
  }
  const double params = static_cast<double>(model::NumParams(c));
  const double fpt = model::FlopsPerToken(c, o.seq_len);
  const int64_t samples_per_step = o.batch_size * o.grad_accum * world;
  const double tokens_per_step = static_cast<double>(samples_per_step * o.seq_len);
  const double act = static_cast<double>(EstimateActivationBytes(c, o.batch_size, o.seq_len));
  // fp32 weights + gradients + AdamW's two moments.
  const double state = params * 4 * 4;
  const double ckpt = params * 4 * 3;

  std::string out;
  auto line = [&](std::string s) { out += s + "\n"; };
  line("hpod-train plan (dry run: nothing allocated, nothing written)");
  line(fmt::format(
      "model      Llama: dim {}, {} layers, {} heads ({} kv heads, head_dim {}), "
      "hidden {}, vocab {}, max_seq_len {}, {} embeddings, rope_theta {}",
      c.dim, c.n_layers, c.n_heads, c.n_kv_heads, c.head_dim(), c.hidden_dim, c.vocab_size,
      c.max_seq_len, c.tied_embeddings ? "tied" : "untied", c.rope_theta));
  line(fmt::format(
      "params     {} ({:.0f}): embedding {}, attention {}, mlp {}, norms {}, lm_head {}",
      Count(params), params, Count(embed), Count(attn), Count(mlp), Count(norms),
      c.tied_embeddings ? "tied" : Count(head)));
  line(fmt::format("flops      {:.1f} MFLOP/token fwd+bwd; {:.1f} GFLOP/step", fpt / 1e6,
                   fpt * tokens_per_step / 1e9));
  if (world == 1) {
    line(fmt::format(
        "memory     {} weights+grads+AdamW, ~{} activations (micro-batch {}x{}), ~{} in all",
        Bytes(state), Bytes(act), o.batch_size, o.seq_len, Bytes(state + act)));
  } else {
    // ZeRO-1: weights and gradients whole on every rank, AdamW's moments split.
    const double shard = params * 4 * 2 / world;
    line(fmt::format(
        "memory     per rank of {}: {} weights, {} grads, {} AdamW (its 1/{} shard; {} "
        "unsharded), ~{} activations (micro-batch {}x{}), ~{} in all",
        world, Bytes(params * 4), Bytes(params * 4), Bytes(shard), world, Bytes(params * 8),
        Bytes(act), o.batch_size, o.seq_len, Bytes(params * 8 + shard + act)));
  }
  std::string data = o.data.empty() ? "(none)" : o.data[0];
  for (size_t i = 1; i < o.data.size(); ++i) data += ", " + o.data[i];
  line(fmt::format(
      "data       {}; seq_len {}, {} samples/step ({} x {} accumulation{}), {} tokens/step, "
      "seed {}",
      data, o.seq_len, samples_per_step, o.batch_size, o.grad_accum,
      world > 1 ? fmt::format(" x {} ranks", world) : std::string(), Count(tokens_per_step),
      o.seed));
  line(fmt::format(
      "schedule   {} steps ({} tokens); AdamW lr {} warmup {} then cosine to {} at step {}, "
      "betas ({}, {}), weight decay {}, clip {}",
      o.max_steps, Count(tokens_per_step * static_cast<double>(o.max_steps)), o.lr, o.warmup_steps,
      o.min_lr, o.lr_decay_steps > 0 ? o.lr_decay_steps : o.max_steps, o.beta1, o.beta2,
      o.weight_decay, o.grad_clip > 0 ? fmt::format("{}", o.grad_clip) : std::string("off")));
  line(fmt::format("runtime    {} thread(s){}, matmul {}", o.threads,
                   world > 1 ? fmt::format(" per rank, {} ranks (gloo)", world) : std::string(),
                   o.matmul));
  if (o.checkpoint_dir.empty()) {
    line("checkpoint none (no --checkpoint-dir or $HPOD_CHECKPOINT_DIR)");
  } else {
    line(fmt::format(
        "checkpoint {}{} in {} every {}, keep last {}; resume {}", Bytes(ckpt),
        world > 1 ? fmt::format(" in {} parts of {}", world, Bytes(ckpt / world)) : std::string(),
        o.checkpoint_dir,
        o.save_interval > 0 ? fmt::format("{} steps", o.save_interval)
                            : std::string("end/stop only"),
        o.keep_last, o.resume ? "from the newest complete one" : "off"));
  }
  if (!o.init_from_hf.empty()) line("init       from HF directory " + o.init_from_hf);
  if (!o.export_hf.empty()) {
    line(fmt::format("export     HF directory {} ({})", o.export_hf, o.export_dtype));
  }
  if (!o.tensorboard_dir.empty()) line("tensorboard " + o.tensorboard_dir);
  return out;
}

}  // namespace hpod::train
