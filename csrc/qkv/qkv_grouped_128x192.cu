// Grouped projection GEMM, 128 x 192 tiles (cooperative): one translation unit per tile configuration.
#include "qkv/sm90_qkv_grouped.cuh"

namespace vlattn {

using GroupedGemm128x192 = grouped::GroupedGemm<128, 192, true>;

size_t grouped_gemm_workspace_128x192(const GroupedGemmParams& p) { return GroupedGemm128x192::workspace_bytes(p); }

cudaError_t grouped_gemm_run_128x192(const GroupedGemmParams& p, void* workspace, size_t bytes) {
  return GroupedGemm128x192::run(p, workspace, bytes);
}

}  // namespace vlattn
