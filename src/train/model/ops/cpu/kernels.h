// The model's non-GEMM kernels on CPU: plain loops over row-major buffers,
// written so GCC vectorizes them at -O3 (no calls in inner loops; exp is a
// branch-free polynomial). Shapes are in the comments: N = batch*seq rows,
// C = channels. Every kernel splits rows statically over the pool, so results
// depend only on inputs and thread count.
//
// Thread contract: called from the pool's one caller thread.
#pragma once

#include <cstdint>

#include "hpod/train/model/ops/cpu/thread_pool.h"

namespace hpod::train::model::cpu {

// exp(x) for float x, max relative error ~2e-7 on [-87, 88]; flushes below.
float Exp(float x);

// out (N,C) = table[tokens[i]] (V,C).
void EmbeddingForward(ThreadPool& pool, float* out, const int32_t* tokens, const float* table,
                      int64_t n, int64_t c);
// dtable[tokens[i]] += dout[i]; serial in row order (rows may share a token).
void EmbeddingBackward(float* dtable, const float* dout, const int32_t* tokens, int64_t n,
                       int64_t c);

// out = x * rstd * g with rstd = 1/sqrt(mean(x^2) + eps) per row; x, out (N,C), rstd (N).
void RmsNormForward(ThreadPool& pool, float* out, float* rstd, const float* x, const float* g,
                    int64_t n, int64_t c, float eps);
// dx (N,C) += d/dx; dg (C) += d/dg. scratch holds pool.size()*C floats for the
// per-thread dg partial sums, added to dg in thread order.
void RmsNormBackward(ThreadPool& pool, float* dx, float* dg, float* scratch, const float* dy,
                     const float* x, const float* g, const float* rstd, int64_t n, int64_t c);

// Rotary embedding, Hugging Face's rotate_half convention, in place on the
// first `heads` head_dim-wide column blocks of each row of x (N, ld); row i is
// at position i % seq_len. cos/sin are (seq_len, head_dim/2) tables.
void RopeForward(ThreadPool& pool, float* x, int64_t n, int64_t ld, int64_t heads, int64_t head_dim,
                 int64_t seq_len, const float* cos, const float* sin);
// The transposed rotation, in place on the gradient.
void RopeBackward(ThreadPool& pool, float* dx, int64_t n, int64_t ld, int64_t heads,
                  int64_t head_dim, int64_t seq_len, const float* cos, const float* sin);

// In place over `mats` square (T,T) score matrices: row i becomes
// softmax(s[i, 0..i]) followed by zeros (causal mask). Only s[i, 0..i] is read.
void CausalSoftmaxForward(ThreadPool& pool, float* att, int64_t mats, int64_t t);
// p (mats,T,T) holds the probabilities and is overwritten with
// dS = p * (dp - sum_j p*dp) (zero above the diagonal). Only dp[i, 0..i] is read.
void CausalSoftmaxBackward(ThreadPool& pool, float* p, const float* dp, int64_t mats, int64_t t);
// The same on rows [r0, r1) of one (T,T) matrix, on the calling thread (for
// attention code that already runs inside a pool task).
void CausalSoftmaxForwardRows(float* att, int64_t t, int64_t r0, int64_t r1);
void CausalSoftmaxBackwardRows(float* p, const float* dp, int64_t t, int64_t r0, int64_t r1);

// gu (N, 2H) = [gate | up]; h (N, H) = silu(gate) * up.
void SwiGluForward(ThreadPool& pool, float* h, const float* gu, int64_t n, int64_t hidden);
// dgu (N, 2H) = d/d[gate | up] given dh (N, H).
void SwiGluBackward(ThreadPool& pool, float* dgu, const float* dh, const float* gu, int64_t n,
                    int64_t hidden);

// Softmax cross-entropy over logits (N,V): writes lse (N) and per-row losses
// (N); returns their mean (summed in double in row order).
float CrossEntropyForward(ThreadPool& pool, float* lse, float* losses, const float* logits,
                          const int32_t* targets, int64_t n, int64_t v);
// In place: logits (N,V) become scale * (softmax - onehot(target)).
void CrossEntropyBackward(ThreadPool& pool, float* logits, const float* lse, const int32_t* targets,
                          int64_t n, int64_t v, float scale);

}  // namespace hpod::train::model::cpu
