#include "hpod/train/model/ops/cpu/kernels.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>

namespace hpod::train::model::cpu {
namespace {

// Row reductions keep kLanes independent partial sums so GCC vectorizes them
// without -ffast-math; the lane order is fixed, so results are deterministic.
constexpr int kLanes = 8;

template <typename F>
inline float LaneSum(int64_t n, F f) {
  float acc[kLanes] = {};
  int64_t j = 0;
  for (; j + kLanes <= n; j += kLanes) {
    for (int k = 0; k < kLanes; ++k) acc[k] += f(j + k);
  }
  float tail = 0.0f;
  for (; j < n; ++j) tail += f(j);
  return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7])) + tail;
}

inline float RowMax(const float* x, int64_t n) {
  float acc[kLanes];
  for (int k = 0; k < kLanes; ++k) acc[k] = -INFINITY;
  int64_t j = 0;
  for (; j + kLanes <= n; j += kLanes) {
    for (int k = 0; k < kLanes; ++k) acc[k] = std::max(acc[k], x[j + k]);
  }
  float m = -INFINITY;
  for (; j < n; ++j) m = std::max(m, x[j]);
  for (int k = 0; k < kLanes; ++k) m = std::max(m, acc[k]);
  return m;
}

// Cephes' expf: range reduction by ln 2 (Cody-Waite split), degree-6
// polynomial, exponent inserted through the float bits. Branch-free and
// call-free so loops calling it vectorize.
[[gnu::always_inline]] inline float ExpInline(float x) {
  x = x < -87.3f ? -87.3f : (x > 88.3f ? 88.3f : x);
  // Round x/ln2 to the nearest integer n by adding 1.5*2^23 (no floor call,
  // which would keep the loop scalar).
  constexpr float kRound = 12582912.0f;
  const float t = x * 1.44269504088896341f + kRound;
  const float fx = t - kRound;
  float r = x - fx * 0.693359375f;
  r = r - fx * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  // n sits in the low mantissa bits of t; 2^n is (n + 127) << 23.
  const int32_t bits = (std::bit_cast<int32_t>(t) - std::bit_cast<int32_t>(kRound) + 127) << 23;
  return p * std::bit_cast<float>(bits);
}

}  // namespace

float Exp(float x) { return ExpInline(x); }

void EmbeddingForward(ThreadPool& pool, float* out, const int32_t* tokens, const float* table,
                      int64_t n, int64_t c) {
  pool.ParallelFor(n, [&](int, int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      std::memcpy(out + i * c, table + static_cast<int64_t>(tokens[i]) * c, c * sizeof(float));
    }
  });
}

void EmbeddingBackward(float* dtable, const float* dout, const int32_t* tokens, int64_t n,
                       int64_t c) {
  for (int64_t i = 0; i < n; ++i) {
    float* d = dtable + static_cast<int64_t>(tokens[i]) * c;
    const float* g = dout + i * c;
    for (int64_t j = 0; j < c; ++j) d[j] += g[j];
  }
}

void RmsNormForward(ThreadPool& pool, float* out, float* rstd, const float* x, const float* g,
                    int64_t n, int64_t c, float eps) {
  pool.ParallelFor(n, [&](int, int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      const float* xi = x + i * c;
      float* oi = out + i * c;
      const float ss = LaneSum(c, [&](int64_t j) { return xi[j] * xi[j]; });
      const float r = 1.0f / std::sqrt(ss / static_cast<float>(c) + eps);
      rstd[i] = r;
      for (int64_t j = 0; j < c; ++j) oi[j] = (xi[j] * r) * g[j];
    }
  });
}

void RmsNormBackward(ThreadPool& pool, float* dx, float* dg, float* scratch, const float* dy,
                     const float* x, const float* g, const float* rstd, int64_t n, int64_t c) {
  pool.ParallelFor(n, [&](int tid, int64_t b, int64_t e) {
    float* dgt = scratch + tid * c;
    std::fill(dgt, dgt + c, 0.0f);
    for (int64_t i = b; i < e; ++i) {
      const float* xi = x + i * c;
      const float* dyi = dy + i * c;
      float* dxi = dx + i * c;
      const float r = rstd[i];
      // y = x*r*g, r = (mean(x^2)+eps)^-1/2:
      // dx = r*g*dy - x * r^3 * sum(g*dy*x) / C.
      const float dot = LaneSum(c, [&](int64_t j) { return dyi[j] * g[j] * xi[j]; });
      const float k = dot * r * r * r / static_cast<float>(c);
      for (int64_t j = 0; j < c; ++j) {
        dxi[j] += r * g[j] * dyi[j] - xi[j] * k;
        dgt[j] += dyi[j] * xi[j] * r;
      }
    }
  });
  for (int t = 0; t < pool.size(); ++t) {
    const float* dgt = scratch + t * c;
    for (int64_t j = 0; j < c; ++j) dg[j] += dgt[j];
  }
}

namespace {

// Rotates each (j, j + half) pair by +theta (sign 1, the forward pass) or
// -theta (sign -1: the rotation's transpose, which is its backward pass).
// Negating sin is exact, so both directions round as written out separately.
void RopeRotate(ThreadPool& pool, float* x, int64_t n, int64_t ld, int64_t heads, int64_t head_dim,
                int64_t seq_len, const float* cos, const float* sin, float sign) {
  const int64_t half = head_dim / 2;
  pool.ParallelFor(n, [&](int, int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      const float* ci = cos + (i % seq_len) * half;
      const float* si = sin + (i % seq_len) * half;
      for (int64_t h = 0; h < heads; ++h) {
        float* v = x + i * ld + h * head_dim;
        for (int64_t j = 0; j < half; ++j) {
          const float a = v[j], bb = v[j + half], s = sign * si[j];
          v[j] = a * ci[j] - bb * s;
          v[j + half] = bb * ci[j] + a * s;
        }
      }
    }
  });
}

}  // namespace

void RopeForward(ThreadPool& pool, float* x, int64_t n, int64_t ld, int64_t heads, int64_t head_dim,
                 int64_t seq_len, const float* cos, const float* sin) {
  RopeRotate(pool, x, n, ld, heads, head_dim, seq_len, cos, sin, 1.0f);
}

void RopeBackward(ThreadPool& pool, float* dx, int64_t n, int64_t ld, int64_t heads,
                  int64_t head_dim, int64_t seq_len, const float* cos, const float* sin) {
  RopeRotate(pool, dx, n, ld, heads, head_dim, seq_len, cos, sin, -1.0f);
}

void CausalSoftmaxForwardRows(float* att, int64_t t, int64_t r0, int64_t r1) {
  for (int64_t r = r0; r < r1; ++r) {
    float* row = att + r * t;
    const int64_t len = r % t + 1;
    const float m = RowMax(row, len);
    for (int64_t j = 0; j < len; ++j) row[j] = ExpInline(row[j] - m);
    const float inv = 1.0f / LaneSum(len, [&](int64_t j) { return row[j]; });
    for (int64_t j = 0; j < len; ++j) row[j] *= inv;
    std::fill(row + len, row + t, 0.0f);
  }
}

void CausalSoftmaxBackwardRows(float* p, const float* dp, int64_t t, int64_t r0, int64_t r1) {
  for (int64_t r = r0; r < r1; ++r) {
    float* pr = p + r * t;
    const float* dpr = dp + r * t;
    const int64_t len = r % t + 1;  // entries above the diagonal stay 0
    const float dot = LaneSum(len, [&](int64_t j) { return pr[j] * dpr[j]; });
    for (int64_t j = 0; j < len; ++j) pr[j] = pr[j] * (dpr[j] - dot);
  }
}

void CausalSoftmaxForward(ThreadPool& pool, float* att, int64_t mats, int64_t t) {
  // Rows of all matrices are independent; row r of the stack is row r % t.
  pool.ParallelFor(mats * t,
                   [&](int, int64_t b, int64_t e) { CausalSoftmaxForwardRows(att, t, b, e); });
}

void CausalSoftmaxBackward(ThreadPool& pool, float* p, const float* dp, int64_t mats, int64_t t) {
  pool.ParallelFor(mats * t,
                   [&](int, int64_t b, int64_t e) { CausalSoftmaxBackwardRows(p, dp, t, b, e); });
}

void SwiGluForward(ThreadPool& pool, float* h, const float* gu, int64_t n, int64_t hidden) {
  pool.ParallelFor(n, [&](int, int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      const float* g = gu + i * 2 * hidden;
      const float* u = g + hidden;
      float* hi = h + i * hidden;
      for (int64_t j = 0; j < hidden; ++j) {
        const float sig = 1.0f / (1.0f + ExpInline(-g[j]));
        hi[j] = g[j] * sig * u[j];
      }
    }
  });
}

void SwiGluBackward(ThreadPool& pool, float* dgu, const float* dh, const float* gu, int64_t n,
                    int64_t hidden) {
  pool.ParallelFor(n, [&](int, int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      const float* g = gu + i * 2 * hidden;
      const float* u = g + hidden;
      const float* dhi = dh + i * hidden;
      float* dg = dgu + i * 2 * hidden;
      float* du = dg + hidden;
      for (int64_t j = 0; j < hidden; ++j) {
        const float sig = 1.0f / (1.0f + ExpInline(-g[j]));
        // silu'(g) = sig * (1 + g * (1 - sig)).
        dg[j] = dhi[j] * u[j] * sig * (1.0f + g[j] * (1.0f - sig));
        du[j] = dhi[j] * g[j] * sig;
      }
    }
  });
}

float CrossEntropyForward(ThreadPool& pool, float* lse, float* losses, const float* logits,
                          const int32_t* targets, int64_t n, int64_t v) {
  pool.ParallelFor(n, [&](int, int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      const float* x = logits + i * v;
      const float m = RowMax(x, v);
      const float s = LaneSum(v, [&](int64_t j) { return ExpInline(x[j] - m); });
      lse[i] = m + std::log(s);
      losses[i] = lse[i] - x[targets[i]];
    }
  });
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += losses[i];
  return static_cast<float>(sum / static_cast<double>(n));
}

void CrossEntropyBackward(ThreadPool& pool, float* logits, const float* lse, const int32_t* targets,
                          int64_t n, int64_t v, float scale) {
  pool.ParallelFor(n, [&](int, int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      float* x = logits + i * v;
      const float l = lse[i];
      for (int64_t j = 0; j < v; ++j) x[j] = ExpInline(x[j] - l) * scale;
      x[targets[i]] -= scale;
    }
  });
}

}  // namespace hpod::train::model::cpu
