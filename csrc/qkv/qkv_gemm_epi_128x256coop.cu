// Projection GEMM with the RoPE + head-major epilogue (qkv/gemm_rope_epi.h): 128 x 256 cooperative
// tiles in 2-CTA clusters along M (from 8192 rows: qkv_gemm_epi_tile; forced by VLATTN_QKV_GEMM_EPI=3).
#define CUTLASS_ENABLE_GDC_FOR_SM90 1
#include "qkv/sm90_gemm_rope_epi.cuh"

namespace vlattn {

using GemmRopeEpi128x256coop = gemm_epi::GemmRopeEpiTile<128, 256, 2, true>;

size_t gemm_rope_epi_workspace_coop(const GemmRopeEpiParams& p) { return GemmRopeEpi128x256coop::workspace_bytes(p); }

GemmStatus gemm_rope_epi_run_coop(const GemmRopeEpiParams& p, void* workspace, size_t bytes) {
  return GemmRopeEpi128x256coop::run(p, workspace, bytes);
}

}  // namespace vlattn
