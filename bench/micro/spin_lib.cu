// A spin kernel as a tiny shared library (ctypes), for Python probes that put a real vlattn kernel after a
// predecessor of P CTAs on torch's stream (bench/micro/o_after_spin.py). The kernel waits on its own predecessor
// grid, triggers its dependents at once (as vlattn's kernels do) and spins `clk` cycles per CTA.
//   nvcc -O3 -std=c++17 -shared -Xcompiler -fPIC -gencode=arch=compute_90a,code=sm_90a bench/micro/spin_lib.cu -o /tmp/spin_lib.so
#include <cuda_runtime.h>

namespace {
__global__ void spin(long long clk) {
  extern __shared__ int smem[];
  asm volatile("griddepcontrol.wait;" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  smem[threadIdx.x] = threadIdx.x;
  const long long t0 = clock64();
  while (clock64() - t0 < clk) {
  }
  if (smem[(threadIdx.x + 1) % blockDim.x] == -1) smem[0] = 1;
}
}  // namespace

// 0 on success, else the cudaError_t.
extern "C" int spin_launch(int ctas, int threads, int smem_bytes, long long clk, int pdl, void* stream) {
  static int opted_in = -1;  // the opt-in once per size, not on every timed launch (host time before the launch)
  if (smem_bytes != opted_in) {
    const cudaError_t e = cudaFuncSetAttribute(spin, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_bytes);
    if (e != cudaSuccess) return int(e);
    opted_in = smem_bytes;
  }
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(unsigned(ctas));
  cfg.blockDim = dim3(unsigned(threads));
  cfg.dynamicSmemBytes = size_t(smem_bytes);
  cfg.stream = static_cast<cudaStream_t>(stream);
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = attr;
  cfg.numAttrs = pdl ? 1 : 0;
  return int(cudaLaunchKernelEx(&cfg, spin, clk));
}
