// Grouped projection GEMM, 128 x 144 tiles (cooperative): one translation unit per tile configuration.
#include "qkv/sm90_qkv_grouped.cuh"

namespace vlattn {

using GroupedGemm128x144 = grouped::GroupedGemm<128, 144, true>;

size_t grouped_gemm_workspace_128x144(const GroupedGemmParams& p) { return GroupedGemm128x144::workspace_bytes(p); }

cudaError_t grouped_gemm_run_128x144(const GroupedGemmParams& p, void* workspace, size_t bytes) {
  return GroupedGemm128x144::run(p, workspace, bytes);
}

}  // namespace vlattn
