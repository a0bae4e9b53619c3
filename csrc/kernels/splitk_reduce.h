// The second kernel of a parallel split-K GEMM (TileSched::kParallelSplitK, kernels/sm90_gemm.cuh): the first
// stores each K slice's fp32 partial D_l[M, N] (row-major, slice after slice); this one adds them in slice order,
// adds the bias, and rounds once to bf16: out[m, n] = bf16(((D_0 + D_1) + ...) + bias[n]), the rounding of the
// unsplit kernels' epilogue. Launched with PDL after the GEMM (launch/pdl.h): it waits for the whole GEMM grid.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace vlattn {

// partials: splits x m x n floats (1 <= splits <= kMaxGemmSplits). bias: bf16 [n] or nullptr. out: bf16 rows of n,
// row stride ldd elements. n and ldd multiples of 4, out 8-byte aligned (vlattn.linear checks 16).
cudaError_t launch_splitk_reduce(const float* partials, int splits, int m, int n, const void* bias, void* out,
                                 int64_t ldd, cudaStream_t stream);

}  // namespace vlattn
