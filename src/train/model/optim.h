// AdamW, gradient clipping and the learning-rate schedule, with PyTorch's
// semantics (torch.optim.AdamW, clip_grad_norm_) so runs compare with the peer.
#pragma once

#include <cstdint>
#include <vector>

#include "hpod/train/model/config.h"

namespace hpod::train::model {

struct AdamWOptions {
  float beta1 = 0.9f;
  float beta2 = 0.95f;
  float eps = 1e-8f;
  float weight_decay = 0.1f;  // decoupled; 2-D parameters only (not norm gains)
};

// Thread contract: one caller thread at a time. m() and v() hold the moments
// of the elements [begin(), end()) of the ParamSpecs(config) layout: all of
// them, or one rank's shard under ZeRO-1 (each rank updates only its slice
// of the parameters and keeps only its slice of the moments).
class AdamW {
 public:
  // Allocates m and v for [begin, end) (end < 0: to the last element), zeroed,
  // and records which ranges are decayed.
  AdamW(const Config& c, AdamWOptions o, int64_t begin = 0, int64_t end = -1);

  // Increments step() first (bias correction uses t >= 1), then per element
  // i in [begin(), end()):
  //   p *= 1 - lr*wd (2-D only); m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2;
  //   p -= lr/(1-b1^t) * m / (sqrt(v)/sqrt(1-b2^t) + eps).
  // `params` and `grads` are whole arenas; only the slice is read and written.
  void Step(float* params, const float* grads, float lr);

  // m()[j] and v()[j] belong to element begin() + j.
  float* m() { return m_.data(); }
  float* v() { return v_.data(); }
  const float* m() const { return m_.data(); }
  const float* v() const { return v_.data(); }
  int64_t begin() const { return begin_; }
  int64_t end() const { return begin_ + static_cast<int64_t>(m_.size()); }
  // Elements this optimizer owns (end() - begin()).
  int64_t num_params() const { return static_cast<int64_t>(m_.size()); }
  int64_t step() const { return step_; }
  void set_step(int64_t step) { step_ = step; }  // restored from checkpoints

 private:
  struct Range {
    int64_t offset, numel;
    bool decay;
  };
  AdamWOptions options_;
  int64_t begin_ = 0;
  std::vector<Range> ranges_;  // intersected with the slice; offsets in the arena
  std::vector<float> m_, v_;
  int64_t step_ = 0;
};

// L2 norm of x[0..n), accumulated in double in a fixed order (deterministic,
// independent of threads).
double GlobalNorm(const float* x, int64_t n);
// The sum of squares GlobalNorm takes the root of (same order, so
// sqrt(SumSquares(x, n)) == GlobalNorm(x, n) bit for bit): ranks add their
// shards' sums to get the global norm.
double SumSquares(const float* x, int64_t n);

// torch.nn.utils.clip_grad_norm_: coef = max_norm / (norm + 1e-6); grads are
// scaled by coef when coef < 1. `norm` is GlobalNorm(grads, n), computed by the
// caller (who also logs it).
void ClipByGlobalNorm(float* grads, int64_t n, double norm, double max_norm);

// Linear warmup from 0 to max_lr over `warmup` steps (0-based step s gets
// max_lr*(s+1)/warmup), then cosine decay to min_lr at total_steps, then
// min_lr constant.
double LearningRate(int64_t step, int64_t warmup, int64_t total_steps, double max_lr,
                    double min_lr);

}  // namespace hpod::train::model
