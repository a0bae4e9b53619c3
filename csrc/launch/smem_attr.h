// The dynamic shared-memory limit is a per-device, per-kernel attribute: set it once per device and
// kernel (GemmUniversalAdapter::initialize sets it on every call: a driver call of host time per
// launch, which the benchmark sees).
#pragma once

#include <atomic>

#include <cuda_runtime_api.h>

namespace vlattn {

// Templated on the kernel itself, so that kernels never share a flag. The flags are atomics (relaxed: two
// host threads may both set the attribute once, which is harmless, but a plain bool read and written from
// several threads is a data race).
template <auto kernel>
bool max_dynamic_smem_once(int device, int bytes) {
  constexpr int kMaxDevices = 64;
  static std::atomic<bool> done[kMaxDevices];  // static storage: zero-initialized, all false
  const bool tracked = device >= 0 && device < kMaxDevices;
  if (tracked && done[device].load(std::memory_order_relaxed)) return true;
  if (bytes >= (48 << 10) &&
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  if (tracked) done[device].store(true, std::memory_order_relaxed);
  return true;
}

}  // namespace vlattn
