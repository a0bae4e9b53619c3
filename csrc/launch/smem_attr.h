// The dynamic shared-memory limit is a per-device, per-kernel attribute: set it once per device and
// kernel (GemmUniversalAdapter::initialize sets it on every call: a driver call of host time per
// launch, which the benchmark sees).
#pragma once

#include <cuda_runtime_api.h>

namespace vlattn {

// Templated on the kernel itself, so that kernels never share a flag. Not synchronized: two host
// threads may both set the attribute once, which is harmless.
template <auto kernel>
bool max_dynamic_smem_once(int device, int bytes) {
  constexpr int kMaxDevices = 64;
  static bool done[kMaxDevices] = {};
  if (device >= 0 && device < kMaxDevices && done[device]) return true;
  if (bytes >= (48 << 10) &&
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  if (device >= 0 && device < kMaxDevices) done[device] = true;
  return true;
}

}  // namespace vlattn
