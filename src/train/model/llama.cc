#include "hpod/train/model/llama.h"

#include <sys/mman.h>

#include <cmath>
#include <cstring>

#include "fmt/format.h"
#include "hpod/train/model/ops/cpu/kernels.h"
#include "hpod/train/model/ops/cpu/thread_pool.h"

namespace hpod::train::model {
namespace {

// One anonymous mapping per arena: huge pages where THP allows, zeroed and
// touched here so the first training step does not pay first-touch faults
// (training-building-blocks.md §4).
float* MapArena(int64_t floats) {
  const size_t bytes = static_cast<size_t>(std::max<int64_t>(floats, 1)) * sizeof(float);
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return nullptr;
  madvise(p, bytes, MADV_HUGEPAGE);
  std::memset(p, 0, bytes);
  return static_cast<float*>(p);
}

void UnmapArena(float* p, int64_t floats) {
  if (p != nullptr) munmap(p, static_cast<size_t>(std::max<int64_t>(floats, 1)) * sizeof(float));
}

uint64_t SplitMix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// Standard normal pairs by Box-Muller from 53-bit uniforms in (0, 1].
void FillNormal(uint64_t& state, float* out, int64_t n, double std) {
  constexpr double kTwoPi = 6.283185307179586;
  for (int64_t i = 0; i < n; i += 2) {
    const double u1 = (static_cast<double>(SplitMix64(state) >> 11) + 1.0) * 0x1.0p-53;
    const double u2 = static_cast<double>(SplitMix64(state) >> 11) * 0x1.0p-53;
    const double r = std::sqrt(-2.0 * std::log(u1));
    out[i] = static_cast<float>(std * r * std::cos(kTwoPi * u2));
    if (i + 1 < n) out[i + 1] = static_cast<float>(std * r * std::sin(kTwoPi * u2));
  }
}

}  // namespace

StatusOr<std::unique_ptr<Llama>> Llama::Create(const Config& c, RunShape shape, ModelOptions o) {
  HPOD_RETURN_IF_ERROR(ValidateConfig(c));
  if (shape.batch <= 0 || shape.seq_len <= 0 || shape.seq_len > c.max_seq_len) {
    return InvalidArgumentError(fmt::format(
        "run shape batch={} seq_len={} is invalid (seq_len must be in 1..max_seq_len={})",
        shape.batch, shape.seq_len, c.max_seq_len));
  }
  if (o.threads < 1 || o.threads > 1024) {
    return InvalidArgumentError(fmt::format("threads = {} must be in 1..1024", o.threads));
  }
  std::unique_ptr<Llama> m(new Llama(c, shape, o));
  m->Allocate();
  // GEMMs run single-threaded inside pool tasks (see Gemm()); oneDNN's
  // OpenMP team size is per calling thread, so set it on every pool thread.
  m->pool_->ParallelFor(o.threads,
                        [&](int, int64_t, int64_t) { cpu::SetGemmThreads(o.matmul, 1); });
  if (m->params_ == nullptr || m->grads_ == nullptr || m->acts_ == nullptr) {
    return ResourceExhaustedError(
        fmt::format("cannot map {} MB for the model's arenas",
                    (m->num_params_ * 8 + m->activation_floats_ * 4) >> 20));
  }
  return m;
}

Llama::Llama(const Config& c, RunShape shape, ModelOptions o)
    : config_(c),
      shape_(shape),
      options_(o),
      n_(shape.batch * shape.seq_len),
      q_dim_(c.n_heads * c.head_dim()),
      qkv_dim_(c.n_heads * c.head_dim() + 2 * c.kv_dim()),
      pool_(std::make_unique<cpu::ThreadPool>(o.threads)) {}

Llama::~Llama() {
  UnmapArena(params_, num_params_);
  UnmapArena(grads_, num_params_);
  UnmapArena(acts_, activation_floats_);
}

void Llama::Allocate() {
  const Config& c = config_;
  const auto specs = ParamSpecs(c);
  num_params_ = specs.back().offset + specs.back().numel;
  // ParamSpecs order: embed, per layer 9 tensors, norm, [lm_head].
  embed_ = specs[0].offset;
  for (int64_t l = 0; l < c.n_layers; ++l) {
    const ParamSpec* s = &specs[1 + 9 * l];
    layer_params_.push_back(
        LayerParams{s[0].offset, s[1].offset, s[4].offset, s[5].offset, s[6].offset, s[8].offset});
  }
  norm_f_ = specs[1 + 9 * c.n_layers].offset;
  classifier_ = c.tied_embeddings ? embed_ : specs[2 + 9 * c.n_layers].offset;

  // Lay out the activation arena: first count, then assign.
  const int64_t n = n_, t = shape_.seq_len, d = c.dim, hid = c.hidden_dim;
  const int64_t att = shape_.batch * c.n_heads * t * t;
  std::vector<std::pair<float**, int64_t>> plan;
  layers_.resize(c.n_layers);
  for (auto& a : layers_) {
    plan.insert(plan.end(), {{&a.res_in, n * d},
                             {&a.ln1, n * d},
                             {&a.rstd1, n},
                             {&a.qkv, n * qkv_dim_},
                             {&a.att, att},
                             {&a.att_out, n * q_dim_},
                             {&a.res_mid, n * d},
                             {&a.ln2, n * d},
                             {&a.rstd2, n},
                             {&a.gu, n * 2 * hid},
                             {&a.h, n * hid}});
  }
  const int64_t half = c.head_dim() / 2;
  plan.insert(plan.end(), {{&res_final_, n * d},
                           {&lnf_, n * d},
                           {&rstdf_, n},
                           {&logits_, n * c.vocab_size},
                           {&lse_, n},
                           {&losses_, n},
                           {&rope_cos_, t * half},
                           {&rope_sin_, t * half},
                           {&dres_, n * d},
                           {&dln_, n * d},
                           {&dqkv_, n * qkv_dim_},
                           {&datt_, n * q_dim_},
                           {&dgu_, n * 2 * hid},
                           {&dh_, n * hid},
                           {&dp_, att},
                           {&norm_scratch_, options_.threads * d}});
  activation_floats_ = 0;
  // Each buffer starts on a 64-byte boundary (16 floats) for aligned vector loads.
  for (auto& [ptr, size] : plan) activation_floats_ += (size + 15) / 16 * 16;
  params_ = MapArena(num_params_);
  grads_ = MapArena(num_params_);
  acts_ = MapArena(activation_floats_);
  if (acts_ == nullptr) return;
  int64_t off = 0;
  for (auto& [ptr, size] : plan) {
    *ptr = acts_ + off;
    off += (size + 15) / 16 * 16;
  }
  // RoPE tables: inv_freq_j = theta^(-2j/head_dim), angle = pos * inv_freq_j.
  for (int64_t p = 0; p < t; ++p) {
    for (int64_t j = 0; j < half; ++j) {
      const double inv_freq =
          std::pow(c.rope_theta, -2.0 * static_cast<double>(j) / static_cast<double>(c.head_dim()));
      rope_cos_[p * half + j] = static_cast<float>(std::cos(p * inv_freq));
      rope_sin_[p * half + j] = static_cast<float>(std::sin(p * inv_freq));
    }
  }
  tokens_.resize(n);
  targets_.resize(n);
}

void Llama::InitWeights(uint64_t seed) {
  uint64_t state = seed;
  const double std_resid = 0.02 / std::sqrt(2.0 * static_cast<double>(config_.n_layers));
  for (const ParamSpec& s : ParamSpecs(config_)) {
    float* p = params_ + s.offset;
    if (s.shape.size() == 1) {
      std::fill(p, p + s.numel, 1.0f);
    } else {
      const bool resid = s.name.ends_with("o_proj.weight") || s.name.ends_with("down_proj.weight");
      FillNormal(state, p, s.numel, resid ? std_resid : 0.02);
    }
  }
}

void Llama::ZeroGrad() { std::memset(grads_, 0, num_params_ * sizeof(float)); }

// Threads split the output rows of every GEMM (in multiples of 16 rows) and
// each part runs single-threaded in the library: one pool owns all threads,
// the partition is static (deterministic), and no OpenMP team spins against
// the pool on a shared 2-core machine.
void Llama::Gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
                 int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  constexpr int64_t kRowBlock = 16;
  if (pool_->size() == 1 || m < 2 * kRowBlock) {
    cpu::Sgemm(options_.matmul, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    return;
  }
  pool_->ParallelFor((m + kRowBlock - 1) / kRowBlock, [&](int, int64_t b0, int64_t b1) {
    const int64_t r0 = b0 * kRowBlock, r1 = std::min(m, b1 * kRowBlock);
    if (r0 >= r1) return;
    // Row r of op(A) is row r of A, or column r when A is transposed.
    const float* ar = ta ? a + r0 : a + r0 * lda;
    cpu::Sgemm(options_.matmul, ta, tb, r1 - r0, n, k, alpha, ar, lda, b, ldb, beta, c + r0 * ldc,
               ldc);
  });
}

// Causal attention per (batch, kv head) unit, so a unit's dK/dV sums stay on
// one thread. Query rows go in blocks of kAttBlock: block [i0, i1) only needs
// key columns [0, i1), which skips ~40% of the score FLOPs at T = 256. Query
// head h reads kv head h / (n_heads / n_kv_heads); scores are scale * q k^T.
namespace {
constexpr int64_t kAttBlock = 64;
}

void Llama::AttentionForward(const LayerActs& a) {
  const Config& c = config_;
  const int64_t t = shape_.seq_len, hd = c.head_dim(), group = c.n_heads / c.n_kv_heads;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  const MatmulBackend be = options_.matmul;
  pool_->ParallelFor(shape_.batch * c.n_kv_heads, [&](int, int64_t u0, int64_t u1) {
    for (int64_t u = u0; u < u1; ++u) {
      const int64_t b = u / c.n_kv_heads, kvh = u % c.n_kv_heads;
      const float* qkv = a.qkv + b * t * qkv_dim_;
      const float* k = qkv + q_dim_ + kvh * hd;
      const float* v = qkv + q_dim_ + c.kv_dim() + kvh * hd;
      for (int64_t h = kvh * group; h < (kvh + 1) * group; ++h) {
        const float* q = qkv + h * hd;
        float* p = a.att + (b * c.n_heads + h) * t * t;
        float* o = a.att_out + b * t * q_dim_ + h * hd;
        for (int64_t i0 = 0; i0 < t; i0 += kAttBlock) {
          const int64_t i1 = std::min(t, i0 + kAttBlock);
          cpu::Sgemm(be, false, true, i1 - i0, i1, hd, scale, q + i0 * qkv_dim_, qkv_dim_, k,
                     qkv_dim_, 0.0f, p + i0 * t, t);
          cpu::CausalSoftmaxForwardRows(p, t, i0, i1);
          cpu::Sgemm(be, false, false, i1 - i0, hd, i1, 1.0f, p + i0 * t, t, v, qkv_dim_, 0.0f,
                     o + i0 * q_dim_, q_dim_);
        }
      }
    }
  });
}

void Llama::AttentionBackward(const LayerActs& a, const float* datt, float* dqkv) {
  const Config& c = config_;
  const int64_t t = shape_.seq_len, hd = c.head_dim(), group = c.n_heads / c.n_kv_heads;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  const MatmulBackend be = options_.matmul;
  pool_->ParallelFor(shape_.batch * c.n_kv_heads, [&](int, int64_t u0, int64_t u1) {
    for (int64_t u = u0; u < u1; ++u) {
      const int64_t b = u / c.n_kv_heads, kvh = u % c.n_kv_heads;
      const float* qkv = a.qkv + b * t * qkv_dim_;
      const float* k = qkv + q_dim_ + kvh * hd;
      const float* v = qkv + q_dim_ + c.kv_dim() + kvh * hd;
      float* dqkv_b = dqkv + b * t * qkv_dim_;
      float* dk = dqkv_b + q_dim_ + kvh * hd;
      float* dv = dqkv_b + q_dim_ + c.kv_dim() + kvh * hd;
      // dK and dV sum over the group's query heads and the query blocks.
      for (int64_t r = 0; r < t; ++r) {
        std::fill(dk + r * qkv_dim_, dk + r * qkv_dim_ + hd, 0.0f);
        std::fill(dv + r * qkv_dim_, dv + r * qkv_dim_ + hd, 0.0f);
      }
      for (int64_t h = kvh * group; h < (kvh + 1) * group; ++h) {
        const float* q = qkv + h * hd;
        float* p = a.att + (b * c.n_heads + h) * t * t;  // becomes dS
        float* dp = dp_ + (b * c.n_heads + h) * t * t;
        const float* dout = datt + b * t * q_dim_ + h * hd;
        float* dq = dqkv_b + h * hd;
        for (int64_t i0 = 0; i0 < t; i0 += kAttBlock) {
          const int64_t i1 = std::min(t, i0 + kAttBlock), rows = i1 - i0;
          // O = P V: dV += P^T dO, dP = dO V^T.
          cpu::Sgemm(be, true, false, i1, hd, rows, 1.0f, p + i0 * t, t, dout + i0 * q_dim_, q_dim_,
                     1.0f, dv, qkv_dim_);
          cpu::Sgemm(be, false, true, rows, i1, hd, 1.0f, dout + i0 * q_dim_, q_dim_, v, qkv_dim_,
                     0.0f, dp + i0 * t, t);
          cpu::CausalSoftmaxBackwardRows(p, dp, t, i0, i1);
          // S = scale Q K^T: dQ = scale dS K, dK += scale dS^T Q.
          cpu::Sgemm(be, false, false, rows, hd, i1, scale, p + i0 * t, t, k, qkv_dim_, 0.0f,
                     dq + i0 * qkv_dim_, qkv_dim_);
          cpu::Sgemm(be, true, false, i1, hd, rows, scale, p + i0 * t, t, q + i0 * qkv_dim_,
                     qkv_dim_, 1.0f, dk, qkv_dim_);
        }
      }
    }
  });
}

float Llama::Forward(const int32_t* tokens, const int32_t* targets) {
  const Config& c = config_;
  const int64_t n = n_, d = c.dim, hid = c.hidden_dim, t = shape_.seq_len;
  const float eps = static_cast<float>(c.norm_eps);
  cpu::SetGemmThreads(options_.matmul, 1);  // see Gemm()
  std::copy(tokens, tokens + n, tokens_.begin());
  std::copy(targets, targets + n, targets_.begin());
  cpu::EmbeddingForward(*pool_, layers_[0].res_in, tokens, params_ + embed_, n, d);
  for (int64_t l = 0; l < c.n_layers; ++l) {
    const LayerActs& a = layers_[l];
    const LayerParams& w = layer_params_[l];
    float* out = l + 1 < c.n_layers ? layers_[l + 1].res_in : res_final_;
    // Attention block: res_mid = res_in + o_proj(attn(rope(qkv(norm(res_in))))).
    cpu::RmsNormForward(*pool_, a.ln1, a.rstd1, a.res_in, params_ + w.ln1, n, d, eps);
    Gemm(false, true, n, qkv_dim_, d, 1.0f, a.ln1, d, params_ + w.wqkv, d, 0.0f, a.qkv, qkv_dim_);
    cpu::RopeForward(*pool_, a.qkv, n, qkv_dim_, c.n_heads + c.n_kv_heads, c.head_dim(), t,
                     rope_cos_, rope_sin_);
    AttentionForward(a);
    std::memcpy(a.res_mid, a.res_in, n * d * sizeof(float));
    Gemm(false, true, n, d, q_dim_, 1.0f, a.att_out, q_dim_, params_ + w.wo, q_dim_, 1.0f,
         a.res_mid, d);
    // MLP block: out = res_mid + down(silu(gate(x)) * up(x)), x = norm(res_mid).
    cpu::RmsNormForward(*pool_, a.ln2, a.rstd2, a.res_mid, params_ + w.ln2, n, d, eps);
    Gemm(false, true, n, 2 * hid, d, 1.0f, a.ln2, d, params_ + w.wgu, d, 0.0f, a.gu, 2 * hid);
    cpu::SwiGluForward(*pool_, a.h, a.gu, n, hid);
    std::memcpy(out, a.res_mid, n * d * sizeof(float));
    Gemm(false, true, n, d, hid, 1.0f, a.h, hid, params_ + w.wd, hid, 1.0f, out, d);
  }
  cpu::RmsNormForward(*pool_, lnf_, rstdf_, res_final_, params_ + norm_f_, n, d, eps);
  Gemm(false, true, n, c.vocab_size, d, 1.0f, lnf_, d, params_ + classifier_, d, 0.0f, logits_,
       c.vocab_size);
  have_forward_ = true;
  return cpu::CrossEntropyForward(*pool_, lse_, losses_, logits_, targets, n, c.vocab_size);
}

void Llama::Backward(float loss_scale) {
  if (!have_forward_) return;  // nothing to differentiate; documented precondition
  have_forward_ = false;
  const Config& c = config_;
  const int64_t n = n_, d = c.dim, hid = c.hidden_dim, t = shape_.seq_len, v = c.vocab_size;
  cpu::SetGemmThreads(options_.matmul, 1);
  // Loss = mean over n rows, so each row's dlogits carry loss_scale / n.
  cpu::CrossEntropyBackward(*pool_, logits_, lse_, targets_.data(), n, v,
                            loss_scale / static_cast<float>(n));
  // Classifier: logits = lnf W^T.
  Gemm(true, false, v, d, n, 1.0f, logits_, v, lnf_, d, 1.0f, grads_ + classifier_, d);
  Gemm(false, false, n, d, v, 1.0f, logits_, v, params_ + classifier_, d, 0.0f, dln_, d);
  std::memset(dres_, 0, n * d * sizeof(float));
  cpu::RmsNormBackward(*pool_, dres_, grads_ + norm_f_, norm_scratch_, dln_, res_final_,
                       params_ + norm_f_, rstdf_, n, d);
  for (int64_t l = c.n_layers - 1; l >= 0; --l) {
    const LayerActs& a = layers_[l];
    const LayerParams& w = layer_params_[l];
    // dres is d/d(layer output); the residual passes it through unchanged.
    // MLP: out = res_mid + h Wd^T.
    Gemm(true, false, d, hid, n, 1.0f, dres_, d, a.h, hid, 1.0f, grads_ + w.wd, hid);
    Gemm(false, false, n, hid, d, 1.0f, dres_, d, params_ + w.wd, hid, 0.0f, dh_, hid);
    cpu::SwiGluBackward(*pool_, dgu_, dh_, a.gu, n, hid);
    Gemm(true, false, 2 * hid, d, n, 1.0f, dgu_, 2 * hid, a.ln2, d, 1.0f, grads_ + w.wgu, d);
    Gemm(false, false, n, d, 2 * hid, 1.0f, dgu_, 2 * hid, params_ + w.wgu, d, 0.0f, dln_, d);
    cpu::RmsNormBackward(*pool_, dres_, grads_ + w.ln2, norm_scratch_, dln_, a.res_mid,
                         params_ + w.ln2, a.rstd2, n, d);
    // Attention: res_mid = res_in + att_out Wo^T.
    Gemm(true, false, d, q_dim_, n, 1.0f, dres_, d, a.att_out, q_dim_, 1.0f, grads_ + w.wo, q_dim_);
    Gemm(false, false, n, q_dim_, d, 1.0f, dres_, d, params_ + w.wo, q_dim_, 0.0f, datt_, q_dim_);
    AttentionBackward(a, datt_, dqkv_);  // writes every element of dqkv
    cpu::RopeBackward(*pool_, dqkv_, n, qkv_dim_, c.n_heads + c.n_kv_heads, c.head_dim(), t,
                      rope_cos_, rope_sin_);
    Gemm(true, false, qkv_dim_, d, n, 1.0f, dqkv_, qkv_dim_, a.ln1, d, 1.0f, grads_ + w.wqkv, d);
    Gemm(false, false, n, d, qkv_dim_, 1.0f, dqkv_, qkv_dim_, params_ + w.wqkv, d, 0.0f, dln_, d);
    cpu::RmsNormBackward(*pool_, dres_, grads_ + w.ln1, norm_scratch_, dln_, a.res_in,
                         params_ + w.ln1, a.rstd1, n, d);
  }
  cpu::EmbeddingBackward(grads_ + embed_, dres_, tokens_.data(), n, d);
}

}  // namespace hpod::train::model
