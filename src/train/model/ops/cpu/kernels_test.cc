// Each kernel against a naive double-precision reference; each backward
// against central finite differences of that reference (in double, so the
// differences are exact to ~1e-9 and the tolerance measures our fp32 kernel).
#include "hpod/train/model/ops/cpu/kernels.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <random>
#include <vector>

namespace hpod::train::model::cpu {
namespace {

std::vector<float> Random(int64_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(gen);
  return v;
}

std::vector<double> ToDouble(const std::vector<float>& v) { return {v.begin(), v.end()}; }

// d/dx of sum(w * f(x)) by central differences, in double.
std::vector<double> NumericGrad(
    const std::function<std::vector<double>(const std::vector<double>&)>& f, std::vector<double> x,
    const std::vector<double>& w) {
  std::vector<double> g(x.size());
  const double h = 1e-6;
  for (size_t i = 0; i < x.size(); ++i) {
    const double x0 = x[i];
    x[i] = x0 + h;
    auto plus = f(x);
    x[i] = x0 - h;
    auto minus = f(x);
    x[i] = x0;
    double d = 0;
    for (size_t j = 0; j < w.size(); ++j) d += w[j] * (plus[j] - minus[j]);
    g[i] = d / (2 * h);
  }
  return g;
}

void ExpectClose(const std::vector<float>& got, const std::vector<double>& want, double rtol,
                 const char* what) {
  ASSERT_EQ(got.size(), want.size());
  double max_ref = 0;
  for (double v : want) max_ref = std::max(max_ref, std::fabs(v));
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_NEAR(got[i], want[i], rtol * max_ref) << what << " element " << i;
  }
}

std::vector<double> RmsNormRef(const std::vector<double>& x, const std::vector<double>& g,
                               int64_t n, int64_t c, double eps) {
  std::vector<double> y(x.size());
  for (int64_t i = 0; i < n; ++i) {
    double ss = 0;
    for (int64_t j = 0; j < c; ++j) ss += x[i * c + j] * x[i * c + j];
    const double r = 1.0 / std::sqrt(ss / c + eps);
    for (int64_t j = 0; j < c; ++j) y[i * c + j] = x[i * c + j] * r * g[j];
  }
  return y;
}

TEST(KernelsTest, ExpMatchesLibm) {
  double worst = 0;
  for (float x = -80.0f; x < 80.0f; x += 0.0137f) {
    worst = std::max(worst, std::fabs(Exp(x) / std::exp(double(x)) - 1.0));
  }
  EXPECT_LT(worst, 3e-7);
  EXPECT_EQ(Exp(0.0f), 1.0f);
  EXPECT_LT(Exp(-200.0f), 1e-37f);  // clamped, finite, tiny
}

TEST(KernelsTest, RmsNormForwardAndBackward) {
  const int64_t n = 5, c = 12;
  const double eps = 1e-5;
  auto x = Random(n * c, 1), g = Random(c, 2), w = Random(n * c, 3);
  for (auto& v : g) v += 1.0f;
  ThreadPool pool(2);
  std::vector<float> y(n * c), rstd(n);
  RmsNormForward(pool, y.data(), rstd.data(), x.data(), g.data(), n, c, float(eps));
  ExpectClose(y, RmsNormRef(ToDouble(x), ToDouble(g), n, c, eps), 1e-6, "y");

  std::vector<float> dx(n * c, 0.5f), dg(c, 0.25f), scratch(2 * c);
  RmsNormBackward(pool, dx.data(), dg.data(), scratch.data(), w.data(), x.data(), g.data(),
                  rstd.data(), n, c);
  auto ndx = NumericGrad([&](const auto& xx) { return RmsNormRef(xx, ToDouble(g), n, c, eps); },
                         ToDouble(x), ToDouble(w));
  auto ndg = NumericGrad([&](const auto& gg) { return RmsNormRef(ToDouble(x), gg, n, c, eps); },
                         ToDouble(g), ToDouble(w));
  for (auto& v : ndx) v += 0.5;  // the kernels accumulate into their outputs
  for (auto& v : ndg) v += 0.25;
  ExpectClose(dx, ndx, 1e-5, "dx");
  ExpectClose(dg, ndg, 1e-5, "dg");
}

TEST(KernelsTest, RmsNormBackwardThreadCountsAgree) {
  const int64_t n = 37, c = 20;
  auto x = Random(n * c, 4), g = Random(c, 5), dy = Random(n * c, 6);
  std::vector<float> rstd(n), y(n * c);
  ThreadPool one(1), two(2);
  RmsNormForward(one, y.data(), rstd.data(), x.data(), g.data(), n, c, 1e-5f);
  std::vector<float> dx1(n * c), dg1(c), dx2(n * c), dg2(c), scratch(2 * c);
  RmsNormBackward(one, dx1.data(), dg1.data(), scratch.data(), dy.data(), x.data(), g.data(),
                  rstd.data(), n, c);
  RmsNormBackward(two, dx2.data(), dg2.data(), scratch.data(), dy.data(), x.data(), g.data(),
                  rstd.data(), n, c);
  EXPECT_EQ(dx1, dx2);  // row-local: bit-identical across thread counts
  for (int64_t j = 0; j < c; ++j) EXPECT_NEAR(dg1[j], dg2[j], 1e-5f * std::fabs(dg1[j]) + 1e-6f);
}

std::vector<double> RopeRef(const std::vector<double>& x, int64_t n, int64_t heads, int64_t hd,
                            int64_t t, double theta) {
  std::vector<double> y(x);
  const int64_t half = hd / 2;
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t h = 0; h < heads; ++h) {
      for (int64_t j = 0; j < half; ++j) {
        const double a = (i % t) * std::pow(theta, -2.0 * j / hd);
        const double x1 = x[i * heads * hd + h * hd + j],
                     x2 = x[i * heads * hd + h * hd + j + half];
        // HF: x * cos + rotate_half(x) * sin, rotate_half(x) = [-x2, x1].
        y[i * heads * hd + h * hd + j] = x1 * std::cos(a) - x2 * std::sin(a);
        y[i * heads * hd + h * hd + j + half] = x2 * std::cos(a) + x1 * std::sin(a);
      }
    }
  }
  return y;
}

TEST(KernelsTest, RopeForwardAndBackward) {
  const int64_t t = 6, n = 2 * t, heads = 3, hd = 8, half = hd / 2;
  const double theta = 10000.0;
  std::vector<float> cos(t * half), sin(t * half);
  for (int64_t p = 0; p < t; ++p) {
    for (int64_t j = 0; j < half; ++j) {
      cos[p * half + j] = float(std::cos(p * std::pow(theta, -2.0 * j / hd)));
      sin[p * half + j] = float(std::sin(p * std::pow(theta, -2.0 * j / hd)));
    }
  }
  auto x = Random(n * heads * hd, 7), w = Random(n * heads * hd, 8);
  ThreadPool pool(2);
  auto y = x;
  RopeForward(pool, y.data(), n, heads * hd, heads, hd, t, cos.data(), sin.data());
  ExpectClose(y, RopeRef(ToDouble(x), n, heads, hd, t, theta), 1e-6, "rope");
  auto dx = w;
  RopeBackward(pool, dx.data(), n, heads * hd, heads, hd, t, cos.data(), sin.data());
  auto ndx = NumericGrad([&](const auto& xx) { return RopeRef(xx, n, heads, hd, t, theta); },
                         ToDouble(x), ToDouble(w));
  ExpectClose(dx, ndx, 1e-6, "drope");
}

std::vector<double> SoftmaxRef(const std::vector<double>& s, int64_t mats, int64_t t) {
  std::vector<double> p(s.size(), 0.0);
  for (int64_t r = 0; r < mats * t; ++r) {
    const int64_t len = r % t + 1;
    double m = -1e300, sum = 0;
    for (int64_t j = 0; j < len; ++j) m = std::max(m, s[r * t + j]);
    for (int64_t j = 0; j < len; ++j) sum += std::exp(s[r * t + j] - m);
    for (int64_t j = 0; j < len; ++j) p[r * t + j] = std::exp(s[r * t + j] - m) / sum;
  }
  return p;
}

TEST(KernelsTest, CausalSoftmaxForwardAndBackward) {
  const int64_t mats = 3, t = 11;
  auto s = Random(mats * t * t, 9, 2.0f), w = Random(mats * t * t, 10);
  ThreadPool pool(2);
  auto p = s;
  CausalSoftmaxForward(pool, p.data(), mats, t);
  ExpectClose(p, SoftmaxRef(ToDouble(s), mats, t), 1e-6, "softmax");
  EXPECT_EQ(p[0 * t + 1], 0.0f);  // masked above the diagonal
  CausalSoftmaxBackward(pool, p.data(), w.data(), mats, t);
  auto nds = NumericGrad([&](const auto& ss) { return SoftmaxRef(ss, mats, t); }, ToDouble(s),
                         ToDouble(w));
  ExpectClose(p, nds, 1e-5, "dsoftmax");
}

std::vector<double> SwiGluRef(const std::vector<double>& gu, int64_t n, int64_t hid) {
  std::vector<double> h(n * hid);
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < hid; ++j) {
      const double g = gu[i * 2 * hid + j], u = gu[i * 2 * hid + hid + j];
      h[i * hid + j] = g / (1.0 + std::exp(-g)) * u;
    }
  }
  return h;
}

TEST(KernelsTest, SwiGluForwardAndBackward) {
  const int64_t n = 4, hid = 13;
  auto gu = Random(n * 2 * hid, 11, 2.0f), w = Random(n * hid, 12);
  ThreadPool pool(2);
  std::vector<float> h(n * hid), dgu(n * 2 * hid);
  SwiGluForward(pool, h.data(), gu.data(), n, hid);
  ExpectClose(h, SwiGluRef(ToDouble(gu), n, hid), 1e-6, "swiglu");
  SwiGluBackward(pool, dgu.data(), w.data(), gu.data(), n, hid);
  auto nd =
      NumericGrad([&](const auto& x) { return SwiGluRef(x, n, hid); }, ToDouble(gu), ToDouble(w));
  ExpectClose(dgu, nd, 1e-5, "dswiglu");
}

TEST(KernelsTest, CrossEntropyForwardAndBackward) {
  const int64_t n = 6, v = 37;
  auto logits = Random(n * v, 13, 3.0f);
  std::vector<int32_t> targets = {0, 36, 5, 5, 17, 2};
  auto loss_ref = [&](const std::vector<double>& x) {
    double total = 0;
    for (int64_t i = 0; i < n; ++i) {
      double m = -1e300, s = 0;
      for (int64_t j = 0; j < v; ++j) m = std::max(m, x[i * v + j]);
      for (int64_t j = 0; j < v; ++j) s += std::exp(x[i * v + j] - m);
      total += m + std::log(s) - x[i * v + targets[i]];
    }
    return std::vector<double>{total / n};
  };
  ThreadPool pool(2);
  std::vector<float> lse(n), losses(n);
  const float loss =
      CrossEntropyForward(pool, lse.data(), losses.data(), logits.data(), targets.data(), n, v);
  EXPECT_NEAR(loss, loss_ref(ToDouble(logits))[0], 1e-6 * loss);
  auto d = logits;
  const float scale = 0.75f;
  CrossEntropyBackward(pool, d.data(), lse.data(), targets.data(), n, v, scale / n);
  auto nd = NumericGrad(loss_ref, ToDouble(logits), {double(scale)});
  ExpectClose(d, nd, 1e-5, "dlogits");
}

TEST(KernelsTest, EmbeddingForwardAndBackward) {
  const int64_t v = 5, c = 3;
  std::vector<float> table(v * c);
  for (int64_t i = 0; i < v * c; ++i) table[i] = float(i);
  std::vector<int32_t> tokens = {4, 0, 4};
  ThreadPool pool(1);
  std::vector<float> out(3 * c);
  EmbeddingForward(pool, out.data(), tokens.data(), table.data(), 3, c);
  EXPECT_EQ(out, (std::vector<float>{12, 13, 14, 0, 1, 2, 12, 13, 14}));
  std::vector<float> dtable(v * c, 0.0f), dout = {1, 1, 1, 2, 2, 2, 3, 3, 3};
  EmbeddingBackward(dtable.data(), dout.data(), tokens.data(), 3, c);
  EXPECT_EQ(dtable, (std::vector<float>{2, 2, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 4, 4, 4}));
}

TEST(ThreadPoolTest, StaticPartitionCoversEveryIndexOnce) {
  for (int threads : {1, 2, 3}) {
    ThreadPool pool(threads);
    for (int64_t n : {0, 1, 7, 100}) {
      std::vector<int> hits(n, 0);
      std::vector<int> calls(threads, 0);
      pool.ParallelFor(n, [&](int tid, int64_t b, int64_t e) {
        ++calls[tid];
        EXPECT_EQ(b, n * tid / threads);
        EXPECT_EQ(e, n * (tid + 1) / threads);
        for (int64_t i = b; i < e; ++i) ++hits[i];
      });
      EXPECT_EQ(calls, std::vector<int>(threads, 1));
      EXPECT_EQ(hits, std::vector<int>(n, 1));
    }
  }
}

}  // namespace
}  // namespace hpod::train::model::cpu
