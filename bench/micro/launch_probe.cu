// Launch-cost microbenchmark for sm_90a: what a short kernel in vlattn's small-layer chains pays
// before and after its work, apart from the work. Three questions (bench/NOTES.md, seventeenth
// session): does a 227 KB shared-memory opt-in cost launch time; does a kernel whose ~150 KB of
// straight-line code runs once per CTA pay for instruction fetch after an L2 flush; and how long is
// the bubble between two dependent kernels on one stream, with and without programmatic dependent
// launch (PDL), when the second is a 28-CTA, 384-thread, 227 KB kernel like 007 B1 S128's attention. A fourth
// (fifty-ninth session): how a PDL dependent's tail grows with the CTAs that could not wait beside its predecessor.
//
// Standalone (no torch, no CUTLASS):
//   nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a bench/micro/launch_probe.cu -o /tmp/launch_probe
//   /tmp/launch_probe [--reps 31]
// Times are CUDA events around the launches only (median of --reps); "cold" launches follow a 256 MB
// memset that evicts L2 (instruction lines included).
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "probe_common.h"  // CHECK, probe::launch_ex, probe::Timer

namespace {

constexpr int kBigSmem = 227 * 1024;  // the sm_90 opt-in maximum (the attention kernel: ~226 KB)

__device__ __forceinline__ void gdc_wait() { asm volatile("griddepcontrol.wait;" ::: "memory"); }
__device__ __forceinline__ void gdc_trigger() { asm volatile("griddepcontrol.launch_dependents;" ::: "memory"); }
__device__ __forceinline__ unsigned dynamic_smem_bytes() {
  unsigned b;
  asm("mov.u32 %0, %%dynamic_smem_size;" : "=r"(b));
  return b;
}

// Touches its dynamic shared memory (so the opt-in is real) and writes one word.
__global__ void empty_kernel(int* out, long long, int pdl) {
  extern __shared__ int smem[];
  if (pdl) {
    gdc_wait();
    gdc_trigger();
  }
  if (dynamic_smem_bytes() < 4 * blockDim.x) return;
  smem[threadIdx.x] = threadIdx.x;
  __syncthreads();
  if (threadIdx.x == 0 && smem[5] == -1) out[blockIdx.x] = 1;
}

// Spins for `clk` cycles on every CTA (a stand-in for the predecessor in a chain). It triggers its
// dependents at the start, as vlattn's kernels do after their wait. kTag only makes another symbol: the
// shared-memory carve-out preference is an attribute of the function, so section 6 needs one per preference.
template <int kTag>
__global__ void spin_kernel_t(int* out, long long clk, int pdl) {
  extern __shared__ int smem[];
  if (pdl) {
    gdc_wait();
    gdc_trigger();
  }
  if (dynamic_smem_bytes() >= 4 * blockDim.x) smem[threadIdx.x] = threadIdx.x;
  const long long t0 = clock64();
  while (clock64() - t0 < clk) {
  }
  if (threadIdx.x == 0 && dynamic_smem_bytes() >= 4 * blockDim.x && smem[7] == -1) out[blockIdx.x] = 1 + kTag;
}
constexpr void (*spin_kernel)(int*, long long, int) = spin_kernel_t<0>;

// One step of the probes' arithmetic: eight independent FFMAs.
__device__ __forceinline__ void ffma8(float (&a)[8], float c) {
  const float add[4] = {0.5f, 0.25f, 0.125f, 0.0625f};
#pragma unroll
  for (int j = 0; j < 8; ++j) a[j] = fmaf(a[j], c, add[j % 4]);
}

__device__ __forceinline__ void ffma8_init(float (&a)[8], float seed) {
  a[0] = seed + threadIdx.x;
#pragma unroll
  for (int j = 1; j < 8; ++j) a[j] = a[0] * (1.0f + 0.1f * j);
}

__device__ __forceinline__ void ffma8_sink(const float (&a)[8], float* out) {
  float s = 0.f;
#pragma unroll
  for (int j = 0; j < 8; ++j) s += a[j];
  if (s == -1.2345f) out[blockIdx.x] = s;
}

// The same arithmetic twice: straight-line (kUnroll steps, ~kUnroll * 8 * 16 bytes of SASS) and as a
// loop of one step (a few hundred bytes). Both execute the same instructions.
template <int kUnroll>
__global__ void fat_kernel(float* out, float seed) {
  float a[8];
  ffma8_init(a, seed);
#pragma unroll
  for (int i = 0; i < kUnroll; ++i) ffma8(a, 1.0f + 1e-7f * float(i % 13));  // varying immediates
  ffma8_sink(a, out);
}

__global__ void thin_kernel(float* out, float seed, int iters) {
  float a[8];
  ffma8_init(a, seed);
#pragma unroll 1
  for (int i = 0; i < iters; ++i) ffma8(a, 1.0f + 1e-7f * float(i % 13));
  ffma8_sink(a, out);
}

}  // namespace

int main(int argc, char** argv) {
  probe::Timer tm;
  tm.reps = 31;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--reps")) tm.reps = std::atoi(argv[i + 1]);
    else {
      std::fprintf(stderr, "unknown argument %s (expected --reps)\n", argv[i]);
      return 2;
    }
  }
  cudaDeviceProp prop;
  CHECK(cudaGetDeviceProperties(&prop, 0));
  const int sms = prop.multiProcessorCount;
  int clock_khz = 0;
  CHECK(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, 0));
  const double ghz = clock_khz / 1e6;
  std::printf("launch_probe on %s (%d SMs, max SM clock %.2f GHz); CUDA events, median of %d\n", prop.name, sms,
              ghz, tm.reps);
  int* out = nullptr;
  CHECK(cudaMalloc(&out, 1 << 20));
  CHECK(cudaFuncSetAttribute(empty_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kBigSmem));
  CHECK(cudaFuncSetAttribute(spin_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kBigSmem));
  cudaFuncAttributes fa;
  CHECK(cudaFuncGetAttributes(&fa, fat_kernel<1200>));
  std::printf("fat_kernel<1200>: %d registers\n", fa.numRegs);

  std::printf("\n%-72s %8s %8s\n", "what", "warm us", "cold us");
  auto row = [&](const char* what, auto&& body) {
    const double w = tm.median(probe::Timer::kIdle, body), c = tm.median(probe::Timer::kCold, body);
    std::printf("%-72s %8.2f %8.2f\n", what, w, c);
    return w;
  };
  // 1. One kernel: shared-memory opt-in.
  for (int smem : {0, 48 * 1024, kBigSmem}) {
    char what[96];
    std::snprintf(what, sizeof what, "empty, 28 CTAs x 384, %3d KB dynamic smem", smem / 1024);
    row(what, [&] { probe::launch_ex(empty_kernel, dim3(28), dim3(384), smem, false, out, 0, 0); });
  }
  // 2. Straight-line code vs a loop of the same instructions, 28 CTAs x 384.
  auto fat = [&] {
    fat_kernel<1200><<<28, 384>>>(reinterpret_cast<float*>(out), 1.0f);
    CHECK(cudaGetLastError());
  };
  auto thin = [&] {
    thin_kernel<<<28, 384>>>(reinterpret_cast<float*>(out), 1.0f, 1200);
    CHECK(cudaGetLastError());
  };
  row("1200 x 8 FFMA straight-line (~150 KB SASS), 28 CTAs x 384", fat);
  row("1200 x 8 FFMA in a loop, 28 CTAs x 384", thin);
  // 3. Chains: a 132-CTA predecessor spinning ~10 us, then the 28-CTA 227 KB kernel, PDL off / on.
  const long long spin = (long long)(10.0 * ghz * 1e3);
  for (int pred_smem : {0, 200 * 1024}) {
    char what[128];
    std::snprintf(what, sizeof what, "spin 10 us, 132 CTAs x 128 (%3d KB smem) alone", pred_smem / 1024);
    const double alone = row(what, [&] { probe::launch_ex(spin_kernel, dim3(sms), dim3(128), pred_smem, false, out, spin, 0); });
    for (int pdl : {0, 1}) {
      std::snprintf(what, sizeof what, "  then empty 28 x 384, 227 KB, %s", pdl ? "PDL" : "plain");
      const double both = row(what, [&] {
        probe::launch_ex(spin_kernel, dim3(sms), dim3(128), pred_smem, pdl, out, spin, pdl);
        probe::launch_ex(empty_kernel, dim3(28), dim3(384), kBigSmem, pdl, out, 0, pdl);
      });
      std::printf("%-72s %8.2f\n", "    added by the second kernel (warm)", both - alone);
    }
    std::snprintf(what, sizeof what, "  then the same spin kernel again, PDL");
    const double two = row(what, [&] {
      probe::launch_ex(spin_kernel, dim3(sms), dim3(128), pred_smem, true, out, spin, 1);
      probe::launch_ex(spin_kernel, dim3(sms), dim3(128), pred_smem, true, out, spin, 1);
    });
    std::printf("%-72s %8.2f\n", "    added by the second spin (warm; 10 us of work)", two - alone);
  }
  // 4. Placement (fifty-ninth session): a predecessor of P CTAs (227 KB each: one per SM) spinning 10 us, then a PDL
  //    dependent of G CTAs (200 KB, 384 threads: like the O projection's t64x128 ping-pong CTAs) spinning 5 us after
  //    its wait. Only 132 - P of the dependent's CTAs can wait on a free SM; the rest are placed after the
  //    predecessor's CTAs exit. "added" = the pair minus the predecessor alone: 5 us plus the latest CTA's placement.
  //    The reading to test: each CTA placed after the predecessor ends costs ~0.08 us of the tail.
  constexpr int kDepSmem = 200 * 1024;  // spin_kernel's opt-in (kBigSmem) was set above
  const long long dep_spin = (long long)(5.0 * ghz * 1e3);
  std::printf("\nplacement: predecessor P CTAs x 384 (227 KB) spinning 10 us, then a PDL dependent of G CTAs x 384 (200 KB) "
              "spinning 5 us\n");
  for (int p : {56, 112, 128}) {
    char what[128];
    std::snprintf(what, sizeof what, "P = %d alone", p);
    const double alone = row(what, [&] { probe::launch_ex(spin_kernel, dim3(p), dim3(384), kBigSmem, true, out, spin, 1); });
    const int free_sms = sms - p;
    for (int g : {36, 76, 112, 132}) {
      const int waiting = g < free_sms ? g : free_sms;
      std::snprintf(what, sizeof what, "  then G = %3d (%3d wait on free SMs, %3d placed after)", g, waiting, g - waiting);
      const double both = row(what, [&] {
        probe::launch_ex(spin_kernel, dim3(p), dim3(384), kBigSmem, true, out, spin, 1);
        probe::launch_ex(spin_kernel, dim3(g), dim3(384), kDepSmem, true, out, dep_spin, 1);
      });
      std::printf("%-72s %8.2f\n", "    added (warm)", both - alone);
    }
  }
  // 5. What the late placement depends on (sixtieth session), P = 112 and G = 112 (92 placed after under a): whether
  //    the dependent's CTAs that cannot wait beside the predecessor cost its tail per CTA (a, e, d differ) or once.
  //    d's 16 KB CTAs fit beside a 200 KB predecessor CTA (shared memory and registers), so none is placed after.
  std::printf("\nplacement, P = 112, G = 112: smem of predecessor / dependent, PDL or plain\n");
  struct Cell {
    const char* what;
    int pred_smem, dep_smem;
    bool pdl;
  };
  const Cell cells[] = {
      {"a 227 / 200 KB, PDL (20 free SMs: 92 placed after)", kBigSmem, kDepSmem, true},
      {"b 227 / 200 KB, plain stream order", kBigSmem, kDepSmem, false},
      {"c 200 / 200 KB, PDL (92 placed after)", kDepSmem, kDepSmem, true},
      {"d 200 /  16 KB, PDL (every dependent CTA fits beside: 0 placed after)", kDepSmem, 16 * 1024, true},
      {"e 227 / 100 KB, PDL (two per free SM: 40 wait, 72 placed after)", kBigSmem, 100 * 1024, true},
  };
  for (const Cell& c : cells) {
    char what[128];
    std::snprintf(what, sizeof what, "P = 112 alone, %d KB", c.pred_smem / 1024);
    const double alone = row(what, [&] { probe::launch_ex(spin_kernel, dim3(112), dim3(384), c.pred_smem, true, out, spin, 1); });
    const double both = row(c.what, [&] {
      probe::launch_ex(spin_kernel, dim3(112), dim3(384), c.pred_smem, true, out, spin, 1);
      probe::launch_ex(spin_kernel, dim3(112), dim3(384), c.dep_smem, c.pdl, out, dep_spin, c.pdl ? 1 : 0);
    });
    std::printf("%-72s %8.2f\n", "    added (warm)", both - alone);
  }
  // 6. The shared-memory carve-out (sixtieth session). The split-key attention kernel takes ~80 KB and sets no
  //    carve-out preference, so the driver may configure its SMs for less shared memory than the O projection's
  //    200 KB CTAs need; those SMs are then reconfigured before such a CTA is placed. The staged kernel takes ~226
  //    KB, already the largest configuration. P = G = 112, dependent 200 KB (PDL), predecessor 80 KB with the
  //    preference unset (the driver's choice, as vlattn launches today), 40% (a small configuration for sure) and
  //    100% (cudaSharedmemCarveoutMaxShared, the candidate fix).
  CHECK(cudaFuncSetAttribute(spin_kernel_t<1>, cudaFuncAttributeMaxDynamicSharedMemorySize, 80 * 1024));
  CHECK(cudaFuncSetAttribute(spin_kernel_t<2>, cudaFuncAttributeMaxDynamicSharedMemorySize, 80 * 1024));
  CHECK(cudaFuncSetAttribute(spin_kernel_t<2>, cudaFuncAttributePreferredSharedMemoryCarveout, 40));
  CHECK(cudaFuncSetAttribute(spin_kernel_t<3>, cudaFuncAttributeMaxDynamicSharedMemorySize, 80 * 1024));
  CHECK(cudaFuncSetAttribute(spin_kernel_t<3>, cudaFuncAttributePreferredSharedMemoryCarveout,
                             int(cudaSharedmemCarveoutMaxShared)));
  std::printf("\ncarve-out, P = 112 x 384 (80 KB) spinning 10 us, then G = 112 x 384 (200 KB) PDL spinning 5 us\n");
  struct Pref {
    const char* what;
    void (*pred)(int*, long long, int);
  };
  const Pref prefs[] = {{"f preference unset (the driver's choice)", spin_kernel_t<1>},
                        {"g preference 40% (a small configuration)", spin_kernel_t<2>},
                        {"h preference MaxShared (100%)", spin_kernel_t<3>}};
  for (const Pref& c : prefs) {
    char what[128];
    std::snprintf(what, sizeof what, "P = 112 alone, %s", c.what);
    const double alone = row(what, [&] { probe::launch_ex(c.pred, dim3(112), dim3(384), 80 * 1024, true, out, spin, 1); });
    const double both = row("  then G = 112 (200 KB)", [&] {
      probe::launch_ex(c.pred, dim3(112), dim3(384), 80 * 1024, true, out, spin, 1);
      probe::launch_ex(spin_kernel, dim3(112), dim3(384), kDepSmem, true, out, dep_spin, 1);
    });
    std::printf("%-72s %8.2f\n", "    added (warm)", both - alone);
  }
  CHECK(cudaDeviceSynchronize());
  return 0;
}
