// The projection GEMM with the bias + RoPE + head-major-store epilogue in registers
// (qkv/gemm_rope_epi.h) on 128 x 128 ping-pong tiles in 2-CTA clusters: each consumer warpgroup owns a
// 128-row, one-head tile (two 64-row wgmma atoms), so one warpgroup's epilogue runs under the other's
// mainloop, with the mainloop's operand reuse of a 128-row tile. One translation unit per tile.
#define CUTLASS_ENABLE_GDC_FOR_SM90 1
#include "qkv/sm90_gemm_rope_epi.cuh"

namespace vlattn {

using GemmRopeEpi128x128pp = gemm_epi::GemmRopeEpiTile<128, 128, 2, false>;

size_t gemm_rope_epi_workspace_pp128(const GemmRopeEpiParams& p) { return GemmRopeEpi128x128pp::workspace_bytes(p); }

GemmStatus gemm_rope_epi_run_pp128(const GemmRopeEpiParams& p, void* workspace, size_t bytes) {
  return GemmRopeEpi128x128pp::run(p, workspace, bytes);
}

}  // namespace vlattn
