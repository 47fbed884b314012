#include "hpod/train/model/optim.h"

#include <algorithm>
#include <cmath>

namespace hpod::train::model {

AdamW::AdamW(const Config& c, AdamWOptions o, int64_t begin, int64_t end)
    : options_(o), begin_(begin) {
  const int64_t n = NumParams(c);
  if (end < 0 || end > n) end = n;
  for (const ParamSpec& s : ParamSpecs(c)) {
    const int64_t lo = std::max(begin, s.offset), hi = std::min(end, s.offset + s.numel);
    if (lo < hi) ranges_.push_back(Range{lo, hi - lo, s.shape.size() >= 2});
  }
  m_.assign(std::max<int64_t>(0, end - begin), 0.0f);
  v_.assign(std::max<int64_t>(0, end - begin), 0.0f);
}

void AdamW::Step(float* params, const float* grads, float lr) {
  ++step_;
  const float b1 = options_.beta1, b2 = options_.beta2, eps = options_.eps;
  // Bias corrections in double, as PyTorch computes them in Python floats.
  const double bc1 = 1.0 - std::pow(static_cast<double>(b1), static_cast<double>(step_));
  const double bc2 = 1.0 - std::pow(static_cast<double>(b2), static_cast<double>(step_));
  const float step_size = static_cast<float>(lr / bc1);
  const float bc2_sqrt = static_cast<float>(std::sqrt(bc2));
  float* m = m_.data();
  float* v = v_.data();
  for (const Range& r : ranges_) {
    const float decay = r.decay ? 1.0f - lr * options_.weight_decay : 1.0f;
    float* p = params + r.offset;
    const float* g = grads + r.offset;
    float* mr = m + (r.offset - begin_);
    float* vr = v + (r.offset - begin_);
    for (int64_t i = 0; i < r.numel; ++i) {
      p[i] *= decay;
      mr[i] = mr[i] * b1 + g[i] * (1.0f - b1);
      vr[i] = vr[i] * b2 + g[i] * g[i] * (1.0f - b2);
      const float denom = std::sqrt(vr[i]) / bc2_sqrt + eps;
      p[i] -= step_size * (mr[i] / denom);
    }
  }
}

double SumSquares(const float* x, int64_t n) {
  // Four double lanes: vectorizable, and the summation order is fixed.
  double acc[4] = {0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    for (int k = 0; k < 4; ++k) acc[k] += static_cast<double>(x[i + k]) * x[i + k];
  }
  for (; i < n; ++i) acc[0] += static_cast<double>(x[i]) * x[i];
  return (acc[0] + acc[1]) + (acc[2] + acc[3]);
}

double GlobalNorm(const float* x, int64_t n) { return std::sqrt(SumSquares(x, n)); }

void ClipByGlobalNorm(float* grads, int64_t n, double norm, double max_norm) {
  const double coef = max_norm / (norm + 1e-6);
  if (coef >= 1.0) return;
  const float f = static_cast<float>(coef);
  for (int64_t i = 0; i < n; ++i) grads[i] *= f;
}

double LearningRate(int64_t step, int64_t warmup, int64_t total_steps, double max_lr,
                    double min_lr) {
  if (step < warmup) {
    return max_lr * static_cast<double>(step + 1) / static_cast<double>(warmup);
  }
  if (step >= total_steps) return min_lr;
  const double ratio =
      static_cast<double>(step - warmup) / static_cast<double>(total_steps - warmup);
  const double coeff = 0.5 * (1.0 + std::cos(M_PI * ratio));
  return min_lr + coeff * (max_lr - min_lr);
}

}  // namespace hpod::train::model
