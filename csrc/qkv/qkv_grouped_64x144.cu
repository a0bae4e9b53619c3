// Grouped projection GEMM, 64 x 144 tiles (ping-pong): one translation unit per tile configuration.
#include "qkv/sm90_qkv_grouped.cuh"

namespace vlattn {

using GroupedGemm64x144 = grouped::GroupedGemm<64, 144, false>;

size_t grouped_gemm_workspace_64x144(const GroupedGemmParams& p) { return GroupedGemm64x144::workspace_bytes(p); }

cudaError_t grouped_gemm_run_64x144(const GroupedGemmParams& p, void* workspace, size_t bytes) {
  return GroupedGemm64x144::run(p, workspace, bytes);
}

}  // namespace vlattn
