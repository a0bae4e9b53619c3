// Grouped projection GEMM, 128 x 192 tiles (cooperative) with 128 x 64 epilogue subtiles (three
// smem-write / TMA-store rounds per tile instead of six; four 40 KB stages instead of five): one
// translation unit per tile configuration. VLATTN_QKV_GROUPED_EPI64=1 picks it for an A/B.
#include "qkv/sm90_qkv_grouped.cuh"

namespace vlattn {

using GroupedGemm128x192e64 = grouped::GroupedGemm<128, 192, true, 64>;

size_t grouped_gemm_workspace_128x192e64(const GroupedGemmParams& p) {
  return GroupedGemm128x192e64::workspace_bytes(p);
}

cudaError_t grouped_gemm_run_128x192e64(const GroupedGemmParams& p, void* workspace, size_t bytes) {
  return GroupedGemm128x192e64::run(p, workspace, bytes);
}

}  // namespace vlattn
