#include "hpod/train/model/llama.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "hpod/train/model/optim.h"

namespace hpod::train::model {
namespace {

Config Small(bool tied, int64_t kv_heads) {
  Config c;
  c.dim = 32;
  c.n_layers = 2;
  c.n_heads = 4;
  c.n_kv_heads = kv_heads;
  c.vocab_size = 50;
  c.hidden_dim = 40;
  c.max_seq_len = 16;
  c.tied_embeddings = tied;
  return c;
}

struct Batch {
  std::vector<int32_t> tokens, targets;
};

Batch MakeBatch(int64_t n, int64_t vocab, uint64_t seed) {
  Batch b;
  for (int64_t i = 0; i < n; ++i) {
    seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
    b.tokens.push_back(static_cast<int32_t>((seed >> 33) % vocab));
    b.targets.push_back(static_cast<int32_t>((seed >> 13) % vocab));
  }
  return b;
}

std::unique_ptr<Llama> Make(const Config& c, RunShape s, int threads = 1,
                            MatmulBackend be = MatmulBackend::kOneDnn) {
  auto m = Llama::Create(c, s, ModelOptions{threads, be});
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  (*m)->InitWeights(7);
  return std::move(*m);
}

TEST(LlamaTest, CreateRejectsBadShapes) {
  EXPECT_FALSE(Llama::Create(Small(true, 4), RunShape{2, 17}, {}).ok());  // > max_seq_len
  EXPECT_FALSE(Llama::Create(Small(true, 4), RunShape{0, 8}, {}).ok());
  EXPECT_FALSE(Llama::Create(Small(true, 4), RunShape{1, 8}, ModelOptions{0}).ok());
  Config bad = Small(true, 3);  // 3 does not divide 4 heads
  EXPECT_FALSE(Llama::Create(bad, RunShape{1, 8}, {}).ok());
}

TEST(LlamaTest, InitWeightsFollowsTheRecipe) {
  const Config c = Small(false, 2);
  auto m = Make(c, RunShape{1, 4});
  EXPECT_EQ(m->num_params(), NumParams(c));
  EXPECT_GT(m->activation_bytes(), 0);
  auto stddev = [&](const ParamSpec& s) {
    double ss = 0;
    for (int64_t i = 0; i < s.numel; ++i)
      ss += double(m->params()[s.offset + i]) * m->params()[s.offset + i];
    return std::sqrt(ss / s.numel);
  };
  for (const ParamSpec& s : ParamSpecs(c)) {
    if (s.shape.size() == 1) {
      for (int64_t i = 0; i < s.numel; ++i) ASSERT_EQ(m->params()[s.offset + i], 1.0f) << s.name;
    } else if (s.name.ends_with("o_proj.weight") || s.name.ends_with("down_proj.weight")) {
      EXPECT_NEAR(stddev(s), 0.01, 0.0015) << s.name;  // 0.02 / sqrt(2 * 2 layers)
    } else {
      EXPECT_NEAR(stddev(s), 0.02, 0.003) << s.name;
    }
  }
  auto again = Make(c, RunShape{1, 4});
  EXPECT_EQ(std::memcmp(m->params(), again->params(), m->num_params() * 4), 0);
  again->InitWeights(8);
  EXPECT_NE(std::memcmp(m->params(), again->params(), m->num_params() * 4), 0);
}

// The gradient along a random direction vs a central difference of the loss.
// Float forward passes make this a ~1% check; the golden test is the precise one.
void ExpectDirectionalDerivative(const Config& c, RunShape s = {2, 8}, int threads = 1) {
  auto m = Make(c, s, threads);
  const Batch b = MakeBatch(s.batch * s.seq_len, c.vocab_size, 3);
  m->ZeroGrad();
  m->Forward(b.tokens.data(), b.targets.data());
  m->Backward(1.0f);
  std::vector<float> grad(m->grads(), m->grads() + m->num_params());
  // Direction = the gradient itself (normalized): the derivative is |g|, large
  // against float noise in the loss.
  const double gnorm = GlobalNorm(grad.data(), m->num_params());
  ASSERT_GT(gnorm, 0);
  std::vector<float> p0(m->params(), m->params() + m->num_params());
  const double h = 1e-2;
  auto loss_at = [&](double t) {
    for (int64_t i = 0; i < m->num_params(); ++i)
      m->params()[i] = p0[i] + float(t * grad[i] / gnorm);
    return double(m->Forward(b.tokens.data(), b.targets.data()));
  };
  const double numeric = (loss_at(h) - loss_at(-h)) / (2 * h);
  EXPECT_NEAR(numeric, gnorm, 0.01 * gnorm);
}

TEST(LlamaTest, GradientMatchesFiniteDifferenceGqaUntied) {
  ExpectDirectionalDerivative(Small(false, 2));
}

TEST(LlamaTest, GradientMatchesFiniteDifferenceMhaTied) {
  const Config c = Small(true, 4);
  EXPECT_EQ(ParamSpecs(c).back().name, "model.norm.weight");  // no lm_head when tied
  ExpectDirectionalDerivative(c);
}

// seq_len 100 spans two attention query blocks (64 + 36 rows), run on 2
// threads so the row-split GEMMs and the per-(batch, kv head) units are used.
TEST(LlamaTest, GradientMatchesFiniteDifferenceLongSequenceTwoThreads) {
  Config c = Small(false, 2);
  c.max_seq_len = 128;
  ExpectDirectionalDerivative(c, RunShape{2, 100}, 2);
}

// Causality across attention blocks: the first 70 positions of a 100-token
// sequence see exactly what a 70-token sequence sees.
TEST(LlamaTest, PrefixLogitsDoNotSeeTheFuture) {
  Config c = Small(false, 2);
  c.max_seq_len = 128;
  const Batch b = MakeBatch(100, c.vocab_size, 21);
  auto full = Make(c, RunShape{1, 100});
  auto prefix = Make(c, RunShape{1, 70});
  full->Forward(b.tokens.data(), b.targets.data());
  prefix->Forward(b.tokens.data(), b.targets.data());
  for (int64_t i = 0; i < 70 * c.vocab_size; ++i) {
    ASSERT_NEAR(full->logits()[i], prefix->logits()[i], 1e-5) << i;
  }
}

TEST(LlamaTest, DeterministicForAThreadCount) {
  Config c = Small(false, 2);
  c.max_seq_len = 80;
  const RunShape s{3, 80};
  const Batch b = MakeBatch(s.batch * s.seq_len, c.vocab_size, 5);
  std::vector<float> grads[3];
  float losses[3];
  int threads[3] = {2, 2, 1};
  for (int i = 0; i < 3; ++i) {
    auto m = Make(c, s, threads[i]);
    m->ZeroGrad();
    losses[i] = m->Forward(b.tokens.data(), b.targets.data());
    m->Backward(1.0f);
    grads[i].assign(m->grads(), m->grads() + m->num_params());
  }
  EXPECT_EQ(losses[0], losses[1]);
  EXPECT_EQ(std::memcmp(grads[0].data(), grads[1].data(), grads[0].size() * 4), 0);
  // 1 vs 2 threads: different partial-sum order, same math.
  EXPECT_NEAR(losses[0], losses[2], 1e-5);
  for (size_t i = 0; i < grads[0].size(); ++i) ASSERT_NEAR(grads[0][i], grads[2][i], 1e-5) << i;
}

TEST(LlamaTest, MatmulBackendsAgree) {
  const Config c = Small(true, 2);
  const RunShape s{2, 16};
  const Batch b = MakeBatch(s.batch * s.seq_len, c.vocab_size, 9);
  auto a = Make(c, s, 1, MatmulBackend::kOneDnn);
  auto o = Make(c, s, 1, MatmulBackend::kOpenBlas);
  a->ZeroGrad();
  o->ZeroGrad();
  EXPECT_NEAR(a->Forward(b.tokens.data(), b.targets.data()),
              o->Forward(b.tokens.data(), b.targets.data()), 1e-5);
  for (int64_t i = 0; i < s.batch * s.seq_len * c.vocab_size; ++i) {
    ASSERT_NEAR(a->logits()[i], o->logits()[i], 1e-5) << i;
  }
  a->Backward(1.0f);
  o->Backward(1.0f);
  for (int64_t i = 0; i < a->num_params(); ++i)
    ASSERT_NEAR(a->grads()[i], o->grads()[i], 1e-5) << i;
}

TEST(LlamaTest, GradientAccumulationEqualsOneBigStep) {
  const Config c = Small(false, 4);
  const RunShape s{2, 8};
  const Batch b1 = MakeBatch(16, c.vocab_size, 11), b2 = MakeBatch(16, c.vocab_size, 12);
  auto m = Make(c, s);
  // Two micro-batches at scale 1/2 ...
  m->ZeroGrad();
  const float l1 = m->Forward(b1.tokens.data(), b1.targets.data());
  m->Backward(0.5f);
  const float l2 = m->Forward(b2.tokens.data(), b2.targets.data());
  m->Backward(0.5f);
  std::vector<float> accum(m->grads(), m->grads() + m->num_params());
  // ... equal one batch of 4 sequences holding both.
  auto big = Make(c, RunShape{4, 8});
  Batch both = b1;
  both.tokens.insert(both.tokens.end(), b2.tokens.begin(), b2.tokens.end());
  both.targets.insert(both.targets.end(), b2.targets.begin(), b2.targets.end());
  big->ZeroGrad();
  EXPECT_NEAR(big->Forward(both.tokens.data(), both.targets.data()), 0.5f * (l1 + l2), 1e-5);
  big->Backward(1.0f);
  for (int64_t i = 0; i < m->num_params(); ++i) ASSERT_NEAR(accum[i], big->grads()[i], 1e-6) << i;
}

TEST(LlamaTest, TrainingLowersTheLossOnAFixedBatch) {
  const Config c = Small(true, 2);
  const RunShape s{2, 16};
  const Batch b = MakeBatch(32, c.vocab_size, 13);
  auto m = Make(c, s);
  AdamW opt(c, AdamWOptions{});
  float first = 0, last = 0;
  for (int step = 0; step < 30; ++step) {
    m->ZeroGrad();
    last = m->Forward(b.tokens.data(), b.targets.data());
    if (step == 0) first = last;
    m->Backward(1.0f);
    const double norm = GlobalNorm(m->grads(), m->num_params());
    ClipByGlobalNorm(m->grads(), m->num_params(), norm, 1.0);
    opt.Step(m->params(), m->grads(), 1e-2f);
  }
  EXPECT_NEAR(first, std::log(50.0), 0.1);  // uniform prediction at init
  EXPECT_LT(last, 0.5f * first);            // memorizes the batch
}

}  // namespace
}  // namespace hpod::train::model
