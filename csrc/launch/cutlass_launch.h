// Launching a CUTLASS 3.x kernel (GemmUniversal, including the ptr-array grouped one) from its Params.
#pragma once

#include <cute/tensor.hpp>
#include <cutlass/device_kernel.h>

#include "launch/pdl.h"

namespace vlattn {

// GemmUniversalAdapter::run's launch, less its host work: on every call with a cluster shape above 1x1
// it sets cudaFuncAttributeNonPortableClusterSizeAllowed (a driver call; our clusters are portable) and
// it calls cudaGetLastError after the launch. One cudaLaunchKernelEx here (launch/pdl.h), with the
// cluster and PDL attributes as CUTLASS would set them; the grid, block and shared memory are CUTLASS's.
template <class GemmKernel>
cudaError_t launch_cutlass_kernel(typename GemmKernel::Params const& params, cudaStream_t stream, bool pdl) {
  using ClusterShape = typename GemmKernel::DispatchPolicy::ClusterShape;
  static_assert(cute::is_static_v<ClusterShape>, "dynamic cluster shapes are not launched here");
  static_assert(cute::size<2>(ClusterShape{}) == 1, "clusters along M and N only");
  constexpr int kClusterX = cute::size<0>(ClusterShape{}), kClusterY = cute::size<1>(ClusterShape{});
  static_assert(kClusterX * kClusterY <= 8, "cluster size must be portable (at most 8)");
  const dim3 cluster = kClusterX * kClusterY > 1 ? dim3(kClusterX, kClusterY, 1) : dim3(0, 1, 1);  // x = 0: none
  return launch_ex(&cutlass::device_kernel<GemmKernel>, GemmKernel::get_grid_shape(params),
                   GemmKernel::get_block_shape(), size_t(GemmKernel::SharedStorageSize), stream, cluster, pdl,
                   params);
}

}  // namespace vlattn
