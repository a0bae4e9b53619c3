// Fused QKV projection for sm_90a: TMA + wgmma mainloop, bias + RoPE + head-major store epilogue.
//
// One CTA computes one 128-column N tile (= one head of one group) of BM rows:
//   warpgroup 0   producer: one thread issues the TMA loads of X and of the group's weight tile
//                 (each group has its own tensor map, so callers' Q/K/V weights are read in place)
//   warpgroups 1+ consumers: 64 rows each, wgmma 64x128x16 (both operands from shared memory),
//                 fp32 accumulators; then the epilogue below.
// Epilogue (per consumer warpgroup, rows are independent):
//   1. y = bf16(acc + bias) into a padded shared staging tile (the F.linear rounding);
//   2. each thread takes 8 consecutive channels of a row, reads the RoPE partner channels from the
//      staging tile (c +- 64 for a full-head rotate-half, c +- W/2 inside a 034 t/h/w segment),
//      applies RoPE with the reference's three roundings, and stores 16 bytes to [B, H, S, 128]:
//      16 threads write one 256-byte row, consecutive rows are consecutive in memory.
// Staging through shared memory makes every RoPE variant the same code (the 42/42/44 segments
// pair channels across lanes and registers, which an in-register rotate cannot do cheaply) and
// turns the accumulator's scattered 4-byte pieces into full 16-byte stores.
#pragma once

#include <cuda_bf16.h>

#include <cute/tensor.hpp>
#include <cutlass/arch/barrier.h>
#include <cutlass/arch/config.h>
#include <cutlass/arch/reg_reconfig.h>
#include <cutlass/bfloat16.h>
#include <cutlass/device_kernel.h>  // CUTLASS_GRID_CONSTANT
#include <cutlass/pipeline/sm90_pipeline.hpp>

#include "kernels/rope.h"
#include "qkv/qkv_params.h"

namespace vlattn {
namespace qkv {

using namespace cute;

template <int BM_, int Stages_>
struct QkvTraits {
  static constexpr int BM = BM_;                   // rows of X per CTA
  static constexpr int BN = kQkvHeadDim;           // one head per CTA: RoPE partners stay in the tile
  static constexpr int BK = 64;                    // 128 bytes of K: one SW128 swizzle atom wide
  static constexpr int Stages = Stages_;
  static constexpr int ConsumerWGs = BM / 64;      // a wgmma warpgroup owns 64 rows
  static constexpr int Threads = 128 * (1 + ConsumerWGs);
  static constexpr int StagePitch = BN + 8;        // +16 B per row: conflict-free accumulator stores
  static constexpr int ProducerRegs = 40;
  static constexpr int ConsumerRegs = ConsumerWGs == 2 ? 232 : 240;

  static_assert(BM == 64 || BM == 128, "one or two consumer warpgroups");
  static_assert(kQkvHeadDim == 128, "one thread per channel of a warpgroup fills inv_freq");
  static_assert(Stages >= 2, "the mainloop keeps one wgmma batch in flight");

  using Element = cutlass::bfloat16_t;
  using SmemLayoutA = decltype(tile_to_shape(GMMA::Layout_K_SW128_Atom<Element>{},
                                             Shape<Int<BM>, Int<BK>, Int<Stages>>{}));
  using SmemLayoutB = decltype(tile_to_shape(GMMA::Layout_K_SW128_Atom<Element>{},
                                             Shape<Int<BN>, Int<BK>, Int<Stages>>{}));
  using TiledMma = decltype(make_tiled_mma(SM90_64x128x16_F32BF16BF16_SS<GMMA::Major::K, GMMA::Major::K>{},
                                           Layout<Shape<Int<ConsumerWGs>, _1, _1>>{}));
  using Pipeline = cutlass::PipelineTmaAsync<Stages>;
  using PipelineState = typename Pipeline::PipelineState;

  struct SharedStorage {
    cute::array_aligned<Element, cosize_v<SmemLayoutA>, 1024> a;  // SW128 tiles need 1 KB alignment
    cute::array_aligned<Element, cosize_v<SmemLayoutB>, 1024> b;
    cute::array_aligned<Element, BM * StagePitch, 128> staging;
    float inv_freq[ConsumerWGs][kQkvHeadDim];  // per channel, for the position-based RoPE modes
    typename Pipeline::SharedStorage pipeline;
  };
  static constexpr int SmemBytes = int(sizeof(SharedStorage));
  static constexpr uint32_t TxBytes = uint32_t((BM + BN) * BK * sizeof(Element));  // per stage
  static_assert(SmemBytes <= 227 * 1024, "sm_90 allows 227 KB of shared memory per CTA");
  static_assert((Threads - 128) * ConsumerRegs + 128 * ProducerRegs <= 65536, "register file");
};

template <class TmaA, class TmaB>
struct QkvKernelParams {
  TmaA tma_a;
  TmaB tma_b[kQkvMaxGroups];
  QkvParams p;
  int first_tile[kQkvMaxGroups + 1];  // prefix sums of heads: N tiles [first[g], first[g+1]) are group g
};

// ---------------------------------------------------------------------------------------------
// Producer: stream the X rows and the weight tile of one head through the stage ring.
// ---------------------------------------------------------------------------------------------
template <class T, class TmaA, class TmaB>
CUTLASS_DEVICE void produce(TmaA const& tma_a, TmaB const& tma_b, int m, int n_group, int k, int m_tile,
                            int head, typename T::Pipeline& pipeline, typename T::SharedStorage& ss) {
  Tensor mA = tma_a.get_tma_tensor(make_shape(m, k));
  Tensor mB = tma_b.get_tma_tensor(make_shape(n_group, k));
  Tensor gA = local_tile(mA, Shape<Int<T::BM>, Int<T::BK>>{}, make_coord(m_tile, _));  // (BM, BK, k)
  Tensor gB = local_tile(mB, Shape<Int<T::BN>, Int<T::BK>>{}, make_coord(head, _));    // (BN, BK, k)
  Tensor sA = make_tensor(make_smem_ptr(ss.a.data()), typename T::SmemLayoutA{});
  Tensor sB = make_tensor(make_smem_ptr(ss.b.data()), typename T::SmemLayoutB{});
  auto [tAgA, tAsA] = tma_partition(tma_a, Int<0>{}, Layout<_1>{}, group_modes<0, 2>(sA), group_modes<0, 2>(gA));
  auto [tBgB, tBsB] = tma_partition(tma_b, Int<0>{}, Layout<_1>{}, group_modes<0, 2>(sB), group_modes<0, 2>(gB));

  const int k_tiles = size<1>(tAgA);
  auto state = cutlass::make_producer_start_state<typename T::Pipeline>();
  for (int kt = 0; kt < k_tiles; ++kt) {
    pipeline.producer_acquire(state);  // also arms the stage's barrier with TxBytes
    auto* bar = pipeline.producer_get_barrier(state);
    copy(tma_a.with(*bar), tAgA(_, kt), tAsA(_, state.index()));
    copy(tma_b.with(*bar), tBgB(_, kt), tBsB(_, state.index()));
    ++state;
  }
}

// ---------------------------------------------------------------------------------------------
// Epilogue helpers
// ---------------------------------------------------------------------------------------------
CUTLASS_DEVICE float bf(float x) { return __bfloat162float(__float2bfloat16_rn(x)); }

// out = bf16( bf16(x * c) + bf16(r * s) ), every operand already a bf16 value held in fp32.
CUTLASS_DEVICE float rope_combine(float x, float r, float c, float s) {
  return __fadd_rn(bf(__fmul_rn(x, c)), bf(__fmul_rn(r, s)));
}

// cos/sin of an integer position times an inverse frequency, as the reference computes its tables:
// fp32 angle, accurate cosf/sinf (this file is never built with fast math), rounded to bf16.
CUTLASS_DEVICE void pos_cos_sin(int64_t pos, float inv_freq, float& c, float& s) {
  const float angle = __fmul_rn(static_cast<float>(pos), inv_freq);
  c = bf(cosf(angle));
  s = bf(sinf(angle));
}

// inv_freq = 1 / theta^(2f / W), in the reference's fp32 steps: torch divides the arange by the CPU
// scalar W as a multiply by the fp32 reciprocal, raises with powf, and `1.0 / t` is reciprocal(t).
CUTLASS_DEVICE float inv_freq(float theta, int f, int width) {
  const float exponent = __fmul_rn(static_cast<float>(2 * f), __fdiv_rn(1.0f, static_cast<float>(width)));
  return __fdiv_rn(1.0f, powf(theta, exponent));
}

// Inverse frequency of channel c (0..127) for a position-based mode; 0 for the others.
CUTLASS_DEVICE float channel_inv_freq(QkvRope const& rope, RopeMode mode, int c) {
  if (mode == RopeMode::kPos1D) return inv_freq(rope.theta, c % (kQkvHeadDim / 2), kQkvHeadDim);
  if (mode == RopeMode::kPos3D) {
    const rope::Segment seg = rope::thw_segment(c, rope.split);
    if (seg.index < 0) return 0.0f;
    return inv_freq(rope.theta, rope::rotate_half_pair(c, seg.base, seg.width).freq, seg.width);
  }
  return 0.0f;
}

union Vec8 {
  uint4 u;
  __nv_bfloat16 h[8];
};

template <class T>
CUTLASS_DEVICE void rope_store_rows(QkvParams const& p, QkvGroup const& grp, int head, int m_tile, int wg,
                                    const __nv_bfloat16* staging, const float* inv_freq_of) {
  constexpr int kChunks = kQkvHeadDim / 8;           // 16-byte chunks per row
  constexpr int kRowsPerPass = 128 / kChunks;        // a warpgroup covers 8 rows per pass
  const int t = threadIdx.x % 128;
  const QkvRope& rope = p.rope;
  const int chunk = t % kChunks;
  const int c0 = chunk * 8;
  auto* out = static_cast<__nv_bfloat16*>(grp.out);

#pragma unroll 1
  for (int pass = 0; pass < 64 / kRowsPerPass; ++pass) {
    const int r = wg * 64 + pass * kRowsPerPass + t / kChunks;  // row inside the CTA tile
    const int m = m_tile * T::BM + r;
    if (m >= p.m) break;  // rows only grow with the pass
    const int b = m / p.seq;
    const int s = m - b * p.seq;
    const __nv_bfloat16* row = staging + r * T::StagePitch;
    Vec8 x, o;
    x.u = *reinterpret_cast<const uint4*>(row + c0);

    if (grp.rope == RopeMode::kNone) {
      o = x;
    } else if (grp.rope == RopeMode::kPos3D) {
      const int64_t* pos = rope.pos + b * rope.pos_batch_stride + s * rope.pos_seq_stride;
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        const int c = c0 + j;
        const rope::Segment seg = rope::thw_segment(c, rope.split);
        const rope::Pair pr = rope::rotate_half_pair(c, seg.base, seg.width);
        float cs, sn;
        pos_cos_sin(pos[seg.index * rope.pos_comp_stride], inv_freq_of[c], cs, sn);
        const float partner = __bfloat162float(row[pr.partner]);
        const float rot = pr.sign < 0 ? -partner : partner;
        o.h[j] = __float2bfloat16_rn(rope_combine(__bfloat162float(x.h[j]), rot, cs, sn));
      }
    } else {
      // Full-head rotate-half: channels c0..c0+7 pair with c0+-64..c0+-64+7, one 16-byte read.
      const bool first_half = c0 < kQkvHeadDim / 2;
      Vec8 y;
      y.u = *reinterpret_cast<const uint4*>(row + (first_half ? c0 + kQkvHeadDim / 2 : c0 - kQkvHeadDim / 2));
      float cs[8], sn[8];
      if (grp.rope == RopeMode::kTable) {
        const int64_t base = b * rope.tab_batch_stride + s * rope.tab_seq_stride + c0;
        const auto* ct = static_cast<const __nv_bfloat16*>(rope.cos);
        const auto* st = static_cast<const __nv_bfloat16*>(rope.sin);
#pragma unroll
        for (int j = 0; j < 8; ++j) {
          const int64_t off = base + rope.plane_of_channel[c0 + j] * rope.tab_plane_stride + j;
          cs[j] = __bfloat162float(ct[off]);
          sn[j] = __bfloat162float(st[off]);
        }
      } else {  // kPos1D: frequency index is c mod 64 (the reference concatenates freqs twice)
        const int64_t pos = rope.pos[b * rope.pos_batch_stride + s * rope.pos_seq_stride];
#pragma unroll
        for (int j = 0; j < 8; ++j) pos_cos_sin(pos, inv_freq_of[c0 + j], cs[j], sn[j]);
      }
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        const float partner = __bfloat162float(y.h[j]);
        const float rot = first_half ? -partner : partner;
        o.h[j] = __float2bfloat16_rn(rope_combine(__bfloat162float(x.h[j]), rot, cs[j], sn[j]));
      }
    }
    const int64_t dst = ((int64_t(b) * grp.heads + head) * p.seq + s) * kQkvHeadDim + c0;
    *reinterpret_cast<uint4*>(out + dst) = o.u;
  }
}

// ---------------------------------------------------------------------------------------------
// The kernel
// ---------------------------------------------------------------------------------------------
template <class T, class TmaA, class TmaB>
__global__ void __launch_bounds__(T::Threads, 1) qkv_rope_kernel(CUTLASS_GRID_CONSTANT QkvKernelParams<TmaA, TmaB> const kp) {
#if defined(CUTLASS_ARCH_MMA_SM90A_ENABLED)
  using Pipeline = typename T::Pipeline;
  extern __shared__ __align__(1024) char smem_raw[];
  auto& ss = *reinterpret_cast<typename T::SharedStorage*>(smem_raw);
  QkvParams const& p = kp.p;

  const int warp_group = threadIdx.x / 128;
  const int n_tile = blockIdx.x;
  const int m_tile = blockIdx.y;
  int g = 0;
  while (g + 1 < p.num_groups && n_tile >= kp.first_tile[g + 1]) ++g;
  const int head = n_tile - kp.first_tile[g];

  typename Pipeline::Params pp;
  pp.transaction_bytes = T::TxBytes;
  pp.role = warp_group == 0 ? Pipeline::ThreadCategory::Producer : Pipeline::ThreadCategory::Consumer;
  pp.is_leader = threadIdx.x == 0;
  pp.num_consumers = 128 * T::ConsumerWGs;
  Pipeline pipeline(ss.pipeline, pp, Shape<_1, _1, _1>{});
  __syncthreads();  // barriers initialised before anyone waits on them

  if (warp_group == 0) {
    cutlass::arch::warpgroup_reg_dealloc<T::ProducerRegs>();
    if (threadIdx.x == 0) {
      const int n_group = p.groups[g].heads * kQkvHeadDim;
      // Static indices keep each tensor map in kernel-parameter space (TMA reads it from there).
      if (g == 0)
        produce<T>(kp.tma_a, kp.tma_b[0], p.m, n_group, p.k, m_tile, head, pipeline, ss);
      else if (g == 1)
        produce<T>(kp.tma_a, kp.tma_b[1], p.m, n_group, p.k, m_tile, head, pipeline, ss);
      else
        produce<T>(kp.tma_a, kp.tma_b[2], p.m, n_group, p.k, m_tile, head, pipeline, ss);
    }
    return;
  }

  cutlass::arch::warpgroup_reg_alloc<T::ConsumerRegs>();
  const int wg = warp_group - 1;
  typename T::TiledMma mma;
  auto thr = mma.get_thread_slice(threadIdx.x - 128);
  Tensor sA = make_tensor(make_smem_ptr(ss.a.data()), typename T::SmemLayoutA{});
  Tensor sB = make_tensor(make_smem_ptr(ss.b.data()), typename T::SmemLayoutB{});
  Tensor tCrA = thr.make_fragment_A(thr.partition_A(sA));  // (MMA, MMA_M, MMA_K, PIPE) descriptors
  Tensor tCrB = thr.make_fragment_B(thr.partition_B(sB));
  Tensor acc = partition_fragment_C(mma, Shape<Int<T::BM>, Int<T::BN>>{});

  const int k_tiles = (p.k + T::BK - 1) / T::BK;
  typename T::PipelineState read{};
  typename T::PipelineState release{};
  mma.accumulate_ = GMMA::ScaleOut::Zero;
#pragma unroll 1
  for (int kt = 0; kt < k_tiles; ++kt) {
    pipeline.consumer_wait(read);
    warpgroup_fence_operand(acc);
    warpgroup_arrive();
#pragma unroll
    for (int kb = 0; kb < size<2>(tCrA); ++kb) {
      cute::gemm(mma, tCrA(_, _, kb, read.index()), tCrB(_, _, kb, read.index()), acc);
      mma.accumulate_ = GMMA::ScaleOut::One;
    }
    warpgroup_commit_batch();
    // Keep this k tile's batch in flight; the previous one is done, so its stage goes back.
    warpgroup_wait<1>();
    warpgroup_fence_operand(acc);
    if (kt > 0) {
      pipeline.consumer_release(release);
      ++release;
    }
    ++read;
  }
  warpgroup_wait<0>();
  warpgroup_fence_operand(acc);

  // 1. bias, F.linear's rounding, into the staging tile.
  QkvGroup const& grp = p.groups[g];
  auto* staging = reinterpret_cast<__nv_bfloat16*>(ss.staging.data());
  const auto* bias = static_cast<const __nv_bfloat16*>(grp.bias);
  Tensor tCcC = thr.partition_C(make_identity_tensor(Shape<Int<T::BM>, Int<T::BN>>{}));
#pragma unroll
  for (int i = 0; i < size(acc); ++i) {
    const int r = get<0>(tCcC(i));
    const int c = get<1>(tCcC(i));
    float v = acc(i);
    if (bias != nullptr) v = __fadd_rn(v, __bfloat162float(bias[head * kQkvHeadDim + c]));
    staging[r * T::StagePitch + c] = __float2bfloat16_rn(v);
  }
  ss.inv_freq[wg][threadIdx.x % 128] = channel_inv_freq(p.rope, grp.rope, threadIdx.x % 128);
  // Rows are independent: only the warpgroup that wrote them has to be in sync.
  cutlass::arch::NamedBarrier::arrive_and_wait(128, wg);

  // 2. RoPE and the head-major store.
  rope_store_rows<T>(p, grp, head, m_tile, wg, staging, ss.inv_freq[wg]);
#endif
}

}  // namespace qkv
}  // namespace vlattn
