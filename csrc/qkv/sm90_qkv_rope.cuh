// Fused QKV projection for sm_90a: TMA + wgmma mainloop, bias + RoPE + head-major store epilogue.
//
// Persistent ping-pong kernel (one CTA per SM, 384 threads):
//   warpgroup 0   producer: one thread walks this CTA's output tiles (tile = TileM rows x one head
//                 of one group) and streams X and the group's weight through the stage ring; each
//                 group has its own tensor map, so callers' Q/K/V weights are read in place.
//   warpgroups 1,2 consumers: take alternate tiles of the CTA. Each computes a whole TileM x 128
//                 tile with wgmma (both operands from shared memory, fp32 accumulators), then runs
//                 the epilogue while the other warpgroup's mainloop keeps the tensor cores busy.
//                 The ring is consumed in load order, so the two mainloops alternate by themselves.
// Epilogue (per consumer warpgroup, rows are independent):
//   1. y = bf16(acc + bias) into the warpgroup's padded shared staging tile (F.linear's rounding);
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
#include <cutlass/arch/memory_sm80.h>  // cp_async, cp_async_fence, cp_async_wait
#include <cutlass/arch/reg_reconfig.h>
#include <cutlass/bfloat16.h>
#include <cutlass/device_kernel.h>  // CUTLASS_GRID_CONSTANT
#include <cutlass/pipeline/sm90_pipeline.hpp>
#include <cute/arch/cluster_sm90.hpp>

#include "kernels/rope.h"
#include "launch/pdl.h"
#include "qkv/qkv_params.h"  // and qkv/qkv_config.h
#include "qkv/qkv_trace.h"   // the development trace's slots
#include "qkv/rope_math.cuh"  // bf, rope_combine2, pack_bf16x2, pos_cos_sin, inv_freq

namespace vlattn {
namespace qkv {

using namespace cute;

template <int TileM_, int Stages_>
struct QkvTraits {
  static constexpr int TileM = TileM_;             // rows of X per tile (one consumer warpgroup)
  static constexpr int BN = kQkvHeadDim;           // one head per tile: RoPE partners stay in the tile
  static constexpr int BK = 64;                    // 128 bytes of K: one SW128 swizzle atom wide
  static constexpr int Stages = Stages_;
  static constexpr int ConsumerWGs = 2;            // ping-pong
  static constexpr int Threads = 128 * (1 + ConsumerWGs);
  static constexpr int StagePitch = BN + 8;        // +16 B per row: conflict-free accumulator stores
  static constexpr int ProducerRegs = 40;
  static constexpr int ConsumerRegs = 232;
  static constexpr bool SplitK = false;
  static constexpr bool Coop = false;

  static_assert(TileM == 64 || TileM == 128, "a warpgroup's wgmma covers 64 rows; 1 or 2 of them per tile");
  static_assert(kQkvHeadDim == 128, "one thread per channel of a warpgroup fills inv_freq");
  static_assert(Stages >= 2, "the mainloop keeps one wgmma batch in flight");

  using Element = cutlass::bfloat16_t;
  using SmemLayoutA = decltype(tile_to_shape(GMMA::Layout_K_SW128_Atom<Element>{},
                                             Shape<Int<TileM>, Int<BK>, Int<Stages>>{}));
  using SmemLayoutB = decltype(tile_to_shape(GMMA::Layout_K_SW128_Atom<Element>{},
                                             Shape<Int<BN>, Int<BK>, Int<Stages>>{}));
  // One warpgroup per tile: the 64x128 atom is repeated TileM/64 times down M by the partitioner.
  using TiledMma = decltype(make_tiled_mma(SM90_64x128x16_F32BF16BF16_SS<GMMA::Major::K, GMMA::Major::K>{}));
  using Pipeline = cutlass::PipelineTmaAsync<Stages>;
  using PipelineState = typename Pipeline::PipelineState;

  struct SharedStorage {
    cute::array_aligned<Element, cosize_v<SmemLayoutA>, 1024> a;  // SW128 tiles need 1 KB alignment
    cute::array_aligned<Element, cosize_v<SmemLayoutB>, 1024> b;
    cute::array_aligned<Element, ConsumerWGs * TileM * StagePitch, 128> staging;  // one tile per warpgroup
    float inv_freq[ConsumerWGs][kQkvHeadDim];  // per channel, for the position-based RoPE modes
    typename Pipeline::SharedStorage pipeline;
  };
  static constexpr int SmemBytes = int(sizeof(SharedStorage));
  static constexpr uint32_t TxBytes = uint32_t((TileM + BN) * BK * sizeof(Element));  // per stage
  static_assert(SmemBytes <= 227 * 1024, "sm_90 allows 227 KB of shared memory per CTA");
  static_assert(128 * (ConsumerWGs * ConsumerRegs + ProducerRegs) <= 65536, "register file");
};

template <class TmaA, class TmaB>
struct QkvKernelParams {
  TmaA tma_a;
  TmaB tma_b[kQkvMaxGroups];
  QkvParams p;
  int first_tile[kQkvMaxGroups + 1];  // prefix sums of heads: N tiles [first[g], first[g+1]) are group g
  int n_tiles;                        // heads of all groups
  int num_tiles;                      // n_tiles * row tiles; tile t = (row tile t / n_tiles, head t % n_tiles)
  // Development trace of the split-K kernels (qkv/qkv_trace.h): kSplitKTraceSlots stamps per CTA for the first
  // trace_ctas CTAs. Read only by the kernels' traced twins (qkv_rope_splitk_kernel<..., true>), launched while a
  // trace buffer is set; appended last, so the other fields keep their offsets.
  unsigned long long* trace = nullptr;
  int trace_ctas = 0;
};

// Pipeline parameters every QKV kernel uses: thread 0 of warpgroup 0 issues the TMA loads (T::TxBytes
// per stage), `consumers` threads of the CTA read and release each stage.
template <class T>
CUTLASS_DEVICE typename T::Pipeline::Params pipeline_params(int warp_group, uint32_t consumers) {
  using Pipeline = typename T::Pipeline;
  typename Pipeline::Params pp;
  pp.transaction_bytes = T::TxBytes;
  pp.role = warp_group == 0 ? Pipeline::ThreadCategory::Producer : Pipeline::ThreadCategory::Consumer;
  pp.is_leader = threadIdx.x == 0;
  pp.num_consumers = consumers;
  return pp;
}

struct TileCoord {
  int m_tile, group, head;
};

template <class TmaA, class TmaB>
CUTLASS_DEVICE TileCoord tile_coord(QkvKernelParams<TmaA, TmaB> const& kp, int t) {
  TileCoord c;
  c.m_tile = t / kp.n_tiles;
  const int n = t - c.m_tile * kp.n_tiles;
  c.group = 0;
  while (c.group + 1 < kp.p.num_groups && n >= kp.first_tile[c.group + 1]) ++c.group;
  c.head = n - kp.first_tile[c.group];
  return c;
}

// ---------------------------------------------------------------------------------------------
// Producer: stream the X rows and the weight tile of one head through the stage ring.
// ---------------------------------------------------------------------------------------------
template <class T, class TmaA, class TmaB>
CUTLASS_DEVICE void produce_tile(TmaA const& tma_a, TmaB const& tma_b, int m, int n_group, int k, int m_tile,
                                 int head, typename T::Pipeline& pipeline, typename T::PipelineState& state,
                                 typename T::Element* smem_a, typename T::Element* smem_b, int kt_begin = 0,
                                 int kt_end = -1) {
  Tensor mA = tma_a.get_tma_tensor(make_shape(m, k));
  Tensor mB = tma_b.get_tma_tensor(make_shape(n_group, k));
  Tensor gA = local_tile(mA, Shape<Int<T::TileM>, Int<T::BK>>{}, make_coord(m_tile, _));  // (TileM, BK, k)
  Tensor gB = local_tile(mB, Shape<Int<T::BN>, Int<T::BK>>{}, make_coord(head, _));       // (BN, BK, k)
  Tensor sA = make_tensor(make_smem_ptr(smem_a), typename T::SmemLayoutA{});
  Tensor sB = make_tensor(make_smem_ptr(smem_b), typename T::SmemLayoutB{});
  auto [tAgA, tAsA] = tma_partition(tma_a, Int<0>{}, Layout<_1>{}, group_modes<0, 2>(sA), group_modes<0, 2>(gA));
  auto [tBgB, tBsB] = tma_partition(tma_b, Int<0>{}, Layout<_1>{}, group_modes<0, 2>(sB), group_modes<0, 2>(gB));

  if (kt_end < 0) kt_end = size<1>(tAgA);
  for (int kt = kt_begin; kt < kt_end; ++kt) {
    pipeline.producer_acquire(state);  // also arms the stage's barrier with TxBytes
    auto* bar = pipeline.producer_get_barrier(state);
    copy(tma_a.with(*bar), tAgA(_, kt), tAsA(_, state.index()));
    copy(tma_b.with(*bar), tBgB(_, kt), tBsB(_, state.index()));
    ++state;
  }
}

// Calls f(tma_b) with group g's tensor map. Static indices keep each map in kernel-parameter space
// (TMA reads the descriptor from there; a runtime-indexed copy would live in local memory).
template <class TmaA, class TmaB, class F>
CUTLASS_DEVICE void with_group_tma(QkvKernelParams<TmaA, TmaB> const& kp, int g, F&& f) {
  if (g == 0)
    f(kp.tma_b[0]);
  else if (g == 1)
    f(kp.tma_b[1]);
  else
    f(kp.tma_b[2]);
}

// One output tile's mainloop: k_tiles stages from `read` on, wgmma with both operands in shared
// memory and one batch kept in flight; a stage goes back to the producer once the batch after it is
// issued and it has retired. `after_last_issue()` runs right after the last batch is committed. On
// return every MMA has retired, all k_tiles stages are released, read and release advanced k_tiles.
template <class Mma, class FragA, class FragB, class Acc, class Pipeline, class State, class AfterLastIssue>
CUTLASS_DEVICE void mma_tile(Mma& mma, FragA& tCrA, FragB& tCrB, Acc& acc, Pipeline& pipeline, State& read,
                             State& release, int k_tiles, AfterLastIssue&& after_last_issue) {
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
    if (kt == k_tiles - 1) after_last_issue();
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
  pipeline.consumer_release(release);
  ++release;
}

// ---------------------------------------------------------------------------------------------
// Epilogue helpers
// ---------------------------------------------------------------------------------------------
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

// Accumulators + bias -> bf16 staging tile: F.linear's one rounding after the bias add. `bias` points
// at the tile's first column (nullptr: no bias); `tCcC` maps each accumulator to its (row, column).
template <class Acc, class Coords>
CUTLASS_DEVICE void stage_with_bias(Acc const& acc, Coords const& tCcC, const __nv_bfloat16* bias,
                                    __nv_bfloat16* staging, int pitch) {
#pragma unroll
  for (int i = 0; i < size(acc); ++i) {
    const int r = get<0>(tCcC(i));
    const int col = get<1>(tCcC(i));
    float v = acc(i);
    if (bias != nullptr) v = __fadd_rn(v, __bfloat162float(bias[col]));
    staging[r * pitch + col] = __float2bfloat16_rn(v);
  }
}

// The position channel c of an X row rotates by: the row's 1-D position (kPos1D) or the t/h/w component
// of c's segment (kPos3D). pos_row: the row's entry of QkvRope::pos.
CUTLASS_DEVICE int64_t channel_position(QkvRope const& rope, RopeMode mode, const int64_t* pos_row, int c) {
  return mode == RopeMode::kPos1D ? pos_row[0] : pos_row[rope::thw_segment(c, rope.split).index * rope.pos_comp_stride];
}

union Vec8 {
  uint4 u;
  uint32_t w[4];  // channel pairs (2k, 2k + 1), packed bf16x2 (low half = channel 2k)
  __nv_bfloat16 h[8];
};

// The 8 channels' cos and sin of a 16-byte chunk of each table (bf16 values, exact in fp32).
CUTLASS_DEVICE void unpack_cos_sin(const Vec8& c8, const Vec8& s8, float (&cs)[8], float (&sn)[8]) {
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    cs[j] = __bfloat162float(c8.h[j]);
    sn[j] = __bfloat162float(s8.h[j]);
  }
}

// bf16(x c) + bf16(rot s) for a chunk's 8 channels, pair by pair (rope_combine2); rot: the rotate-half operand's
// bf16 bits per channel with its sign already applied (an XOR of bit 15: exact). The 3-D paths' shared tail.
CUTLASS_DEVICE Vec8 rope_pairs_signed(Vec8 x, const uint16_t (&rot)[8], const float (&cs)[8], const float (&sn)[8]) {
  Vec8 o;
#pragma unroll
  for (int k = 0; k < 4; ++k)
    o.w[k] = rope_combine2(x.w[k], uint32_t(rot[2 * k]) | (uint32_t(rot[2 * k + 1]) << 16),
                           pack_bf16x2(cs[2 * k], cs[2 * k + 1]), pack_bf16x2(sn[2 * k], sn[2 * k + 1]), false);
  return o;
}

// Offset (elements) of channels c0..c0+7 of X row (b, s) in the cos/sin tables when the chunk's 8 channels share a
// plane (rope.tab_vec16): one 16-byte read per table (chunk_cos_sin<true> computes it inline: the RoPE pass's
// registers moved when it called this).
CUTLASS_DEVICE int64_t table_chunk_offset(QkvRope const& rope, int b, int s, int c0) {
  return b * rope.tab_batch_stride + s * rope.tab_seq_stride + c0 + rope.plane_of_channel[c0] * rope.tab_plane_stride;
}

// cos/sin of channels c0..c0+7 at X row (b, s): read from the tables (kTable), or computed at the
// 1-D position (kPos1D) or at each channel's t/h/w position (kPos3D). Not called for kNone. They
// depend on the row and channel only, not on the head.
// kTableVec: take the 16-byte table reads when rope.tab_vec16 allows (the RoPE pass only: in the fused
// kernels' epilogues the extra path costs registers, a 4-byte spill in the coop kernels).
template <bool kTableVec = false>
CUTLASS_DEVICE void chunk_cos_sin(QkvRope const& rope, RopeMode mode, int b, int s, int c0, const float* inv_freq_of,
                                  float (&cs)[8], float (&sn)[8]) {
  if (mode == RopeMode::kTable) {
    const int64_t base = b * rope.tab_batch_stride + s * rope.tab_seq_stride + c0;
    const auto* ct = static_cast<const __nv_bfloat16*>(rope.cos);
    const auto* st = static_cast<const __nv_bfloat16*>(rope.sin);
    if (kTableVec && rope.tab_vec16) {  // the chunk's 8 channels share a plane: one 16-byte read per table
      const int64_t off = base + rope.plane_of_channel[c0] * rope.tab_plane_stride;
      Vec8 c8, s8;
      c8.u = __ldg(reinterpret_cast<const uint4*>(ct + off));
      s8.u = __ldg(reinterpret_cast<const uint4*>(st + off));
      unpack_cos_sin(c8, s8, cs, sn);
      return;
    }
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const int64_t off = base + rope.plane_of_channel[c0 + j] * rope.tab_plane_stride + j;
      cs[j] = __bfloat162float(ct[off]);
      sn[j] = __bfloat162float(st[off]);
    }
  } else if (mode == RopeMode::kPos1D) {  // frequency index is c mod 64 (the reference concatenates freqs twice)
    const int64_t pos = rope.pos[b * rope.pos_batch_stride + s * rope.pos_seq_stride];
#pragma unroll
    for (int j = 0; j < 8; ++j) pos_cos_sin(pos, inv_freq_of[c0 + j], cs[j], sn[j]);
  } else {  // kPos3D
    const int64_t* pos = rope.pos + b * rope.pos_batch_stride + s * rope.pos_seq_stride;
#pragma unroll
    for (int j = 0; j < 8; ++j)
      pos_cos_sin(channel_position(rope, RopeMode::kPos3D, pos, c0 + j), inv_freq_of[c0 + j], cs[j], sn[j]);
  }
}

// RoPE of channels c0..c0+7 of one head's row (`row` points at its channel 0; x = row[c0..c0+7]).
CUTLASS_DEVICE Vec8 rope_chunk(QkvRope const& rope, RopeMode mode, const __nv_bfloat16* row, int c0, Vec8 x,
                               const float (&cs)[8], const float (&sn)[8]) {
  Vec8 o;
  if (mode == RopeMode::kPos3D) {
    uint16_t rot[8];  // the rotate-half operand's bf16 bits, the sign applied (exact)
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const int c = c0 + j;
      const rope::Segment seg = rope::thw_segment(c, rope.split);
      const rope::Pair pr = rope::rotate_half_pair(c, seg.base, seg.width);
      rot[j] = static_cast<uint16_t>(__bfloat16_as_ushort(row[pr.partner]) ^ (pr.sign < 0 ? 0x8000u : 0u));
    }
    o = rope_pairs_signed(x, rot, cs, sn);
  } else {
    // Full-head rotate-half: channels c0..c0+7 pair with c0+-64..c0+-64+7, one 16-byte read.
    const bool first_half = c0 < kQkvHeadDim / 2;
    Vec8 y;
    y.u = *reinterpret_cast<const uint4*>(row + (first_half ? c0 + kQkvHeadDim / 2 : c0 - kQkvHeadDim / 2));
    // bf16(x c) -/+ bf16(y s) per channel pair (rope_combine2: the reference's roundings, see rope_math.cuh).
#pragma unroll
    for (int k = 0; k < 4; ++k)
      o.w[k] = rope_combine2(x.w[k], y.w[k], pack_bf16x2(cs[2 * k], cs[2 * k + 1]),
                             pack_bf16x2(sn[2 * k], sn[2 * k + 1]), first_half);
  }
  return o;
}

// Channels c0..c0+7 of X row (b, s) for kHeads heads of one group staged side by side (`row`: the row's channel 0 in
// the staging tile): RoPE with the chunk's cos/sin (ignored for kNone), then the head-major 16-byte store.
template <int kHeads = 1>
CUTLASS_DEVICE void rope_store_chunk(QkvParams const& p, QkvGroup const& grp, int head, int b, int s,
                                     const __nv_bfloat16* row, int c0, const float (&cs)[8], const float (&sn)[8]) {
  auto* out = static_cast<__nv_bfloat16*>(grp.out);
#pragma unroll
  for (int h = 0; h < kHeads; ++h) {
    const __nv_bfloat16* hrow = row + h * kQkvHeadDim;
    Vec8 x, o;
    x.u = *reinterpret_cast<const uint4*>(hrow + c0);
    o = grp.rope != RopeMode::kNone ? rope_chunk(p.rope, grp.rope, hrow, c0, x, cs, sn) : x;
    const int64_t dst = ((int64_t(b) * grp.heads + head + h) * p.seq + s) * kQkvHeadDim + c0;
    // One 16-byte store: written as `*(uint4*)(out + dst) = o.u`, the union's words went out as four 4-byte
    // stores (SASS of every fused kernel's epilogue).
    asm volatile("st.global.v4.b32 [%0], {%1, %2, %3, %4};\n" ::"l"(out + dst), "r"(o.w[0]), "r"(o.w[1]), "r"(o.w[2]),
                 "r"(o.w[3]));
  }
}

// Rows [row_begin, row_end) of a staged tile whose first row is X row `row0`, for kHeads heads of
// one group staged side by side (head h's channel 0 at staging + h * 128): `nthreads` threads
// (thread index t) take 16-byte chunks, 16 threads per row. A row's cos/sin are read (or computed)
// once for all kHeads heads, and each iteration takes two row passes whose table loads are all
// issued before either pass stores: the compiler cannot move a load across a store that may alias
// it, so one pass per iteration made the epilogue a chain of dependent DRAM round trips (ncu, c256
// at 007 M=512: ~45% of the kernel outside the MMA floor). kPasses = 1 where registers are short
// (the split-K kernels spilled with 2).
template <int kHeads = 1, int kPasses = 2>
CUTLASS_DEVICE void rope_store_rows(QkvParams const& p, QkvGroup const& grp, int head, int row0, int row_begin,
                                    int row_end, int t, int nthreads, const __nv_bfloat16* staging, int pitch,
                                    const float* inv_freq_of) {
  constexpr int kChunks = kQkvHeadDim / 8;  // 16-byte chunks per row
  const int rows_per_pass = nthreads / kChunks;
  const int chunk = t % kChunks;
  const int c0 = chunk * 8;
  const bool rotate = grp.rope != RopeMode::kNone;

#pragma unroll 1
  for (int r0 = row_begin + t / kChunks; r0 < row_end; r0 += kPasses * rows_per_pass) {  // row inside the tile
    int b[kPasses], s[kPasses];
    bool live[kPasses];
    float cs[kPasses][8], sn[kPasses][8];
#pragma unroll
    for (int i = 0; i < kPasses; ++i) {
      const int m = row0 + r0 + i * rows_per_pass;
      live[i] = r0 + i * rows_per_pass < row_end && m < p.m;
      b[i] = live[i] ? m / p.seq : 0;
      s[i] = live[i] ? m - b[i] * p.seq : 0;
      if (live[i] && rotate) chunk_cos_sin(p.rope, grp.rope, b[i], s[i], c0, inv_freq_of, cs[i], sn[i]);
    }
#pragma unroll
    for (int i = 0; i < kPasses; ++i)
      if (live[i])
        rope_store_chunk<kHeads>(p, grp, head, b[i], s[i], staging + (r0 + i * rows_per_pass) * pitch, c0, cs[i],
                                 sn[i]);
  }
}

// Consumer warpgroups of the ping-pong kernels (qkv_rope_kernel, qkv_rope_mc_kernel). The CTA's tile
// sequence is first, first + stride, ...; warpgroup wg takes every other one. m_tile_of(c) gives the
// row tile this CTA computes for tile c (the multicast kernel's CTAs split a row-tile pair).
template <class T, class TmaA, class TmaB, class MTileOf>
CUTLASS_DEVICE void pingpong_consumers(QkvKernelParams<TmaA, TmaB> const& kp, typename T::SharedStorage& ss,
                                       typename T::Pipeline& pipeline, int k_tiles, int first, int stride,
                                       MTileOf&& m_tile_of) {
  QkvParams const& p = kp.p;
  const int wg = static_cast<int>(threadIdx.x) / 128 - 1;
  typename T::TiledMma mma;
  auto thr = mma.get_thread_slice(threadIdx.x % 128);
  Tensor sA = make_tensor(make_smem_ptr(ss.a.data()), typename T::SmemLayoutA{});
  Tensor sB = make_tensor(make_smem_ptr(ss.b.data()), typename T::SmemLayoutB{});
  Tensor tCrA = thr.make_fragment_A(thr.partition_A(sA));  // (MMA, MMA_M, MMA_K, PIPE) descriptors
  Tensor tCrB = thr.make_fragment_B(thr.partition_B(sB));
  Tensor tCcC = thr.partition_C(make_identity_tensor(Shape<Int<T::TileM>, Int<T::BN>>{}));
  auto* staging = reinterpret_cast<__nv_bfloat16*>(ss.staging.data()) + wg * T::TileM * T::StagePitch;

  // The ring holds the CTA's tiles in order; this warpgroup owns every other one. The mainloops
  // take turns (named barriers kTurn0/kTurn1): a stage barrier is waited on by parity, which is
  // only unambiguous within one phase, so a warpgroup may not wait on its next tile's stages
  // while the other one is still consuming the ring (it would race up to k_tiles ahead).
  constexpr uint32_t kTurn[2] = {2, 3};  // named barrier ids after the two epilogue ones
  typename T::PipelineState read{};
  read.advance(wg * k_tiles);
#pragma unroll 1
  for (int t = first + wg * stride; t < kp.num_tiles; t += 2 * stride) {
    const TileCoord c = tile_coord(kp, t);
    const int m_tile = m_tile_of(c);
    if (t >= 2 * stride || wg == 1)  // the other warpgroup consumed the tile before this one
      cutlass::arch::NamedBarrier::arrive_and_wait(256, kTurn[wg]);
    Tensor acc = partition_fragment_C(mma, Shape<Int<T::TileM>, Int<T::BN>>{});
    typename T::PipelineState release = read;
    // Hand the ring over as soon as this tile's last stage has been waited on: the other
    // warpgroup's first wait is then within one phase, and its MMAs queue behind ours.
    mma_tile(mma, tCrA, tCrB, acc, pipeline, read, release, k_tiles, [&] {
      if (t + stride < kp.num_tiles) cutlass::arch::NamedBarrier::arrive(256, kTurn[wg ^ 1]);
    });
    read.advance(k_tiles);  // skip the other warpgroup's next tile

    // 1. bias, F.linear's rounding, into the staging tile.
    QkvGroup const& grp = p.groups[c.group];
    const auto* bias = static_cast<const __nv_bfloat16*>(grp.bias);
    // The previous tile's RoPE pass may still read the staging tile and inv_freq.
    cutlass::arch::NamedBarrier::arrive_and_wait(128, wg);
    stage_with_bias(acc, tCcC, bias == nullptr ? nullptr : bias + c.head * kQkvHeadDim, staging, T::StagePitch);
    ss.inv_freq[wg][threadIdx.x % 128] = channel_inv_freq(p.rope, grp.rope, threadIdx.x % 128);
    cutlass::arch::NamedBarrier::arrive_and_wait(128, wg);

    // 2. RoPE and the head-major store (a padding tile, m_tile * TileM >= M, stores nothing).
    rope_store_rows(p, grp, c.head, m_tile * T::TileM, 0, T::TileM, threadIdx.x % 128, 128, staging,
                    T::StagePitch, ss.inv_freq[wg]);
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

  const auto pp = pipeline_params<T>(warp_group, 128);  // read by the one warpgroup that owns the tile
  Pipeline pipeline(ss.pipeline, pp, Shape<_1, _1, _1>{});
  __syncthreads();  // barriers initialised before anyone waits on them
  pdl_enter();      // launch/pdl.h: no global memory access before this

  const int k_tiles = (p.k + T::BK - 1) / T::BK;
  if (warp_group == 0) {
    cutlass::arch::warpgroup_reg_dealloc<T::ProducerRegs>();
    if (threadIdx.x == 0) {
      auto state = cutlass::make_producer_start_state<Pipeline>();
      for (int t = blockIdx.x; t < kp.num_tiles; t += gridDim.x) {
        const TileCoord c = tile_coord(kp, t);
        const int n_group = p.groups[c.group].heads * kQkvHeadDim;
        with_group_tma(kp, c.group, [&](auto const& tma_b) {
          produce_tile<T>(kp.tma_a, tma_b, p.m, n_group, p.k, c.m_tile, c.head, pipeline, state, ss.a.data(),
                          ss.b.data());
        });
      }
    }
    return;
  }

  cutlass::arch::warpgroup_reg_alloc<T::ConsumerRegs>();
  pingpong_consumers<T>(kp, ss, pipeline, k_tiles, static_cast<int>(blockIdx.x), static_cast<int>(gridDim.x),
                        [](TileCoord const& c) { return c.m_tile; });
#endif
}

// ---------------------------------------------------------------------------------------------
// Small M: split K across a thread-block cluster.
//
// With few row tiles the persistent kernel leaves most SMs idle (007 at 128 tokens: 36 tiles for
// 132 SMs) and the job is streaming the weights. Here a cluster of S CTAs shares one 128-row tile:
// CTA s accumulates k tiles [s*kt/S, (s+1)*kt/S), parks its fp32 partial tile in its own shared
// memory (over the dead stage buffers), and after a cluster barrier CTA s reduces rows
// [s*128/S, (s+1)*128/S) over all S partials through distributed shared memory, in rank order
// (deterministic), then runs the same bias/RoPE/store epilogue on those rows.
// ---------------------------------------------------------------------------------------------
// ---------------------------------------------------------------------------------------------
// Large M: 128 x 256 tiles (two heads of one group), two consumer warpgroups on the same tile
// (64 rows x 256 columns each), persistent. Per FLOP this streams 3/4 of the shared-memory fill
// traffic of the 128 x 128 tiles (A is read once for two heads), which is what limits the
// ping-pong kernel at large M (L2 -> SM bandwidth); the epilogue is exposed, but the producer
// keeps prefetching the next tile's stages under it.
// SingleTile (the host launches one CTA per tile, the automatic choice's one-wave case): nothing is
// prefetched under the epilogue, so the staging tile lives over the dead stage buffers and the ring
// gets a 4th stage (ncu, 007 M=512: with 3 stages the consumers waited on data, 54% of the SM's
// MMA peak per tile, against 87% for the 4-stage CUTLASS 128x256 GEMM on the same tile).
// ---------------------------------------------------------------------------------------------
template <int Stages_, bool SingleTile_ = false>
struct CoopTraits {
  static constexpr bool SingleTile = SingleTile_;
  static constexpr int TileM = 128;
  static constexpr int BN = 2 * kQkvHeadDim;  // a head pair
  static constexpr int BK = 64;
  static constexpr int Stages = Stages_;
  static constexpr int Threads = 384;
  static constexpr int StagePitch = BN + 8;
  static constexpr bool SplitK = false;
  static constexpr bool Coop = true;

  using Element = cutlass::bfloat16_t;
  using SmemLayoutA = decltype(tile_to_shape(GMMA::Layout_K_SW128_Atom<Element>{},
                                             Shape<Int<TileM>, Int<BK>, Int<Stages>>{}));
  using SmemLayoutB = decltype(tile_to_shape(GMMA::Layout_K_SW128_Atom<Element>{},
                                             Shape<Int<BN>, Int<BK>, Int<Stages>>{}));
  using TiledMma = decltype(make_tiled_mma(SM90::GMMA::MMA_64x256x16_F32BF16BF16_SS<GMMA::Major::K, GMMA::Major::K>{},
                                           Layout<Shape<_2, _1, _1>>{}));
  using Pipeline = cutlass::PipelineTmaAsync<Stages>;
  using PipelineState = typename Pipeline::PipelineState;

  struct Ring {
    cute::array_aligned<Element, cosize_v<SmemLayoutA>, 1024> a;
    cute::array_aligned<Element, cosize_v<SmemLayoutB>, 1024> b;
  };
  using Staging = cute::array_aligned<Element, TileM * StagePitch, 128>;
  struct SharedSingle {  // the staging tile over the ring: one tile per CTA, nothing in flight after it
    union {
      Ring ring;
      Staging staging;
    };
    float inv_freq[kQkvHeadDim];
    typename Pipeline::SharedStorage pipeline;
  };
  struct SharedPersistent {
    Ring ring;
    Staging staging;
    float inv_freq[kQkvHeadDim];
    typename Pipeline::SharedStorage pipeline;
  };
  using SharedStorage = cute::conditional_t<SingleTile, SharedSingle, SharedPersistent>;
  static constexpr int SmemBytes = int(sizeof(SharedStorage));
  static constexpr uint32_t TxBytes = uint32_t((TileM + BN) * BK * sizeof(Element));
  static_assert(SmemBytes <= 227 * 1024, "sm_90 allows 227 KB of shared memory per CTA");
};

// Tile t of the coop kernel: row tile t / pairs, head pair t % pairs (pairs never straddle groups:
// the host requires an even head count per group).
template <class TmaA, class TmaB>
CUTLASS_DEVICE TileCoord pair_coord(QkvKernelParams<TmaA, TmaB> const& kp, int t) {
  const int pairs = kp.n_tiles / 2;
  TileCoord c;
  c.m_tile = t / pairs;
  const int n = 2 * (t - c.m_tile * pairs);  // first head of the pair, over all groups
  c.group = 0;
  while (c.group + 1 < kp.p.num_groups && n >= kp.first_tile[c.group + 1]) ++c.group;
  c.head = n - kp.first_tile[c.group];
  return c;
}

template <class T, class TmaA, class TmaB>
__global__ void __launch_bounds__(T::Threads, 1)
    qkv_rope_coop_kernel(CUTLASS_GRID_CONSTANT QkvKernelParams<TmaA, TmaB> const kp) {
#if defined(CUTLASS_ARCH_MMA_SM90A_ENABLED)
  using Pipeline = typename T::Pipeline;
  extern __shared__ __align__(1024) char smem_raw[];
  auto& ss = *reinterpret_cast<typename T::SharedStorage*>(smem_raw);
  QkvParams const& p = kp.p;
  const int warp_group = threadIdx.x / 128;

  const auto pp = pipeline_params<T>(warp_group, 256);
  Pipeline pipeline(ss.pipeline, pp, Shape<_1, _1, _1>{});
  __syncthreads();
  pdl_enter();

  const int k_tiles = (p.k + T::BK - 1) / T::BK;
  if (warp_group == 0) {
    cutlass::arch::warpgroup_reg_dealloc<40>();
    if (threadIdx.x == 0) {
      auto state = cutlass::make_producer_start_state<Pipeline>();
      for (int t = blockIdx.x; t < kp.num_tiles; t += gridDim.x) {
        const TileCoord c = pair_coord(kp, t);
        const int n_group = p.groups[c.group].heads * kQkvHeadDim;
        const int pair = c.head / 2;  // B tile index in units of 256 rows
        with_group_tma(kp, c.group, [&](auto const& tma_b) {
          produce_tile<T>(kp.tma_a, tma_b, p.m, n_group, p.k, c.m_tile, pair, pipeline, state, ss.ring.a.data(),
                          ss.ring.b.data());
        });
      }
    }
    return;
  }

  cutlass::arch::warpgroup_reg_alloc<232>();
  const int t_cons = threadIdx.x - 128;
  typename T::TiledMma mma;
  auto thr = mma.get_thread_slice(t_cons);
  Tensor sA = make_tensor(make_smem_ptr(ss.ring.a.data()), typename T::SmemLayoutA{});
  Tensor sB = make_tensor(make_smem_ptr(ss.ring.b.data()), typename T::SmemLayoutB{});
  Tensor tCrA = thr.make_fragment_A(thr.partition_A(sA));
  Tensor tCrB = thr.make_fragment_B(thr.partition_B(sB));
  Tensor tCcC = thr.partition_C(make_identity_tensor(Shape<Int<T::TileM>, Int<T::BN>>{}));
  auto* staging = reinterpret_cast<__nv_bfloat16*>(ss.staging.data());
  typename T::PipelineState read{}, release{};

#pragma unroll 1
  for (int t = blockIdx.x; t < kp.num_tiles; t += gridDim.x) {
    const TileCoord c = pair_coord(kp, t);
    Tensor acc = partition_fragment_C(mma, Shape<Int<T::TileM>, Int<T::BN>>{});
    mma_tile(mma, tCrA, tCrB, acc, pipeline, read, release, k_tiles, [] {});

    QkvGroup const& grp = p.groups[c.group];
    const auto* bias = static_cast<const __nv_bfloat16*>(grp.bias);
    // The previous tile's RoPE pass may still read the staging tile and inv_freq. SingleTile: the
    // staging tile overwrites the ring; every stage was consumed and both warpgroups' wgmma reads
    // are done (warpgroup_wait<0> in mma_tile) before this barrier; the fence orders the async
    // proxy's (TMA, wgmma) use of those bytes before the generic stores below.
    if constexpr (T::SingleTile) cutlass::arch::fence_view_async_shared();
    cutlass::arch::NamedBarrier::arrive_and_wait(256, 0);
    stage_with_bias(acc, tCcC, bias == nullptr ? nullptr : bias + c.head * kQkvHeadDim, staging, T::StagePitch);
    if (t_cons < kQkvHeadDim) ss.inv_freq[t_cons] = channel_inv_freq(p.rope, grp.rope, t_cons);
    cutlass::arch::NamedBarrier::arrive_and_wait(256, 0);
    rope_store_rows<2>(p, grp, c.head, c.m_tile * T::TileM, 0, T::TileM, t_cons, 256, staging, T::StagePitch,
                       ss.inv_freq);
  }
#endif
}

// 16 bytes of CTA `rank`'s shared memory at the address of `local` in this CTA (same layout).
CUTLASS_DEVICE float4 ld_dsmem_f4(const float* local, uint32_t rank) {
  const uint32_t remote = cute::set_block_rank(static_cast<uint32_t>(__cvta_generic_to_shared(local)), rank);
  float4 v;
  asm volatile("ld.shared::cluster.v4.f32 {%0, %1, %2, %3}, [%4];\n"
               : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
               : "r"(remote));
  return v;
}

CUTLASS_DEVICE unsigned long long globaltimer_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// TileM 128: each consumer warpgroup holds 64 rows (64 accumulator floats per thread); TileM 256: 128
// rows each (128 floats), the 64x128 atoms repeated twice down M by the partitioner.
template <int TileM_, int Stages_>
struct SplitKTraits {
  static constexpr int TileM = TileM_;  // two consumer warpgroups on one tile (cooperative)
  static constexpr int BN = kQkvHeadDim;
  static constexpr int BK = 64;
  static constexpr int Stages = Stages_;
  static constexpr int Threads = 384;
  static constexpr int StagePitch = BN + 8;
  static constexpr int RedPitch = BN + 4;  // fp32 partial tile row pitch (+16 B)
  // setmaxnreg per warpgroup (producer + 2 consumers <= 512 per thread): at 40 the producer's k-range
  // address math spilled, at 56 still 20 B; the 256-row consumers need room for 128 accumulators.
  static constexpr int ProducerRegs = TileM == 256 ? 72 : 80;
  static constexpr int ConsumerRegs = TileM == 256 ? 216 : 208;
  static_assert(TileM == 128 || TileM == 256, "64 or 128 rows per consumer warpgroup");
  static_assert(128 * (2 * ConsumerRegs + ProducerRegs) <= 65536, "register file");
  static constexpr int MaxSplits = 8;      // portable cluster size
  static constexpr bool SplitK = true;
  static constexpr bool Coop = false;

  using Element = cutlass::bfloat16_t;
  using SmemLayoutA = decltype(tile_to_shape(GMMA::Layout_K_SW128_Atom<Element>{},
                                             Shape<Int<TileM>, Int<BK>, Int<Stages>>{}));
  using SmemLayoutB = decltype(tile_to_shape(GMMA::Layout_K_SW128_Atom<Element>{},
                                             Shape<Int<BN>, Int<BK>, Int<Stages>>{}));
  using TiledMma = decltype(make_tiled_mma(SM90_64x128x16_F32BF16BF16_SS<GMMA::Major::K, GMMA::Major::K>{},
                                           Layout<Shape<_2, _1, _1>>{}));
  using Pipeline = cutlass::PipelineTmaAsync<Stages>;
  using PipelineState = typename Pipeline::PipelineState;

  static constexpr int StageBytes = int((cosize_v<SmemLayoutA> + cosize_v<SmemLayoutB>) * sizeof(Element));
  static constexpr int RedBytes = TileM * RedPitch * int(sizeof(float));
  struct SharedStorage {
    union {
      struct {
        cute::array_aligned<Element, cosize_v<SmemLayoutA>, 1024> a;
        cute::array_aligned<Element, cosize_v<SmemLayoutB>, 1024> b;
      } mainloop;
      float red[TileM * RedPitch];  // after the mainloop: this CTA's fp32 partial tile
    };
    cute::array_aligned<Element, TileM * StagePitch, 128> staging;
    float inv_freq[kQkvHeadDim];
    typename Pipeline::SharedStorage pipeline;
  };
  static constexpr int SmemBytes = int(sizeof(SharedStorage));
  static constexpr uint32_t TxBytes = uint32_t((TileM + BN) * BK * sizeof(Element));
  static_assert(RedBytes <= StageBytes, "the partial tile lives in the stage buffers");
  static_assert(SmemBytes <= 227 * 1024, "sm_90 allows 227 KB of shared memory per CTA");
};

// kTrace: the development trace's twin (qkv/qkv_trace.h). The kernel the library launches is the kTrace = false
// instantiation, in which every trace statement folds away: its code is the untraced kernel's, instruction for
// instruction, so the trace costs nothing when it is off (the kernel-parameter form cost +0.25 us cold, 56th session).
template <class T, class TmaA, class TmaB, bool kTrace = false>
__global__ void __launch_bounds__(T::Threads, 1)
    qkv_rope_splitk_kernel(CUTLASS_GRID_CONSTANT QkvKernelParams<TmaA, TmaB> const kp) {
#if defined(CUTLASS_ARCH_MMA_SM90A_ENABLED)
  using Pipeline = typename T::Pipeline;
  extern __shared__ __align__(1024) char smem_raw[];
  auto& ss = *reinterpret_cast<typename T::SharedStorage*>(smem_raw);
  QkvParams const& p = kp.p;
  const int warp_group = threadIdx.x / 128;
  const int splits = static_cast<int>(cute::cluster_shape().x);
  const int rank = static_cast<int>(cute::block_rank_in_cluster());
  const TileCoord c = tile_coord(kp, blockIdx.x / splits);
  const int k_tiles = (p.k + T::BK - 1) / T::BK;
  const int kt_begin = rank * k_tiles / splits, kt_end = (rank + 1) * k_tiles / splits;

  const auto pp = pipeline_params<T>(warp_group, 256);
  // Cluster shape (1,1,1) for the pipeline: no multicast, every CTA only signals itself.
  Pipeline pipeline(ss.pipeline, pp, Shape<_1, _1, _1>{});
  __syncthreads();
  pdl_enter();
  // Development trace (qkv/qkv_trace.h): this CTA's slots, or null. The first consumer thread stamps the phases.
  unsigned long long* const trace = kTrace && kp.trace != nullptr && static_cast<int>(blockIdx.x) < kp.trace_ctas
                                        ? kp.trace + static_cast<size_t>(blockIdx.x) * kSplitKTraceSlots
                                        : nullptr;
  const bool tracer = trace != nullptr && threadIdx.x == 128;
  if (trace != nullptr && threadIdx.x == 0) {
    unsigned smid;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(smid));
    trace[0] = globaltimer_ns();
    trace[6] = smid;
    trace[7] = static_cast<unsigned long long>(rank);
  }

  QkvGroup const& grp = p.groups[c.group];
  if (warp_group == 0) {
    // SplitKTraits: at 40 the producer's k-range address math spilled (108 B; ncu at 007 M=128
    // counted 81832 local-memory requests).
    cutlass::arch::warpgroup_reg_dealloc<T::ProducerRegs>();
    if (threadIdx.x == 0) {
      auto state = cutlass::make_producer_start_state<Pipeline>();
      const int n_group = grp.heads * kQkvHeadDim;
      with_group_tma(kp, c.group, [&](auto const& tma_b) {
        produce_tile<T>(kp.tma_a, tma_b, p.m, n_group, p.k, c.m_tile, c.head, pipeline, state, ss.mainloop.a.data(),
                        ss.mainloop.b.data(), kt_begin, kt_end);
      });
    }
    // The producer warpgroup reads no peer's shared memory: it passes the partials' barrier and arrives at once.
    cute::cluster_arrive();
    cute::cluster_wait();
    cute::cluster_arrive_relaxed();
  } else {
    cutlass::arch::warpgroup_reg_alloc<T::ConsumerRegs>();
    const int t = threadIdx.x - 128;
    const int row0 = c.m_tile * T::TileM;
    const int row_begin = rank * T::TileM / splits, row_end = (rank + 1) * T::TileM / splits;  // this rank's rows
    // The reduction: 256 threads x 4 columns, each thread sums a float4 of a row over the S partials. A thread's
    // columns are the same on every row, so its 4 bias values are loaded once, here, before the mainloop: on a cold
    // call that load is a DRAM round trip, which the partials' barrier would otherwise wait for.
    constexpr int kColsPerThread = 4, kThreadsPerRow = T::BN / kColsPerThread, kRowStep = 256 / kThreadsPerRow;
    const int col = (t % kThreadsPerRow) * kColsPerThread;
    const auto* bias = static_cast<const __nv_bfloat16*>(grp.bias);
    float bias4[kColsPerThread];
#pragma unroll
    for (int j = 0; j < kColsPerThread; ++j)
      bias4[j] = bias != nullptr ? __bfloat162float(bias[c.head * kQkvHeadDim + col + j]) : 0.0f;

    typename T::TiledMma mma;
    auto thr = mma.get_thread_slice(t);
    Tensor sA = make_tensor(make_smem_ptr(ss.mainloop.a.data()), typename T::SmemLayoutA{});
    Tensor sB = make_tensor(make_smem_ptr(ss.mainloop.b.data()), typename T::SmemLayoutB{});
    Tensor tCrA = thr.make_fragment_A(thr.partition_A(sA));
    Tensor tCrB = thr.make_fragment_B(thr.partition_B(sB));
    Tensor acc = partition_fragment_C(mma, Shape<Int<T::TileM>, Int<T::BN>>{});
    typename T::PipelineState read{}, release{};
    mma.accumulate_ = GMMA::ScaleOut::Zero;  // the host guarantees every split at least one k tile
#pragma unroll 1
    for (int kt = kt_begin; kt < kt_end; ++kt) {
      pipeline.consumer_wait(read);
      if (tracer) {
        if (kt == kt_begin) trace[1] = globaltimer_ns();
        if (kt == kt_end - 1) trace[2] = globaltimer_ns();
      }
      warpgroup_fence_operand(acc);
      warpgroup_arrive();
#pragma unroll
      for (int kb = 0; kb < size<2>(tCrA); ++kb) {
        cute::gemm(mma, tCrA(_, _, kb, read.index()), tCrB(_, _, kb, read.index()), acc);
        mma.accumulate_ = GMMA::ScaleOut::One;
      }
      warpgroup_commit_batch();
      warpgroup_wait<1>();
      warpgroup_fence_operand(acc);
      if (kt > kt_begin) {
        // Not pipeline.consumer_release(): with a (1,1,1) pipeline it signals cluster rank 0's
        // barrier, which in this real cluster is another CTA's. The ring is CTA-local.
        ss.pipeline.empty_barrier_[release.index()].arrive();
        ++release;
      }
      ++read;
    }
    warpgroup_wait<0>();
    warpgroup_fence_operand(acc);
    // Both warpgroups' wgmmas have read the stage buffers before they become the partial tile.
    cutlass::arch::NamedBarrier::arrive_and_wait(256, 0);
    Tensor tCcC = thr.partition_C(make_identity_tensor(Shape<Int<T::TileM>, Int<T::BN>>{}));
#pragma unroll
    for (int i = 0; i < size(acc); ++i) ss.red[get<0>(tCcC(i)) * T::RedPitch + get<1>(tCcC(i))] = acc(i);
    ss.inv_freq[t % 128] = channel_inv_freq(p.rope, grp.rope, t % 128);

    // The RoPE epilogue's cos/sin for 16-byte table chunks (kTable with tab_vec16: 007's mRoPE tables), this
    // thread's first kPrePasses rows (16 threads per row, 16 rows per pass), loaded here, before the partials'
    // barrier, so that their round trips overlap the barrier and the reduction instead of following them.
    constexpr int kChunks = kQkvHeadDim / 8, kEpiRows = 256 / kChunks, kPrePasses = 4;
    const int c0 = (t % kChunks) * 8;
    const bool pre = grp.rope == RopeMode::kTable && p.rope.tab_vec16;
    Vec8 pre_cos[kPrePasses], pre_sin[kPrePasses];
#pragma unroll
    for (int i = 0; i < kPrePasses; ++i) {
      const int r = row_begin + t / kChunks + i * kEpiRows, m = row0 + r;
      pre_cos[i].u = pre_sin[i].u = make_uint4(0, 0, 0, 0);
      if (pre && r < row_end && m < p.m) {
        const int b = m / p.seq;
        const int64_t off = table_chunk_offset(p.rope, b, m - b * p.seq, c0);
        pre_cos[i].u = __ldg(reinterpret_cast<const uint4*>(static_cast<const __nv_bfloat16*>(p.rope.cos) + off));
        pre_sin[i].u = __ldg(reinterpret_cast<const uint4*>(static_cast<const __nv_bfloat16*>(p.rope.sin) + off));
      }
    }

    // Every partial tile of the cluster is in shared memory (release/acquire across the cluster).
    cute::cluster_arrive();
    cute::cluster_wait();
    if (tracer) trace[3] = globaltimer_ns();

    // Two rows per iteration, every rank's partial of both loaded before the sums (independent remote loads in
    // flight together, not one round trip per row), each summed in rank order: the same sum on every run.
    auto* staging = reinterpret_cast<__nv_bfloat16*>(ss.staging.data());
    auto sum_store = [&](int r, float4 const (&part)[T::MaxSplits]) {
      float4 sum = part[0];
#pragma unroll
      for (int q = 1; q < T::MaxSplits; ++q) {
        if (q < splits) {
          sum.x = __fadd_rn(sum.x, part[q].x);
          sum.y = __fadd_rn(sum.y, part[q].y);
          sum.z = __fadd_rn(sum.z, part[q].z);
          sum.w = __fadd_rn(sum.w, part[q].w);
        }
      }
      const float v[4] = {sum.x, sum.y, sum.z, sum.w};
#pragma unroll
      for (int j = 0; j < 4; ++j)
        staging[r * T::StagePitch + col + j] = __float2bfloat16_rn(bias != nullptr ? __fadd_rn(v[j], bias4[j]) : v[j]);
    };
#pragma unroll 1
    for (int r = row_begin + t / kThreadsPerRow; r < row_end; r += 2 * kRowStep) {
      const int r2 = r + kRowStep;
      float4 part_a[T::MaxSplits], part_b[T::MaxSplits];
#pragma unroll
      for (int q = 0; q < T::MaxSplits; ++q) {
        if (q < splits) {
          part_a[q] = ld_dsmem_f4(&ss.red[r * T::RedPitch + col], q);
          if (r2 < row_end) part_b[q] = ld_dsmem_f4(&ss.red[r2 * T::RedPitch + col], q);
        }
      }
      sum_store(r, part_a);
      if (r2 < row_end) sum_store(r2, part_b);
    }
    // The exit barrier's arrive: this thread's reads of its peers' partial tiles are done (their values are in
    // the sums above), so it arrives here, relaxed (nothing it wrote need be visible to a peer), and the RoPE
    // epilogue below runs before the wait instead of every CTA waiting there for its slowest peer's epilogue.
    cute::cluster_arrive_relaxed();
    cutlass::arch::NamedBarrier::arrive_and_wait(256, 0);
    if (tracer) trace[4] = globaltimer_ns();
    if (pre) {
#pragma unroll
      for (int i = 0; i < kPrePasses; ++i) {
        const int r = row_begin + t / kChunks + i * kEpiRows, m = row0 + r;
        if (r < row_end && m < p.m) {
          float cs[8], sn[8];
          unpack_cos_sin(pre_cos[i], pre_sin[i], cs, sn);
          const int b = m / p.seq;
          rope_store_chunk(p, grp, c.head, b, m - b * p.seq, staging + r * T::StagePitch, c0, cs, sn);
        }
      }
    }
    // Rows not preloaded above (all of them without `pre`; beyond kPrePasses passes with it: 256-row tiles or one
    // split): cos/sin read in the pass.
    rope_store_rows<1, 1>(p, grp, c.head, row0, pre ? row_begin + kPrePasses * kEpiRows : row_begin, row_end, t, 256,
                          staging, T::StagePitch, ss.inv_freq);
  }
  // No CTA may leave while a peer can still read its partial tile: every thread of the cluster has arrived above.
  cute::cluster_wait();
  if (tracer) trace[5] = globaltimer_ns();
#endif
}

// ---------------------------------------------------------------------------------------------
// Large M with B multicast (config m128mc): the ping-pong kernel in clusters of 2 CTAs along M.
//
// The two CTAs of a cluster work in lockstep on "pair tiles": pair tile u = (row pair u / n_tiles,
// head u % n_tiles) gives CTA rank r the 128-row tile 2 * (u / n_tiles) + r of the same head, so
// both need the same 128 x 64 weight slab per k step. Each CTA loads its own A tile and 64 of the
// 128 weight rows, multicast into both CTAs' stage (SM90_TMA_LOAD_MULTICAST, mask 0b11): per CTA
// and k step 24 KB leave L2 instead of 32 KB. Every stage's full barrier therefore completes on
// three TMA transfers (own A, own B half, the peer's B half) = the whole stage's bytes, and a stage
// may be refilled only when BOTH CTAs' consumers have released it (the peer writes into it):
// PipelineTmaAsync built with the real cluster shape (2,1,1) counts 2 arrivals per empty barrier
// and makes two threads of each consumer warpgroup signal, one per CTA.
// Both CTAs walk the same pair-tile sequence, so their rings stay in step. An odd number of row
// tiles pads the last pair: rank 1's tile then starts at or beyond row M, its TMA box reads zeros
// and the epilogue stores nothing (rope_store_rows stops at row M); its B half is still loaded,
// because rank 0 needs it. Before exit the producer waits until every stage has been released by
// both CTAs (producer_tail), so no peer arrives on, or writes into, a finished CTA's shared memory.
// The per-CTA mainloop, the ping-pong turns and the epilogue are those of qkv_rope_kernel.
// ---------------------------------------------------------------------------------------------
template <int Stages_>
struct McTraits : QkvTraits<128, Stages_> {
  using Base = QkvTraits<128, Stages_>;
  static constexpr int ClusterM = 2;  // CTAs per cluster, along M; they share (multicast) the B tile
  static constexpr uint16_t McastMask = uint16_t((1u << ClusterM) - 1);
  static_assert(Base::BN % ClusterM == 0 && (Base::BN / ClusterM) % 8 == 0,
                "each CTA multicasts whole 8-row SW128 atoms of the B tile");
  static_assert(Base::SmemBytes <= 227 * 1024, "sm_90 allows 227 KB of shared memory per CTA");
  static_assert(128 * (Base::ConsumerWGs * Base::ConsumerRegs + Base::ProducerRegs) <= 65536, "register file");
};

// Producer of the multicast kernel: this CTA's A rows and its 1/ClusterM share of the weight rows
// (multicast to every CTA of the cluster) for each k tile of one tile.
template <class T, class TmaA, class TmaB>
CUTLASS_DEVICE void produce_tile_mc(TmaA const& tma_a, TmaB const& tma_b, int m, int n_group, int k, int m_tile,
                                    int head, int rank, typename T::Pipeline& pipeline,
                                    typename T::PipelineState& state, typename T::Element* smem_a,
                                    typename T::Element* smem_b) {
  Tensor mA = tma_a.get_tma_tensor(make_shape(m, k));
  Tensor mB = tma_b.get_tma_tensor(make_shape(n_group, k));
  Tensor gA = local_tile(mA, Shape<Int<T::TileM>, Int<T::BK>>{}, make_coord(m_tile, _));  // (TileM, BK, k)
  Tensor gB = local_tile(mB, Shape<Int<T::BN>, Int<T::BK>>{}, make_coord(head, _));       // (BN, BK, k)
  Tensor sA = make_tensor(make_smem_ptr(smem_a), typename T::SmemLayoutA{});
  Tensor sB = make_tensor(make_smem_ptr(smem_b), typename T::SmemLayoutB{});
  auto [tAgA, tAsA] = tma_partition(tma_a, Int<0>{}, Layout<_1>{}, group_modes<0, 2>(sA), group_modes<0, 2>(gA));
  // Rank r's slice of the multicast box: weight rows [r * BN / ClusterM, (r + 1) * BN / ClusterM).
  auto [tBgB, tBsB] = tma_partition(tma_b, rank, Layout<Int<T::ClusterM>>{}, group_modes<0, 2>(sB),
                                    group_modes<0, 2>(gB));
  const uint16_t mcast_mask = T::McastMask;  // a local: .with() takes the mask by reference
  const int k_tiles = size<1>(tAgA);
  for (int kt = 0; kt < k_tiles; ++kt) {
    pipeline.producer_acquire(state);  // both CTAs released the stage; arms it with the whole stage's bytes
    auto* bar = pipeline.producer_get_barrier(state);
    copy(tma_a.with(*bar), tAgA(_, kt), tAsA(_, state.index()));
    copy(tma_b.with(*bar, mcast_mask), tBgB(_, kt), tBsB(_, state.index()));
    ++state;
  }
}

template <class T, class TmaA, class TmaB>
__global__ void __launch_bounds__(T::Threads, 1)
    qkv_rope_mc_kernel(CUTLASS_GRID_CONSTANT QkvKernelParams<TmaA, TmaB> const kp) {
#if defined(CUTLASS_ARCH_MMA_SM90A_ENABLED)
  using Pipeline = typename T::Pipeline;
  extern __shared__ __align__(1024) char smem_raw[];
  auto& ss = *reinterpret_cast<typename T::SharedStorage*>(smem_raw);
  QkvParams const& p = kp.p;
  const int warp_group = threadIdx.x / 128;
  // A 1-D grid of (ClusterM, 1, 1) clusters: cluster c holds blocks [c * ClusterM, (c + 1) * ClusterM).
  const int rank = static_cast<int>(cute::block_rank_in_cluster());
  const int cluster = static_cast<int>(blockIdx.x) / T::ClusterM;
  const int clusters = static_cast<int>(gridDim.x) / T::ClusterM;

  // Per stage: A + the whole B tile (both halves land in this CTA's stage); per CTA, the one warpgroup
  // that owns the stage's tile reads it.
  const auto pp = pipeline_params<T>(warp_group, 128);
  // The real cluster shape: empty barriers count one arrival per CTA of the cluster, and each
  // consumer warpgroup signals both CTAs' barriers (consumer_release).
  Pipeline pipeline(ss.pipeline, pp, Shape<Int<T::ClusterM>, _1, _1>{});
  // Every CTA's barriers are initialised before a peer can multicast into them or arrive on them.
  cute::cluster_sync();
  pdl_enter();

  const int k_tiles = (p.k + T::BK - 1) / T::BK;
  if (warp_group == 0) {
    cutlass::arch::warpgroup_reg_dealloc<T::ProducerRegs>();
    if (threadIdx.x == 0) {
      auto state = cutlass::make_producer_start_state<Pipeline>();
      for (int u = cluster; u < kp.num_tiles; u += clusters) {
        const TileCoord c = tile_coord(kp, u);  // c.m_tile: the row pair
        const int m_tile = c.m_tile * T::ClusterM + rank;
        const int n_group = p.groups[c.group].heads * kQkvHeadDim;
        if (c.group == 0)
          produce_tile_mc<T>(kp.tma_a, kp.tma_b[0], p.m, n_group, p.k, m_tile, c.head, rank, pipeline, state,
                             ss.a.data(), ss.b.data());
        else if (c.group == 1)
          produce_tile_mc<T>(kp.tma_a, kp.tma_b[1], p.m, n_group, p.k, m_tile, c.head, rank, pipeline, state,
                             ss.a.data(), ss.b.data());
        else
          produce_tile_mc<T>(kp.tma_a, kp.tma_b[2], p.m, n_group, p.k, m_tile, c.head, rank, pipeline, state,
                             ss.a.data(), ss.b.data());
      }
      // Do not leave while a peer may still arrive on this CTA's empty barriers.
      pipeline.producer_tail(state);
    }
    return;
  }

  cutlass::arch::warpgroup_reg_alloc<T::ConsumerRegs>();
  // As in qkv_rope_kernel, over the cluster's pair tiles; rank r computes row tile 2j + r of pair j.
  pingpong_consumers<T>(kp, ss, pipeline, k_tiles, cluster, clusters,
                        [rank](TileCoord const& c) { return c.m_tile * T::ClusterM + rank; });
#endif
}

// ---------------------------------------------------------------------------------------------
// Config kGemmRope, second pass: RoPE + head-major store of projections computed by the CUTLASS
// GEMMs (bias already added and rounded to bf16, as F.linear). Block: 16 rows x a run of heads of one
// group (heads_per_block, chosen on the host so that the grid still fills every SM's block slots).
// Each thread owns one 16-byte chunk of one row: it computes that chunk's cos/sin once for all of
// the block's heads, then walks the heads kRopeRowsHeads at a time through a kRopeRowsStages-deep ring
// of shared-memory buffers filled by cp.async (two steps in flight while one is rotated and stored:
// the RoPE partners, d +- 64 or the t/h/w segment partners, come from the staged rows).
// History (H200, bench/NOTES.md): one block per 4 heads with register loads, 4 x 16 bytes per thread
// and one step per block, ran at 1.9-2.5 TB/s on 034 Lq 8192 (Q 53.6 us, K/V 55.1 us, ninth session);
// a whole group per block with registers only was ~3x its memory time at 1024 rows of 007; 8 heads
// per block in registers lost occupancy (seventh session).
// ---------------------------------------------------------------------------------------------
constexpr int kRopeRowsThreads = 256;
constexpr int kRopeRowsChunks = kQkvHeadDim / 8;                        // 16-byte chunks per head row
constexpr int kRopeRowsPerBlock = kRopeRowsThreads / kRopeRowsChunks;  // 16
constexpr int kRopeRowsHeads = kRopePassStepHeads;  // heads per pipeline step: 4 x 16 bytes per thread
static_assert(kRopeRowsPerBlock == kRopePassRows, "qkv_config.h sizes the pass's grid with these rows");
constexpr int kRopeRowsStages = 3;  // ring depth: steps i+1 and i+2 in flight while step i is rotated
constexpr int kRopeRowsStepElems = kRopeRowsHeads * kRopeRowsPerBlock * kQkvHeadDim;
constexpr int kRopeRowsSmemBytes = kRopeRowsStages * kRopeRowsStepElems * 2;  // 48 KB (dynamic)
// Resident blocks per SM the compiler must allow (<= 64 registers): the host sizes heads_per_block
// for this many blocks per SM.
constexpr int kRopeRowsMinBlocks = kRopePassBlocksPerSm;
static_assert(kRopeRowsMinBlocks * (kRopeRowsSmemBytes + kQkvHeadDim * 4) <= 227 * 1024,
              "the resident blocks' shared memory must fit in an SM");

struct RopeRowsParams {
  QkvParams p;
  const __nv_bfloat16* y[kQkvMaxGroups];
  int64_t ldy[kQkvMaxGroups];
  int heads_per_block[kQkvMaxGroups];  // a multiple of kRopeRowsHeads
  int chunk_first[kQkvMaxGroups + 1];  // prefix sums of ceil(heads / heads_per_block): blockIdx.y -> group
  // The launch's cos/sin precomputed by rope_table_kernel (nullptr: computed in the pass): bf16 cos
  // [m, 128] then sin [m, 128], for the groups with a position mode (kPos1D / kPos3D; a launch gets a
  // table only when one position mode appears among its groups, rope_table_mode()).
  const __nv_bfloat16* tab;
};

// 034's t/h/w rotate-halves in the pass: rope_chunk's kPos3D branch walks the segments for every
// channel of every head (~4 x 8 walks per thread per step in the K blocks). Here the block writes each
// channel's partner (0..127) once into a 128-byte shared table (partners_3d, before the pass's first
// barrier) and rope_chunk_3d reads a chunk's eight with one 8-byte load per head. Kept in registers
// across the heads, the eight partners spilled at the pass's 64 registers. No sign is stored: a
// rotate-half partner lies above its channel exactly when the sign is negative (rope::rotate_half_pair).
// It also lists the 64 rotate-half pairs by their first channel (partner_of[128 + p] for pair p = rope::thw_pair_index,
// which tests/cpp checks is a bijection onto 0..63 for even splits summing to 128; pos3d_cos_sin_split reads it).
constexpr int kPartnerTableBytes = kQkvHeadDim + kQkvHeadDim / 2;
CUTLASS_DEVICE void partners_3d(QkvRope const& rope, uint8_t* partner_of, int t) {
  if (t < kQkvHeadDim) {
    const rope::Segment seg = rope::thw_segment(t, rope.split);
    partner_of[t] = static_cast<uint8_t>(rope::rotate_half_pair(t, seg.base, seg.width).partner);
    const int pair = rope::thw_pair_index(t, rope.split);
    if (pair >= 0) partner_of[kQkvHeadDim + pair] = static_cast<uint8_t>(t);
  }
}

// rope_chunk's kPos3D branch with the partners from partners_3d: the same operations on the same operands.
CUTLASS_DEVICE Vec8 rope_chunk_3d(const __nv_bfloat16* row, int c0, Vec8 x, const uint8_t* partner_of,
                                  const float (&cs)[8], const float (&sn)[8]) {
  const uint2 packed = *reinterpret_cast<const uint2*>(partner_of + c0);
  uint16_t rot[8];  // the rotate-half operand's bf16 bits, the sign applied (exact)
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    const int partner_c = static_cast<int>(((j < 4 ? packed.x : packed.y) >> (8 * (j % 4))) & 0xffu);
    // First half of its segment (the partner lies above): -x2.
    rot[j] = static_cast<uint16_t>(__bfloat16_as_ushort(row[partner_c]) ^ (partner_c > c0 + j ? 0x8000u : 0u));
  }
  return rope_pairs_signed(x, rot, cs, sn);
}

// Channels c0..c0+7 of row m from a precomputed table (cos [m_rows, 128], then sin): the bf16 values
// chunk_cos_sin computes, so the same floats.
CUTLASS_DEVICE void table_cos_sin(const __nv_bfloat16* tab, int m_rows, int m, int c0, float (&cs)[8], float (&sn)[8]) {
  Vec8 c8, s8;
  c8.u = __ldg(reinterpret_cast<const uint4*>(tab + int64_t(m) * kQkvHeadDim + c0));
  s8.u = __ldg(reinterpret_cast<const uint4*>(tab + (int64_t(m_rows) + m) * kQkvHeadDim + c0));
  unpack_cos_sin(c8, s8, cs, sn);
}

// chunk_cos_sin's kPos1D values for the RoPE pass, half the trigonometry per thread: channels c and c +- 64
// share the row's position and their frequency (index c mod 64), so a chunk (c0..c0+7) and the lane 8 away
// in the warp (the chunk c0 ^ 64 of the same row, kRopeRowsChunks = 16 lanes per row) need the same eight
// cos/sin pairs. Each computes four (the low half of the head channels j = 0..3, the high half j = 4..7)
// with pos_cos_sin on the same operands as chunk_cos_sin, and takes the other four from that lane: the same
// floats. Every lane of the warp must call it (rows past p.m with b = s = 0: a valid position entry).
CUTLASS_DEVICE void pos1d_cos_sin_split(QkvRope const& rope, int b, int s, int c0, const float* inv_freq_of,
                                        float (&cs)[8], float (&sn)[8]) {
  static_assert(kRopeRowsChunks == 16 && kQkvHeadDim == 128, "lane ^ 8 holds chunk c0 ^ 64 of the same row");
  const int64_t pos = rope.pos[b * rope.pos_batch_stride + s * rope.pos_seq_stride];
  const bool high = (c0 & (kQkvHeadDim / 2)) != 0;  // this lane computes j = 4..7, else j = 0..3
  const int mine = high ? 4 : 0;
  float c4[4], s4[4];
#pragma unroll
  for (int jj = 0; jj < 4; ++jj) pos_cos_sin(pos, inv_freq_of[c0 + mine + jj], c4[jj], s4[jj]);
  // Static register indices only (a j chosen at run time would put cs / sn in local memory).
#pragma unroll
  for (int jj = 0; jj < 4; ++jj) {
    const float oc = __shfl_xor_sync(0xffffffffu, c4[jj], 8), os = __shfl_xor_sync(0xffffffffu, s4[jj], 8);
    cs[jj] = high ? oc : c4[jj];
    sn[jj] = high ? os : s4[jj];
    cs[4 + jj] = high ? c4[jj] : oc;
    sn[4 + jj] = high ? s4[jj] : os;
  }
}

// chunk_cos_sin's kPos3D values for the RoPE pass, half the trigonometry per thread: a channel and its
// rotate-half partner lie in one segment (the same t/h/w position) and share the frequency index, so they need
// the same cos/sin. The 64 pairs of a row are dealt 4 per lane (pair p's first channel: partner_of[128 + p],
// partners_3d); a lane computes its 4 with pos_cos_sin on chunk_cos_sin's operands for the first channel (the
// partner's are the same floats), stores them as bf16 (exact: they are bf16 values) for both channels into
// `xchg` (cos [kRopeRowsPerBlock][128], then sin), and after a block barrier reads its chunk's 8. Every thread of
// the block must call it, after partner_of is written and a barrier (rows past p.m pass b = s = 0).
CUTLASS_DEVICE void pos3d_cos_sin_split(QkvRope const& rope, int b, int s, int r, int c0, const float* inv_freq_of,
                                        const uint8_t* partner_of, __nv_bfloat16* xchg, float (&cs)[8], float (&sn)[8]) {
  static_assert(kRopeRowsChunks * 4 == kQkvHeadDim / 2, "4 pairs per lane cover a row's 64");
  const int64_t* pos = rope.pos + b * rope.pos_batch_stride + s * rope.pos_seq_stride;
  __nv_bfloat16* xc = xchg + r * kQkvHeadDim;
  __nv_bfloat16* xs = xchg + (kRopeRowsPerBlock + r) * kQkvHeadDim;
  const uint32_t firsts = *reinterpret_cast<const uint32_t*>(partner_of + kQkvHeadDim + c0 / 2);  // pairs c0/2 ..
#pragma unroll
  for (int q = 0; q < 4; ++q) {
    const int c = static_cast<int>((firsts >> (8 * q)) & 0xffu);
    float cv, sv;
    pos_cos_sin(channel_position(rope, RopeMode::kPos3D, pos, c), inv_freq_of[c], cv, sv);
    const int partner = partner_of[c];
    xc[c] = xc[partner] = __float2bfloat16_rn(cv);
    xs[c] = xs[partner] = __float2bfloat16_rn(sv);
  }
  __syncthreads();
  Vec8 c8, s8;
  c8.u = *reinterpret_cast<const uint4*>(xc + c0);
  s8.u = *reinterpret_cast<const uint4*>(xs + c0);
  unpack_cos_sin(c8, s8, cs, sn);
}

// One block's rows and heads with the group's RoPE mode M known at compile time (the block's group is
// uniform): the other modes' code (accurate sincosf, the t/h/w segment maps) is not in the path, so the
// instruction footprint is the mode's own (ncu, 2026-11-30: "no instruction" was the pass's top stall).
template <RopeMode M>
CUTLASS_DEVICE void rope_rows_block(RopeRowsParams const& rp, int g, float* inv_freq, uint8_t* partner_of,
                                     __nv_bfloat16* ring) {
  QkvParams const& p = rp.p;
  QkvGroup const& grp = p.groups[g];
  constexpr bool kRotate = M != RopeMode::kNone;
  const int hpb = g == 0 ? rp.heads_per_block[0] : g == 1 ? rp.heads_per_block[1] : rp.heads_per_block[2];
  const int h_begin = (static_cast<int>(blockIdx.y) - rp.chunk_first[g]) * hpb;
  const int h_end = min(grp.heads, h_begin + hpb);  // uniform over the block
  const int steps = (h_end - h_begin + kRopeRowsHeads - 1) / kRopeRowsHeads;
  const int t = static_cast<int>(threadIdx.x);
  constexpr bool kPosMode = M == RopeMode::kPos1D || M == RopeMode::kPos3D;
  const bool from_table = kPosMode && rp.tab != nullptr;  // uniform over the grid
  if constexpr (kPosMode) {
    if (!from_table) {
      if (t < kQkvHeadDim) inv_freq[t] = channel_inv_freq(p.rope, M, t);  // no global memory
      if constexpr (M == RopeMode::kPos3D) partners_3d(p.rope, partner_of, t);  // pos3d_cos_sin_split reads it
      __syncthreads();
    }
  }
  pdl_enter();  // y comes from the GEMMs launched just before (and the table from the kernel before it)
  const int r = t / kRopeRowsChunks;
  const int m = static_cast<int>(blockIdx.x) * kRopeRowsPerBlock + r;
  const bool live = m < p.m;
  const int c0 = (t % kRopeRowsChunks) * 8;
  const int64_t ldy = g == 0 ? rp.ldy[0] : g == 1 ? rp.ldy[1] : rp.ldy[2];
  const __nv_bfloat16* y_row = (g == 0 ? rp.y[0] : g == 1 ? rp.y[1] : rp.y[2]) + int64_t(live ? m : 0) * ldy;
  // Ring layout [stage][head][row][channel]; this thread's row of head h in stage st:
  auto staged_row = [&](int st, int h) { return ring + ((st * kRopeRowsHeads + h) * kRopeRowsPerBlock + r) * kQkvHeadDim; };
  // Step i's copies (heads h_begin + 4i ..), one commit group per step, empty past the last step so
  // that cp.async.wait_group counts stay uniform.
  auto issue = [&](int step) {
    if (live && step < steps) {
      const int hs = h_begin + step * kRopeRowsHeads;
#pragma unroll
      for (int h = 0; h < kRopeRowsHeads; ++h)
        if (hs + h < h_end)
          cutlass::arch::cp_async<16, cutlass::arch::CacheOperation::Global>(
              staged_row(step % kRopeRowsStages, h) + c0, y_row + (hs + h) * kQkvHeadDim + c0, true);
    }
    cutlass::arch::cp_async_fence();
  };
  static_assert(kRopeRowsStages == 3, "the prologue below fills stages - 1 = 2 steps");
  issue(0);
  issue(1);
  // cos/sin of this thread's channels: once for all of the block's heads, while the first copies fly.
  const int b = live ? m / p.seq : 0, s = live ? m - b * p.seq : 0;
  float cs[8], sn[8];
  if constexpr (M == RopeMode::kPos1D) {
    if (from_table) {
      if (live) table_cos_sin(rp.tab, p.m, m, c0, cs, sn);
    } else {
      pos1d_cos_sin_split(p.rope, b, s, c0, inv_freq, cs, sn);  // every lane: it shuffles
    }
  } else if constexpr (M == RopeMode::kPos3D) {
    if (from_table) {
      if (live) table_cos_sin(rp.tab, p.m, m, c0, cs, sn);
      partners_3d(p.rope, partner_of, t);  // read after the step's barrier
    } else {
      // Every thread (a block barrier inside). The exchange tile is the ring's third stage, which the first
      // copy into it (issue(2), after the loop's first barrier) overwrites only after every lane has read it.
      static_assert(kRopeRowsStages >= 3 && 2 * kRopeRowsPerBlock * kQkvHeadDim <= kRopeRowsStepElems,
                    "the cos/sin exchange fits in a ring stage the prologue leaves empty");
      pos3d_cos_sin_split(p.rope, b, s, r, c0, inv_freq, partner_of, ring + 2 * kRopeRowsStepElems, cs, sn);
    }
  } else if constexpr (kRotate) {
    if (live) {
      if (from_table)
        table_cos_sin(rp.tab, p.m, m, c0, cs, sn);
      else
        chunk_cos_sin<true>(p.rope, M, b, s, c0, inv_freq, cs, sn);
    }
  }
  const int64_t head_stride = int64_t(p.seq) * kQkvHeadDim;
  auto* out = static_cast<__nv_bfloat16*>(grp.out) + (int64_t(b) * grp.heads * p.seq + s) * kQkvHeadDim + c0;
#pragma unroll 1
  for (int step = 0; step < steps; ++step) {
    cutlass::arch::cp_async_wait<kRopeRowsStages - 2>();  // this thread's copies of step `step` landed
    __syncthreads();  // every thread's (partners); and every thread is done with step - 1's stage
    issue(step + kRopeRowsStages - 1);                    // into step - 1's stage
    if (live) {
      const int hs = h_begin + step * kRopeRowsHeads;
#pragma unroll
      for (int h = 0; h < kRopeRowsHeads; ++h) {
        if (hs + h < h_end) {
          const __nv_bfloat16* row = staged_row(step % kRopeRowsStages, h);
          Vec8 o;
          o.u = *reinterpret_cast<const uint4*>(row + c0);
          if constexpr (M == RopeMode::kPos3D)
            o = rope_chunk_3d(row, c0, o, partner_of, cs, sn);
          else if constexpr (kRotate)
            o = rope_chunk(p.rope, M, row, c0, o, cs, sn);
          *reinterpret_cast<uint4*>(out + (hs + h) * head_stride) = o.u;
        }
      }
    }
  }
  cutlass::arch::cp_async_wait<0>();  // only empty groups are left; nothing outlives the block
}

// The RoPE passes of up to two launches of one op in one grid (034: the text's q and the vision
// tokens' k and v, whose GEMMs all ran before it): blockIdx.z picks the launch, and a block past that
// launch's own (x, y) grid exits at once (an exited block counts as triggered for PDL).
constexpr int kRopeRowsMaxLaunches = 2;
struct RopeRowsLaunches {
  RopeRowsParams launch[kRopeRowsMaxLaunches];
  unsigned blocks_x[kRopeRowsMaxLaunches];
  unsigned blocks_y[kRopeRowsMaxLaunches];
};

// kModes: bit (1 << mode) for every RopeMode a group of the launch uses (rope_rows_modes() on the
// host); a block whose group has another mode cannot occur.
template <int kModes>
CUTLASS_DEVICE void rope_rows_launch(RopeRowsParams const& rp, float* inv_freq, uint8_t* partner_of,
                                      __nv_bfloat16* ring) {
  QkvParams const& p = rp.p;
  const int y_block = static_cast<int>(blockIdx.y);
  int g = 0;
  while (g + 1 < p.num_groups && y_block >= rp.chunk_first[g + 1]) ++g;
  switch (p.groups[g].rope) {
    case RopeMode::kNone:
      if constexpr ((kModes & (1 << int(RopeMode::kNone))) != 0) rope_rows_block<RopeMode::kNone>(rp, g, inv_freq, partner_of, ring);
      break;
    case RopeMode::kTable:
      if constexpr ((kModes & (1 << int(RopeMode::kTable))) != 0) rope_rows_block<RopeMode::kTable>(rp, g, inv_freq, partner_of, ring);
      break;
    case RopeMode::kPos1D:
      if constexpr ((kModes & (1 << int(RopeMode::kPos1D))) != 0) rope_rows_block<RopeMode::kPos1D>(rp, g, inv_freq, partner_of, ring);
      break;
    case RopeMode::kPos3D:
      if constexpr ((kModes & (1 << int(RopeMode::kPos3D))) != 0) rope_rows_block<RopeMode::kPos3D>(rp, g, inv_freq, partner_of, ring);
      break;
  }
}

// kLaunches (1 or 2): the launches in the grid. Each launch's branch reads its parameters at fixed
// offsets: a parameter pointer chosen at run time cost the all-modes kernel a spilled register.
template <int kModes, int kLaunches>
__global__ void __launch_bounds__(kRopeRowsThreads, kRopeRowsMinBlocks)
    qkv_rope_rows_kernel(CUTLASS_GRID_CONSTANT RopeRowsLaunches const rl) {
#if defined(CUTLASS_ARCH_MMA_SM90A_ENABLED)
  static_assert(kLaunches >= 1 && kLaunches <= kRopeRowsMaxLaunches, "one or two launches per pass");
  __shared__ float inv_freq[kQkvHeadDim];
  __shared__ __align__(8) uint8_t partner_of[kPartnerTableBytes];  // kPos3D blocks: partners_3d
  extern __shared__ __align__(16) unsigned char rope_rows_ring[];
  auto* ring = reinterpret_cast<__nv_bfloat16*>(rope_rows_ring);
  if (kLaunches == 1 || blockIdx.z == 0) {
    if (blockIdx.x < rl.blocks_x[0] && blockIdx.y < rl.blocks_y[0]) rope_rows_launch<kModes>(rl.launch[0], inv_freq, partner_of, ring);
  } else if constexpr (kLaunches == 2) {
    if (blockIdx.x < rl.blocks_x[1] && blockIdx.y < rl.blocks_y[1]) rope_rows_launch<kModes>(rl.launch[1], inv_freq, partner_of, ring);
  }
#endif
}

// ---------------------------------------------------------------------------------------------
// cos/sin tables for the RoPE pass of few rows (qkv_rope_table_pays): one thread per (row, channel)
// computes what chunk_cos_sin computes for that channel (the same helpers, the same operands) and
// stores it as bf16: cos [m, 128], then sin [m, 128]. The pass then reads 2 x 16 bytes per chunk
// instead of running 8 accurate cosf/sinf pairs per thread: at 034 B2 Lq128 the pass was 15 us for ~3 MB
// (ncu: ~1300 instructions per warp at ~15 cycles each, mostly the trig and the t/h/w pair walks),
// a latency chain no SM could hide with 3 warps per scheduler.
// ---------------------------------------------------------------------------------------------
constexpr int kRopeTableThreads = 2 * kQkvHeadDim;  // two rows per block
struct RopeTableParams {
  QkvRope rope;
  RopeMode mode = RopeMode::kNone;  // kPos1D or kPos3D
  int m = 0, seq = 0;
  __nv_bfloat16* tab = nullptr;  // cos [m, 128], then sin [m, 128]
};
struct RopeTableLaunches {
  RopeTableParams launch[kRopeRowsMaxLaunches];  // a launch with m == 0 has no table
};

template <RopeMode M>
CUTLASS_DEVICE void rope_table_rows(RopeTableParams const& tp, float* inv_freq) {
  const int t = static_cast<int>(threadIdx.x);
  const int c = t % kQkvHeadDim;
  if (t < kQkvHeadDim) inv_freq[t] = channel_inv_freq(tp.rope, M, t);  // no global memory
  __syncthreads();
  pdl_enter();  // the positions may come from the kernel before (launch/pdl.h contract)
  QkvRope const& rope = tp.rope;
  // Grid-stride over the rows (the grid is capped at a few blocks per SM: each block computes the
  // 128 inverse frequencies, a powf and a division each, once for all of its rows).
  constexpr int kRows = kRopeTableThreads / kQkvHeadDim;
  for (int m = static_cast<int>(blockIdx.x) * kRows + t / kQkvHeadDim; m < tp.m;
       m += static_cast<int>(gridDim.x) * kRows) {
    const int b = m / tp.seq, s = m - b * tp.seq;
    if constexpr (M == RopeMode::kPos1D) {
      // Channels c and c + 64 share their position and frequency (channel_inv_freq: c % 64), so the
      // row's 128 threads split the work: thread c < 64 computes the cos of frequency c, thread 64 + c
      // its sin, each stored for both halves. The operands and cosf / sinf are pos_cos_sin's: same bits.
      const int f = c % (kQkvHeadDim / 2);
      const int64_t pos =
          channel_position(rope, M, rope.pos + b * rope.pos_batch_stride + s * rope.pos_seq_stride, c);
      const float angle = __fmul_rn(static_cast<float>(pos), inv_freq[f]);
      const bool is_sin = c >= kQkvHeadDim / 2;
      const __nv_bfloat16 v = __float2bfloat16_rn(is_sin ? sinf(angle) : cosf(angle));
      __nv_bfloat16* dst = tp.tab + (int64_t(is_sin ? tp.m : 0) + m) * kQkvHeadDim + f;
      dst[0] = v;
      dst[kQkvHeadDim / 2] = v;
    } else {
      float cs, sn;  // as chunk_cos_sin computes channel c of this row
      pos_cos_sin(channel_position(rope, M, rope.pos + b * rope.pos_batch_stride + s * rope.pos_seq_stride, c),
                  inv_freq[c], cs, sn);
      tp.tab[int64_t(m) * kQkvHeadDim + c] = __float2bfloat16_rn(cs);  // exact: cs is a bf16 value
      tp.tab[(int64_t(tp.m) + m) * kQkvHeadDim + c] = __float2bfloat16_rn(sn);
    }
  }
}

CUTLASS_DEVICE void rope_table_launch(RopeTableParams const& tp, float* inv_freq) {
  if (tp.mode == RopeMode::kPos1D) rope_table_rows<RopeMode::kPos1D>(tp, inv_freq);
  else if (tp.mode == RopeMode::kPos3D) rope_table_rows<RopeMode::kPos3D>(tp, inv_freq);
  else pdl_enter();  // no table for this launch: nothing to write
}

// blockIdx.y picks the launch; fixed offsets per branch, as in qkv_rope_rows_kernel.
__global__ void __launch_bounds__(kRopeTableThreads) rope_table_kernel(CUTLASS_GRID_CONSTANT RopeTableLaunches const tl) {
#if defined(CUTLASS_ARCH_MMA_SM90A_ENABLED)
  __shared__ float inv_freq[kQkvHeadDim];
  if (blockIdx.y == 0) rope_table_launch(tl.launch[0], inv_freq);
  else rope_table_launch(tl.launch[1], inv_freq);
#endif
}

}  // namespace qkv
}  // namespace vlattn
