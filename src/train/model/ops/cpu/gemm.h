// Row-major single-precision GEMM over a field library, the one seam through
// which every matmul of the model goes (a CUDA backend adds a sibling op layer).
//
// Thread contract: Sgemm may be called from several threads at once (both
// libraries are reentrant); the model calls it from its pool threads with the
// library set to 1 thread, so parallelism lives in one place. SetGemmThreads
// sets oneDNN's OpenMP team size for the calling thread only (an OpenMP
// per-thread setting) and OpenBLAS's thread count process-wide.
#pragma once

#include <cstdint>
#include <string>

namespace hpod::train::model {

// oneDNN is the default: its JIT picks the widest ISA by itself, while
// OpenBLAS follows OPENBLAS_CORETYPE from the environment (which hpod never
// changes; training-building-blocks.md §3).
enum class MatmulBackend { kOneDnn, kOpenBlas };

std::string MatmulBackendName(MatmulBackend b);

namespace cpu {

// C = alpha * op(A) * op(B) + beta * C, all row-major; op(A) is m x k and
// op(B) is k x n; lda/ldb/ldc are row strides of the stored matrices.
void Sgemm(MatmulBackend backend, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
           float alpha, const float* a, int64_t lda, const float* b, int64_t ldb, float beta,
           float* c, int64_t ldc);

// Sets the library's worker count (openblas_set_num_threads / omp_set_num_threads).
void SetGemmThreads(MatmulBackend backend, int threads);

}  // namespace cpu
}  // namespace hpod::train::model
