// Fused GQA attention forward for sm_90a, version 1 (issue 4; design: docs/design/attention_sm90.md).
//
//   o[b, i, h*128 + d] = sum_j softmax_j(q[b,h,i,:] . k[b,h/G,j,:] * scale + mask[b,i,j]) v[b,h/G,j,d]
//
// Structure (one CTA per (query head, 128-row q-block, batch); 384 threads = 3 warpgroups):
//   warpgroup 0  producer: one thread issues TMA loads: Q once (its own mbarrier), then K and V
//                tiles of 128 keys through two separate PipelineTmaAsync rings. Registers 24.
//   warpgroups 1, 2  consumers: each owns 64 of the 128 query rows. Per key tile:
//                S = Q K^T (wgmma SS, fp32) -> online softmax in fp32 (exp2) -> P = bf16(p) in
//                registers -> O += P V (wgmma RS, P as the register A operand). Registers 240.
//                (The loop is software-pipelined; see "Overlap" below.)
//   Epilogue     O /= l, bf16, staged through this warpgroup's half of the Q tile in smem (no longer
//                read), then 16-byte coalesced stores of the rows < Sq into o [B, Sq, Hq*128].
//
// Mask tiles (brief §5): with skip = true a pre-pass (mask_summary.cuh) classifies every 128x128 mask
// tile as DEAD / ZERO / MIXED; producer and consumers both walk the same list of tiles, leaving out
// DEAD tiles when every row of the q-block has a live key (exact), and ZERO tiles skip the mask loads.
//
// Overlap (brief §3): within a consumer warpgroup, S_i = Q K_i^T and O += P_{i-1} V_{i-1} are issued
// together and the softmax of tile i runs while PV_{i-1} is on the tensor cores; across the two
// consumer warpgroups the GEMM issue alternates (ping-pong through two named barriers).
//
// Still to do (brief §3, §5, §6): persistent scheduler, TMA mask tiles, GQA packing, BN 176, PDL.
//
// Numerics (brief §4): x = s*scale (+ mask) in fp32; running max m; p = exp2((x - m) * log2e) for any
// tile that carries a mask, a causal diagonal or the Sk tail. Never exp2(x*scale*log2e - m*log2e) on
// masked tiles: with a bf16-min mask entry (-3.39e38) the product with log2e overflows fp32 and the
// fused form yields inf - inf = NaN. A row whose running max is -inf uses 0 in the exponent (p = 0)
// and ends with l = 0 -> O = 0 (the reference gives NaN there; we never produce NaN).
#pragma once

#include <cstdint>
#include <cstdlib>
#include <limits>

// The 64x176 wgmma atoms (176-key tiles) live in CuTe's extended shape list, compiled in only on request.
// Defined before the first CuTe header of this translation unit (attention_sm90.cu includes this first).
#ifndef CUTE_SM90_EXTENDED_MMA_SHAPES_ENABLED
#define CUTE_SM90_EXTENDED_MMA_SHAPES_ENABLED
#endif
#include <cute/tensor.hpp>
#include <cute/arch/copy_sm90_tma.hpp>
#include <cute/atom/copy_traits_sm90_tma.hpp>
#include <cute/atom/mma_atom.hpp>
#include <cute/atom/mma_traits_sm90_gmma.hpp>
#include <cutlass/arch/barrier.h>
#include <cutlass/arch/reg_reconfig.h>
#include <cutlass/bfloat16.h>
#include <cutlass/cutlass.h>
#include <cutlass/pipeline/sm90_pipeline.hpp>

#include "attention/attention_params.h"
#include "attention/attention_rules.h"
#include "attention/mask_summary.cuh"
#include "launch/dev_switch.h"
#include "launch/host_trace.h"
#include "launch/smem_attr.h"

namespace vlattn {
namespace attn_sm90 {

using namespace cute;

using Element = cutlass::bfloat16_t;

// ----------------------------------------------------------------------------------------------
// Compile-time configuration
// ----------------------------------------------------------------------------------------------

struct AttnConfig {
  static constexpr int kHeadDim = kAttnHeadDim;  // 128
  static constexpr int kBlockM = 128;            // query rows per CTA
  static constexpr int kBlockN = 128;            // keys per pipeline step (mask tiles, causal, default)
  static constexpr int kBlockNWide = 176;        // keys per step of the unmasked, non-causal kernels (FA3's pick)
  static constexpr int kStages = 2;              // K ring and V ring depth (each)
  static constexpr int kNumConsumerWarpgroups = 2;
  static constexpr int kRowsPerConsumer = kBlockM / kNumConsumerWarpgroups;  // 64 = one wgmma M
  static constexpr int kThreads = 128 * (1 + kNumConsumerWarpgroups);        // 384
  // setmaxnreg budgets (FA3's values for 3 warpgroups): 24*128 + 2*240*128 = 64512 <= 65536.
  static constexpr int kProducerRegs = 24;
  static constexpr int kConsumerRegs = 240;
  // With staged mask tiles warps 1..3 of the producer copy tiles: their loop needs more than 24.
  static constexpr int kProducerRegsMaskSmem = 40;
  static constexpr int kConsumerRegsMaskSmem = 232;

  static_assert(kHeadDim == 128, "the kernel is written for head_dim 128 only");
  static_assert(kRowsPerConsumer == 64, "each consumer warpgroup issues 64-row wgmma");
  static_assert(kBlockN % 16 == 0 && kBlockN <= 256, "wgmma N must be a multiple of 16 up to 256 (8 for bf16)");
  static_assert(kProducerRegsMaskSmem * 128 + kConsumerRegsMaskSmem * 128 * kNumConsumerWarpgroups <= 65536,
                "register file budget of one SM exceeded by the setmaxnreg split (mask staging)");
  static_assert(kProducerRegs * 128 + kConsumerRegs * 128 * kNumConsumerWarpgroups <= 65536,
                "register file budget of one SM exceeded by the setmaxnreg split");
};

using C = AttnConfig;

using TileQ = Shape<Int<C::kBlockM>, Int<C::kHeadDim>>;  // (rows, d)

// Shared memory: 128B-swizzled wgmma-canonical layouts. Q and K are K-major (d contiguous). V is the
// B operand of P V with N = d, which is contiguous in memory: MN-major, tiled K-first like CUTLASS's
// sm90 collectives do for MN-major operands.
using SmemLayoutQ = decltype(tile_to_shape(GMMA::Layout_K_SW128_Atom<Element>{}, TileQ{}));

// Everything that depends on the key-tile width kBN (keys per pipeline step): 128 (every mask, causal)
// or 144, 160, 176 (unmasked and not causal: 034's cross attention; attn_rules::block_n picks the width
// that pads the key length with the fewest keys and steps). A wider step spreads the per-step costs (row
// max and sum shuffles, the O rescale, the pipeline and turn barriers) over more keys; FA3 picks 176 for
// head_dim 128 without a mask. At 176 the score tile is 64 x 176 fp32 per warpgroup: 88 accumulator
// registers, P 44, O 64. kBN must be a multiple of 16 (the P V k-blocks).
template <int kBN>
struct QkAtom;
template <>
struct QkAtom<128> { using type = SM90::GMMA::MMA_64x128x16_F32BF16BF16_SS<GMMA::Major::K, GMMA::Major::K>; };
template <>
struct QkAtom<144> { using type = SM90::GMMA::MMA_64x144x16_F32BF16BF16_SS<GMMA::Major::K, GMMA::Major::K>; };
template <>
struct QkAtom<160> { using type = SM90::GMMA::MMA_64x160x16_F32BF16BF16_SS<GMMA::Major::K, GMMA::Major::K>; };
template <>
struct QkAtom<176> { using type = SM90::GMMA::MMA_64x176x16_F32BF16BF16_SS<GMMA::Major::K, GMMA::Major::K>; };

template <int kBN>
struct KeyTile {
  static_assert(kBN == 128 || kBN == 144 || kBN == 160 || kBN == 176, "key tiles of 128, 144, 160 or 176 keys");
  using TileK = Shape<Int<kBN>, Int<C::kHeadDim>>;  // (keys, d)
  using TileV = Shape<Int<C::kHeadDim>, Int<kBN>>;  // (d, keys): V as the B operand (N = d, K = keys)
  using SmemLayoutK = decltype(tile_to_shape(GMMA::Layout_K_SW128_Atom<Element>{},
                                             make_shape(Int<kBN>{}, Int<C::kHeadDim>{}, Int<C::kStages>{})));
  using SmemLayoutV = decltype(tile_to_shape(GMMA::Layout_MN_SW128_Atom<Element>{},
                                             make_shape(Int<C::kHeadDim>{}, Int<kBN>{}, Int<C::kStages>{}),
                                             Step<_2, _1, _3>{}));
  // S = Q K^T: two warpgroups stacked along M (each 64 rows), N = kBN keys, K = head_dim.
  using AtomQK = typename QkAtom<kBN>::type;
  using TiledMmaQK = decltype(make_tiled_mma(AtomQK{}, Layout<Shape<_2, _1, _1>>{}));
  // O += P V: A = P from registers (must be K-major), B = V (MN-major), N = head_dim, K = kBN keys
  // (kBN / 16 k-blocks of the 64x128x16 atom).
  using TiledMmaPV = decltype(make_tiled_mma(
      SM90::GMMA::MMA_64x128x16_F32BF16BF16_RS<GMMA::Major::K, GMMA::Major::MN>{}, Layout<Shape<_2, _1, _1>>{}));
  static constexpr uint32_t kKBytes = kBN * C::kHeadDim * sizeof(Element);
  static constexpr uint32_t kVBytes = kKBytes;
};
static_assert(C::kHeadDim == 128, "the PV atom is 64x128: N = head_dim");

using PipelineK = cutlass::PipelineTmaAsync<C::kStages>;
using PipelineV = cutlass::PipelineTmaAsync<C::kStages>;
using PipeState = typename PipelineK::PipelineState;

// MIXED mask tiles staged in shared memory (VLATTN_ATTN_MASK_SMEM, default on; §12 of the design
// notes), for 16-byte aligned masks (mask_vec16: aligned pointer, strides multiples of 8; others are
// read element-wise from global memory). Stage layout: 128 rows x 64 32-bit words (word w = keys
// key0 + 2w, +1), row pitch 256 bytes, the 16-byte chunk c of row r stored at chunk c ^ (r % 8) (a
// consumer warp reads 8 rows x 4 words of one chunk column per access: 32 distinct banks), copied with
// 16-byte cp.async. Out-of-range keys and rows are zero-filled (src-size); the consumers set those
// scores to -inf or drop the rows as before. (A second, "shifted" layout for unaligned masks, 4-byte
// copies recombined by byte permutes, measured slower than the global loads and was removed with its
// code: it made the staged kernels 26% larger and the kLean one spill, twentieth session.)
constexpr int kMaskStages = 2;
constexpr int kMaskWordsPerRow = C::kBlockN / 2;                                // 64
constexpr int kMaskStageBytes = C::kBlockM * kMaskWordsPerRow * 4;              // 32 KB
static_assert(kMaskWordsPerRow == 64 && C::kBlockM % 8 == 0, "swizzle: 16 chunks of 16 bytes per row");
using PipelineM = cutlass::PipelineAsync<kMaskStages>;
using PipeStateM = typename PipelineM::PipelineState;
constexpr int kMaskCopyWarps = 3;  // producer warpgroup warps 1..3 (warp 0 issues the TMA loads)

// A persistent CTA's items in the tail of a split launch, at most: its range of the tail (chunk <= tiles,
// attn_rules::tail_split_plan) meets at most two units.
constexpr int kTailSplitItems = 2;

template <int kBN>
struct SharedStorageBase {
  // 128B swizzle needs 1024-byte aligned tiles.
  alignas(1024) Element q[cosize_v<SmemLayoutQ>];  // also the O staging buffer in the epilogue
  alignas(1024) Element k[cosize_v<typename KeyTile<kBN>::SmemLayoutK>];
  alignas(1024) Element v[cosize_v<typename KeyTile<kBN>::SmemLayoutV>];
  typename PipelineK::SharedStorage pipe_k;
  typename PipelineV::SharedStorage pipe_v;
  alignas(8) uint64_t q_full;   // transaction barrier of the Q load of each work unit
  alignas(8) uint64_t q_empty;  // the consumers' wgmma are done with the Q tile of a unit (persistent)
  // The CTA's items in the tail of a split launch (kTailSplitItems; attn_rules::TailItem as {u, n_begin, n_end,
  // slot}), written once at the kernel's start: the TMA thread, in 24 registers, spilled when it derived them.
  int4 tail_items[kTailSplitItems];
};

template <int kBN, bool kMaskSmem, bool kOStage = false>
struct SharedStorage : SharedStorageBase<kBN> {};

// A persistent kernel releases its Q tile to the next unit's load before the epilogue (§18), so it stages O
// in a tile of its own where one fits (kOStaged below), instead of storing from registers.
template <int kBN>
struct SharedStorage<kBN, false, true> : SharedStorageBase<kBN> {
  alignas(1024) Element o[cosize_v<SmemLayoutQ>];
};

// Mask tiles are 128 x 128: only the 128-key kernels stage them.
template <>
struct SharedStorage<128, true, false> : SharedStorageBase<128> {
  // 256-byte aligned stages: the consumers' address math XORs bits 4..7 of the stage address.
  alignas(256) uint32_t mask[kMaskStages][C::kBlockM * kMaskWordsPerRow];
  typename PipelineM::SharedStorage pipe_m;
};

template <int kBN, bool kMaskSmem>
constexpr int kSmemBytes = int(sizeof(SharedStorage<kBN, kMaskSmem>));
constexpr int kMaxSmemBytes = 227 * 1024;  // opt-in dynamic shared memory per block on H100/H200
// The persistent kernels that stage O in their own tile: those without a mask ring whose shared memory
// has room for it (128-160-key tiles: 192-224 KB; not 176: 240 KB; not the staged-mask kernel: 256 KB).
template <int kBN, bool kMaskSmem, bool kPersistent>
constexpr bool kOStaged = kPersistent && !kMaskSmem && sizeof(SharedStorage<kBN, false, true>) <= kMaxSmemBytes;
static_assert(kOStaged<128, false, true> && kOStaged<160, false, true> && !kOStaged<176, false, true> &&
                  !kOStaged<128, true, true> && !kOStaged<128, false, false>,
              "which persistent kernels stage O in their own tile");
// The shared storage of attention_kernel<kBN, *, kMaskSmem, kPersistent, *>: the kernel and its launcher's
// shared-memory size both name it here.
template <int kBN, bool kMaskSmem, bool kPersistent>
using KernelStorage = SharedStorage<kBN, kMaskSmem, kOStaged<kBN, kMaskSmem, kPersistent>>;
static_assert(kSmemBytes<128, false> <= kMaxSmemBytes, "shared memory budget exceeded");
static_assert(kSmemBytes<176, false> <= kMaxSmemBytes, "shared memory budget exceeded (176-key tiles)");
static_assert(kSmemBytes<160, false> <= kSmemBytes<176, false> && kSmemBytes<144, false> <= kSmemBytes<160, false>,
              "narrower key tiles need less shared memory");
static_assert(kSmemBytes<128, true> <= kMaxSmemBytes, "shared memory budget exceeded (mask ring)");
static_assert(sizeof(SharedStorage<128, true>::mask[0]) == kMaskStageBytes && kMaskStageBytes % 256 == 0,
              "mask stage size / alignment");

constexpr uint32_t kQBytes = C::kBlockM * C::kHeadDim * sizeof(Element);
// The packed Q load writes each 64-column half of the tile as 128-byte rows (row r at r * 64 elements
// from the half's start, the second half 128 rows on): SmemLayoutQ must place them there.
// (Before the 128B swizzle, which TMA applies the same way from the shared-memory address.)
static_assert(SmemLayoutQ{}.layout_b()(0, 64) == C::kBlockM * 64 && SmemLayoutQ{}.layout_b()(9, 0) == 9 * 64 &&
                  SmemLayoutQ{}.layout_b()(127, 63) == 127 * 64 + 63,
              "Q tile halves / rows are not where the packed TMA boxes put them");

// Named barriers 0..7 of the user range (NamedBarrier adds CUTLASS's reserved offset).
constexpr uint32_t kEpilogueBarrierBase = 0;  // + consumer warpgroup index
constexpr uint32_t kTurnBarrierBase = 2;      // + consumer warpgroup index: ping-pong GEMM turns

constexpr float kLog2e = 1.4426950408889634f;
constexpr int kRowNone = std::numeric_limits<int>::max() / 2;  // a packed tile's rows that hold no head
constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// ----------------------------------------------------------------------------------------------
// Global tensors and TMA descriptors
// ----------------------------------------------------------------------------------------------

// q [B, Hq, Sq, D] viewed as (s, d, h, b); k the same with Hkv, Sk. The per-(h, b) slab is a separate
// mode, so rows >= Sq of one head are out of bounds (zero-filled by TMA), not the next head's rows.
// The strides are the tensor's (AttentionParams::q_strides ...): a token-major [B, S, H, D] buffer
// viewed as [B, H, S, D] loads without a copy.
using GmemShape = Shape<int, int, int, int>;
using GmemStrideRowMajor = Stride<int64_t, _1, int64_t, int64_t>;  // (s, d, h, b), d contiguous
using GmemStrideVt = Stride<_1, int64_t, int64_t, int64_t>;        // (d, s, h, b): V transposed view

// Element strides of one of q, k, v.
struct SlabStrides {
  int64_t b, h, s;
};
// {0, 0, 0}: contiguous [B, heads, seq, 128].
inline SlabStrides slab_strides(const int64_t (&st)[3], int heads, int seq) {
  if (st[0] == 0 && st[1] == 0 && st[2] == 0)
    return {int64_t(heads) * seq * C::kHeadDim, int64_t(seq) * C::kHeadDim, int64_t(C::kHeadDim)};
  return {st[0], st[1], st[2]};
}

CUTE_HOST_DEVICE auto q_layout(int s, int h, int b, SlabStrides st) {
  return make_layout(make_shape(s, int(C::kHeadDim), h, b), make_stride(st.s, _1{}, st.h, st.b));
}
CUTE_HOST_DEVICE auto vt_layout(int s, int h, int b, SlabStrides st) {
  return make_layout(make_shape(int(C::kHeadDim), s, h, b), make_stride(_1{}, st.s, st.h, st.b));
}

inline auto make_tma_q(const Element* q, int s, int h, int b, SlabStrides st) {
  return make_tma_copy(SM90_TMA_LOAD{}, make_tensor(make_gmem_ptr(q), q_layout(s, h, b, st)), SmemLayoutQ{}, TileQ{},
                       _1{});
}
template <int kBN>
inline auto make_tma_k(const Element* k, int s, int h, int b, SlabStrides st) {
  using T = KeyTile<kBN>;
  return make_tma_copy(SM90_TMA_LOAD{}, make_tensor(make_gmem_ptr(k), q_layout(s, h, b, st)),
                       typename T::SmemLayoutK{}(_, _, Int<0>{}), typename T::TileK{}, _1{});
}
template <int kBN>
inline auto make_tma_v(const Element* v, int s, int h, int b, SlabStrides st) {
  using T = KeyTile<kBN>;
  return make_tma_copy(SM90_TMA_LOAD{}, make_tensor(make_gmem_ptr(v), vt_layout(s, h, b, st)),
                       typename T::SmemLayoutV{}(_, _, Int<0>{}), typename T::TileV{}, _1{});
}

using TmaQ = decltype(make_tma_q(nullptr, 1, 1, 1, SlabStrides{1, 1, 1}));
template <int kBN>
using TmaK = decltype(make_tma_k<kBN>(nullptr, 1, 1, 1, SlabStrides{1, 1, 1}));
template <int kBN>
using TmaV = decltype(make_tma_v<kBN>(nullptr, 1, 1, 1, SlabStrides{1, 1, 1}));

// The launch's arguments apart from the K and V tensor maps (whose box is the key-tile width).
struct KernelArgs {
  TmaQ tma_q;
  Element* o;
  const uint16_t* mask;  // bf16 bits; nullptr = no mask
  int64_t mask_batch_stride;
  int64_t mask_row_stride;
  int batch, heads_q, heads_kv, seqlen_q, seqlen_k;
  int group;  // Hq / Hkv
  float scale;
  float scale_log2;  // scale * log2(e): unmasked tiles fold it into one FFMA per element
  bool fold_scale;   // scale > 0 (max commutes with the multiply); otherwise every tile takes the masked path
  bool causal;
  // Mask summary (nullptr: every mask tile is MIXED, nothing skipped).
  const uint8_t* tile_kinds;  // [mask batches, m_blocks, n_blocks]
  const uint32_t* live_rows;  // [mask batches, m_blocks, live_chunks, 4]: OR over the chunks
  int n_blocks;
  int live_chunks;
  bool mask_broadcast;        // mask batch dim 1: summary batch index 0
  // GQA packing (pack_rows > 0): a unit is (KV head, pack_rows query positions, batch) and its Q tile
  // holds the G = group query heads of that KV head for those positions, tile row g * pack_rows + p
  // (pack_rows = floor(128 / G); rows from G * pack_rows on are not loaded and never stored). Every
  // K/V tile in shared memory then serves G heads. Launched without a mask summary and without mask
  // staging (the launcher guarantees both).
  int pack_rows;          // 0: one query head per tile, 128 positions
  uint32_t q_tile_bytes;  // transaction bytes of one Q tile load
  CUtensorMap tma_q_packed;  // q viewed as (d, s, g, Hkv, B), box (64, pack_rows, G, 1, 1), 128B swizzle
  // Kernels built with kLean: masked-path tiles with no mask values to add (ZERO tiles) and no key to
  // drop take the softmax without per-key checks (VLATTN_ATTN_LEAN_ZERO=0 clears it).
  bool lean_zero = true;
  // kv_resident_kernel only (sm90_attention_resident.cuh): query heads per CTA and CTAs per (batch, KV head);
  // diag_half: its CAUSAL diagonal tiles skip the keys past the first 64 rows in their warpgroup (same bits).
  int resident_heads = 0;
  int resident_chunks = 0;
  bool diag_half = true;
  // tma_o_store: the producer thread stores each unit's staged O with TMA (tma_o: o viewed as (d, s, Hq, B), box
  // (64, 128, 1, 1), 128B swizzle: half a staged tile), instead of the consumers' 16-byte stores. Same bytes.
  bool tma_o_store = false;
  CUtensorMap tma_o{};
  bool walk_cache = true;  // the resident kernel's walks computed once per q-block (with at most two), same bits
  // Key split of the last wave (attn_rules::TailSplit; split_tiles = 0: off). Only the build kTailSplitBuilt names
  // (persistent, 128-key, no mask ring, no kLean) reads these; the launcher sets them only for launches without a mask
  // and without the causal flag, on a grid of exactly the plan's CTAs, without GQA packing.
  int split_main_units = 0;   // units run whole, round robin: a multiple of the grid
  int split_main_count = 0;   // split_main_units / grid
  int split_tiles = 0;        // key tiles per unit
  int split_total = 0;        // tail units x split_tiles
  int split_chunk = 0;        // tail tiles per CTA
  int split_max_pieces = 0;   // partial slots per tail unit
  float* split_o = nullptr;   // [slots][128 rows][128] fp32: a piece's O before the division by its row sum
  float* split_ml = nullptr;  // [slots][2][128]: a piece's row max (scaled scores) and row sum
};

template <int kBN>
struct KernelParams : KernelArgs {
  TmaK<kBN> tma_k;
  TmaV<kBN> tma_v;
};

// Rows (query positions) per unit and the head count units are indexed by.
CUTLASS_DEVICE int unit_rows(const KernelArgs& kp) { return kp.pack_rows > 0 ? kp.pack_rows : AttnConfig::kBlockM; }
CUTLASS_DEVICE int unit_heads(const KernelArgs& kp) { return kp.pack_rows > 0 ? kp.heads_kv : kp.heads_q; }

// Work units: (query head, 128-row q-block, batch), or (KV head, pack_rows-row block, batch) packed. Linear unit u has the heads fastest, then the
// q-blocks last-first (causal: the longest units first), then the batches: the heads reading the same
// K/V (G of them) and the same mask rows (all of them) run side by side and share those through L2.
// A CTA runs units first, first + stride, ...: one unit per CTA with the 3-D grid (Hq, q-blocks, B),
// or a persistent 1-D grid of at most one CTA per SM that strides over all units (static round robin).
struct WorkUnit {
  int head, m_block, batch;
};
CUTLASS_DEVICE WorkUnit work_unit(int u, int heads_q, int m_blocks) {
  const int rest = u / heads_q;
  return {u - rest * heads_q, m_blocks - 1 - rest % m_blocks, rest / m_blocks};
}

// Which attention_kernel build carries the tail split: the persistent 128-key one without a mask ring and without
// kLean (the launcher runs it without a mask). The long key sequences it serves take 128-key tiles (attn_rules::
// block_n: from 4096 keys); in the wider persistent builds the split's TMA thread spilled at 24 registers, and
// their consumers need the 240 (ptxas, 2026-12-04).
template <int kBN, bool kMaskSmem, bool kPersistent, bool kLean>
constexpr bool kTailSplitBuilt = kBN == AttnConfig::kBlockN && kPersistent && !kMaskSmem && !kLean;

// Item i of this CTA under the tail split (attn_rules::tail_split_item).
CUTLASS_DEVICE attn_rules::TailItem tail_split_item(const KernelArgs& kp, int i, int cta, int grid) {
  return attn_rules::tail_split_item(kp.split_main_units, kp.split_tiles, kp.split_total, kp.split_chunk,
                                     kp.split_max_pieces, i, cta, grid);
}
// Item `it` of this CTA as {u, n_begin, n_end, slot}: the round robin's units, then the tail items the kernel wrote
// to shared memory at its start.
CUTLASS_DEVICE int4 split_item(const KernelArgs& kp, const int4 (&tail_items)[kTailSplitItems], int it, int cta,
                               int grid) {
  if (it < kp.split_main_count) return make_int4(cta + it * grid, 0, -1, -1);
  const int j = it - kp.split_main_count;
  return j < kTailSplitItems ? tail_items[j] : make_int4(-1, 0, 0, -1);
}

// Key tiles of a q-block. Causal (top-left aligned): row i sees keys j <= i, so tiles wholly to the
// right of the block's last valid row contribute exact zeros and are not visited.
template <int kBN>
CUTLASS_DEVICE int unit_key_tiles(const KernelArgs& kp, int m_block) {
  int n_tiles = ceil_div(kp.seqlen_k, kBN);
  if (kp.causal) {
    const int last_row = min(kp.seqlen_q - 1, (m_block + 1) * unit_rows(kp) - 1);
    n_tiles = min(n_tiles, last_row / kBN + 1);
  }
  return n_tiles;
}

// Walks the key tiles of one work unit in order, leaving out those that are skipped exactly. Producer and
// consumers each run one; they read the same summary and so see the same sequence.
struct TileWalker {
  const uint8_t* kinds = nullptr;  // this (b, m) row of the summary, or nullptr
  bool skip_dead = false;
  int n_tiles = 0;

  CUTLASS_DEVICE TileWalker(const KernelArgs& kp, int batch, int m_block, int n_tiles_) : n_tiles(n_tiles_) {
    if (kp.tile_kinds == nullptr) return;
    const int m_blocks = ceil_div(kp.seqlen_q, int(AttnConfig::kBlockM));
    const int64_t block = int64_t(kp.mask_broadcast ? 0 : batch) * m_blocks + m_block;
    kinds = kp.tile_kinds + block * kp.n_blocks;
    // DEAD tiles may be left out only if every valid row of the block has a live key.
    const int valid_rows = min(int(AttnConfig::kBlockM), kp.seqlen_q - m_block * AttnConfig::kBlockM);
    const uint4* words = reinterpret_cast<const uint4*>(kp.live_rows) + block * kp.live_chunks;
    uint4 live = make_uint4(0, 0, 0, 0);
#pragma unroll 4
    for (int c = 0; c < kp.live_chunks; ++c) {
      const uint4 w = __ldg(words + c);
      live.x |= w.x, live.y |= w.y, live.z |= w.z, live.w |= w.w;
    }
    const uint32_t lw[kLiveWordsPerBlock] = {live.x, live.y, live.z, live.w};
    bool all_live = true;
    CUTE_UNROLL
    for (int w = 0; w < kLiveWordsPerBlock; ++w) {
      const int rows_in_word = max(0, min(32, valid_rows - 32 * w));
      const uint32_t want = rows_in_word == 32 ? 0xffffffffu : ((1u << rows_in_word) - 1u);
      all_live &= (lw[w] & want) == want;
    }
    skip_dead = all_live;
  }
  CUTLASS_DEVICE int kind(int n) const { return kinds == nullptr ? int(kTileMixed) : int(__ldg(kinds + n)); }
  // A CAUSAL tile that the kernels built with kCausalTiles apply as the causal predicate, without its
  // values: only where every row has a live key (as for skipping DEAD tiles). The mask producer stages
  // nothing for it and the consumers load nothing: both ask here.
  CUTLASS_DEVICE bool causal_predicate(int kind_n) const { return kind_n == kTileCausal && skip_dead; }
  // First tile >= n that is visited.
  CUTLASS_DEVICE int next(int n) const {
    if (skip_dead)
      while (n < n_tiles && kind(n) == kTileDead) ++n;
    return n;
  }
};

// ----------------------------------------------------------------------------------------------
// Device helpers
// ----------------------------------------------------------------------------------------------

CUTLASS_DEVICE float bf16_bits_to_float(uint16_t bits) { return __uint_as_float(uint32_t(bits) << 16); }

// 2^x with the MUFU (ftz): -inf -> +0, large negative -> 0. The argument is never NaN by construction.
CUTLASS_DEVICE float fast_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// cp.async with zero-fill: copies src_bytes (0..size) from src and zero-fills the rest of the
// size-byte destination. src must be size-aligned even when src_bytes is 0 (then nothing is read).
CUTLASS_DEVICE void cp_async_16(uint32_t dst, const void* src, int src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(src_bytes) : "memory");
}
CUTLASS_DEVICE void cp_async_4(uint32_t dst, const void* src, int src_bytes) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(dst), "l"(src), "r"(src_bytes) : "memory");
}
CUTLASS_DEVICE uint32_t lds_u32(uint32_t addr) {
  uint32_t v;
  asm volatile("ld.shared.u32 %0, [%1];\n" : "=r"(v) : "r"(addr) : "memory");
  return v;
}

// The four lanes of a quad hold the same two accumulator rows (the wgmma C layout gives lane l
// row l/4 and columns 2*(l%4), +1 of every 8-column group): reduce across them.
CUTLASS_DEVICE float quad_max(float x) {
  x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));
  return fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 2));
}
CUTLASS_DEVICE float quad_sum(float x) {
  x += __shfl_xor_sync(0xffffffffu, x, 1);
  return x + __shfl_xor_sync(0xffffffffu, x, 2);
}

// Per-thread accumulator fragment of a 64xN wgmma tile: ((2 cols, 2 rows (+8), N/8 col groups), 1, 1),
// compact, so the linear index of (c, r, j) is c + 2r + 4j.
constexpr int kColGroups = C::kBlockN / 8;     // of a 128-key score tile (staged mask tiles)
constexpr int kOColGroups = C::kHeadDim / 8;   // of the 64 x 128 O accumulator
CUTLASS_DEVICE constexpr int acc_idx(int c, int r, int j) { return c + 2 * r + 4 * j; }

// The consumers' per-unit steps that both kernels (attention_kernel, kv_resident_kernel) share.
// Issue S = Q K^T (wgmma SS, asynchronous: the caller waits): A = Q's fragment (.., k-blocks), B = one K tile's.
template <class Mma, class FragQ, class FragK, class FragS>
CUTLASS_DEVICE void issue_qk_gemm(Mma& mma, FragQ const& q, FragK const& k, FragS& s) {
  mma.accumulate_ = GMMA::ScaleOut::Zero;
  warpgroup_fence_operand(s);
  warpgroup_arrive();
  CUTE_UNROLL
  for (int kb = 0; kb < size<2>(q); ++kb) {
    cute::gemm(mma, q(_, _, kb), k(_, _, kb), s);
    mma.accumulate_ = GMMA::ScaleOut::One;
  }
  warpgroup_commit_batch();
}
// Issue O += P V (wgmma RS, asynchronous): P from registers, B = one V tile's fragment. kKBlocks > 0: only P's
// first kKBlocks k-blocks (16 keys each; the caller knows the others' P is exactly 0, so O gets the same bits).
template <int kKBlocks = 0, class Mma, class FragP, class FragV, class FragO>
CUTLASS_DEVICE void issue_pv_gemm(Mma& mma, FragP& p, FragV const& v, FragO& o) {
  constexpr int kAll = decltype(size<2>(p))::value;
  constexpr int kIssued = kKBlocks > 0 ? kKBlocks : kAll;
  static_assert(kIssued <= kAll, "more k-blocks than P has");
  warpgroup_fence_operand(o);
  warpgroup_fence_operand(p);
  warpgroup_arrive();
  CUTE_UNROLL
  for (int kb = 0; kb < kIssued; ++kb) cute::gemm(mma, p(_, _, kb), v(_, _, kb), o);
  warpgroup_commit_batch();
}
// P = bf16(S), element by element: the RS operand's register layout holds the accumulator's (row, col) pairs
// in the same compact order (see the consumer's tOrP).
template <class FragS, class FragP>
CUTLASS_DEVICE void scores_to_p(FragS const& s, FragP& p) {
  CUTE_UNROLL
  for (int e = 0; e < size(s); ++e) p(e) = Element(s(e));
}
// O *= rescale[r] on this thread's two rows of the 64 x 128 O accumulator.
template <class FragO>
CUTLASS_DEVICE void rescale_rows(FragO& o, const float (&rescale)[2]) {
  CUTE_UNROLL
  for (int r = 0; r < 2; ++r) {
    CUTE_UNROLL
    for (int j = 0; j < kOColGroups; ++j) {
      CUTE_UNROLL
      for (int c = 0; c < 2; ++c) o(acc_idx(c, r, j)) *= rescale[r];
    }
  }
}
// 1 / (row sum) of this thread's two rows, the quad's partial sums reduced; 0 where the sum is 0 (every key
// was -inf: O = 0).
CUTLASS_DEVICE void inverse_row_sums(const float (&l)[2], float (&inv_l)[2]) {
  CUTE_UNROLL
  for (int r = 0; r < 2; ++r) {
    const float total = quad_sum(l[r]);
    inv_l[r] = total > 0.f ? 1.f / total : 0.f;
  }
}
// A piece of a split unit (tail split): its O before the division by the row sum, fp32, row-major [128][128] at
// po, and per row the max (scaled scores, as m) and the sum (the quad's partial sums reduced) at pml[r] and
// pml[128 + r]; lane4 = the thread's lane % 4 (one lane of each quad writes the row's pair).
template <class FragO, class CoordO>
CUTLASS_DEVICE void store_partial(const FragO& o, const CoordO& tOcO, const float (&m)[2], const float (&l)[2],
                                  int lane4, float* po, float* pml) {
  CUTE_UNROLL
  for (int r = 0; r < 2; ++r) {
    const int r_local = get<0>(tOcO(acc_idx(0, r, 0)));
    float* dst = po + r_local * C::kHeadDim;
    CUTE_UNROLL
    for (int j = 0; j < kOColGroups; ++j) {
      const int i0 = acc_idx(0, r, j);
      *reinterpret_cast<float2*>(dst + get<1>(tOcO(i0))) = make_float2(o(i0), o(i0 + 1));
    }
    const float total = quad_sum(l[r]);
    if (lane4 == 0) {
      pml[r_local] = m[r];
      pml[C::kBlockM + r_local] = total;
    }
  }
}

// The O staging tile: a Q-shaped tile of shared memory (a Q stage, 1024-byte aligned) addressed by hand in the
// shared state space. Through a CuTe tensor on ss.q the compiler lost the address space: every staged pair was a
// generic ST.E with its own 64-bit swizzled address and every 16-byte read a generic LD.E.128 (cuobjdump: 32 + 8
// per thread in every kernel that stages O; ncu of kv_resident_kernel at 007 B32 S128: ~950 SASS lines per unit,
// a quarter of its stall samples). Byte offset of element (r, c) in SmemLayoutQ: 64-column halves kBlockM x 128
// bytes apart, 128-byte rows, then the 128-byte swizzle (byte bits 7-9 into 4-6), as TMA and CuTe place it.
// kRows: the tile's rows (128; the split-key kernel's 64-row Q tile, SmemLayoutQ64, has its halves 64 x 128 bytes apart).
template <uint32_t kRows = C::kBlockM>
CUTLASS_HOST_DEVICE constexpr uint32_t q_tile_linear_byte(uint32_t r, uint32_t c) {
  return (c / 64) * (kRows * 128) + r * 128 + (c % 64) * 2;
}
template <uint32_t kRows = C::kBlockM>
CUTLASS_HOST_DEVICE constexpr uint32_t q_tile_byte(uint32_t r, uint32_t c) {
  return q_tile_linear_byte<kRows>(r, c) ^ ((q_tile_linear_byte<kRows>(r, c) & 0x380u) >> 3);
}
static_assert(std::is_same_v<std::remove_cv_t<decltype(SmemLayoutQ{}.layout_a())>, Swizzle<3, 4, 3>> &&
                  SmemLayoutQ{}.layout_b()(0, 64) * 2 == q_tile_linear_byte(0, 64) &&
                  SmemLayoutQ{}.layout_b()(9, 5) * 2 == q_tile_linear_byte(9, 5) &&
                  SmemLayoutQ{}.layout_b()(127, 127) * 2 == q_tile_linear_byte(127, 127),
              "q_tile_byte must address SmemLayoutQ (a 128-byte swizzle over 128-byte rows, 64-column halves)");
// What stage_o and store_o_rows below take out of the per-element address: from a thread's first element
// (row r0, column c0 < 8), the element 8r rows and 8j columns on is at q_tile_byte(r0, c0) with the 16-byte
// chunk bits XOR (j % 8), plus r x 1 KB and (j / 8) x the half's size; a row 8p on is p x 1 KB on.
// (Rows 0, 5, 10, ..: every low-bit pattern; all of them exceed nvcc's constexpr budget.)
constexpr bool q_tile_steps_hold() {
  for (uint32_t r0 = 0; r0 < C::kBlockM; r0 += 5)
    for (uint32_t c0 = 0; c0 < 8; c0 += 2)
      for (uint32_t r = 0; r0 + 8 * r < C::kBlockM; ++r)
        for (uint32_t j = 0; c0 + 8 * j < C::kHeadDim; ++j)
          if (q_tile_byte(r0 + 8 * r, c0 + 8 * j) !=
              ((q_tile_byte(r0, c0) ^ ((j % 8) << 4)) + r * 1024 + (j / 8) * (C::kBlockM * 128)))
            return false;
  return true;
}
static_assert(q_tile_steps_hold(), "the O staging's per-element address steps");
// A consumer warpgroup's 64 staged O rows (stage_o) to o [B, Sq, Hq * 128], 16 bytes per lane: 16 lanes per
// 256-byte row, 8 rows per pass. s_tile: the staging tile's shared-state-space address (1024-byte aligned); t: the
// thread's index in its warpgroup; row_map(r_local, q_row, head_out): the tile row's query position and head (a
// position >= Sq is not stored).
template <class RowMap>
CUTLASS_DEVICE void store_o_rows(uint32_t s_tile, int t, int consumer_wg, const KernelArgs& kp, int batch,
                                 int64_t o_row_stride, RowMap const& row_map) {
  constexpr int kChunk = 16 / sizeof(Element);          // 8 elements
  constexpr int kChunksPerRow = C::kHeadDim / kChunk;   // 16
  constexpr int kRowsPerPass = 128 / kChunksPerRow;     // 8
  const int chunk = t % kChunksPerRow;
  const int row0 = consumer_wg * C::kRowsPerConsumer + t / kChunksPerRow;
  const uint32_t s_row0 = s_tile + q_tile_byte(row0, chunk * kChunk);  // pass p: p x 1 KB on (q_tile_steps_hold)
  CUTE_UNROLL
  for (int pass = 0; pass < C::kRowsPerConsumer / kRowsPerPass; ++pass) {
    const int r_local = row0 + pass * kRowsPerPass;
    int q_row, head_out;
    row_map(r_local, q_row, head_out);
    if (q_row < kp.seqlen_q) {
      uint4 val;
      asm volatile("ld.shared.v4.b32 {%0, %1, %2, %3}, [%4];\n"
                   : "=r"(val.x), "=r"(val.y), "=r"(val.z), "=r"(val.w)
                   : "r"(s_row0 + pass * kRowsPerPass * 128));
      Element* dst = kp.o + (int64_t(batch) * kp.seqlen_q + q_row) * o_row_stride + int64_t(head_out) * C::kHeadDim +
                     chunk * kChunk;
      // One 16-byte store, written out: a uint4 assignment of the load's four outputs compiled to four
      // st.global.u32, and __stwb to a .STRONG.SM store.
      asm volatile("st.global.v4.b32 [%0], {%1, %2, %3, %4};\n" ::"l"(dst), "r"(val.x), "r"(val.y), "r"(val.z),
                   "r"(val.w));
    }
  }
}
// This thread's O / l as bf16 pairs into the staging tile at s_tile (1024-byte aligned). tOcO: the (row, col)
// of each O element; pair (r, j) is 8r rows and 8j columns from the first (acc_idx), so one address per thread
// and its chunk XORs give all 32 (q_tile_steps_hold).
template <class FragO, class CoordO>
CUTLASS_DEVICE void stage_o(FragO const& o, CoordO const& tOcO, const float (&inv_l)[2], uint32_t s_tile) {
  const uint32_t s0 = s_tile + q_tile_byte(get<0>(tOcO(0)), get<1>(tOcO(0)));
  CUTE_UNROLL
  for (int r = 0; r < 2; ++r) {
    CUTE_UNROLL
    for (int j = 0; j < kOColGroups; ++j) {
      const int i0 = acc_idx(0, r, j);
      const __nv_bfloat162 v = __floats2bfloat162_rn(o(i0) * inv_l[r], o(i0 + 1) * inv_l[r]);
      const uint32_t addr = (s0 ^ uint32_t((j % 8) << 4)) + r * 1024 + (j / 8) * (C::kBlockM * 128);
      asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(addr), "r"(reinterpret_cast<const uint32_t&>(v)));
    }
  }
}

// Online softmax over one S tile, in place: S becomes p = exp2((x - m) log2e), l accumulates this
// thread's partial row sums (quad-reduced at the end), and rescale[r] = exp2((m_old - m_new) log2e) is
// returned for O: the caller applies it once the previous P V (still running on the tensor cores
// while this executes) has landed in O.
// kMasked: the tile has an additive mask, causal diagonal or Sk tail -> the overflow-safe form.
// load_mask: false for ZERO tiles (x + 0 == x exactly, so leaving the add out changes no bit).
// Where the masked path reads the mask of a tile.
enum MaskSource : int {
  kMaskGlobal = 0,        // per-element __ldg from the user's mask (VLATTN_ATTN_MASK_SMEM=0)
  kMaskSmemAligned = 1,   // the staged tile: one shared load per accumulator pair
  kMaskRegs = 2,          // the split-key kernel: the thread's pairs loaded into registers before Q K^T (MaskPairRegs)
};

// Per-thread shared-memory addresses of the staged mask tile (stage 0; + stage * kMaskStageBytes).
struct MaskSmemThread {
  uint32_t a0q[2];    // row r: stage base + row*256 + (row%8)*16 + 4*q (q = this lane's pair in a chunk)

  // Bits of the bf16 pair (keys col0 + 8j, +1) of row r: low half the first key.
  CUTLASS_DEVICE uint32_t pair(int r, int j, int stage) const {
    // a0q has zero bits 4..7 apart from the row's swizzle (bits 4..6): XOR applies the swizzle to the
    // chunk index j (bit 7 = j / 8 is then a plain add).
    return lds_u32((a0q[r] ^ (uint32_t(j) << 4)) + uint32_t(stage) * kMaskStageBytes);
  }
};

// The bf16 mask pairs of a thread's score fragment held in registers (kMaskRegs): row r's keys key_first + 8j and
// + 1 in pair j, the first key in the low half, as MaskSmemThread::pair returns them from a staged tile. Keys >= Sk
// and rows without a mask row (>= Sq) read 0: their scores become -inf by the per-key checks or are never stored.
template <int kGroups>
struct MaskPairRegs {
  uint32_t v[2][kGroups];

  CUTLASS_DEVICE void load(const uint16_t* const (&mask_row)[2], int key_first, int seqlen_k) {
    CUTE_UNROLL
    for (int r = 0; r < 2; ++r) {
      CUTE_UNROLL
      for (int j = 0; j < kGroups; ++j) {
        const int key = key_first + 8 * j;
        uint32_t lo = 0, hi = 0;
        if (mask_row[r] != nullptr && key < seqlen_k) lo = __ldg(mask_row[r] + key);
        if (mask_row[r] != nullptr && key + 1 < seqlen_k) hi = __ldg(mask_row[r] + key + 1);
        v[r][j] = lo | (hi << 16);
      }
    }
  }
  CUTLASS_DEVICE uint32_t pair(int r, int j, int) const { return v[r][j]; }
};

// col0: this thread's first key column in a tile; its columns are col0 + 8j + c (the wgmma C layout).
// kMaybeCausal: false compiles the causal test out (the 176-key kernels never run causal).
// kKeyChecks = false: a tile whose keys are all < Sk and all visible under the causal flag (no per-key
// checks; with load_mask false the same arithmetic as with them, so the same bits).
// kForceCausal: keys past the row get -inf as under the causal flag (a CAUSAL summary tile: its mask is 0
// on and below the diagonal, <= -2^100 above it, in a block whose rows all have a live key: those keys'
// probabilities are exactly 0 either way and they never set the row max, so the bits are the same as
// loading and adding the tile).
// kLiveGroups > 0 (masked path only): the caller knows every key of the column groups from kLiveGroups on is
// -inf in this thread's rows (a diagonal tile's upper half for the block's first 64 rows): those groups are
// neither scaled nor exponentiated, their p is written as 0. -inf never sets the max and exp2(-inf) = +0 adds
// nothing to the sum (accumulated in the same order over the live groups), so the bits are the same (and a P V
// over the live k-blocks only gives O's bits too, for finite V).
template <bool kMasked, int kMaskSrc = kMaskGlobal, bool kMaybeCausal = true, bool kKeyChecks = true,
          bool kForceCausal = false, int kLiveGroups = 0, class FragS, class MaskPairs = MaskSmemThread>
CUTLASS_DEVICE void softmax_tile(FragS& s, float (&rescale_out)[2], float (&m)[2], float (&l)[2], const int (&row)[2],
                                 int col0, int key0, const KernelArgs& kp,
                                 const uint16_t* const (&mask_row)[2], bool load_mask,
                                 const MaskPairs* ms = nullptr, int mask_stage = 0) {
  constexpr int kCG = decltype(size(s))::value / 4;  // 8-column groups of the score tile
  constexpr int kLive = kLiveGroups > 0 ? kLiveGroups : kCG;
  static_assert(kLive <= kCG && (kLiveGroups == 0 || kMasked), "live column groups: masked path, within the tile");
  CUTE_UNROLL
  for (int r = 0; r < 2; ++r) {
    float mx = m[r];
    if constexpr (kMasked) {
      // The per-key checks as one compare per key: key >= Sk or (causal and key > row) <=> key > key_max, the
      // row's last visible key (Sk - 1, or min(row, Sk - 1) under the causal predicate; row >= 0, Sk >= 1).
      int key_max = kp.seqlen_k - 1;
      if (kMaybeCausal && (kForceCausal || kp.causal)) key_max = min(key_max, row[r]);
      CUTE_UNROLL
      for (int j = 0; j < kLive; ++j) {
        uint32_t pair = 0;
        if constexpr (kMaskSrc != kMaskGlobal) {
          if (load_mask) pair = ms->pair(r, j, mask_stage);
        }
        CUTE_UNROLL
        for (int c = 0; c < 2; ++c) {
          const int i = acc_idx(c, r, j);
          const int key = key0 + col0 + 8 * j + c;
          float x;
          if constexpr (kMaskSrc == kMaskGlobal) {
            x = s(i) * kp.scale;
            if (load_mask && mask_row[r] != nullptr && key < kp.seqlen_k)
              x += bf16_bits_to_float(__ldg(mask_row[r] + key));
          } else {
            // The same two roundings as the global path's FMUL + FADD (compiled that way, checked in
            // the SASS): _rn keeps the compiler from contracting them into one FFMA. Rows >= Sq and
            // keys >= Sk read zero-filled words: those rows are never stored, those keys become -inf.
            x = __fmul_rn(s(i), kp.scale);
            if (load_mask) x = __fadd_rn(x, __uint_as_float(c == 0 ? pair << 16 : pair & 0xffff0000u));
          }
          if (kKeyChecks && key > key_max) x = kNegInf;
          s(i) = x;
          mx = fmaxf(mx, x);
        }
      }
    } else {
      // S stays raw: with scale > 0, max_j fl(s_j * scale) == fl(max_j s_j * scale) (rounding is
      // monotonic), so the row max in scaled units costs one multiply per row.
      float raw = kNegInf;
      CUTE_UNROLL
      for (int i = 0; i < 2 * kCG; ++i) raw = fmaxf(raw, s(acc_idx(i % 2, r, i / 2)));
      mx = fmaxf(mx, raw * kp.scale);
    }
    mx = quad_max(mx);
    // Row max -inf (every key so far masked with -inf): use 0 in the exponent so that p = 0, never NaN.
    const float m_use = (mx == kNegInf) ? 0.f : mx;
    // m[r] - m_use: both are finite or m[r] = -inf, so no inf - inf; the product may overflow to -inf,
    // which exp2 maps to the exact 0 the rescale needs.
    const float rescale = fast_exp2((m[r] - m_use) * kLog2e);
    m[r] = mx;
    float sum = 0.f;
    if constexpr (kMasked) {
      CUTE_UNROLL
      for (int j = 0; j < kLive; ++j) {
        CUTE_UNROLL
        for (int c = 0; c < 2; ++c) {
          const int i = acc_idx(c, r, j);
          const float p = fast_exp2((s(i) - m_use) * kLog2e);  // FADD then FMUL: no overflow
          s(i) = p;
          sum += p;
        }
      }
      CUTE_UNROLL
      for (int j = kLive; j < kCG; ++j) {
        CUTE_UNROLL
        for (int c = 0; c < 2; ++c) s(acc_idx(c, r, j)) = 0.f;
      }
    } else {
      // Unmasked tile (no mask tensor, no tail, off the causal diagonal): every score is finite and
      // m_use >= its scaled value, so m_use*log2e is in range (scores bounded as the brief's
      // precondition |x| <= 2^97 says): p = exp2(s * scale*log2e - m*log2e), one FFMA per element.
      const float m_scaled = m_use * kLog2e;
      CUTE_UNROLL
      for (int j = 0; j < kCG; ++j) {
        CUTE_UNROLL
        for (int c = 0; c < 2; ++c) {
          const int i = acc_idx(c, r, j);
          const float p = fast_exp2(fmaf(s(i), kp.scale_log2, -m_scaled));
          s(i) = p;
          sum += p;
        }
      }
    }
    l[r] = l[r] * rescale + sum;
    rescale_out[r] = rescale;
  }
}

// ----------------------------------------------------------------------------------------------
// The kernel
// ----------------------------------------------------------------------------------------------

// kPipelined: the overlapped consumer loop (intra-warpgroup overlap + ping-pong). false: the plain
// v1 loop (S, softmax, PV strictly in sequence), kept as a fallback for diagnosis
// (VLATTN_ATTN_SIMPLE=1 selects it at run time).
// kMaskSmem: MIXED mask tiles are staged in shared memory by producer warps 1..3 (launched only with a
// mask; VLATTN_ATTN_MASK_SMEM=0 selects false, the per-element global loads, bitwise the same result).
// kPersistent: a 1-D grid of at most one CTA per SM, each running work units blockIdx.x + i * gridDim.x
// (VLATTN_ATTN_PERSISTENT); false: one CTA per unit, the loops below run once and have no back edge
// (straight-line code, as before the persistent variant existed).
// kBN: keys per pipeline step (KeyTile): 144, 160 or 176 only for launches without a mask and without the
// causal flag (the launcher's rule), so the mask tile machinery (summary, staging) exists only at 128.
// kLean: ZERO tiles inside the keys and below the causal diagonal skip the per-key checks (same bits).
// Launches with a mask only (ZERO tiles need one); without a mask the kernels are built as before this
// path existed (034's 128-key kernels keep their code). The per-unit staged-mask kernel has both builds:
// attn_rules::lean_staged_pays picks.
template <int kBN, bool kPipelined, bool kMaskSmem, bool kPersistent, bool kLean>
__global__ void __launch_bounds__(C::kThreads, 1) attention_kernel(CUTE_GRID_CONSTANT KernelParams<kBN> const kp) {
#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ == 900) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  static_assert(kBN == 128 || !kMaskSmem, "mask tiles are staged by the 128-key kernels only");
  using KT = KeyTile<kBN>;
  // The 176-key kernels run without a mask and without the causal flag (attn_rules::wide_allowed): their
  // softmax has no mask or causal code at all.
  constexpr bool kPlain = kBN != C::kBlockN;
  // Kernels that apply CAUSAL tiles (summary kind: a causal mask's diagonal tile) as the causal
  // predicate without loading them: the kernels that launch with a mask (the launcher runs the pipelined
  // ones without kMaskSmem or kLean only without a mask). (With the first tile peeled, the per-unit
  // staged kernel's build without kLean outlined its softmax step with this branch: a 544-byte frame.)
  constexpr bool kCausalTiles = !kPlain && (kMaskSmem || kLean || !kPipelined);
  extern __shared__ __align__(1024) char smem_buf[];
  constexpr bool kOStage = kOStaged<kBN, kMaskSmem, kPersistent>;
  constexpr bool kSplit = kTailSplitBuilt<kBN, kMaskSmem, kPersistent, kLean>;
  // The producer warpgroup's register budget: 40 (consumers 232) for the mask ring's copy loop, and for the build
  // with the tail split, whose TMA thread spilled at 24 (ptxas, 2026-12-04: 40/76 B).
  constexpr bool kWideProducer = kMaskSmem || kSplit;
  using Storage = KernelStorage<kBN, kMaskSmem, kPersistent>;
  Storage& ss = *reinterpret_cast<Storage*>(smem_buf);

  const int warp_group = threadIdx.x / 128;
  const int m_blocks = ceil_div(kp.seqlen_q, unit_rows(kp));
  const int units = unit_heads(kp) * m_blocks * kp.batch;
  const int first_unit = int(blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z));
  const int unit_stride = int(gridDim.x * gridDim.y * gridDim.z);

  using Role = typename PipelineK::ThreadCategory;
  typename PipelineK::Params pk;
  pk.transaction_bytes = KT::kKBytes;
  pk.role = warp_group == 0 ? Role::Producer : Role::Consumer;
  pk.is_leader = threadIdx.x == 0;
  pk.num_consumers = 128 * C::kNumConsumerWarpgroups;
  pk.initializing_warp = 0;
  typename PipelineV::Params pv = pk;
  pv.transaction_bytes = KT::kVBytes;
  pv.initializing_warp = 1;
  PipelineK pipe_k(ss.pipe_k, pk, Shape<_1, _1, _1>{});
  PipelineV pipe_v(ss.pipe_v, pv, Shape<_1, _1, _1>{});
  if constexpr (kSplit) {
    // The CTA's tail items (kernel parameters only: before pdl_enter is fine), by a consumer thread before its
    // register budget changes; visible to all after the __syncthreads below.
    if (threadIdx.x == 128 && kp.split_tiles > 0) {
      const int main_count = kp.split_main_count;
      CUTE_UNROLL
      for (int j = 0; j < kTailSplitItems; ++j) {
        const attn_rules::TailItem t = tail_split_item(kp, main_count + j, first_unit, unit_stride);
        ss.tail_items[j] = make_int4(t.u, t.n_begin, t.n_end, t.slot);
      }
    }
  }
  if (threadIdx.x == 64) {  // warp 2: the pipelines' init warps are 0 and 1 (3: the mask ring)
    cutlass::arch::ClusterTransactionBarrier::init(&ss.q_full, 1);
    cutlass::arch::ClusterBarrier::init(&ss.q_empty, 128 * C::kNumConsumerWarpgroups);
    cutlass::arch::fence_barrier_init();
  }
  // Mask ring: producers are the 96 threads of warps 1..3 (each arrives once per stage, plus one
  // cp.async arrival that lands when its copies have), consumers all 256 consumer threads.
  using RoleM = typename PipelineM::ThreadCategory;
  typename PipelineM::Params pm;
  pm.role = warp_group == 0 ? RoleM::Producer : RoleM::Consumer;
  pm.producer_arv_count = 32 * kMaskCopyWarps;
  pm.consumer_arv_count = 128 * C::kNumConsumerWarpgroups;
  pm.dst_blockid = 0;
  pm.initializing_warp = 3;
  [[maybe_unused]] auto pipe_m = [&] {
    if constexpr (kMaskSmem) return PipelineM(ss.pipe_m, pm);
    else return 0;
  }();
  __syncthreads();
  pdl_enter();  // launch/pdl.h: no global memory access before this

  Tensor sQ = make_tensor(make_smem_ptr(ss.q), SmemLayoutQ{});
  Tensor sK = make_tensor(make_smem_ptr(ss.k), typename KT::SmemLayoutK{});
  Tensor sV = make_tensor(make_smem_ptr(ss.v), typename KT::SmemLayoutV{});

  if (warp_group == 0) {
    // ---------------------------------------------------------------- producer
    cutlass::arch::warpgroup_reg_dealloc<kWideProducer ? C::kProducerRegsMaskSmem : C::kProducerRegs>();
    if (threadIdx.x == 0) {
      Tensor mQ = kp.tma_q.get_tma_tensor(make_shape(kp.seqlen_q, int(C::kHeadDim), kp.heads_q, kp.batch));
      Tensor mK = kp.tma_k.get_tma_tensor(make_shape(kp.seqlen_k, int(C::kHeadDim), kp.heads_kv, kp.batch));
      Tensor mV = kp.tma_v.get_tma_tensor(make_shape(int(C::kHeadDim), kp.seqlen_k, kp.heads_kv, kp.batch));
      PipeState state = cutlass::make_producer_start_state<PipelineK>();
      int it = 0;
#pragma unroll 1
      for (int u = first_unit;; u += unit_stride, ++it) {
        int n_first = 0, n_last = -1;  // key tiles [n_first, n_last) of unit u (-1: all)
        if constexpr (kSplit) {
          if (kp.split_tiles > 0) {  // item `it` of this CTA
            const int4 wi = split_item(kp, ss.tail_items, it, first_unit, unit_stride);
            u = wi.x, n_first = wi.y, n_last = wi.z;
            if (u < 0) break;
          }
        }
        if (u >= units) break;
        const WorkUnit w = work_unit(u, unit_heads(kp), m_blocks);
        const int head_kv = kp.pack_rows > 0 ? w.head : w.head / kp.group;
        if (n_last < 0) n_last = unit_key_tiles<kBN>(kp, w.m_block);
        Tensor gQ = local_tile(mQ(_, _, w.head, w.batch), TileQ{}, make_coord(w.m_block, 0));  // (128, 128)
        Tensor gK = local_tile(mK(_, _, head_kv, w.batch), typename KT::TileK{}, make_coord(_, 0));  // (kBN, 128, n)
        Tensor gV = local_tile(mV(_, _, head_kv, w.batch), typename KT::TileV{}, make_coord(0, _));  // (128, kBN, n)
        auto tQ = tma_partition(kp.tma_q, Int<0>{}, Layout<_1>{}, group_modes<0, 2>(sQ), group_modes<0, 2>(gQ));
        auto tK = tma_partition(kp.tma_k, Int<0>{}, Layout<_1>{}, group_modes<0, 2>(sK), group_modes<0, 2>(gK));
        auto tV = tma_partition(kp.tma_v, Int<0>{}, Layout<_1>{}, group_modes<0, 2>(sV), group_modes<0, 2>(gV));

        // A CTA's first unit loads Q first (the per-unit kernels: exactly the order they always had; K/V
        // first cost them 4-8% on the short 007 units, H200 2026-11-30). A later unit's first K/V tile
        // goes out before its Q: those ring stages are free once the previous unit's last GEMMs read
        // them, and the Q tile once all of the previous unit's wgmma have completed (q_empty, arrived
        // before its epilogue, which stores O from registers), so both loads overlap that epilogue.
        const TileWalker walk(kp, w.batch, w.m_block, n_last);
        bool q_issued = it == 0;
        auto load_q = [&]() {
          cutlass::arch::ClusterTransactionBarrier::arrive_and_expect_tx(&ss.q_full, kp.q_tile_bytes);
          if (kp.pack_rows > 0) {
            // Two boxes of (64 d, P positions, G heads): rows g * P + p of each 64-column half.
            CUTE_UNROLL
            for (int c = 0; c < 2; ++c)
              SM90_TMA_LOAD_5D::copy(&kp.tma_q_packed, &ss.q_full, uint64_t(TMA::CacheHintSm90::EVICT_NORMAL),
                                     ss.q + c * (C::kBlockM * 64), c * 64, w.m_block * kp.pack_rows, 0, w.head,
                                     w.batch);
          } else {
            copy(kp.tma_q.with(ss.q_full), get<0>(tQ), get<1>(tQ));
          }
        };
        if (q_issued) load_q();
#pragma unroll 1
        for (int n = walk.next(n_first);; n = walk.next(n + 1)) {
          if (n < n_last) {
            pipe_k.producer_acquire(state);
            copy(kp.tma_k.with(*pipe_k.producer_get_barrier(state)), get<0>(tK)(_, n), get<1>(tK)(_, state.index()));
            pipe_v.producer_acquire(state);
            copy(kp.tma_v.with(*pipe_v.producer_get_barrier(state)), get<0>(tV)(_, n), get<1>(tV)(_, state.index()));
            ++state;
          }
          if (!q_issued) {
            cutlass::arch::ClusterBarrier::wait(&ss.q_empty, (it - 1) & 1);
            load_q();
            q_issued = true;
          }
          if (n >= n_last) break;
        }
        if constexpr (!kPersistent) break;  // one unit per CTA: no loop back edge at all
      }
    }
    if constexpr (kMaskSmem) {
      if (threadIdx.x >= 32 && kp.mask != nullptr) {
        // ------------------------------------------------------------ mask tile copies (warps 1..3)
        // Same tile order as the TMA thread; every visited tile that is not ZERO (MIXED, or DEAD when
        // DEAD tiles are not skipped) is staged, in the order the consumers apply them.
        PipeStateM st = cutlass::make_producer_start_state<PipelineM>();
#pragma unroll 1
        for (int u = first_unit; u < units; u += unit_stride) {
        const WorkUnit wu = work_unit(u, unit_heads(kp), m_blocks);
        const int n_tiles = unit_key_tiles<kBN>(kp, wu.m_block);
        // The walker first: its live-row reads need registers that the copy loop's state would take.
        const TileWalker walk(kp, wu.batch, wu.m_block, n_tiles);
        const int row0 = wu.m_block * C::kBlockM;
        const int rows_valid = min(int(C::kBlockM), kp.seqlen_q - row0);
        // Row 0 of this q-block (a pointer past the mask for padding rows is never dereferenced).
        const uint16_t* mrow0 =
            kp.mask + int64_t(wu.batch) * kp.mask_batch_stride + int64_t(row0) * kp.mask_row_stride;
#pragma unroll 1
        for (int n = walk.next(0); n < n_tiles; n = walk.next(n + 1)) {
          const int kind = walk.kind(n);
          if (kind == kTileZero || (kCausalTiles && walk.causal_predicate(kind))) continue;  // as the consumers
          // The ring's barriers by their shared addresses (not through pipe_m's 64-bit generic
          // pointers: this loop runs in kProducerRegsMaskSmem registers).
          cutlass::arch::ClusterBarrier::wait(reinterpret_cast<uint64_t const*>(&ss.pipe_m.empty_barrier_[st.index()]),
                                              st.phase());
          // Per-thread indices re-derived every tile from an opaque copy: keeps the compiler from
          // hoisting per-thread address terms out of the tile loop (they spilled at 40 registers).
          int pt = int(threadIdx.x) - 32;  // 0..95
          asm volatile("" : "+r"(pt));
          const int pwarp = pt / 32, lane = pt % 32;
          const uint32_t sbase = cute::cast_smem_ptr_to_uint(&ss.mask[0][0]) + st.index() * kMaskStageBytes;
          const int key0 = n * kBN;
          const int keys = min(kp.seqlen_k - key0, kBN);  // valid keys of the tile, >= 1
          // Source of empty copies: a 16-byte aligned address inside the mask's allocation.
          const void* dummy = reinterpret_cast<const void*>(reinterpret_cast<uintptr_t>(kp.mask) & ~uintptr_t(15));
          // 16 lanes per row, one 16-byte chunk (8 keys) each: a warp copies two rows per step.
          const int chunk = lane % 16;
          const int col_bytes = 2 * max(0, min(8, keys - 8 * chunk));
          int rr = 2 * pwarp + lane / 16;
          const char* src = reinterpret_cast<const char*>(mrow0 + int64_t(rr) * kp.mask_row_stride + key0 + 8 * chunk);
#pragma unroll 1
          for (; rr < C::kBlockM; rr += 2 * kMaskCopyWarps) {
            const int bytes = rr < rows_valid ? col_bytes : 0;
            cp_async_16(sbase + rr * 256 + ((chunk ^ (rr & 7)) << 4), bytes > 0 ? src : dummy, bytes);
            src += 2 * kMaskCopyWarps * 2 * kp.mask_row_stride;
          }
          uint64_t const* full = reinterpret_cast<uint64_t const*>(&ss.pipe_m.full_barrier_[st.index()]);
          cutlass::arch::cpasync_barrier_arrive(full);  // lands when this thread's copies have
          cutlass::arch::ClusterBarrier::arrive(full);
          ++st;
        }
        if constexpr (!kPersistent) break;
        }  // units
      }
    }
  } else {
    // ---------------------------------------------------------------- consumers
    cutlass::arch::warpgroup_reg_alloc<kWideProducer ? C::kConsumerRegsMaskSmem : C::kConsumerRegs>();
    const int ct = threadIdx.x - 128;          // 0..255 across both consumer warpgroups
    const int consumer_wg = warp_group - 1;    // 0 or 1: rows [64*wg, 64*wg + 64) of the tile

    typename KT::TiledMmaQK mma_qk;
    typename KT::TiledMmaPV mma_pv;
    auto thr_qk = mma_qk.get_thread_slice(ct);
    auto thr_pv = mma_pv.get_thread_slice(ct);

    // Pipeline states run on across the units of this CTA (consumer start: stage 0, phase 0).
    [[maybe_unused]] PipeStateM st_m;
    PipeState st_k;  // the pipelined loop's V state lags it by one tile within a unit, equals it between units
    const bool tail = (kp.seqlen_k % kBN) != 0;

    int it = 0;
#pragma unroll 1
    for (int u = first_unit;; u += unit_stride, ++it) {
    int n_first = 0, n_last = -1;  // as the producer's
    if constexpr (kSplit) {
      if (kp.split_tiles > 0) {
        const int4 wi = split_item(kp, ss.tail_items, it, first_unit, unit_stride);
        u = wi.x, n_first = wi.y, n_last = wi.z;
        if (u < 0) break;
      }
    }
    if (u >= units) break;
    const WorkUnit wu = work_unit(u, unit_heads(kp), m_blocks);
    const int m_block = wu.m_block, batch = wu.batch, head = wu.head;
    // Everything that depends only on the thread or on shared-memory addresses (wgmma descriptors:
    // 2 x 8 + 2 x 16 64-bit values, key columns, mask staging addresses, the epilogue's addresses) is
    // derived per unit from opaque copies: hoisted out of the unit loop it stayed live through the
    // mainloop and ptxas spilled 360-570 bytes of the pipelined kernels.
    int ct_u = ct, smem_off = 0;
    if constexpr (kPersistent) asm volatile("" : "+r"(ct_u), "+r"(smem_off));
    auto thr_qk_u = mma_qk.get_thread_slice(ct_u);
    Tensor tSrQ = thr_qk.partition_fragment_A(make_tensor(make_smem_ptr(ss.q + smem_off), SmemLayoutQ{}));  // (MMA, 1, 8)
    Tensor tSrK = thr_qk.partition_fragment_B(
        make_tensor(make_smem_ptr(ss.k + smem_off), typename KT::SmemLayoutK{}));  // (.., stages)
    Tensor tOrV = thr_pv.partition_fragment_B(
        make_tensor(make_smem_ptr(ss.v + smem_off), typename KT::SmemLayoutV{}));  // (.., stages)
    // (row, col) of each accumulator element from an identity tensor partitioned like the accumulator.
    Tensor tScS = thr_qk_u.partition_C(make_identity_tensor(Shape<Int<C::kBlockM>, Int<kBN>>{}));
    int local_row[2];  // this thread's two rows within the q-block
    CUTE_UNROLL
    for (int r = 0; r < 2; ++r) local_row[r] = get<0>(tScS(acc_idx(0, r, 0)));
    // Key columns within a tile: col0 + 8j + c for element (c, r, j) (the wgmma C layout: lane l holds
    // columns 2 (l % 4), +1 of every 8-column group). One register instead of a kBN-entry table: at 176
    // keys the table's 44 registers spilled.
    const int col0 = get<1>(tScS(acc_idx(0, 0, 0)));
    Tensor tSrS = partition_fragment_C(mma_qk, Shape<Int<C::kBlockM>, Int<kBN>>{});   // fp32
    Tensor tOrO = partition_fragment_C(mma_pv, Shape<Int<C::kBlockM>, Int<C::kHeadDim>>{});  // fp32
    // P as the RS A operand: ((2,2,2), 1, kBN/16 k-blocks) bf16. For 16-bit A the register layout
    // holds, per thread, exactly the (row, col) pairs of the accumulator, and the compact linear order of
    // ((2,2,2),1,kBN/16) coincides with that of the accumulator's ((2,2,kBN/8),1,1): value (c, r, j) of
    // S is element c + 2r + 4j of both (j = 2*kblock + half). A straight element-wise convert suffices.
    Tensor tOrP = make_tensor<Element>(partition_shape_A(mma_pv, Shape<Int<C::kBlockM>, Int<kBN>>{}));
    static_assert(decltype(size(tSrS))::value == kBN / 2 && decltype(size(tOrP))::value == kBN / 2 &&
                      decltype(size(tOrO))::value == 64,
                  "unexpected per-thread fragment sizes");
    static_assert(decltype(size<2>(tOrP))::value == kBN / 16 && decltype(size<2>(tSrS))::value == 1,
                  "P's k-blocks / the score fragment's shape");


    const int n_tiles = unit_key_tiles<kBN>(kp, m_block);
    if (n_last < 0) n_last = n_tiles;
    // The Sk tail tile (the masked path) is this item's last tile, if the item reaches the unit's end: in terms of
    // n_last only, so that n_tiles is not live in the loop beside it.
    const bool tail_tile_last = tail && n_last == n_tiles;
    // First query position of the unit; the masked-path choice below and the causal bound use it.
    const int first_row = kMaskSmem ? m_block * C::kBlockM : m_block * unit_rows(kp);
    int row[2];  // query position of this thread's two rows
    CUTE_UNROLL
    for (int r = 0; r < 2; ++r) row[r] = first_row + local_row[r];
    if constexpr (!kMaskSmem) {  // packed units never stage mask tiles
      if (kp.pack_rows > 0) {
        // Tile row g * P + p: position first_row + p of query head hkv * G + g. Rows from G * P on hold
        // no head: a position past every bound (no mask row, nothing causal-masked, never stored).
        CUTE_UNROLL
        for (int r = 0; r < 2; ++r) {
          const int g = local_row[r] / kp.pack_rows;
          row[r] = g < kp.group ? first_row + local_row[r] - g * kp.pack_rows : kRowNone;
        }
      }
    }
    const uint16_t* mask_row[2] = {nullptr, nullptr};
    if (kp.mask != nullptr) {
      CUTE_UNROLL
      for (int r = 0; r < 2; ++r)
        if (row[r] < kp.seqlen_q)
          mask_row[r] = kp.mask + int64_t(batch) * kp.mask_batch_stride + int64_t(row[r]) * kp.mask_row_stride;
    }
    // Staged mask tiles: this thread's shared-memory addresses (see MaskSmemThread).
    MaskSmemThread ms{};
    if constexpr (kMaskSmem) {
      const uint32_t smem_mask = cute::cast_smem_ptr_to_uint(&ss.mask[0][0]) + smem_off;
      const uint32_t q4 = uint32_t(2 * col0);  // col0 = 2q: the pair's byte offset in its 16-byte chunk
      CUTE_UNROLL
      for (int r = 0; r < 2; ++r) {
        const int lr = local_row[r];  // 0..127
        ms.a0q[r] = smem_mask + uint32_t(lr) * 256 + (uint32_t(lr & 7) << 4) + q4;
      }
    }

    // Tiles that need the per-element mask path: every tile with a mask tensor; the Sk tail tile; the
    // causal tiles that reach past the block's first row.

    float m[2] = {kNegInf, kNegInf};
    float l[2] = {0.f, 0.f};
    clear(tOrO);

    // The walker's summary loads overlap the Q load's latency.
    const TileWalker walk(kp, batch, m_block, n_last);

    cutlass::arch::ClusterTransactionBarrier::wait(&ss.q_full, it & 1);

    // Issue S = Q K^T on a K stage / O += P V for a V stage (asynchronous: the caller waits).
    auto issue_qk = [&](int stage) { issue_qk_gemm(mma_qk, tSrQ, tSrK(_, _, _, stage), tSrS); };
    auto issue_pv = [&](int stage) { issue_pv_gemm(mma_pv, tOrP, tOrV(_, _, _, stage), tOrO); };
    float rescale[2];
    // The softmax step of key tile n. ptxas left it as a call in the persistent staged-mask kernels (a
    // 672-byte stack frame: the accumulators in local memory, 4-10x slower per tile on the H200,
    // 2026-11-30; --warn-on-spills does not report it), and forcing it inline everywhere made the
    // per-unit staged-mask kernel spill 100 B then: so it is forced inline only where the heuristic
    // fails. It fails in the per-unit staged-mask kernel built with kLean too (a 560-byte frame, 2026-12-01);
    // forced inline there, ptxas spills 16 B, and the S 256 shapes ran ~10% slower than without kLean
    // (bench/NOTES.md nineteenth session): hence the two builds of that kernel. (Those spills came with a
    // consumer loop that peeled its first tile, i.e. inlined every variant twice, and a second staged mask
    // layout; with one loop and one layout, 2026-12-01, only the persistent staged-mask kernel (28/44 B) and
    // the per-unit 176-key kernel (20/24 B) spill: tests/test_codegen.py holds each kernel to its budget.)
#define VLATTN_SOFTMAX_STEP(INLINE) \
    [&](int n) INLINE { \
      const int key0 = n * kBN;                                                                                   \
      const bool masked = (!kPlain && (kp.mask != nullptr || (kp.causal && key0 + kBN - 1 > first_row))) ||       \
                          !kp.fold_scale || (tail_tile_last && n == n_last - 1);                                  \
      if constexpr (kPlain) {                                                                                     \
        /* No mask, not causal: only the Sk tail (or scale <= 0) takes the masked path, without mask loads. */ \
        if (masked)                                                                                               \
          softmax_tile<true, kMaskGlobal, false>(tSrS, rescale, m, l, row, col0, key0, kp, mask_row, false);      \
        else                                                                                                      \
          softmax_tile<false>(tSrS, rescale, m, l, row, col0, key0, kp, mask_row, false);                         \
        return;                                                                                                   \
      }                                                                                                           \
      if (masked) {                                                                                               \
        const int kind = walk.kind(n);                                                                            \
        const bool load_mask = kind != kTileZero;                                                                 \
        /* A CAUSAL tile (summary kind) in a block whose rows are all live: the causal predicate, no mask      \
           loads (its own instantiation, so the other paths' code stays as it was). */                        \
        if constexpr (kCausalTiles) {                                                                             \
          if (walk.causal_predicate(kind)) {                                                                      \
            softmax_tile<true, kMaskGlobal, true, true, true>(tSrS, rescale, m, l, row, col0, key0, kp, mask_row,  \
                                                              false);                                             \
            return;                                                                                               \
          }                                                                                                       \
        }                                                                                                         \
        if constexpr (kMaskSmem) {                                                                                \
          if (load_mask && kp.mask != nullptr) {                                                                  \
            pipe_m.consumer_wait(st_m);                                                                           \
            softmax_tile<true, kMaskSmemAligned>(tSrS, rescale, m, l, row, col0, key0, kp, mask_row, true, &ms,    \
                                                 st_m.index());                                                   \
            pipe_m.consumer_release(st_m);                                                                        \
            ++st_m;                                                                                               \
            return;                                                                                               \
          }                                                                                                       \
        }                                                                                                         \
        /* No mask values to add (a ZERO tile; kLean kernels launch with a mask only) on a tile inside the   \
           keys and below the causal diagonal: the same arithmetic without the per-key checks, which cannot   \
           fire there. */                                                                                     \
        if constexpr (kLean) {                                                                                    \
          if (kp.lean_zero && (kMaskSmem || !load_mask || kp.mask == nullptr) &&                                  \
              !(tail_tile_last && n == n_last - 1) && !(kp.causal && key0 + kBN - 1 > first_row)) {               \
            softmax_tile<true, kMaskGlobal, false, false>(tSrS, rescale, m, l, row, col0, key0, kp, mask_row,     \
                                                          false);                                                 \
            return;                                                                                               \
          }                                                                                                       \
        }                                                                                                         \
        /* kMaskSmem kernels run only with a mask: here the tile is ZERO (no mask loads compiled in). */       \
        softmax_tile<true>(tSrS, rescale, m, l, row, col0, key0, kp, mask_row, kMaskSmem ? false : load_mask);     \
      } else                                                                                                      \
        softmax_tile<false>(tSrS, rescale, m, l, row, col0, key0, kp, mask_row, false);                            \
    }
    auto softmax = [&] {
      if constexpr (kMaskSmem && (kPersistent || kLean)) return VLATTN_SOFTMAX_STEP(CUTLASS_LAMBDA_FUNC_INLINE);
      else return VLATTN_SOFTMAX_STEP();
    }();
#undef VLATTN_SOFTMAX_STEP
    auto convert_p = [&]() { scores_to_p(tSrS, tOrP); };
    auto rescale_o = [&]() { rescale_rows(tOrO, rescale); };

    if constexpr (!kPipelined) {
      // Plain loop: every step waits for its GEMM before going on.
      PipeState& st = st_k;
      for (int n = walk.next(n_first); n < n_last; n = walk.next(n + 1)) {
        pipe_k.consumer_wait(st);
        issue_qk(st.index());
        warpgroup_wait<0>();
        warpgroup_fence_operand(tSrS);
        pipe_k.consumer_release(st);
        softmax(n);
        rescale_o();
        convert_p();
        pipe_v.consumer_wait(st);
        issue_pv(st.index());
        warpgroup_wait<0>();
        warpgroup_fence_operand(tOrO);
        pipe_v.consumer_release(st);
        ++st;
      }
    } else {
      // Inter-warpgroup ping-pong (brief §3): the two consumer warpgroups take turns issuing their
      // GEMMs, so one warpgroup's softmax runs while the other's wgmma occupy the tensor cores. Turn
      // barrier T_w (256 threads: w syncs, the other arrives). Both warpgroups visit the same tiles, so
      // they have the same number k of issue points; warpgroup 0 goes first (warpgroup 1 arrives on T_0
      // once up front and skips its arrive after its last issue point), keeping every barrier balanced:
      // T_0 gets k syncs and 1 + (k - 1) arrives, T_1 k syncs and k arrives.
      auto turn_wait = [&]() { cutlass::arch::NamedBarrier::sync(256, kTurnBarrierBase + consumer_wg); };
      auto turn_pass = [&](bool last) {
        if (!(last && consumer_wg == 1)) cutlass::arch::NamedBarrier::arrive(256, kTurnBarrierBase + (1 - consumer_wg));
      };

      // Intra-warpgroup overlap (brief §3): while the softmax of tile i runs on the CUDA cores, the
      // tensor cores compute P_{i-1} V_{i-1}. S_i and PV_{i-1} are issued back to back; wait<1> returns
      // once S_i (committed first) is done; O is rescaled only after wait<0> (PV_{i-1} landed), and P's
      // registers are overwritten only then (the RS wgmma reads them until it completes).
      PipeState st_v = st_k;
      // One loop for every tile, rotated so that the softmax step opens it (its variants are inlined
      // once, not once more for a peeled first tile) and every wgmma inside it is issued on every trip:
      // the first tile's S = Q K^T is issued before the loop, the last tile's P V after it. A loop that
      // issued P V under `if (!first)` made ptxas serialize the wgmma of every pipelined kernel (C7513,
      // tests/test_codegen.py; 20-48% slower on the long 007 shapes, H200 2026-12-01).
      int n = walk.next(n_first);
      if (n < n_last) {
        if (consumer_wg == 1) cutlass::arch::NamedBarrier::arrive(256, kTurnBarrierBase + 0);
        pipe_k.consumer_wait(st_k);
        turn_wait();
        issue_qk(st_k.index());
        turn_pass(false);
        warpgroup_wait<0>();
        warpgroup_fence_operand(tSrS);
        pipe_k.consumer_release(st_k);
        ++st_k;
        bool first = true;
#pragma unroll 1
        while (true) {
          softmax(n);
          warpgroup_wait<0>();  // PV_{n-1} (nothing in flight on the first tile)
          warpgroup_fence_operand(tOrO);
          // Keep P's registers live until the RS wgmma that reads them asynchronously has completed:
          // without this the compiler may hand them to the softmax above as temporaries.
          warpgroup_fence_operand(tOrP);
          if (!first) {  // the first tile: O is still 0 and its rescale is moot
            pipe_v.consumer_release(st_v);
            ++st_v;
            rescale_o();
          }
          convert_p();
          first = false;
          const int next = walk.next(n + 1);
          if (next >= n_last) break;
          n = next;
          pipe_k.consumer_wait(st_k);
          pipe_v.consumer_wait(st_v);
          turn_wait();
          issue_qk(st_k.index());
          issue_pv(st_v.index());
          turn_pass(false);
          warpgroup_wait<1>();
          warpgroup_fence_operand(tSrS);
          pipe_k.consumer_release(st_k);
          ++st_k;
        }
        pipe_v.consumer_wait(st_v);
        turn_wait();
        issue_pv(st_v.index());
        turn_pass(true);
        warpgroup_wait<0>();
        warpgroup_fence_operand(tOrO);
        pipe_v.consumer_release(st_v);
      }
    }  // kPipelined

    // ---------------------------------------------------------------- epilogue
    float inv_l[2];
    inverse_row_sums(l, inv_l);
    Tensor tOcO = mma_pv.get_thread_slice(ct_u).partition_C(
        make_identity_tensor(Shape<Int<C::kBlockM>, Int<C::kHeadDim>>{}));
    const int64_t o_row_stride = int64_t(kp.heads_q) * C::kHeadDim;
    // The tile row -> (query position, head) map of store_o_rows (a functor: it compiles to the same SASS as the
    // loop written out, cuobjdump, thirty-fifth session, where a helper returning the row's pointer had cost these
    // kernels 64-88 SASS instructions, twenty-third session).
    auto row_map = [&](int r_local, int& q_row, int& head_out) {
      q_row = first_row + r_local, head_out = head;
      if constexpr (!kMaskSmem) {
        if (kp.pack_rows > 0) {  // tile row g * P + p -> position first_row + p of head hkv * G + g
          const int g = r_local / kp.pack_rows;
          q_row = g < kp.group ? first_row + r_local - g * kp.pack_rows : kp.seqlen_q;
          head_out = head * kp.group + g;
        }
      }
    };
    if constexpr (kPersistent) {
      // Every wgmma of this unit has completed (warpgroup_wait<0> above), so nothing reads the Q tile
      // any more: release it now, and the producer loads the next unit's Q under this epilogue instead
      // of after it (on 034's short key sequences a unit is 3-6 key tiles, and each unit boundary paid
      // the Q load's latency).
      cutlass::arch::fence_view_async_shared();
      cutlass::arch::ClusterBarrier::arrive(&ss.q_empty);
      if constexpr (kSplit) {
        // A piece of a split tail unit: its partial result, merged by tail_combine_kernel. The slot is read again
        // here rather than kept live through the key loop.
        const int slot = kp.split_tiles > 0 ? split_item(kp, ss.tail_items, it, first_unit, unit_stride).w : -1;
        if (slot >= 0) {
          store_partial(tOrO, tOcO, m, l, ct_u % 4, kp.split_o + int64_t(slot) * (C::kBlockM * C::kHeadDim),
                        kp.split_ml + int64_t(slot) * (2 * C::kBlockM));
          continue;
        }
      }
      if constexpr (kOStage) {
        // O through this kernel's own staging tile (this warpgroup's 64 rows), then 16-byte coalesced stores:
        // from registers, 32 four-byte stores per thread held their address registers until the LSU took them
        // (kv_resident_kernel's first version: ~19% of its stall samples, bench/NOTES.md thirty-fifth session).
        // The first barrier: this warpgroup's reads of the previous unit's rows (store_o_rows) are done before
        // they are overwritten.
        const uint32_t s_tile = cute::cast_smem_ptr_to_uint(ss.o);
        cutlass::arch::NamedBarrier::sync(128, kEpilogueBarrierBase + consumer_wg);
        stage_o(tOrO, tOcO, inv_l, s_tile);
        cutlass::arch::NamedBarrier::sync(128, kEpilogueBarrierBase + consumer_wg);
        store_o_rows(s_tile, ct_u % 128, consumer_wg, kp, batch, o_row_stride, row_map);
      } else {
        // No room for a staging tile (176-key tiles, the staged mask): from registers, per row of this
        // thread bf16 pairs at columns 8j + 2 (lane % 4).
        CUTE_UNROLL
        for (int r = 0; r < 2; ++r) {
          const int r_local = get<0>(tOcO(acc_idx(0, r, 0)));
          int q_row, head_out;
          row_map(r_local, q_row, head_out);
          if (q_row < kp.seqlen_q) {
            Element* dst =
                kp.o + (int64_t(batch) * kp.seqlen_q + q_row) * o_row_stride + int64_t(head_out) * C::kHeadDim;
            CUTE_UNROLL
            for (int j = 0; j < kOColGroups; ++j) {
              const int i0 = acc_idx(0, r, j);
              *reinterpret_cast<__nv_bfloat162*>(dst + get<1>(tOcO(i0))) =
                  __floats2bfloat162_rn(tOrO(i0) * inv_l[r], tOrO(i0 + 1) * inv_l[r]);
            }
          }
        }
      }
    } else {
      // One unit per CTA: stage O in this warpgroup's own 64 rows of the Q tile (only this warpgroup's
      // wgmma read them, and all of those completed: warpgroup_wait<0> above), then 16-byte coalesced
      // stores. The staging and store addresses: from the opaque per-unit thread index (see above).
      const uint32_t s_tile = cute::cast_smem_ptr_to_uint(ss.q);
      stage_o(tOrO, tOcO, inv_l, s_tile);
      cutlass::arch::NamedBarrier::sync(128, kEpilogueBarrierBase + consumer_wg);
      store_o_rows(s_tile, ct_u % 128, consumer_wg, kp, batch, o_row_stride, row_map);
      break;  // the last unit: nobody waits for q_empty
    }
    }  // units
  }
#endif  // sm_90a
}

// ----------------------------------------------------------------------------------------------
// The tail split's combine kernel
// ----------------------------------------------------------------------------------------------

// Merges the pieces of every split tail unit (attn_rules::tail_split_plan; attention_kernel's store_partial):
// per row, M = max_i m_i, w_i = exp2((m_i - M) log2e), O = sum_i w_i O_i / sum_i w_i l_i, bf16, to o as the
// attention epilogue stores it. Block (t, y): tail unit t, rows 8y .. 8y + 7, one per warp, 4 columns per lane. A
// row's maxima and sums are loaded by one lane per piece (32 pieces per step) and reduced across the warp
// (butterfly: the same order every run), and its pieces' O slices are loaded kCombineBatch at a time before they are
// summed: the first version walked rows and pieces with dependent loads, 4 rows per warp, and took 11.9 µs for Lq
// 8192's 13 MB of partials in L2, this one 9.9 (ncu, clocks at base, bench/NOTES.md forty-fourth session). A unit
// that one CTA ran whole (none while chunk < tiles, which the plan's use implies) was stored by that CTA: its block
// returns.
struct TailCombineParams {
  const float* split_o;
  const float* split_ml;
  Element* o;
  int main_units, tiles, chunk, max_pieces;
  int heads_q, m_blocks, seqlen_q;
};
constexpr int kCombineThreads = 256;
constexpr int kCombineRows = kCombineThreads / 32;  // rows per block: one per warp
constexpr int kCombineBatch = 4;                    // pieces whose O slices are in flight together
static_assert(C::kHeadDim == 32 * 4 && C::kBlockM % kCombineRows == 0,
              "tail_combine_kernel: a warp per row, 4 columns per lane");

__global__ void __launch_bounds__(kCombineThreads) tail_combine_kernel(const TailCombineParams cp) {
  pdl_enter();
  const int t = blockIdx.x;
  const int pieces =
      attn_rules::tail_last_cta(t, cp.tiles, cp.chunk) - attn_rules::tail_first_cta(t, cp.tiles, cp.chunk) + 1;
  if (pieces < 2) return;
  const WorkUnit w = work_unit(cp.main_units + t, cp.heads_q, cp.m_blocks);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int r = blockIdx.y * kCombineRows + warp;
  const int q_row = w.m_block * C::kBlockM + r;
  if (q_row >= cp.seqlen_q) return;
  const int64_t slot0 = int64_t(t) * cp.max_pieces;
  const float* ml = cp.split_ml + slot0 * (2 * C::kBlockM) + r;  // piece i: ml[i * 256] (max), ml[i * 256 + 128] (sum)
  constexpr int kMlFloats = 2 * C::kBlockM;
  // The row max over the pieces, 32 pieces per step (one per lane), then the warp's butterfly (the same order every
  // run).
  float mx = kNegInf;
#pragma unroll 1
  for (int j0 = 0; j0 < pieces; j0 += 32)
    if (j0 + lane < pieces) mx = fmaxf(mx, ml[(j0 + lane) * kMlFloats]);
  CUTE_UNROLL
  for (int o = 16; o > 0; o /= 2) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
  // Per group of 32 pieces: lane i's weight and weighted sum, then the group's O slices kCombineBatch at a time,
  // each weighted by its lane's weight (broadcast), summed in piece order.
  constexpr int64_t kSlotFloats = int64_t(C::kBlockM) * C::kHeadDim;
  const float* po = cp.split_o + (slot0 * C::kBlockM + r) * C::kHeadDim + 4 * lane;
  float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
  float sum = 0.f;
#pragma unroll 1
  for (int j0 = 0; j0 < pieces; j0 += 32) {
    const int n = min(32, pieces - j0);
    float w_i = 0.f;
    if (lane < n && mx != kNegInf) {
      w_i = exp2f((ml[(j0 + lane) * kMlFloats] - mx) * kLog2e);
      sum += w_i * ml[(j0 + lane) * kMlFloats + C::kBlockM];
    }
#pragma unroll 1
    for (int i0 = 0; i0 < n; i0 += kCombineBatch) {
      float4 v[kCombineBatch];
      CUTE_UNROLL
      for (int k = 0; k < kCombineBatch; ++k)
        if (i0 + k < n) v[k] = *reinterpret_cast<const float4*>(po + (j0 + i0 + k) * kSlotFloats);
      CUTE_UNROLL
      for (int k = 0; k < kCombineBatch; ++k) {
        const float wgt = __shfl_sync(0xffffffffu, w_i, min(i0 + k, 31));
        if (i0 + k < n) acc.x += wgt * v[k].x, acc.y += wgt * v[k].y, acc.z += wgt * v[k].z, acc.w += wgt * v[k].w;
      }
    }
  }
  CUTE_UNROLL
  for (int o = 16; o > 0; o /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, o);
  const float inv = sum > 0.f ? 1.f / sum : 0.f;
  const __nv_bfloat162 lo = __floats2bfloat162_rn(acc.x * inv, acc.y * inv);
  const __nv_bfloat162 hi = __floats2bfloat162_rn(acc.z * inv, acc.w * inv);
  uint2 packed;
  packed.x = *reinterpret_cast<const uint32_t*>(&lo);
  packed.y = *reinterpret_cast<const uint32_t*>(&hi);
  Element* dst = cp.o + (int64_t(w.batch) * cp.seqlen_q + q_row) * int64_t(cp.heads_q) * C::kHeadDim +
                 int64_t(w.head) * C::kHeadDim;
  *reinterpret_cast<uint2*>(dst + 4 * lane) = packed;
}

// The K/V-resident kernel for short key sequences and its launcher.
#include "attention/sm90_attention_resident.cuh"
#include "attention/sm90_attention_splitkeys.cuh"

// ----------------------------------------------------------------------------------------------
// Host launcher
// ----------------------------------------------------------------------------------------------

// Mask summary scratch: live-row words (uint4 per (mask batch, q-block, chunk)) then tile kinds (bytes).
// Every byte the attention kernel reads is written by the summary kernel: no memset.
struct SummaryLayout {
  int mask_batches = 0, m_blocks = 0, n_blocks = 0;
  SummaryChunking chunking;
  size_t live_bytes = 0, kinds_bytes = 0;
  size_t total() const { return live_bytes + kinds_bytes; }
};

using attn_rules::mask_vec16;
using attn_rules::persistent_pays;
using attn_rules::summary_pays;
static_assert(attn_rules::kBlockM == C::kBlockM && attn_rules::kBlockN == C::kBlockN &&
                  attn_rules::kBlockNWide == C::kBlockNWide,
              "attention_rules.h and the kernel disagree on the tile shape");

// The attention's development switches (launch/dev_switch.h; each documented at its rule in attention_rules.h).
inline attn_rules::LaunchSwitches launch_switches() {
  attn_rules::LaunchSwitches sw;
  sw.simple = dev_switch_on(DevSwitch::kAttnSimple);
  sw.mask_smem = static_cast<int>(dev_switch(DevSwitch::kAttnMaskSmem));
  sw.lean_zero = static_cast<int>(dev_switch(DevSwitch::kAttnLeanZero));
  sw.pack = static_cast<int>(dev_switch(DevSwitch::kAttnPack));
  sw.persistent = static_cast<int>(dev_switch(DevSwitch::kAttnPersistent));
  sw.bn = static_cast<int>(dev_switch(DevSwitch::kAttnBn));
  sw.resident = static_cast<int>(dev_switch(DevSwitch::kAttnResident));
  sw.tail_split = static_cast<int>(dev_switch(DevSwitch::kAttnTailSplit));
  sw.diag_half = dev_switch_on(DevSwitch::kAttnDiagHalf);
  sw.tma_o = dev_switch_on(DevSwitch::kAttnTmaO);
  sw.walk_cache = dev_switch_on(DevSwitch::kAttnWalkCache);
  sw.split_keys = static_cast<int>(dev_switch(DevSwitch::kAttnSplitKeys));
  return sw;
}

inline SummaryLayout summary_layout(const AttentionParams& p, bool runs) {
  SummaryLayout s;
  if (!runs) return s;
  s.mask_batches = p.mask_batch_stride == 0 ? 1 : p.batch;
  s.m_blocks = ceil_div(p.seqlen_q, int(C::kBlockM));
  s.n_blocks = ceil_div(p.seqlen_k, int(C::kBlockN));
  const size_t blocks = size_t(s.mask_batches) * s.m_blocks;
  s.chunking = mask_summary_chunking((long long)blocks, s.n_blocks, p.sm_count);
  s.live_bytes = blocks * s.chunking.n_chunks * kLiveWordsPerBlock * sizeof(uint32_t);
  s.kinds_bytes = (blocks * s.n_blocks + 15) / 16 * 16;
  return s;
}

// Workspace: the mask summary's bytes, then (a split launch has no mask, so from 0) the split's partials, 16-byte
// aligned: O slots [slots][128][128] fp32, then the row max / sum slots [slots][2][128] fp32.
constexpr size_t kSplitSlotOFloats = size_t(C::kBlockM) * C::kHeadDim;
constexpr size_t kSplitSlotMlFloats = 2 * size_t(C::kBlockM);
inline size_t split_offset(size_t summary_bytes) { return (summary_bytes + 15) / 16 * 16; }
inline size_t split_bytes(const attn_rules::TailSplit& s) {
  return s.use ? size_t(s.slots()) * (kSplitSlotOFloats + kSplitSlotMlFloats) * sizeof(float) : 0;
}

inline size_t workspace_bytes(const attn_rules::LaunchPlan& plan, const AttentionParams& p) {
  const size_t summary = summary_layout(p, plan.summary).total();
  const size_t split = split_bytes(plan.split);
  return split > 0 ? split_offset(summary) + split : summary;
}

// The combine kernel after a split launch (PDL: its blocks wait for the attention grid; the O projection after
// it waits for it in turn).
inline AttentionStatus launch_tail_combine(const KernelArgs& kp, const attn_rules::TailSplit& s,
                                           const AttentionParams& p) {
  const TailCombineParams cp{kp.split_o,  kp.split_ml, kp.o,      s.main_units, s.tiles,
                             s.chunk,     s.max_pieces, p.heads_q, ceil_div(p.seqlen_q, int(C::kBlockM)), p.seqlen_q};
  return launch_pdl(tail_combine_kernel, dim3(s.tail_units, C::kBlockM / kCombineRows), dim3(kCombineThreads), 0,
                    p.stream, 0, cp) == cudaSuccess
             ? AttentionStatus::kSuccess
             : AttentionStatus::kLaunchFailed;
}

// One kernel instantiation: its shared-memory opt-in is per device context and per kernel, set once
// (launch/smem_attr.h: a flag per instantiation, as kernels of one signature must not share it,
// bench/NOTES.md lessons). The K and V tensor maps are encoded here: their box is the key-tile width.
template <int kBN, bool kPipelined, bool kMaskSmem, bool kPersistent = false, bool kLean = false>
inline AttentionStatus launch_kernel(const KernelArgs& args, dim3 grid, const AttentionParams& p) {
  const KernelParams<kBN> kp{
      args,
      make_tma_k<kBN>(static_cast<const Element*>(p.k), p.seqlen_k, p.heads_kv, p.batch,
                      slab_strides(p.k_strides, p.heads_kv, p.seqlen_k)),
      make_tma_v<kBN>(static_cast<const Element*>(p.v), p.seqlen_k, p.heads_kv, p.batch,
                      slab_strides(p.v_strides, p.heads_kv, p.seqlen_k))};
  constexpr auto kernel = attention_kernel<kBN, kPipelined, kMaskSmem, kPersistent, kLean>;
  constexpr int kBytes = int(sizeof(KernelStorage<kBN, kMaskSmem, kPersistent>));
  if (!max_dynamic_smem_once<kernel>(p.device, kBytes)) return AttentionStatus::kInitFailed;
  return launch_pdl(kernel, grid, dim3(C::kThreads), kBytes, p.stream, 0, kp) == cudaSuccess
             ? AttentionStatus::kSuccess
             : AttentionStatus::kLaunchFailed;
}

// The unmasked, non-causal pipelined kernel of key-tile width kBN, per unit or on the persistent grid.
template <int kBN>
inline AttentionStatus launch_plain(const KernelArgs& args, dim3 grid, const AttentionParams& p, bool persistent) {
  return persistent ? launch_kernel<kBN, true, false, true>(args, grid, p) : launch_kernel<kBN, true, false>(args, grid, p);
}

// q [B, Hq, Sq, 128] viewed as (d, s, g, Hkv, B) with query head hkv * G + g: one box of (64, P, G, 1, 1)
// is half of a packed Q tile (rows g * P + p, 128-byte rows, 128B swizzle like SmemLayoutQ).
inline bool make_tma_q_packed(CUtensorMap* map, const AttentionParams& p, int pack_rows) {
  const int group = p.heads_q / p.heads_kv;
  const SlabStrides st = slab_strides(p.q_strides, p.heads_q, p.seqlen_q);
  const cuuint64_t e = sizeof(Element);
  cuuint64_t dims[5] = {cuuint64_t(C::kHeadDim), cuuint64_t(p.seqlen_q), cuuint64_t(group), cuuint64_t(p.heads_kv),
                        cuuint64_t(p.batch)};
  cuuint64_t strides[4] = {cuuint64_t(st.s) * e, cuuint64_t(st.h) * e, cuuint64_t(st.h) * group * e,
                           cuuint64_t(st.b) * e};
  cuuint32_t box[5] = {64, cuuint32_t(pack_rows), cuuint32_t(group), 1, 1};
  cuuint32_t elem_strides[5] = {1, 1, 1, 1, 1};
  const CUresult r = CUTLASS_CUDA_DRIVER_WRAPPER_CALL(cuTensorMapEncodeTiled)(
      map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 5, const_cast<void*>(p.q), dims, strides, box, elem_strides,
      CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
      CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  return r == CUDA_SUCCESS;
}

// o [B, Sq, Hq, 128] (token-major, contiguous: the layout every kernel stores) viewed as (d, s, h, b): one box of
// (64, 128, 1, 1) is a 64-column half of a staged O tile (128-byte rows, 128B swizzle like SmemLayoutQ); rows past
// Sq are out of bounds, so TMA leaves them (and the next head's rows) alone.
inline bool make_tma_o(CUtensorMap* map, const AttentionParams& p) {
  const cuuint64_t e = sizeof(Element);
  cuuint64_t dims[4] = {cuuint64_t(C::kHeadDim), cuuint64_t(p.seqlen_q), cuuint64_t(p.heads_q), cuuint64_t(p.batch)};
  cuuint64_t strides[3] = {cuuint64_t(p.heads_q) * C::kHeadDim * e, cuuint64_t(C::kHeadDim) * e,
                           cuuint64_t(p.seqlen_q) * p.heads_q * C::kHeadDim * e};
  cuuint32_t box[4] = {64, cuuint32_t(C::kBlockM), 1, 1};
  cuuint32_t elem_strides[4] = {1, 1, 1, 1};
  const CUresult r = CUTLASS_CUDA_DRIVER_WRAPPER_CALL(cuTensorMapEncodeTiled)(
      map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 4, p.o, dims, strides, box, elem_strides, CU_TENSOR_MAP_INTERLEAVE_NONE,
      CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  return r == CUDA_SUCCESS;
}

// `plan`: attn_rules::launch_plan for p (attention_plan, which also sized p.workspace from it).
inline AttentionStatus launch(const AttentionParams& p, const attn_rules::LaunchPlan& plan) {
  if (p.q == nullptr || p.k == nullptr || p.v == nullptr || p.o == nullptr) return AttentionStatus::kInvalidArgument;
  if (p.batch < 1 || p.heads_q < 1 || p.heads_kv < 1 || p.seqlen_q < 1 || p.seqlen_k < 1 ||
      p.heads_q % p.heads_kv != 0)
    return AttentionStatus::kInvalidArgument;
  const int m_blocks = ceil_div(p.seqlen_q, int(C::kBlockM));
  if (m_blocks > 65535 || p.batch > 65535) return AttentionStatus::kInvalidArgument;  // grid y/z limits
  for (const void* ptr : {p.q, p.k, p.v, static_cast<const void*>(p.o)})
    if (reinterpret_cast<uintptr_t>(ptr) % 16 != 0) return AttentionStatus::kInvalidArgument;  // TMA / uint4 stores
  for (const int64_t* st : {p.q_strides, p.k_strides, p.v_strides}) {
    if (st[0] == 0 && st[1] == 0 && st[2] == 0) continue;  // contiguous
    for (int i = 0; i < 3; ++i)  // TMA: strides in bytes multiples of 16, below 2^40
      if (st[i] <= 0 || st[i] % 8 != 0 || st[i] >= (int64_t(1) << 39)) return AttentionStatus::kInvalidArgument;
  }
  if (p.mask != nullptr && reinterpret_cast<uintptr_t>(p.mask) % 2 != 0) return AttentionStatus::kInvalidArgument;

  KernelArgs kp{
      make_tma_q(static_cast<const Element*>(p.q), p.seqlen_q, p.heads_q, p.batch,
                 slab_strides(p.q_strides, p.heads_q, p.seqlen_q)),
      static_cast<Element*>(p.o),
      static_cast<const uint16_t*>(p.mask),
      p.mask_batch_stride,
      p.mask_row_stride,
      p.batch,
      p.heads_q,
      p.heads_kv,
      p.seqlen_q,
      p.seqlen_k,
      p.heads_q / p.heads_kv,
      p.scale,
      p.scale * kLog2e,
      p.scale > 0.f,
      p.causal,
      nullptr,
      nullptr,
      0,
      0,
      p.mask_batch_stride == 0,
      0,
      kQBytes,
      CUtensorMap{},
  };

  VLATTN_HOST_MARK("attn.params");
  // Every decision of this launch is in `plan` (the resident kernel, the mask pre-pass, GQA packing, the persistent
  // grid, the key-tile width, the tail split and the kernel build).
  if (plan.kernel == attn_rules::AttnKernel::kNone) return AttentionStatus::kInvalidArgument;
  const SummaryLayout sl = summary_layout(p, plan.summary);
  if (sl.total() > 0) {
    if (p.workspace == nullptr || p.workspace_bytes < sl.total()) return AttentionStatus::kWorkspaceTooSmall;
    auto* live = static_cast<uint32_t*>(p.workspace);
    auto* kinds = static_cast<uint8_t*>(p.workspace) + sl.live_bytes;
    if (reinterpret_cast<uintptr_t>(live) % 16 != 0) return AttentionStatus::kInvalidArgument;
    if (sl.chunking.n_chunks > kSummaryMaxChunks || sl.chunking.tiles_per_chunk > kSummaryMaxTilesPerChunk ||
        sl.m_blocks > 65535 || sl.mask_batches > 65535)
      return AttentionStatus::kInvalidArgument;
    const bool vec16 = mask_vec16(p);
    MaskSummaryParams sp{static_cast<const uint16_t*>(p.mask),
                         p.mask_batch_stride,
                         p.mask_row_stride,
                         p.seqlen_q,
                         p.seqlen_k,
                         p.causal,
                         vec16,
                         sl.m_blocks,
                         sl.n_blocks,
                         sl.chunking.n_chunks,
                         sl.chunking.tiles_per_chunk,
                         kinds,
                         live,
                         p.mask_settled};
    if (launch_pdl(mask_summary_kernel<C::kBlockM, C::kBlockN>, dim3(sl.chunking.n_chunks, sl.m_blocks, sl.mask_batches),
                   dim3(kSummaryThreads), 0, p.stream, 0, sp) != cudaSuccess)
      return AttentionStatus::kLaunchFailed;
    VLATTN_HOST_MARK("attn.summary");
    kp.tile_kinds = kinds;
    kp.live_rows = live;
    kp.n_blocks = sl.n_blocks;
    kp.live_chunks = sl.chunking.n_chunks;
  }

  // Short launches on an idle machine: 64-row units, each warpgroup over half of the keys (VLATTN_ATTN_SPLIT_KEYS;
  // attn_rules::split_keys_use).
  if (plan.kernel == attn_rules::AttnKernel::kSplitKeys) return launch_split_keys(kp, p, plan.grid[0]);

  // Short key sequences: the K/V-resident kernel (VLATTN_ATTN_RESIDENT; attn_rules::resident_plan).
  if (plan.kernel == attn_rules::AttnKernel::kResident) {
    kp.lean_zero = plan.lean_zero;  // VLATTN_ATTN_LEAN_ZERO=0 reaches this kernel's ZERO tiles too (same bits)
    kp.diag_half = plan.diag_half;
    kp.tma_o_store = plan.tma_o_store;
    kp.walk_cache = plan.walk_cache;
    if (kp.tma_o_store && !make_tma_o(&kp.tma_o, p)) return AttentionStatus::kInitFailed;
    return launch_resident(kp, plan.resident, p);
  }

  // The kLean builds skip the per-key checks on ZERO tiles inside the keys and below the causal diagonal
  // (VLATTN_ATTN_LEAN_ZERO; attn_rules::lean_staged_pays for the per-unit staged-mask kernel). MIXED mask tiles
  // are staged in shared memory by the producer's idle warps when the mask is 16-byte aligned, else read
  // element-wise from global memory ([B=4,S=256] 39.8 -> 26.3 us staged, H200 2026-11-30; VLATTN_ATTN_MASK_SMEM:
  // 0 = never stage, 1 or 2 = stage aligned masks; a "shifted" layout for unaligned ones lost to the global loads
  // and was removed in the twentieth session). Every choice gives the same bits.
  kp.lean_zero = plan.lean_zero;

  // GQA packing (VLATTN_ATTN_PACK; attn_rules::pack_plan; off by default). Same bits: a row's arithmetic and key
  // order are the same. Part of its measured loss is the host: a packed call encodes a fourth tensor map, and
  // every encode looks up the driver entry point (bench/NOTES.md run 11).
  if (plan.pack.packed) {
    const int group = p.heads_q / p.heads_kv;
    kp.pack_rows = plan.pack.rows;
    kp.q_tile_bytes = uint32_t(2 * 64 * plan.pack.rows * group * sizeof(Element));
    if (!make_tma_q_packed(&kp.tma_q_packed, p, plan.pack.rows)) return AttentionStatus::kInitFailed;
  }
  if (plan.pack.units > std::numeric_limits<int>::max()) return AttentionStatus::kInvalidArgument;
  // The persistent grid (VLATTN_ATTN_PERSISTENT; attn_rules::persistent_pays) or one CTA per work unit; same
  // bits: a unit's arithmetic does not depend on the CTA that runs it.
  const dim3 grid(unsigned(plan.grid[0]), unsigned(plan.grid[1]), unsigned(plan.grid[2]));
  // The last wave's key split (VLATTN_ATTN_TAIL_SPLIT; attn_rules::tail_split_plan): the kernel writes the cut
  // units' pieces to the workspace after the summary's bytes, and the combine kernel merges them after it.
  const attn_rules::TailSplit& split = plan.split;
  if (split.use) {
    const size_t offset = split_offset(sl.total());
    if (split.grid != int(grid.x) || split.main_units % split.grid != 0) return AttentionStatus::kInvalidArgument;
    if (p.workspace == nullptr || p.workspace_bytes < offset + split_bytes(split))
      return AttentionStatus::kWorkspaceTooSmall;
    auto* base = reinterpret_cast<float*>(static_cast<char*>(p.workspace) + offset);
    if (reinterpret_cast<uintptr_t>(base) % 16 != 0) return AttentionStatus::kInvalidArgument;
    kp.split_main_units = split.main_units;
    kp.split_main_count = split.main_count();
    kp.split_tiles = split.tiles;
    kp.split_total = split.total;
    kp.split_chunk = split.chunk;
    kp.split_max_pieces = split.max_pieces;
    kp.split_o = base;
    kp.split_ml = base + size_t(split.slots()) * kSplitSlotOFloats;
  }

  const bool persistent = plan.persistent;
  switch (plan.kernel) {
    case attn_rules::AttnKernel::kSimple: return launch_kernel<128, false, false>(kp, grid, p);
    case attn_rules::AttnKernel::kSimpleStaged: return launch_kernel<128, false, true, false, true>(kp, grid, p);
    case attn_rules::AttnKernel::kPlain:
      // Key-tile widths (VLATTN_ATTN_BN; attn_rules::block_n): 144 / 160 / 176 without a mask and not causal.
      switch (plan.block_n) {
        case C::kBlockN: {
          if (!persistent) return launch_kernel<128, true, false>(kp, grid, p);
          const AttentionStatus st = launch_kernel<128, true, false, true>(kp, grid, p);
          return st != AttentionStatus::kSuccess || !split.use ? st : launch_tail_combine(kp, split, p);
        }
        case 144: return launch_plain<144>(kp, grid, p, persistent);
        case 160: return launch_plain<160>(kp, grid, p, persistent);
        case C::kBlockNWide: return launch_plain<C::kBlockNWide>(kp, grid, p, persistent);
        default: return AttentionStatus::kInvalidArgument;
      }
    case attn_rules::AttnKernel::kGlobalMask:
      return persistent ? launch_kernel<128, true, false, true, true>(kp, grid, p)
                        : launch_kernel<128, true, false, false, true>(kp, grid, p);
    case attn_rules::AttnKernel::kStaged:
      return persistent  ? launch_kernel<128, true, true, true, true>(kp, grid, p)
             : plan.lean ? launch_kernel<128, true, true, false, true>(kp, grid, p)
                         : launch_kernel<128, true, true, false, false>(kp, grid, p);
    default: return AttentionStatus::kInvalidArgument;
  }
}

}  // namespace attn_sm90
}  // namespace vlattn
