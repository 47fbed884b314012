#include "hpod/train/model/ops/cpu/gemm.h"

#include <cblas.h>
#include <omp.h>

#include <cstdio>
#include <cstdlib>

#include "oneapi/dnnl/dnnl.h"

extern "C" void openblas_set_num_threads(int);

namespace hpod::train::model {

std::string MatmulBackendName(MatmulBackend b) {
  return b == MatmulBackend::kOneDnn ? "onednn" : "openblas";
}

namespace cpu {

void Sgemm(MatmulBackend backend, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
           float alpha, const float* a, int64_t lda, const float* b, int64_t ldb, float beta,
           float* c, int64_t ldc) {
  if (m == 0 || n == 0) return;
  if (backend == MatmulBackend::kOpenBlas) {
    cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
                trans_b ? CblasTrans : CblasNoTrans, static_cast<blasint>(m),
                static_cast<blasint>(n), static_cast<blasint>(k), alpha, a,
                static_cast<blasint>(lda), b, static_cast<blasint>(ldb), beta, c,
                static_cast<blasint>(ldc));
    return;
  }
  // dnnl_sgemm is row-major (oneDNN >= 1.0). It returns an error only for bad
  // arguments, which the model's fixed shapes rule out: a failure is a bug.
  dnnl_status_t s = dnnl_sgemm(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', m, n, k, alpha, a, lda, b,
                               ldb, beta, c, ldc);
  if (s != dnnl_success) {
    std::fprintf(stderr, "dnnl_sgemm(m=%lld n=%lld k=%lld) failed with status %d\n",
                 static_cast<long long>(m), static_cast<long long>(n), static_cast<long long>(k),
                 static_cast<int>(s));
    std::abort();
  }
}

void SetGemmThreads(MatmulBackend backend, int threads) {
  if (backend == MatmulBackend::kOpenBlas) {
    openblas_set_num_threads(threads);
  } else {
    // Debian's libdnnl 2.6 uses the OpenMP CPU runtime (DNNL_CPU_RUNTIME ==
    // DNNL_RUNTIME_OMP), whose team size is the caller's nthreads-var ICV.
    omp_set_num_threads(threads);
  }
}

}  // namespace cpu
}  // namespace hpod::train::model
