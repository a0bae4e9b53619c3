// Mask summary pre-pass for exact tile skipping (design brief §5).
//
// For every (mask batch b, q-block m, key tile n) of kBlockM x kBlockN mask entries it records a kind:
//   DEAD  every visible entry <= tau_dead = -2^100 (includes bf16 min and -inf)
//   ZERO  every visible entry == 0 (the attention kernel skips the mask loads and the add)
//   CAUSAL every visible entry (i, j) with j <= i is 0 and every one with j > i is <= tau_dead: a causal
//         mask's diagonal tile. Where the block's rows are all live the attention kernel applies it as
//         the causal predicate (key > row -> -inf) without loading it: a dead key's probability is 0
//         and it never sets the row max, either way (the same argument as for DEAD tiles, below).
//   MIXED anything else
// and, per (b, m, chunk of key tiles), a 128-bit set of the rows that have at least one visible key with
// mask >= tau_live = -2^99 ("live" keys) in that chunk; the attention kernel ORs the chunks' sets.
// "Visible": i < Sq, j < Sk and, with the causal flag, j <= i (invisible entries get -inf in the
// attention kernel regardless of the mask, so they never decide a kind).
//
// The attention kernel skips DEAD tiles only when every valid row of the q-block is live. Then, with
// scaled scores |t| <= 2^97 (documented precondition), a dead key's x - M <= -2^98 for the row max M,
// so its probability is exactly 0 with or without the tile, and the online-softmax state after the
// first live key is bitwise the same: skipping is exact (brief §5). Blocks with a row that has no live
// key (padding rows, rows entirely at bf16 min) process every tile and get the reference's uniform
// average.
//
// One launch, plain stores only (no memset node, no global atomics): CTA (chunk, m, b) classifies the
// key tiles [chunk * tiles_per_chunk, ...) of its q-block and writes their kinds and its chunk's live-row
// set. The host picks the chunking so that the grid fills the GPU (mask_summary_chunking).
#pragma once

#include <cstdint>

#include "attention/mask_kinds.h"
#include "launch/pdl.h"

namespace vlattn {
namespace attn_sm90 {

constexpr int kLiveWordsPerBlock = 4;                 // 128 rows -> 4 x 32-bit row sets (one uint4)
constexpr int kSummaryThreads = 256;
constexpr int kSummaryMaxTilesPerChunk = 64;          // shared-memory flags per CTA
constexpr int kSummaryMaxChunks = 16;                 // bounds the attention kernel's OR over chunks

struct MaskSummaryParams {
  const uint16_t* mask;  // bf16 bits
  int64_t mask_batch_stride, mask_row_stride;
  int seqlen_q, seqlen_k;
  bool causal;
  bool vec16;            // mask pointer and both strides allow 16-byte loads of 8 aligned columns
  int m_blocks, n_blocks;
  int n_chunks, tiles_per_chunk;
  uint8_t* kinds;        // [mask batches, m_blocks, n_blocks]
  uint32_t* live;        // [mask batches, m_blocks, n_chunks, 4] (16-byte aligned)
  // The mask is complete before the grid launched just before this one started, and that grid does
  // not write it (a layer's mask: the kernels before the pre-pass only write Q/K/V): the mask is read
  // before griddepcontrol.wait, concurrently with that grid's tail, and kinds/live are written after it.
  bool mask_settled;
};

struct SummaryChunking {
  int n_chunks = 1, tiles_per_chunk = 1;
};

// Enough CTAs to cover the GPU about 4 times (the kernel is load-latency bound), at most
// kSummaryMaxTilesPerChunk tiles per CTA and at most kSummaryMaxChunks chunks per q-block.
inline SummaryChunking mask_summary_chunking(long long row_blocks, int n_blocks, int sm_count) {
  SummaryChunking c;
  const long long target = 4LL * (sm_count > 0 ? sm_count : 132);
  long long want = (target + row_blocks - 1) / row_blocks;
  if (want < 1) want = 1;
  if (want > kSummaryMaxChunks) want = kSummaryMaxChunks;
  if (want > n_blocks) want = n_blocks;
  int tpc = int((n_blocks + want - 1) / want);
  const int min_tpc = (n_blocks + kSummaryMaxChunks - 1) / kSummaryMaxChunks;
  if (tpc < min_tpc) tpc = min_tpc;
  c.tiles_per_chunk = tpc;
  c.n_chunks = (n_blocks + tpc - 1) / tpc;
  return c;
}

// 256 threads: thread t takes the 16-thread column slot t % 16 and the rows t / 16 + 16 g (g = 0..7).
// 16-byte path: slot s reads columns 8s .. 8s+7 of a row (one uint4). Element path (odd strides,
// tails): slot s reads columns s + 16e (e = 0..7), so a half-warp reads 32 contiguous bytes per load.
// All loads of a tile are issued before any is used (predicated, no early exits).
template <int kBlockM, int kBlockN>
__global__ void __launch_bounds__(kSummaryThreads) mask_summary_kernel(const MaskSummaryParams p) {
  static_assert(kBlockM == 128 && kBlockN == 128, "16 slots x 8 columns, 16 row lanes x 8 row groups");
  constexpr int kSlots = 16, kRowGroups = kBlockM / (kSummaryThreads / kSlots);  // 8
  constexpr int kWarps = kSummaryThreads / 32;
  __shared__ uint8_t tile_flags[kSummaryMaxTilesPerChunk][kWarps];  // bit 0 dead, bit 1 zero, bit 2 causal
  __shared__ uint8_t row_live[kSummaryThreads / kSlots];             // bit g: row rsub + 16 g

  // launch/pdl.h: no global memory access before pdl_enter(), except reading a settled mask. The
  // predecessor passed its own wait before triggering this launch (pdl_enter), so everything before
  // it is complete; kinds/live may still be memory it uses, so they are written after the wait.
  if (p.mask_settled)
    pdl_trigger();
  else
    pdl_enter();
  const int chunk = blockIdx.x, m = blockIdx.y, b = blockIdx.z;
  const int t = threadIdx.x, warp = t / 32, lane = t % 32;
  const int slot = t % kSlots, rsub = t / kSlots;
  const int row_base = m * kBlockM + rsub;
  const uint16_t* base = p.mask + int64_t(b) * p.mask_batch_stride;
  const int n_begin = chunk * p.tiles_per_chunk;
  const int n_end = min(p.n_blocks, n_begin + p.tiles_per_chunk);
  const int last_row = min(p.seqlen_q - 1, m * kBlockM + kBlockM - 1);

  uint32_t live_bits = 0;  // bit g: row row_base + 16 g has a live visible key in this chunk
  for (int n = n_begin; n < n_end; ++n) {
    const int col0 = n * kBlockN;
    // Bit 0: every visible entry dead, bit 1: zero, bit 2: causal (one register for the three).
    uint32_t kind_bits = kKindBitsAll;
    // Causal: a tile wholly right of the block's last row has no visible entry (kind DEAD, like the
    // element-wise rule gives); nothing to load.
    if (!(p.causal && col0 > last_row)) {
      if (p.vec16 && col0 + kBlockN <= p.seqlen_k) {
        uint4 v[kRowGroups];
#pragma unroll
        for (int g = 0; g < kRowGroups; ++g) {
          const int i = row_base + 16 * g;
          v[g] = make_uint4(0, 0, 0, 0);
          if (i < p.seqlen_q)
            v[g] = __ldg(reinterpret_cast<const uint4*>(base + int64_t(i) * p.mask_row_stride + col0 + 8 * slot));
        }
#pragma unroll
        for (int g = 0; g < kRowGroups; ++g) {
          const int i = row_base + 16 * g;
          const uint32_t w[4] = {v[g].x, v[g].y, v[g].z, v[g].w};
          bool live = false;
#pragma unroll
          for (int e = 0; e < 8; ++e) {
            const int j = col0 + 8 * slot + e;
            const bool visible = i < p.seqlen_q && !(p.causal && j > i);
            const float x = __uint_as_float(e % 2 == 0 ? (w[e / 2] << 16) : (w[e / 2] & 0xffff0000u));
            if (visible) kind_bits &= entry_kind_bits(x, i, j);
            live |= visible && entry_live(x);
          }
          live_bits |= uint32_t(live) << g;
        }
      } else {
        // Two halves of 4 row groups (32 loads in flight per thread) keep the registers in budget.
#pragma unroll 1
        for (int h = 0; h < 2; ++h) {
          constexpr int kHalf = kRowGroups / 2;
          uint16_t v[kHalf][8];
#pragma unroll
          for (int gg = 0; gg < kHalf; ++gg) {
            const int i = row_base + 16 * (h * kHalf + gg);
            const uint16_t* row = base + int64_t(i) * p.mask_row_stride;
#pragma unroll
            for (int e = 0; e < 8; ++e) {
              const int j = col0 + slot + 16 * e;
              v[gg][e] = (i < p.seqlen_q && j < p.seqlen_k) ? __ldg(row + j) : uint16_t(0);
            }
          }
#pragma unroll
          for (int gg = 0; gg < kHalf; ++gg) {
            const int g = h * kHalf + gg;
            const int i = row_base + 16 * g;
            bool live = false;
#pragma unroll
            for (int e = 0; e < 8; ++e) {
              const int j = col0 + slot + 16 * e;
              const bool visible = i < p.seqlen_q && j < p.seqlen_k && !(p.causal && j > i);
              const float x = __uint_as_float(uint32_t(v[gg][e]) << 16);
              if (visible) kind_bits &= entry_kind_bits(x, i, j);
              live |= visible && entry_live(x);
            }
            live_bits |= uint32_t(live) << g;
          }
        }
      }
    }
    // AND over the warp: a bit survives only if no lane cleared it.
    const uint32_t cleared = __reduce_or_sync(0xffffffffu, ~kind_bits & kKindBitsAll);
    if (lane == 0) tile_flags[n - n_begin][warp] = uint8_t(~cleared & kKindBitsAll);
  }
  // OR the live bits over the 16 slots of each row (a half-warp).
#pragma unroll
  for (int o = 1; o < kSlots; o *= 2) live_bits |= __shfl_xor_sync(0xffffffffu, live_bits, o);
  if (slot == 0) row_live[rsub] = uint8_t(live_bits);
  __syncthreads();
  if (p.mask_settled) pdl_wait();

  const int64_t block = int64_t(b) * p.m_blocks + m;
  if (t < n_end - n_begin) {
    uint32_t all = kKindBitsAll;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) all &= tile_flags[t][w];
    p.kinds[block * p.n_blocks + n_begin + t] = tile_kind(all);
  }
  if (warp == 0) {
    // Word w, bit l: local row 32 w + l = rsub + 16 g with rsub = l % 16, g = 2 w + l / 16.
    uint32_t words[kLiveWordsPerBlock];
#pragma unroll
    for (int w = 0; w < kLiveWordsPerBlock; ++w)
      words[w] = __ballot_sync(0xffffffffu, (row_live[lane % 16] >> (2 * w + lane / 16)) & 1);
    if (lane == 0)
      *reinterpret_cast<uint4*>(p.live + (block * p.n_chunks + chunk) * kLiveWordsPerBlock) =
          make_uint4(words[0], words[1], words[2], words[3]);
  }
}

}  // namespace attn_sm90
}  // namespace vlattn
