#include "hpod/train/model/optim.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace hpod::train::model {
namespace {

Config Tiny() {
  Config c;
  c.dim = 4;
  c.n_layers = 1;
  c.n_heads = 2;
  c.n_kv_heads = 1;
  c.vocab_size = 3;
  c.hidden_dim = 6;
  c.max_seq_len = 4;
  return c;
}

TEST(LearningRateTest, WarmupCosineThenFloor) {
  // warmup 4, total 14, max 1e-3, min 1e-4.
  EXPECT_DOUBLE_EQ(LearningRate(0, 4, 14, 1e-3, 1e-4), 2.5e-4);
  EXPECT_DOUBLE_EQ(LearningRate(3, 4, 14, 1e-3, 1e-4), 1e-3);
  EXPECT_DOUBLE_EQ(LearningRate(4, 4, 14, 1e-3, 1e-4), 1e-3);      // cosine starts at max
  EXPECT_NEAR(LearningRate(9, 4, 14, 1e-3, 1e-4), 5.5e-4, 1e-15);  // halfway
  EXPECT_NEAR(LearningRate(13, 4, 14, 1e-3, 1e-4), 1e-4 + 0.5 * (1 + std::cos(M_PI * 0.9)) * 9e-4,
              1e-15);
  EXPECT_DOUBLE_EQ(LearningRate(14, 4, 14, 1e-3, 1e-4), 1e-4);
  EXPECT_DOUBLE_EQ(LearningRate(1000, 4, 14, 1e-3, 1e-4), 1e-4);
  EXPECT_DOUBLE_EQ(LearningRate(0, 0, 10, 1e-3, 0.0), 1e-3);  // no warmup
}

TEST(GlobalNormTest, L2NormInDouble) {
  std::vector<float> x = {3, 4, 0, 0, 0, 12};  // 9 + 16 + 144 = 169
  EXPECT_DOUBLE_EQ(GlobalNorm(x.data(), 6), 13.0);
  EXPECT_DOUBLE_EQ(GlobalNorm(x.data(), 0), 0.0);
}

TEST(ClipByGlobalNormTest, ScalesOnlyAboveTheThreshold) {
  std::vector<float> g = {3, 4};
  ClipByGlobalNorm(g.data(), 2, 5.0, 1.0);
  const double coef = 1.0 / (5.0 + 1e-6);  // PyTorch's clip_grad_norm_ coefficient
  EXPECT_FLOAT_EQ(g[0], float(3 * coef));
  EXPECT_FLOAT_EQ(g[1], float(4 * coef));
  EXPECT_NEAR(GlobalNorm(g.data(), 2), 1.0, 1e-6);
  std::vector<float> small = {0.3f, 0.4f};
  ClipByGlobalNorm(small.data(), 2, 0.5, 1.0);
  EXPECT_EQ(small, (std::vector<float>{0.3f, 0.4f}));
}

TEST(AdamWTest, MatchesTheClosedFormAndDecaysOnly2dParams) {
  const Config c = Tiny();
  const int64_t n = NumParams(c);
  AdamW opt(c, AdamWOptions{0.9f, 0.95f, 1e-8f, 0.1f});
  EXPECT_EQ(opt.num_params(), n);
  EXPECT_EQ(opt.step(), 0);
  std::vector<float> p(n, 1.0f), g(n, 0.0f);
  const auto specs = ParamSpecs(c);
  const int64_t embed0 = specs[0].offset;  // 2-D: decayed
  const int64_t norm0 = specs[1].offset;   // input_layernorm: not decayed
  g[embed0] = 0.5f;
  g[norm0] = -2.0f;
  const float lr = 0.01f;
  opt.Step(p.data(), g.data(), lr);
  EXPECT_EQ(opt.step(), 1);
  // Step 1: m = 0.1 g, v = 0.05 g^2, m_hat = g, v_hat = g^2 -> update lr*sign(g)
  // (up to eps), after decoupled decay p *= 1 - lr*wd.
  EXPECT_NEAR(p[embed0], 1.0f * (1 - lr * 0.1f) - lr, 1e-6);
  EXPECT_NEAR(p[norm0], 1.0f + lr, 1e-6);
  EXPECT_NEAR(p[embed0 + 1], 1.0f * (1 - lr * 0.1f), 1e-7);  // zero grad: decay only
  EXPECT_EQ(p[norm0 + 1], 1.0f);                             // zero grad, no decay
  EXPECT_FLOAT_EQ(opt.m()[embed0], 0.05f);
  EXPECT_FLOAT_EQ(opt.v()[norm0], 0.05f * 4.0f);

  // Step 2 with the same gradient, against the formula in double.
  const float p_before = p[embed0];
  opt.Step(p.data(), g.data(), lr);
  const double m2 = 0.9 * 0.05 + 0.1 * 0.5, v2 = 0.95 * 0.0125 + 0.05 * 0.25;
  const double bc1 = 1 - 0.9 * 0.9, bc2 = 1 - 0.95 * 0.95;
  const double want = p_before * (1 - lr * 0.1) - lr / bc1 * m2 / (std::sqrt(v2 / bc2) + 1e-8);
  EXPECT_NEAR(p[embed0], want, 1e-6);

  opt.set_step(41);  // restored from a checkpoint
  EXPECT_EQ(opt.step(), 41);
}

TEST(AdamWTest, ShardsUpdatedApartEqualTheWholeBitForBit) {
  // ZeRO-1: three ranks each own a slice (cutting through tensors, decayed and
  // not); together they must do exactly what one optimizer does.
  const Config c = Tiny();
  const int64_t n = NumParams(c);
  std::vector<float> g(n);
  for (int64_t i = 0; i < n; ++i) g[i] = std::sin(static_cast<float>(i)) * 0.1f;
  std::vector<float> whole(n, 0.5f), sharded(n, 0.5f);
  AdamW all(c, AdamWOptions{});
  const int64_t cuts[] = {0, n / 3 + 5, 2 * n / 3 - 7, n};
  std::vector<AdamW> shards;
  for (int r = 0; r < 3; ++r) shards.emplace_back(c, AdamWOptions{}, cuts[r], cuts[r + 1]);
  for (int step = 0; step < 3; ++step) {
    all.Step(whole.data(), g.data(), 0.01f);
    for (auto& s : shards) s.Step(sharded.data(), g.data(), 0.01f);
  }
  EXPECT_EQ(whole, sharded);
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(shards[r].begin(), cuts[r]);
    EXPECT_EQ(shards[r].num_params(), cuts[r + 1] - cuts[r]);
    for (int64_t j = 0; j < shards[r].num_params(); ++j) {
      ASSERT_EQ(shards[r].m()[j], all.m()[cuts[r] + j]);
      ASSERT_EQ(shards[r].v()[j], all.v()[cuts[r] + j]);
    }
  }
  // Shard sums of squares add up to the global norm.
  double sum = 0;
  for (int r = 0; r < 3; ++r) sum += SumSquares(g.data() + cuts[r], cuts[r + 1] - cuts[r]);
  EXPECT_NEAR(std::sqrt(sum), GlobalNorm(g.data(), n), 1e-12);
  EXPECT_EQ(std::sqrt(SumSquares(g.data(), n)), GlobalNorm(g.data(), n));
}

}  // namespace
}  // namespace hpod::train::model
