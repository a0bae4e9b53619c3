// Programmatic dependent launch (PDL, sm_90+) for vlattn's kernels.
//
// A layer runs as a chain of kernels on one stream (fused QKV -> [mask pre-pass] -> attention ->
// O projection). Launched with cudaLaunchAttributeProgrammaticStreamSerialization, a kernel may be
// scheduled before its predecessor has finished: its CTAs start on SMs the predecessor no longer
// uses, set up shared memory and barriers, and then wait in griddepcontrol.wait until the
// predecessor grid has completed and its memory is visible. That hides the launch latency and the
// prologue of each kernel behind the tail of the previous one.
//
// Contract of every kernel launched through launch_pdl():
//   * it calls pdl_enter() before its first global-memory access (read or write, any buffer: a
//     user's tensor may come from the kernel before ours), after which everything is ordered as in
//     a plain stream launch;
//   * pdl_enter() also lets the next PDL-launched kernel be scheduled: that kernel's CTAs take only
//     SMs left free, because the trigger fires once every CTA of this grid has issued it;
//   * the one exception is the mask pre-pass inside a layer, which reads the layer's mask (an input no
//     kernel of the layer writes) before its wait and writes only after it.
// A predecessor that never triggers (any non-PDL kernel) simply makes the launch an ordinary one.
// CUTLASS's GEMM kernels follow the same contract when built with CUTLASS_ENABLE_GDC_FOR_SM90.
//
// VLATTN_PDL=0 (a dev switch) launches everything without the attribute.
#pragma once

#include <cuda_runtime.h>

#include "launch/dev_switch.h"
#include "launch/host_trace.h"

#include <cstdlib>
#include <utility>

namespace vlattn {

__device__ __forceinline__ void pdl_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

__device__ __forceinline__ void pdl_trigger() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// Wait first, then trigger: once a grid's dependent is scheduled, everything before that grid has
// completed. The mask pre-pass relies on it to read a layer's mask before its own wait
// (attention/mask_summary.cuh); it costs nothing measurable, the dependent waits for this grid anyway.
__device__ __forceinline__ void pdl_enter() {
  pdl_wait();
  pdl_trigger();
}

inline bool pdl_enabled() {
  return dev_switch_on(DevSwitch::kPdl);
}

// kernel<<<grid, block, smem, stream>>>(args...) with an optional cluster shape (cluster.x = 0: none; at
// most 8 CTAs, the portable size, so no cudaFuncAttributeNonPortableClusterSizeAllowed is needed) and, if
// `pdl`, the PDL attribute. One driver call: nothing else on the host path of a launch.
template <class... Params, class... Args>
cudaError_t launch_ex(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream,
                      dim3 cluster, bool pdl, Args&&... args) {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  cudaLaunchAttribute attr[2];
  unsigned n = 0;
  if (cluster.x > 0) {
    attr[n].id = cudaLaunchAttributeClusterDimension;
    attr[n].val.clusterDim.x = cluster.x;
    attr[n].val.clusterDim.y = cluster.y;
    attr[n].val.clusterDim.z = cluster.z;
    ++n;
  }
  if (pdl) {
    attr[n].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[n].val.programmaticStreamSerializationAllowed = 1;
    ++n;
  }
  cfg.attrs = attr;
  cfg.numAttrs = n;
  VLATTN_HOST_MARK("launch.begin");
  const cudaError_t err = cudaLaunchKernelEx(&cfg, kernel, std::forward<Args>(args)...);
  VLATTN_HOST_MARK("launch.end");
  return err;
}

// launch_ex with the PDL attribute whenever PDL is enabled (VLATTN_PDL).
template <class... Params, class... Args>
cudaError_t launch_pdl(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream,
                       unsigned cluster_x, Args&&... args) {
  return launch_ex(kernel, grid, block, smem, stream, cluster_x, pdl_enabled(), std::forward<Args>(args)...);
}

}  // namespace vlattn
