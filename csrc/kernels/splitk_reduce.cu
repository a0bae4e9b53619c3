// kernels/splitk_reduce.h: the parallel split-K GEMM's reduction.
#include "kernels/splitk_reduce.h"

#include <cuda_bf16.h>

#include "launch/gemm_params.h"
#include "launch/pdl.h"

namespace vlattn {

namespace {

constexpr int kReduceThreads = 256;
constexpr int kCols = 4;  // columns per thread: one float4 per slice, one 8-byte store

__global__ void __launch_bounds__(kReduceThreads)
    splitk_reduce_kernel(const float* __restrict__ partials, int splits, int m, int n,
                         const __nv_bfloat16* __restrict__ bias, __nv_bfloat16* __restrict__ out, int64_t ldd) {
  pdl_enter();  // the partials come from the GEMM launched just before
  const int quads = n / kCols;
  const int64_t i = int64_t(blockIdx.x) * kReduceThreads + threadIdx.x;
  if (i >= int64_t(m) * quads) return;
  const int row = int(i / quads), col = int(i % quads) * kCols;
  const int64_t slice = int64_t(m) * n;
  const float4* p = reinterpret_cast<const float4*>(partials + int64_t(row) * n + col);
  // Every slice's load in flight before the sum, which then runs in slice order (the same bits every run).
  float4 v[kMaxGemmSplits];
#pragma unroll
  for (int l = 0; l < kMaxGemmSplits; ++l)
    if (l < splits) v[l] = __ldcs(p + l * (slice / kCols));  // read once: evict first
  float4 acc = v[0];
#pragma unroll
  for (int l = 1; l < kMaxGemmSplits; ++l)
    if (l < splits) acc.x += v[l].x, acc.y += v[l].y, acc.z += v[l].z, acc.w += v[l].w;
  if (bias != nullptr) {
    const uint2 braw = *reinterpret_cast<const uint2*>(bias + col);
    const __nv_bfloat162 b01 = *reinterpret_cast<const __nv_bfloat162*>(&braw.x);
    const __nv_bfloat162 b23 = *reinterpret_cast<const __nv_bfloat162*>(&braw.y);
    acc.x += __low2float(b01), acc.y += __high2float(b01), acc.z += __low2float(b23), acc.w += __high2float(b23);
  }
  const __nv_bfloat162 o01 = __floats2bfloat162_rn(acc.x, acc.y), o23 = __floats2bfloat162_rn(acc.z, acc.w);
  uint2 packed;
  packed.x = *reinterpret_cast<const uint32_t*>(&o01);
  packed.y = *reinterpret_cast<const uint32_t*>(&o23);
  *reinterpret_cast<uint2*>(out + int64_t(row) * ldd + col) = packed;
}

}  // namespace

cudaError_t launch_splitk_reduce(const float* partials, int splits, int m, int n, const void* bias, void* out,
                                 int64_t ldd, cudaStream_t stream) {
  if (splits < 1 || splits > kMaxGemmSplits || n % kCols != 0 || ldd % kCols != 0) return cudaErrorInvalidValue;
  const int64_t threads = int64_t(m) * (n / kCols);
  if (threads == 0) return cudaSuccess;
  const unsigned blocks = unsigned((threads + kReduceThreads - 1) / kReduceThreads);
  return launch_pdl(splitk_reduce_kernel, dim3(blocks), dim3(kReduceThreads), 0, stream, 0u, partials, splits, m, n,
                    static_cast<const __nv_bfloat16*>(bias), static_cast<__nv_bfloat16*>(out), ldd);
}

}  // namespace vlattn
