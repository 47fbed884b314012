#include "hpod/train/model/ops/cpu/gemm.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

namespace hpod::train::model::cpu {
namespace {

// Both backends against a double reference, for every transpose combination,
// strided views (ld > width) and alpha/beta; and against each other.
TEST(GemmTest, BackendsMatchReferenceAndEachOther) {
  const int64_t m = 19, n = 23, k = 31, pad = 3;
  std::mt19937 gen(42);
  std::normal_distribution<float> dist;
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      // Stored shapes: A is (m,k) or (k,m); B is (k,n) or (n,k); padded rows.
      const int64_t a_rows = ta ? k : m, a_cols = ta ? m : k;
      const int64_t b_rows = tb ? n : k, b_cols = tb ? k : n;
      const int64_t lda = a_cols + pad, ldb = b_cols + pad, ldc = n + pad;
      std::vector<float> a(a_rows * lda), b(b_rows * ldb), c0(m * ldc);
      for (auto& x : a) x = dist(gen);
      for (auto& x : b) x = dist(gen);
      for (auto& x : c0) x = dist(gen);
      const float alpha = 0.5f, beta = 0.25f;
      std::vector<double> want(m * ldc);
      for (int64_t i = 0; i < m; ++i) {
        for (int64_t j = 0; j < n; ++j) {
          double s = 0;
          for (int64_t p = 0; p < k; ++p) {
            const double av = ta ? a[p * lda + i] : a[i * lda + p];
            const double bv = tb ? b[j * ldb + p] : b[p * ldb + j];
            s += av * bv;
          }
          want[i * ldc + j] = alpha * s + beta * c0[i * ldc + j];
        }
      }
      std::vector<float> got[2];
      int idx = 0;
      for (MatmulBackend be : {MatmulBackend::kOneDnn, MatmulBackend::kOpenBlas}) {
        SetGemmThreads(be, 1);
        got[idx] = c0;
        Sgemm(be, ta, tb, m, n, k, alpha, a.data(), lda, b.data(), ldb, beta, got[idx].data(), ldc);
        for (int64_t i = 0; i < m; ++i) {
          for (int64_t j = 0; j < n; ++j) {
            ASSERT_NEAR(got[idx][i * ldc + j], want[i * ldc + j], 1e-5)
                << MatmulBackendName(be) << " ta=" << ta << " tb=" << tb << " at " << i << "," << j;
          }
          for (int64_t j = n; j < ldc; ++j) {  // padding untouched
            ASSERT_EQ(got[idx][i * ldc + j], c0[i * ldc + j]);
          }
        }
        ++idx;
      }
      for (size_t i = 0; i < got[0].size(); ++i) ASSERT_NEAR(got[0][i], got[1][i], 1e-5);
    }
  }
}

}  // namespace
}  // namespace hpod::train::model::cpu
