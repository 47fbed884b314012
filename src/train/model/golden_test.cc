// Golden test against PyTorch (llm.c's test_gpt2): tests/golden/llama_golden.py
// dumps tiny Llamas' weights, a batch, logits, loss, every gradient and 10
// AdamW steps; this test loads them (no PyTorch at run time) and checks ours.
//
// Tolerances, fp32 both sides. The two implementations sum in different
// orders (GEMM blocking, lane-split reductions, our polynomial exp vs libm),
// so each op carries ~1e-7 relative rounding that a 2-layer model amplifies
// to a few 1e-7..1e-6. Logits and gradients: |ours - torch| <= 1e-5 *
// max|torch| + 1e-4 * |torch| per element, i.e. 1e-4 relative with an
// absolute floor scaled to the tensor (gradients span 1e-6..1e-1 across
// tensors, so one fixed absolute floor would be meaningless for some).
// Losses: 1e-5 absolute on values near 4 (~3e-6 relative), over 10 optimizer
// steps; grad norms 1e-4 relative. Final weights 5e-5 absolute: AdamW moves
// each weight by ~lr per step whatever the gradient's size, so for elements
// whose gradient is near zero, rounding noise in g decides the step's sign;
// 10 steps with sum(lr) ~ 6e-3 bound that at a few 1e-5 (measured 1.3e-5).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "hpod/train/model/config.h"
#include "hpod/train/model/llama.h"
#include "hpod/train/model/optim.h"

namespace hpod::train::model {
namespace {

struct Golden {
  nlohmann::json index;
  std::vector<float> data;

  const float* Tensor(const std::string& key, int64_t* numel = nullptr) const {
    const auto& t = index["tensors"].at(key);
    int64_t n = 1;
    for (int64_t d : t["shape"]) n *= d;
    if (numel != nullptr) *numel = n;
    return data.data() + t["offset"].get<int64_t>();
  }
};

const Golden& LoadGolden() {
  static const Golden* golden = [] {
    auto* g = new Golden;
    const std::string dir = HPOD_MODEL_TESTDATA_DIR;
    std::ifstream js(dir + "/llama_golden.json");
    g->index = nlohmann::json::parse(js);
    std::ifstream bin(dir + "/llama_golden.bin", std::ios::binary | std::ios::ate);
    const auto bytes = static_cast<size_t>(bin.tellg());
    g->data.resize(bytes / sizeof(float));
    bin.seekg(0);
    bin.read(reinterpret_cast<char*>(g->data.data()), static_cast<std::streamsize>(bytes));
    return g;
  }();
  return *golden;
}

// Worst element of `ours` vs `ref` in units of the allowed error (<= 1 passes).
struct Mismatch {
  double ratio = 0;  // max |diff| / allowed
  double max_abs_diff = 0;
  int64_t at = 0;
};

Mismatch Compare(const float* ours, const float* ref, int64_t n, double atol_scale, double rtol,
                 double atol = 0.0) {
  double max_ref = 0;
  for (int64_t i = 0; i < n; ++i) max_ref = std::max(max_ref, std::fabs(double(ref[i])));
  Mismatch m;
  for (int64_t i = 0; i < n; ++i) {
    const double diff = std::fabs(double(ours[i]) - double(ref[i]));
    const double allowed = atol + atol_scale * max_ref + rtol * std::fabs(double(ref[i])) + 1e-30;
    m.max_abs_diff = std::max(m.max_abs_diff, diff);
    if (diff / allowed > m.ratio) {
      m.ratio = diff / allowed;
      m.at = i;
    }
  }
  return m;
}

class GoldenTest : public ::testing::TestWithParam<std::tuple<int, MatmulBackend>> {
 protected:
  const nlohmann::json& Case() const {
    return LoadGolden().index["configs"][std::get<0>(GetParam())];
  }

  std::unique_ptr<Llama> MakeModel() {
    const auto& c = Case();
    auto config = ConfigFromJson(c["config"]);
    EXPECT_TRUE(config.ok()) << config.status().ToString();
    auto m = Llama::Create(*config, RunShape{c["batch"], c["seq_len"]},
                           ModelOptions{1, std::get<1>(GetParam())});
    EXPECT_TRUE(m.ok()) << m.status().ToString();
    std::unique_ptr<Llama> model = std::move(*m);
    const Golden& g = LoadGolden();
    for (const ParamSpec& s : ParamSpecs(model->config())) {
      int64_t numel = 0;
      const float* src = g.Tensor(c["name"].get<std::string>() + "/param/" + s.name, &numel);
      EXPECT_EQ(numel, s.numel) << s.name;
      std::copy(src, src + s.numel, model->params() + s.offset);
    }
    tokens_ = c["tokens"].get<std::vector<int32_t>>();
    targets_ = c["targets"].get<std::vector<int32_t>>();
    return model;
  }

  // Checks every parameter-layout tensor under `prefix` ("grad" or "final").
  void ExpectArenaMatches(const Llama& model, const float* arena, const std::string& prefix,
                          double atol_scale, double rtol, double atol = 0.0) {
    const Golden& g = LoadGolden();
    std::string worst;
    Mismatch worst_m;
    for (const ParamSpec& s : ParamSpecs(model.config())) {
      const float* ref = g.Tensor(Case()["name"].get<std::string>() + "/" + prefix + "/" + s.name);
      Mismatch m = Compare(arena + s.offset, ref, s.numel, atol_scale, rtol, atol);
      if (m.ratio >= worst_m.ratio) {
        worst_m = m;
        worst = s.name;
      }
    }
    EXPECT_LE(worst_m.ratio, 1.0) << "worst " << prefix << " tensor: " << worst << " element "
                                  << worst_m.at << ", |diff| " << worst_m.max_abs_diff;
    // The margin, for whoever tightens or loosens these tolerances.
    std::printf("%s: worst %s tensor %s at %.3g of its tolerance (|diff| %.3g)\n",
                Case()["name"].get<std::string>().c_str(), prefix.c_str(), worst.c_str(),
                worst_m.ratio, worst_m.max_abs_diff);
  }

  std::vector<int32_t> tokens_, targets_;
};

TEST_P(GoldenTest, LogitsLossAndGradients) {
  auto model = MakeModel();
  const auto& c = Case();
  const float loss = model->Forward(tokens_.data(), targets_.data());
  EXPECT_NEAR(loss, c["loss"].get<double>(), 1e-5);
  int64_t numel = 0;
  const float* ref = LoadGolden().Tensor(c["name"].get<std::string>() + "/logits", &numel);
  ASSERT_EQ(numel, static_cast<int64_t>(tokens_.size()) * model->config().vocab_size);
  Mismatch m = Compare(model->logits(), ref, numel, 1e-5, 1e-4);
  EXPECT_LE(m.ratio, 1.0) << "logits element " << m.at << " |diff| " << m.max_abs_diff;
  std::printf("%s: logits at %.3g of tolerance, loss diff %.3g\n",
              c["name"].get<std::string>().c_str(), m.ratio,
              std::fabs(loss - c["loss"].get<double>()));

  model->ZeroGrad();
  model->Backward(1.0f);
  ExpectArenaMatches(*model, model->grads(), "grad", 1e-5, 1e-4);
}

TEST_P(GoldenTest, TenAdamWSteps) {
  auto model = MakeModel();
  const auto& c = Case();
  const auto& train = LoadGolden().index["train"];
  AdamW opt(model->config(),
            AdamWOptions{train["beta1"], train["beta2"], train["eps"], train["weight_decay"]});
  const int64_t steps = train["steps"];
  for (int64_t step = 0; step < steps; ++step) {
    model->ZeroGrad();
    const float loss = model->Forward(tokens_.data(), targets_.data());
    model->Backward(1.0f);
    const double norm = GlobalNorm(model->grads(), model->num_params());
    ClipByGlobalNorm(model->grads(), model->num_params(), norm, c["max_norm"].get<double>());
    const double lr = LearningRate(step, train["warmup"], steps, train["max_lr"], train["min_lr"]);
    opt.Step(model->params(), model->grads(), static_cast<float>(lr));
    EXPECT_NEAR(loss, c["losses"][step].get<double>(), 1e-5) << "step " << step;
    EXPECT_NEAR(norm, c["grad_norms"][step].get<double>(), 1e-4 * norm) << "step " << step;
    EXPECT_NEAR(lr, c["lrs"][step].get<double>(), 1e-12) << "step " << step;
  }
  EXPECT_EQ(opt.step(), steps);
  ExpectArenaMatches(*model, model->params(), "final", 0.0, 0.0, 5e-5);
}

INSTANTIATE_TEST_SUITE_P(
    Configs, GoldenTest,
    ::testing::Combine(::testing::Values(0, 1),
                       ::testing::Values(MatmulBackend::kOneDnn, MatmulBackend::kOpenBlas)),
    [](const ::testing::TestParamInfo<GoldenTest::ParamType>& info) {
      const nlohmann::json& c = LoadGolden().index["configs"][std::get<0>(info.param)];
      return c["name"].get<std::string>() + "_" + MatmulBackendName(std::get<1>(info.param));
    });

}  // namespace
}  // namespace hpod::train::model
