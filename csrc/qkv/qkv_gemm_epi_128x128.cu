// Projection GEMM with the RoPE + head-major epilogue (qkv/gemm_rope_epi.h): 128 x 128 cooperative
// tiles, one translation unit per tile.
#define CUTLASS_ENABLE_GDC_FOR_SM90 1
#include "qkv/sm90_gemm_rope_epi.cuh"

namespace vlattn {

using GemmRopeEpi128x128 = gemm_epi::GemmRopeEpiTile<128, 128, 1>;

size_t gemm_rope_epi_workspace_128x128(const GemmRopeEpiParams& p) { return GemmRopeEpi128x128::workspace_bytes(p); }

GemmStatus gemm_rope_epi_run_128x128(const GemmRopeEpiParams& p, void* workspace, size_t bytes) {
  return GemmRopeEpi128x128::run(p, workspace, bytes);
}

}  // namespace vlattn
