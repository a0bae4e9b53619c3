// Projection GEMM with the RoPE + head-major epilogue (qkv/gemm_rope_epi.h): 64 x 256 ping-pong tiles
// in 2-CTA clusters along M (4096-8191 rows: qkv_gemm_epi_tile; forced by VLATTN_QKV_GEMM_EPI=2).
#define CUTLASS_ENABLE_GDC_FOR_SM90 1
#include "qkv/sm90_gemm_rope_epi.cuh"

namespace vlattn {

using GemmRopeEpi64x256pp = gemm_epi::GemmRopeEpiTile<64, 256, 2, false>;

size_t gemm_rope_epi_workspace(const GemmRopeEpiParams& p) { return GemmRopeEpi64x256pp::workspace_bytes(p); }

GemmStatus gemm_rope_epi_run(const GemmRopeEpiParams& p, void* workspace, size_t bytes) {
  return GemmRopeEpi64x256pp::run(p, workspace, bytes);
}

}  // namespace vlattn
