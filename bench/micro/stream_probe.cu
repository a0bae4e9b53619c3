// Weight-streaming microbenchmark for sm_90a (docs/design/qkv_small_m.md, section 4 step 1): how fast
// can CTAs pull a projection's weight (and its activation tile) through a TMA + mbarrier ring when the
// consumer does nothing but release stages (optionally after a spin standing in for the wgmma time)?
// It answers what the small-M GEMM floor is made of, without any GEMM: the DRAM rate of a read-only
// kernel and of TMA streams by CTA count, slab shape, ring depth and activation replication.
//
// Standalone (no torch, no CUTLASS), so it builds in seconds on the device machine:
//   nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a bench/micro/stream_probe.cu -o /tmp/stream_probe
//   /tmp/stream_probe [--reps 15] [--n 4608] [--k 3584] [--m 128] [--warm 1]
// Every timing is of one launch after a 256 MB write that evicts L2 (the bench's cold-L2 rule), median
// of --reps, by CUDA events around that launch only. GB/s columns: `weight` = unique weight bytes / time
// (the issue's "weights streamed"), `fill` = bytes the CTAs pulled into shared memory / time (weight
// slabs plus every CTA's own copy of the activation slice).
#include <cuda.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "probe_common.h"  // CHECK, probe::launch_ex, probe::Timer

namespace {

constexpr int kMaxStages = 16;
constexpr int kBoxK = 64;
constexpr int kMaxDynSmem = 200 * 1024;  // + 1 KB static (barriers): within sm_90's 227 KB  // bf16 elements per box row: 128 bytes, one SW128 atom

// ---- PTX wrappers (mbarrier, TMA) ----
__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ void mbar_init(uint64_t* bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_addr(bar)), "r"(count));
}
__device__ __forceinline__ void mbar_expect_tx(uint64_t* bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_addr(bar)), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbar_arrive(uint64_t* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(smem_addr(bar)) : "memory");
}
__device__ __forceinline__ void mbar_wait(uint64_t* bar, uint32_t parity) {
  asm volatile(
      "{\n"
      ".reg .pred done;\n"
      "WAIT_%=:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra WAIT_%=;\n"
      "}\n" ::"r"(smem_addr(bar)),
      "r"(parity)
      : "memory");
}
__device__ __forceinline__ void tma_load_2d(void* dst, const CUtensorMap* map, int c0, int c1, uint64_t* bar) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];" ::
          "r"(smem_addr(dst)),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(smem_addr(bar))
      : "memory");
}

struct StreamArgs {
  int slabs;        // weight row slabs; CTA c streams slab c % slabs over K part c / slabs
  int split;        // K parts
  int slab_rows;    // weight rows per slab (a multiple of w_box_rows)
  int w_box_rows;   // rows per weight TMA box
  int x_rows;       // activation rows per stage (0: weight only), in boxes of x_box_rows
  int x_box_rows;
  int k_tiles;      // 64-wide K tiles of the whole K
  int stages;
  int consumer_clk; // spin per stage before the release (a stand-in for the MMA)
  int pdl;          // griddepcontrol.wait before the first load, then launch_dependents
};

// One producer thread (warp 0) fills the ring; warp 1 waits for each stage, reads one word of it, spins
// consumer_clk cycles and releases it. 64 threads per CTA, so the slab kernel never limits occupancy
// by registers; shared memory (the ring) keeps it at one CTA per SM for the deep rings.
__global__ void __launch_bounds__(64) stream_kernel(const __grid_constant__ CUtensorMap w_map,
                                                    const __grid_constant__ CUtensorMap x_map, StreamArgs a,
                                                    unsigned long long* sink) {
  extern __shared__ __align__(1024) uint8_t smem_raw[];
  __shared__ uint64_t full[kMaxStages], empty[kMaxStages];
  uint8_t* smem = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t(1023));
  const int w_stage = a.slab_rows * kBoxK * 2, x_stage = a.x_rows * kBoxK * 2;
  const int stage_bytes = w_stage + x_stage;
  if (threadIdx.x == 0) {
    for (int s = 0; s < a.stages; ++s) {
      mbar_init(&full[s], 1);
      mbar_init(&empty[s], 1);
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  if (a.pdl) {
    asm volatile("griddepcontrol.wait;" ::: "memory");
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  }
  const int slab = blockIdx.x % a.slabs, part = blockIdx.x / a.slabs;
  const int per_part = (a.k_tiles + a.split - 1) / a.split;
  const int k_begin = part * per_part, k_end = min(a.k_tiles, k_begin + per_part);
  const int n = max(0, k_end - k_begin);
  if (threadIdx.x == 0) {
    for (int i = 0; i < n; ++i) {
      const int s = i % a.stages;
      if (i >= a.stages) mbar_wait(&empty[s], ((i / a.stages) - 1) & 1);
      mbar_expect_tx(&full[s], uint32_t(stage_bytes));
      uint8_t* dst = smem + size_t(s) * stage_bytes;
      const int kc = (k_begin + i) * kBoxK;
      for (int r = 0; r < a.slab_rows; r += a.w_box_rows)
        tma_load_2d(dst + r * kBoxK * 2, &w_map, kc, slab * a.slab_rows + r, &full[s]);
      for (int r = 0; r < a.x_rows; r += a.x_box_rows)
        tma_load_2d(dst + w_stage + r * kBoxK * 2, &x_map, kc, r, &full[s]);
    }
  } else if (threadIdx.x >= 32) {
    unsigned long long acc = 0;
    for (int i = 0; i < n; ++i) {
      const int s = i % a.stages;
      mbar_wait(&full[s], (i / a.stages) & 1);
      acc += reinterpret_cast<const uint32_t*>(smem + size_t(s) * stage_bytes)[threadIdx.x - 32];
      if (a.consumer_clk > 0) {
        const long long t0 = clock64();
        while (clock64() - t0 < a.consumer_clk) {
        }
      }
      __syncwarp();
      if (threadIdx.x == 32) mbar_arrive(&empty[s]);
    }
    if (acc == 0x5eed5eed5eedull) sink[0] = acc;  // keeps the reads; never true for random data
  }
}

// Read-only ceiling: 16-byte loads, grid-stride, a sum per thread.
__global__ void read_kernel(const uint4* __restrict__ p, size_t n16, unsigned long long* sink) {
  unsigned long long acc = 0;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n16; i += size_t(gridDim.x) * blockDim.x) {
    const uint4 v = __ldg(p + i);
    acc += v.x ^ v.y ^ v.z ^ v.w;
  }
  if (acc == 0x5eed5eed5eedull) sink[0] = acc;
}

// A stand-in for a latency-bound kernel between two GEMMs (007 B1 S128's attention: 28 CTAs of 384
// threads, 227 KB of shared memory, ~12 us): waits for its predecessor, lets its dependent be scheduled,
// spins.
__global__ void spin_kernel(long long clk, int pdl) {
  if (pdl) {
    asm volatile("griddepcontrol.wait;" ::: "memory");
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  }
  const long long t0 = clock64();
  while (clock64() - t0 < clk) {
  }
}

// L2 prefetch of `bytes` from p by the CTAs of this grid (slice per CTA, bulk requests of `chunk`
// bytes issued by the 32 lanes of warp 0 in turn). With pdl it issues before waiting (the data is an
// input nothing in the chain writes), lets its dependent be scheduled, then waits, so that it completes
// only after its predecessor and the dependent's wait still covers the whole chain.
__global__ void prefetch_kernel(const char* p, unsigned long long bytes, unsigned long long slice, unsigned chunk,
                                int pdl) {
  const unsigned long long begin = blockIdx.x * slice;
  const unsigned long long end = min(begin + slice, bytes);
  if (threadIdx.x < 32) {
    for (unsigned long long off = begin + threadIdx.x * (unsigned long long)chunk; off < end; off += 32ull * chunk) {
      const unsigned long long left = end - off;
      const unsigned n = left < chunk ? unsigned(left) : chunk;
      asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(p + off), "r"(n) : "memory");
    }
  }
  if (pdl) {
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
    asm volatile("griddepcontrol.wait;" ::: "memory");
  }
}

__global__ void fill_kernel(uint32_t* p, size_t n, uint32_t seed) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    p[i] = uint32_t(i) * 2654435761u ^ seed;
}

using EncodeTiled = CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*, const cuuint64_t*,
                                 const cuuint64_t*, const cuuint32_t*, const cuuint32_t*, CUtensorMapInterleave,
                                 CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill);

EncodeTiled encode_fn() {
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
  CHECK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault, &q));
  if (q != cudaDriverEntryPointSuccess || fn == nullptr) {
    std::fprintf(stderr, "cuTensorMapEncodeTiled not found\n");
    std::exit(1);
  }
  return reinterpret_cast<EncodeTiled>(fn);
}

// A [rows, k] bf16 row-major tensor, boxes of box_rows x 64, 128-byte swizzle (as the GEMMs load).
CUtensorMap make_map(void* base, int rows, int k, int box_rows, CUtensorMapL2promotion promo) {
  static const EncodeTiled encode = encode_fn();
  CUtensorMap m;
  const cuuint64_t dims[2] = {cuuint64_t(k), cuuint64_t(rows)};
  const cuuint64_t strides[1] = {cuuint64_t(k) * 2};
  const cuuint32_t box[2] = {cuuint32_t(kBoxK), cuuint32_t(box_rows)};
  const cuuint32_t estr[2] = {1, 1};
  const CUresult r = encode(&m, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, base, dims, strides, box, estr,
                            CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, promo,
                            CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS) {
    std::fprintf(stderr, "cuTensorMapEncodeTiled failed (%d): rows %d k %d box %d\n", int(r), rows, k, box_rows);
    std::exit(1);
  }
  return m;
}

}  // namespace

int main(int argc, char** argv) {
  int n = 4608, k = 3584, m = 128;  // 007's Q|K|V projection at B1 S128
  probe::Timer c;
  bool warm = false;  // --warm 1: no flush, the same launch just before (its data is what L2 holds)
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--reps")) c.reps = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--n")) n = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--k")) k = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--m")) m = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--warm")) warm = std::atoi(argv[i + 1]) != 0;
    else {
      std::fprintf(stderr, "unknown argument %s (expected --reps, --n, --k, --m, --warm 0|1)\n", argv[i]);
      return 2;
    }
  }
  if (k % kBoxK != 0 || n % 128 != 0 || m % 64 != 0 || m > 256) {
    std::fprintf(stderr, "--k must be a multiple of 64, --n of 128, --m a multiple of 64 up to 256\n");
    return 2;
  }
  const probe::Timer::Mode mode = warm ? probe::Timer::kWarm : probe::Timer::kCold;
  cudaDeviceProp prop;
  CHECK(cudaGetDeviceProperties(&prop, 0));
  const int sms = prop.multiProcessorCount;
  int clock_khz = 0;
  CHECK(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, 0));
  std::printf("stream_probe on %s (%d SMs, L2 %d MiB, max SM clock %.2f GHz): weight [%d, %d] bf16 = %.1f MB, "
              "activations [%d, %d]; %s L2, median of %d launches\n",
              prop.name, sms, prop.l2CacheSize >> 20, clock_khz / 1e6, n, k, 2.0 * n * k / 1e6, m, k, warm ? "warm (the same launch just before)" : "cold", c.reps);

  const size_t w_bytes = size_t(n) * k * 2, x_bytes = size_t(m) * k * 2;
  void *w = nullptr, *x = nullptr;
  unsigned long long* sink = nullptr;
  CHECK(cudaMalloc(&w, w_bytes));
  CHECK(cudaMalloc(&x, x_bytes));
  CHECK(cudaMalloc(&sink, 64));
  fill_kernel<<<sms * 4, 256>>>(static_cast<uint32_t*>(w), w_bytes / 4, 0x1234u);
  fill_kernel<<<sms * 4, 256>>>(static_cast<uint32_t*>(x), x_bytes / 4, 0x9876u);
  CHECK(cudaFuncSetAttribute(stream_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kMaxDynSmem));

  std::printf("\n%-58s %8s %9s %9s %10s\n", "kernel", "us", "weightGB/s", "fillGB/s", "fill/SM GB/s");
  // Ceilings: a read-only kernel over the weight, and a device copy of it (read + write bytes).
  for (int per_sm : {1, 2, 4, 8}) {
    const int blocks = sms * per_sm;
    const double us = c.median(mode, [&] {
      read_kernel<<<blocks, 512>>>(static_cast<const uint4*>(w), w_bytes / 16, sink);
    });
    char name[96];
    std::snprintf(name, sizeof name, "ld.global.v4 read, %d blocks x 512", blocks);
    std::printf("%-58s %8.1f %9.0f %9s %10s\n", name, us, w_bytes / us / 1e3, "-", "-");
  }
  {
    void* dst = nullptr;
    CHECK(cudaMalloc(&dst, w_bytes));
    const double us = c.median(mode, [&] { CHECK(cudaMemcpyAsync(dst, w, w_bytes, cudaMemcpyDeviceToDevice)); });
    std::printf("%-58s %8.1f %9.0f %9s %10s   (read + write: %.0f GB/s)\n", "cudaMemcpy D2D of the weight", us,
                w_bytes / us / 1e3, "-", "-", 2.0 * w_bytes / us / 1e3);
    CHECK(cudaFree(dst));
  }

  struct Case {
    const char* what;
    int slab_rows, w_box_rows, split, x_rows, stages, consumer_clk;
    CUtensorMapL2promotion promo;
  };
  // consumer_clk: wgmma time of one stage at full tensor rate for m tokens (2 * rows * m * 64 flop at
  // ~3780 dense bf16 flop per SM clock), the MMA a real consumer would run.
  const int mma128 = int(2.0 * 128 * m * 64 / 3780), mma64 = int(2.0 * 64 * m * 64 / 3780);
  const CUtensorMapL2promotion p256 = CU_TENSOR_MAP_L2_PROMOTION_L2_256B;
  const std::vector<Case> cases = {
      // The fused split-K kernel's shape today (kSplitK3 at M=128): 128-row head slabs, K over 3.
      {"W 128-row slabs, K/3                 ", 128, 128, 3, 0, 4, 0, p256},
      {"W 128-row slabs, K/3                 ", 128, 128, 3, 0, 8, 0, p256},
      {"W+X 128-row slabs, K/3 (split-K now)  ", 128, 128, 3, m, 4, 0, p256},
      {"W+X 128-row slabs, K/3 (split-K now)  ", 128, 128, 3, m, 6, 0, p256},
      {"W+X 128-row slabs, K/3, +MMA spin     ", 128, 128, 3, m, 4, mma128, p256},
      {"W+X 128-row slabs, K/3, +MMA spin     ", 128, 128, 3, m, 6, mma128, p256},
      // Whole-K slabs (cuBLAS's launch shape at small M): half-head slabs, 72 CTAs.
      {"W 64-row slabs, whole K              ", 64, 64, 1, 0, 4, 0, p256},
      {"W 64-row slabs, whole K              ", 64, 64, 1, 0, 8, 0, p256},
      {"W 64-row slabs, whole K              ", 64, 64, 1, 0, 13, 0, p256},
      {"W+X 64-row slabs, whole K            ", 64, 64, 1, m, 8, 0, p256},
      {"W+X 64-row slabs, whole K, +MMA spin ", 64, 64, 1, m, 8, mma64, p256},
      // Every SM on the weight: 64-row slabs with K over 2 (2 waves on 132 SMs: 144 CTAs).
      {"W 64-row slabs, K/2                  ", 64, 64, 2, 0, 8, 0, p256},
      {"W+X 64-row slabs, K/2, +MMA spin     ", 64, 64, 2, m, 8, mma64, p256},
      // Whole-head slabs over the whole K: 36 CTAs (what one SM can pull).
      {"W 128-row slabs, whole K             ", 128, 128, 1, 0, 4, 0, p256},
      {"W 128-row slabs, whole K             ", 128, 128, 1, 0, 12, 0, p256},
      // L2 promotion off for the split-K shape.
      {"W+X 128-row slabs, K/3, no L2 promo   ", 128, 128, 3, m, 4, 0, CU_TENSOR_MAP_L2_PROMOTION_NONE},
  };
  for (const Case& cs : cases) {
    const int slabs = n / cs.slab_rows;
    const int ctas = slabs * cs.split;
    StreamArgs a{slabs, cs.split, cs.slab_rows, cs.w_box_rows, cs.x_rows, std::min(cs.x_rows, 256), k / kBoxK,
                 cs.stages, cs.consumer_clk, 0};
    const int stage_bytes = (cs.slab_rows + cs.x_rows) * kBoxK * 2;
    const int smem = stage_bytes * cs.stages + 1024;
    if (smem > kMaxDynSmem || cs.stages > kMaxStages) {
      std::printf("%s: %d stages of %d B do not fit, skipped\n", cs.what, cs.stages, stage_bytes);
      continue;
    }
    const CUtensorMap wm = make_map(w, n, k, cs.w_box_rows, cs.promo);
    const CUtensorMap xm = make_map(x, m, k, std::min(m, 256), cs.promo);
    const double us = c.median(mode, [&] { stream_kernel<<<ctas, 64, smem>>>(wm, xm, a, sink); });
    const double fill = double(w_bytes) + double(x_bytes) * (cs.x_rows > 0 ? n / cs.slab_rows : 0);
    const int resident = std::min(ctas, sms);
    char name[128];
    std::snprintf(name, sizeof name, "%s %3d CTAs, %2d x %3d KB", cs.what, ctas, cs.stages, stage_bytes / 1024);
    std::printf("%-58s %8.1f %9.0f %9.0f %10.1f%s\n", name, us, w_bytes / us / 1e3, fill / us / 1e3,
                fill / us / 1e3 / resident, cs.consumer_clk ? "  (spin)" : "");
  }
  // One CTA over one whole-K head slab: the rate a single SM pulls at each ring depth.
  for (int stages : {2, 4, 8, 12}) {
    StreamArgs a{n / 128, 1, 128, 128, 0, 128, k / kBoxK, stages, 0, 0};
    const CUtensorMap wm = make_map(w, n, k, 128, p256);
    const CUtensorMap xm = make_map(x, m, k, std::min(m, 256), p256);
    const int smem = 128 * kBoxK * 2 * stages + 1024;
    const double us = c.median(mode, [&] { stream_kernel<<<1, 64, smem>>>(wm, xm, a, sink); });
    const double bytes = 128.0 * k * 2;
    char name[96];
    std::snprintf(name, sizeof name, "one CTA, one 128-row slab, whole K, %2d x 16 KB", stages);
    std::printf("%-58s %8.1f %9s %9.0f %10.1f\n", name, us, "-", bytes / us / 1e3, bytes / us / 1e3);
  }
  // The chain of a small layer's tail: a latency-bound kernel (spin, 28 CTAs, 227 KB) and then the
  // weight stream of the next GEMM (128-row slabs, K/3, activations, MMA spin), PDL between them; with
  // a prefetch kernel in between that pulls the next GEMM's weight into L2 from the SMs the spinning
  // kernel leaves idle. Cold L2 before each chain.
  if (!warm) {
    CHECK(cudaFuncSetAttribute(spin_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, 227 * 1024));
    const int slabs = n / 128;
    StreamArgs a{slabs, 3, 128, 128, m, std::min(m, 256), k / kBoxK, 4, mma128, 1};
    const int smem = (128 + m) * kBoxK * 2 * 4 + 1024;
    const CUtensorMap wm = make_map(w, n, k, 128, p256);
    const CUtensorMap xm = make_map(x, m, k, std::min(m, 256), p256);
    std::printf("\nchain (cold L2, PDL): spin kernel 28 x 384, 227 KB, S us -> [prefetch of the weight, G CTAs] -> "
                "W+X K/3 stream + MMA spin, %d CTAs\n", slabs * 3);
    for (double spin_us : {8.0, 12.0}) {
      const long long spin = (long long)(spin_us * clock_khz * 1e-3);
      const double base = c.median(mode, [&] {
        probe::launch_ex(spin_kernel, 28, 384, 227 * 1024, true, spin, 1);
        probe::launch_ex(stream_kernel, slabs * 3, 64, smem, true, wm, xm, a, sink);
      });
      const double alone = c.median(mode, [&] { probe::launch_ex(spin_kernel, 28, 384, 227 * 1024, true, spin, 1); });
      std::printf("  S=%4.1f: spin alone %6.1f us, spin -> stream %6.1f us (stream adds %5.1f)\n", spin_us, alone, base,
                  base - alone);
      for (int g : {104, 132}) {
        for (unsigned chunk : {16384u, 65536u}) {
          const unsigned long long slice = ((w_bytes + g - 1) / g + 15) / 16 * 16;
          const double with = c.median(mode, [&] {
            probe::launch_ex(spin_kernel, 28, 384, 227 * 1024, true, spin, 1);
            probe::launch_ex(prefetch_kernel, g, 64, 0, true, static_cast<const char*>(w), (unsigned long long)w_bytes, slice,
                      chunk, 1);
            probe::launch_ex(stream_kernel, slabs * 3, 64, smem, true, wm, xm, a, sink);
          });
          std::printf("    prefetch by %3d CTAs, %2u KB requests: %6.1f us (stream adds %5.1f, %+5.1f)\n", g,
                      chunk / 1024, with, with - alone, with - base);
        }
      }
    }
    for (int g : {28, 104, 132}) {
      const unsigned long long slice = ((w_bytes + g - 1) / g + 15) / 16 * 16;
      const double us = c.median(mode, [&] {
        probe::launch_ex(prefetch_kernel, g, 64, 0, false, static_cast<const char*>(w), (unsigned long long)w_bytes, slice,
                  65536u, 0);
      });
      std::printf("  prefetch alone, %3d CTAs, 64 KB requests: %6.1f us (%.0f GB/s issued; completion not awaited)\n", g,
                  us, w_bytes / us / 1e3);
    }
  }
  CHECK(cudaDeviceSynchronize());
  std::printf("\nsink %llu (ignore)\n", 0ull);
  return 0;
}
