// One projection of the QKV stage on a CUTLASS sm_90a GEMM whose epilogue applies the bias, the
// group's RoPE and the head-major store itself (config "gemm" without its second pass; issue 3's
// "bias and RoPE fused into the epilogue" for the large-M path). No torch headers: csrc/ops/qkv.cpp
// fills the parameters, csrc/qkv/qkv_gemm_epi_*.cu instantiate the kernels.
//
// The epilogue works on the wgmma accumulators in registers: a thread holds columns c and c + 64 of
// every head of its rows, so the full-head rotate-half pairs (RopeMode kTable) and kNone need no data
// exchange. kPos1D (034's q) runs as kTable with one plane, reading a cos/sin table that the RoPE pass's
// table kernel writes first (csrc/ops/qkv.cpp, VLATTN_QKV_EPI_POS1D; computing them in the epilogue
// measured ~50 us per tile). kPos3D (034's t/h/w segments pair c with c +- 21 / 22, held by other lanes)
// is not supported here: those groups keep the GEMM + RoPE-pass path.
//
// Numerics are the two-pass path's, element for element: y = bf16(acc + bias) (F.linear's rounding),
// then out = bf16(bf16(y * cos) + bf16(rot(y) * sin)) with the same table cos/sin: the same bits as
// config "gemm" for the same accumulators. The RoPE runs on packed bf16x2 (qkv::rope_combine2, as in every
// other RoPE path since the thirty-eighth session), whose products round once where the reference's fp32
// products round twice: identical except for products below 2^-126 in magnitude (bf16 subnormal results,
// last bit). When it runs: qkv_gemm_epi_tile
// (qkv/qkv_config.h).
#pragma once

#include <cstddef>
#include <cstdint>

#include "launch/gemm_params.h"
#include "qkv/qkv_params.h"

namespace vlattn {

// What the epilogue reads (kernel parameter space, the epilogue's CUTLASS Arguments as they are).
struct GemmRopeEpilogueArgs {
  const void* bias = nullptr;  // bf16 [heads * 128], 4-byte aligned, or nullptr
  void* out = nullptr;         // bf16 [batch, heads, seq, 128] contiguous; M (the GEMM's) == batch * seq
  int heads = 0, seq = 0;
  // kTable: cos/sin [3, B, S, 128] bf16, strides in elements (all even, bases 4-byte aligned: pairs of
  // channels are read as one bf16x2); plane of channel c = (plane_bits[c / 16] >> 2 * (c % 16)) & 3.
  const void* cos = nullptr;
  const void* sin = nullptr;
  int64_t tab_plane_stride = 0, tab_batch_stride = 0, tab_seq_stride = 0;
  uint32_t plane_bits[kQkvHeadDim / 16] = {};
};

// The epilogue keeps a channel's table offset (plane * tab_plane_stride + channel, planes 0..2) in 32 bits:
// the host's choice (epi_supported) and the kernel's can_implement both ask this.
constexpr bool epi_table_offsets_fit(int64_t tab_plane_stride) {
  return tab_plane_stride >= 0 && 2 * tab_plane_stride + kQkvHeadDim < (int64_t(1) << 31);
}

struct GemmRopeEpiParams {
  GemmParams gemm;  // a, b, m, n (== heads * 128), k, lda, ldb, device, sm_count, stream; bias, d: unused
  RopeMode mode = RopeMode::kNone;
  GemmRopeEpilogueArgs epi;
};

// The kernels, one translation unit each; which runs: qkv_gemm_epi_tile (qkv/qkv_config.h).
// 64 x 256 ping-pong tiles in 2-CTA clusters along M (the weight tile multicast to both): one consumer
// warpgroup's epilogue runs under the other's mainloop (4096-8191 rows).
size_t gemm_rope_epi_workspace(const GemmRopeEpiParams& p);
GemmStatus gemm_rope_epi_run(const GemmRopeEpiParams& p, void* workspace, size_t bytes);
// 128 x 256 cooperative tiles in 2-CTA clusters (vlattn.linear's large tile): the epilogue runs between
// two mainloops, the faster mainloop from 8192 rows.
size_t gemm_rope_epi_workspace_coop(const GemmRopeEpiParams& p);
GemmStatus gemm_rope_epi_run_coop(const GemmRopeEpiParams& p, void* workspace, size_t bytes);
size_t gemm_rope_epi_workspace_pp128(const GemmRopeEpiParams& p);
GemmStatus gemm_rope_epi_run_pp128(const GemmRopeEpiParams& p, void* workspace, size_t bytes);

}  // namespace vlattn
