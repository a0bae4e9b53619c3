// Shared by the standalone microbenchmarks in bench/micro (no torch, no CUTLASS): error checks, a
// launch with optional programmatic dependent launch, and the median of CUDA-event timings of a
// launch sequence after an optional 256 MB memset that evicts L2 (the bench's cold-L2 rule).
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CHECK(x)                                                                               \
  do {                                                                                         \
    cudaError_t e_ = (x);                                                                      \
    if (e_ != cudaSuccess) {                                                                   \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      std::exit(1);                                                                            \
    }                                                                                          \
  } while (0)

namespace probe {

// kernel<<<grid, block, smem>>>(args...) on the default stream, with the PDL attribute when `pdl`.
template <class... Params, class... Args>
void launch_ex(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem, bool pdl, Args... args) {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = 0;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = attr;
  cfg.numAttrs = pdl ? 1 : 0;
  CHECK(cudaLaunchKernelEx(&cfg, kernel, static_cast<Params>(args)...));
}

struct Timer {
  void* flush = nullptr;
  size_t flush_bytes = 256ull << 20;
  cudaEvent_t e0 = nullptr, e1 = nullptr;
  int reps = 15;

  Timer() {
    CHECK(cudaMalloc(&flush, flush_bytes));
    CHECK(cudaEventCreate(&e0));
    CHECK(cudaEventCreate(&e1));
  }
  // Median µs of `body` over `reps` runs after one untimed run. Before each timed run:
  //   kCold  the L2-evicting memset;
  //   kWarm  one more untimed run of `body` (its data is what L2 holds; the GPU is busy while the
  //          host queues the timed run);
  //   kIdle  nothing: the GPU is idle when the first event fires, so a short body's time includes the
  //          host's launch latency (~2 µs for a lone kernel on the H200 machine).
  enum Mode { kCold, kWarm, kIdle };
  template <class F>
  double median(Mode mode, F&& body) {
    std::vector<float> t;
    body();
    CHECK(cudaDeviceSynchronize());
    for (int r = 0; r < reps; ++r) {
      if (mode == kCold) CHECK(cudaMemsetAsync(flush, r & 0xff, flush_bytes));
      if (mode == kWarm) body();
      CHECK(cudaEventRecord(e0));
      body();
      CHECK(cudaEventRecord(e1));
      CHECK(cudaEventSynchronize(e1));
      float ms = 0.f;
      CHECK(cudaEventElapsedTime(&ms, e0, e1));
      t.push_back(ms * 1000.f);
    }
    CHECK(cudaGetLastError());
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
  }
};

}  // namespace probe
