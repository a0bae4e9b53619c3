// Parameter block of the fused QKV projection (issue 3): one launch computes, for one activation
// matrix X [M = B*S, K], up to three projections Y_g = X . W_g^T + b_g (g = Q, K, V, each from the
// caller's own weight tensor: no concatenation), applies RoPE to the groups that need it and
// stores every group head-major, [B, heads_g, S, 128] bf16 — the layout the attention kernel reads.
//
// Numerics (bitwise the reference's, given the same fp32 accumulator; see csrc/qkv/qkv_epilogue.cuh):
//   y   = bf16(acc + float(bias))                     one rounding, as F.linear
//   out = bf16( bf16(y * cos) + bf16(rot(y) * sin) )  rot = rotate-half (exact in bf16)
// with cos/sin either read from bf16 tables (007) or computed as bf16(cosf(float(pos) * inv_freq))
// in fp32 with accurate cosf/sinf (034; positions up to 8191, fast-math intrinsics are wrong there).
//
// No torch headers: csrc/ops/qkv.cpp fills this from tensors, csrc/qkv/qkv_sm90.cu launches it.
#pragma once

#include <cstddef>
#include <cstdint>

#include <cuda_runtime_api.h>

#include "qkv/qkv_config.h"

namespace vlattn {

constexpr int kQkvHeadDim = 128;
constexpr int kQkvMaxGroups = 3;

// RopeMode: qkv/qkv_config.h (the host rules take it too).

struct QkvGroup {
  const void* weight = nullptr;  // bf16 [heads * 128, K], row stride ldw elements, unit column stride
  int64_t ldw = 0;
  const void* bias = nullptr;    // bf16 [heads * 128] contiguous, or nullptr
  void* out = nullptr;           // bf16 [B, heads, S, 128] contiguous
  int heads = 0;
  RopeMode rope = RopeMode::kNone;
};

struct QkvRope {
  // kTable: cos/sin [3, B, S, 128] bf16 with unit channel stride; strides in elements.
  const void* cos = nullptr;
  const void* sin = nullptr;
  int64_t tab_plane_stride = 0, tab_batch_stride = 0, tab_seq_stride = 0;
  int8_t plane_of_channel[kQkvHeadDim] = {};  // 0/1/2 = t/h/w plane, from mrope_section (host)
  bool tab_vec16 = false;  // each 8-channel chunk in one plane, tables' rows 16-byte aligned: uint4 reads

  // kPos1D: int64 pos[b * pos_batch_stride + s * pos_seq_stride], rotate-half over 128 channels.
  // kPos3D: int64 pos[b * pos_batch_stride + s * pos_seq_stride + seg * pos_comp_stride], segment
  //         seg of width split[seg]. Inverse frequencies theta^-(2f/W) are computed in the kernel
  //         with the reference's fp32 operation sequence (see inv_freq() in rope_math.cuh).
  const int64_t* pos = nullptr;
  int64_t pos_batch_stride = 0, pos_seq_stride = 0, pos_comp_stride = 0;
  float theta = 10000.0f;
  int split[3] = {0, 0, 0};
};

struct QkvParams {
  const void* x = nullptr;  // bf16 [M, K], row stride ldx, unit column stride
  int64_t ldx = 0;
  int m = 0, k = 0;
  int batch = 0, seq = 0;  // m == batch * seq
  int num_groups = 0;
  QkvGroup groups[kQkvMaxGroups];
  QkvRope rope;
  int sm_count = 0;
  cudaStream_t stream = nullptr;
};


// The position mode whose cos/sin one table can hold for launch p (rule: rope_table_mode, qkv_config.h):
// the RoPE pass's tables and the epilogue GEMM's 1-D table (csrc/ops/qkv.cpp) ask the same question.
inline RopeMode rope_table_mode(const QkvParams& p) {
  RopeMode modes[kQkvMaxGroups] = {};
  const int count = p.num_groups < kQkvMaxGroups ? p.num_groups : kQkvMaxGroups;
  for (int g = 0; g < count; ++g) modes[g] = p.groups[g].rope;
  return rope_table_mode(modes, count);
}

// Returns cudaSuccess or the launch error; cudaErrorNotSupported for an illegal problem that the
// host checks should have rejected (kept as a second line of defence).
cudaError_t qkv_rope_sm90(const QkvParams& p, QkvConfig config);
// Config kGemmRope's second pass, for n <= 2 launches of one op (034's q and k/v) in one grid on
// ps[0]->stream: y[i][g] is launch i's group g projection (bias added, bf16) [M, heads_g * 128] with row
// stride ldy[i][g] (a multiple of 8); applies the group's RoPE and stores head-major into groups[g].out,
// one launch for all groups (programmatic dependent launch after the GEMMs). Same bits for any n.
// table (optional, 16-byte aligned, at least qkv_rope_table_bytes(ps, n) bytes): first compute the
// launches' position-mode cos/sin into it with one small kernel, which the pass then reads instead of
// computing them per thread (qkv_rope_table_pays in qkv_config.h says when). Same bits either way.
// pass_width > 0: the pass's blocks take runs of that many heads (rope_pass_heads_per_block's forced
// width) instead of the rule's; same bits for any width.
cudaError_t qkv_rope_rows_sm90(const QkvParams* const* ps, const void* const* const* y, const int64_t* const* ldy,
                               int n, void* table = nullptr, size_t table_bytes = 0, int pass_width = 0);
// The table alone, for one launch whose groups use one position mode (rope_table_mode): cos [m, 128] then
// sin [m, 128] bf16 into `table` (16-byte aligned, at least qkv_rope_table_bytes of p), on p.stream with
// programmatic dependent launch. The RoPE epilogue GEMM reads it for 1-D positions (csrc/ops/qkv.cpp).
cudaError_t qkv_rope_table_sm90(const QkvParams& p, void* table, size_t table_bytes);
// Workspace bytes of those tables: m x 128 x 2 bf16 for each launch whose groups use one position mode
// (kPos1D or kPos3D); 0 when no launch has one (007's table RoPE needs none).
size_t qkv_rope_table_bytes(const QkvParams* const* ps, int n);

}  // namespace vlattn
