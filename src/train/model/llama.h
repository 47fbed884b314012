// The Llama decoder, forward and backward written out by hand (llm.c style).
//
// One parameter arena and one gradient arena in ParamSpecs(config) layout; one
// activation arena sized for the run shape, allocated and touched once in
// Create, so a training step allocates nothing. The math is Hugging Face's
// LlamaForCausalLM: embedding, per layer pre-norm RMSNorm -> causal
// grouped-query attention with rotary embeddings (rotate_half) -> residual ->
// RMSNorm -> SwiGLU MLP down(silu(gate x) * up x) -> residual; final RMSNorm;
// tied or untied classifier; mean softmax cross-entropy.
//
// Thread contract: one caller thread at a time (not necessarily the same one);
// internally a pool of `threads` threads (the caller included) runs the
// kernels and splits every GEMM by output rows; the GEMM library itself is
// set to 1 thread (so no OpenMP/OpenBLAS team spins against the pool).
// Deterministic: the same inputs, weights and thread count give bit-identical
// results (static partitioning, fixed reduction order, no atomics).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "hpod/base/status.h"
#include "hpod/train/model/config.h"
#include "hpod/train/model/ops/cpu/gemm.h"

namespace hpod::train::model {

namespace cpu {
class ThreadPool;
}

struct RunShape {
  int64_t batch = 1;    // sequences per micro-batch
  int64_t seq_len = 1;  // tokens per sequence, <= config.max_seq_len
};

struct ModelOptions {
  int threads = 1;                                // pool threads for kernels and GEMMs
  MatmulBackend matmul = MatmulBackend::kOneDnn;  // see gemm.h
};

class Llama {
 public:
  // Validates the config and shape; allocates and touches every arena.
  static StatusOr<std::unique_ptr<Llama>> Create(const Config& c, RunShape shape, ModelOptions o);
  ~Llama();
  Llama(const Llama&) = delete;
  Llama& operator=(const Llama&) = delete;

  const Config& config() const { return config_; }
  RunShape shape() const { return shape_; }
  // Flat arenas in ParamSpecs(config()) layout, num_params() floats each.
  float* params() { return params_; }
  const float* params() const { return params_; }
  float* grads() { return grads_; }
  const float* grads() const { return grads_; }
  int64_t num_params() const { return num_params_; }

  // N(0, 0.02) for embeddings and Linear weights, N(0, 0.02/sqrt(2*n_layers))
  // for o_proj and down_proj (residual projections), 1 for norm gains. Own
  // RNG (splitmix64 + Box-Muller): the same seed gives the same weights on
  // every machine, independent of threads.
  void InitWeights(uint64_t seed);

  // tokens, targets: batch*seq_len ids in [0, vocab) each (row-major
  // [batch, seq_len]; targets are the next tokens; ids are not range-checked,
  // the data loader validates them against the vocabulary). Keeps the activations for
  // Backward and returns the mean cross-entropy loss.
  float Forward(const int32_t* tokens, const int32_t* targets);
  // Adds d(loss * loss_scale)/dparams to grads(); needs the preceding Forward.
  // Gradient accumulation: ZeroGrad, then k pairs of Forward/Backward(1/k).
  // Overwrites logits() with dlogits (the fused softmax-CE backward).
  void Backward(float loss_scale);
  void ZeroGrad();

  // [batch*seq_len, vocab] from the last Forward, until Backward runs.
  const float* logits() const { return logits_; }
  // Bytes of the activation arena (for --dry-run memory plans); parameters,
  // gradients and optimizer state are 4*num_params() bytes each on top.
  int64_t activation_bytes() const { return activation_floats_ * 4; }

 private:
  // Offsets into the parameter arena of one layer's tensors. q/k/v and
  // gate/up are adjacent in ParamSpecs, so each group is one GEMM.
  struct LayerParams {
    int64_t ln1, wqkv, wo, ln2, wgu, wd;
  };
  // Per-layer activations kept for the backward pass (pointers into the arena).
  struct LayerActs {
    float* res_in;   // (N, dim) layer input (residual stream)
    float* ln1;      // (N, dim)
    float* rstd1;    // (N)
    float* qkv;      // (N, q_dim + 2 kv_dim), q and k rotated
    float* att;      // (B*H, T, T) attention probabilities
    float* att_out;  // (N, q_dim) attention output before o_proj
    float* res_mid;  // (N, dim) after the attention residual
    float* ln2;      // (N, dim)
    float* rstd2;    // (N)
    float* gu;       // (N, 2*hidden) [gate | up]
    float* h;        // (N, hidden) silu(gate) * up
  };

  Llama(const Config& c, RunShape shape, ModelOptions o);
  void Allocate();
  void Gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
            int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc);
  void AttentionForward(const LayerActs& a);
  // datt (N, q_dim) -> dqkv (N, qkv_dim), every element written; overwrites
  // a.att with dS.
  void AttentionBackward(const LayerActs& a, const float* datt, float* dqkv);

  const Config config_;
  const RunShape shape_;
  const ModelOptions options_;
  const int64_t n_;        // batch * seq_len
  const int64_t q_dim_;    // n_heads * head_dim
  const int64_t qkv_dim_;  // q_dim + 2 * kv_dim
  int64_t num_params_ = 0;
  int64_t activation_floats_ = 0;
  std::unique_ptr<cpu::ThreadPool> pool_;

  // Arenas (mmap'ed, MADV_HUGEPAGE); freed in the destructor.
  float* params_ = nullptr;
  float* grads_ = nullptr;
  float* acts_ = nullptr;

  std::vector<LayerParams> layer_params_;
  int64_t embed_ = 0, norm_f_ = 0, classifier_ = 0;
  std::vector<LayerActs> layers_;
  float* res_final_ = nullptr;  // (N, dim) output of the last layer
  float* lnf_ = nullptr;        // (N, dim)
  float* rstdf_ = nullptr;      // (N)
  float* logits_ = nullptr;     // (N, vocab); dlogits after Backward
  float* lse_ = nullptr;        // (N) log-sum-exp per row
  float* losses_ = nullptr;     // (N)
  float* rope_cos_ = nullptr;   // (T, head_dim/2)
  float* rope_sin_ = nullptr;
  // Backward scratch, reused by every layer.
  float* dres_ = nullptr;          // (N, dim) gradient of the residual stream
  float* dln_ = nullptr;           // (N, dim)
  float* dqkv_ = nullptr;          // (N, qkv_dim)
  float* datt_ = nullptr;          // (N, q_dim)
  float* dgu_ = nullptr;           // (N, 2*hidden)
  float* dh_ = nullptr;            // (N, hidden)
  float* dp_ = nullptr;            // (B*H, T, T)
  float* norm_scratch_ = nullptr;  // (threads, max(dim)) RMSNorm dg partial sums

  std::vector<int32_t> tokens_;  // last Forward's tokens and targets
  std::vector<int32_t> targets_;
  bool have_forward_ = false;
};

}  // namespace hpod::train::model
