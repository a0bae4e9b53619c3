// One launch for several projections that share nothing but K's meaning: CUTLASS's sm_90 ptr-array
// ("grouped") GEMM, D_i[M_i, N_i] = bf16(A_i[M_i, K] . B_i[N_i, K]^T + bias_i[N_i]), every problem
// with its own pointers, strides and M. The QKV op's config "grouped" runs all of a layer's
// projections through it (007: Q, K and V of one input; 034: Q of the text and K, V of the vision
// tokens) into bf16 y buffers, then the RoPE pass of config "gemm" (qkv_rope_rows_sm90).
//
// Why (H200, bench/NOTES.md eighth session): below ~1024 rows the three separate GEMMs of config
// "gemm" leave most SMs idle (K and V are 512 or 1024 columns wide), and the fused kernel's
// 128-row x one-head tiles need two waves where 128 x 192 tiles over all columns need one.
//
// The per-problem pointers, shapes and strides must be in device memory for the kernel. They are
// written there, every call, by a one-block kernel launched just before the GEMM on the same stream
// (kernel arguments, so CUDA-graph capture records the values, not a host buffer's address).
//
// No torch headers: csrc/ops/qkv.cpp fills GroupedGemmParams, the per-tile translation units
// (qkv_grouped_*.cu) launch it.
#pragma once

#include <cstddef>
#include <cstdint>

#include <cuda_runtime_api.h>

namespace vlattn {

constexpr int kGroupedMaxProblems = 4;

struct GroupedProblem {
  const void* a = nullptr;     // bf16 [M, K], row stride lda, unit column stride
  int64_t lda = 0;
  const void* b = nullptr;     // bf16 [N, K], row stride ldb: a PyTorch Linear weight
  int64_t ldb = 0;
  const void* bias = nullptr;  // bf16 [N], 16-byte aligned; all problems have one or none has
  void* d = nullptr;           // bf16 [M, N], row stride ldd
  int64_t ldd = 0;
  int m = 0, n = 0, k = 0;
};

struct GroupedGemmParams {
  int count = 0;
  GroupedProblem prob[kGroupedMaxProblems];
  int device = 0;
  int sm_count = 0;
  cudaStream_t stream = nullptr;
};

// Tile configurations, one translation unit each (csrc/qkv/qkv_grouped_<tile>.cu).
enum class GroupedTile : int32_t {
  k128x192 = 0,  // cooperative: two consumer warpgroups on one 128 x 192 tile
  k64x192 = 1,   // ping-pong: each consumer warpgroup its own 64 x 192 tile
};

// Workspace for one launch (the device argument block and CUTLASS's per-SM tensor maps), 0 when the
// problem set is not supported (count out of range, a mixed bias set, misaligned pointers or strides).
size_t grouped_gemm_workspace_bytes(const GroupedGemmParams& p, GroupedTile tile);
// Writes the argument block into the workspace and launches the GEMM on p.stream. Returns
// cudaErrorNotSupported for problems the checks above refuse, cudaErrorInvalidValue for a workspace
// smaller than grouped_gemm_workspace_bytes, or the launch error.
cudaError_t grouped_gemm_sm90(const GroupedGemmParams& p, GroupedTile tile, void* workspace, size_t bytes);

// Per-tile entry points (one translation unit each).
size_t grouped_gemm_workspace_128x192(const GroupedGemmParams& p);
cudaError_t grouped_gemm_run_128x192(const GroupedGemmParams& p, void* workspace, size_t bytes);
size_t grouped_gemm_workspace_64x192(const GroupedGemmParams& p);
cudaError_t grouped_gemm_run_64x192(const GroupedGemmParams& p, void* workspace, size_t bytes);

inline size_t grouped_gemm_workspace_bytes(const GroupedGemmParams& p, GroupedTile tile) {
  return tile == GroupedTile::k128x192 ? grouped_gemm_workspace_128x192(p) : grouped_gemm_workspace_64x192(p);
}

inline cudaError_t grouped_gemm_sm90(const GroupedGemmParams& p, GroupedTile tile, void* workspace, size_t bytes) {
  return tile == GroupedTile::k128x192 ? grouped_gemm_run_128x192(p, workspace, bytes)
                                       : grouped_gemm_run_64x192(p, workspace, bytes);
}

}  // namespace vlattn
