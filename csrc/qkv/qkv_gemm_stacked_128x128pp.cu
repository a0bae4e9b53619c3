// Every group of a QKV launch in one GEMM launch (qkv/gemm_rope_epi.h, "stacked") on the 128 x 128 ping-pong tile
// in 2-CTA clusters along M: the per-group kernel qkv_gemm_epi_128x128pp.cu's tile, one head per tile.
#define CUTLASS_ENABLE_GDC_FOR_SM90 1
#include "qkv/sm90_gemm_rope_stacked.cuh"

namespace vlattn {

using GemmRopeStacked128x128pp = gemm_epi::Sm90GemmRopeStacked<128, 128, 2, false>;

size_t gemm_rope_stacked_workspace_pp128(const GemmRopeStackedParams& p) {
  return GemmRopeStacked128x128pp::workspace_bytes(p);
}

GemmStatus gemm_rope_stacked_run_pp128(const GemmRopeStackedParams& p, void* workspace, size_t bytes) {
  return GemmRopeStacked128x128pp::run(p, workspace, bytes);
}

}  // namespace vlattn
