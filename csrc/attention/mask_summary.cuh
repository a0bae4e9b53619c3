// Mask summary pre-pass for exact tile skipping (design brief §5).
//
// For every (mask batch b, q-block m, key tile n) of kBlockM x kBlockN mask entries it records a kind:
//   DEAD  every visible entry <= tau_dead = -2^100 (includes bf16 min and -inf)
//   ZERO  every visible entry == 0 (the attention kernel skips the mask loads and the add)
//   MIXED anything else
// and, per (b, m), a 128-bit set of the rows that have at least one visible key with mask >= tau_live
// = -2^99 ("live" keys). "Visible": i < Sq, j < Sk and, with the causal flag, j <= i (invisible entries
// get -inf in the attention kernel regardless of the mask, so they never decide a kind).
//
// The attention kernel skips DEAD tiles only when every valid row of the q-block is live. Then, with
// scaled scores |t| <= 2^97 (documented precondition), a dead key's x - M <= -2^98 for the row max M,
// so its probability is exactly 0 with or without the tile, and the online-softmax state after the
// first live key is bitwise the same: skipping is exact (brief §5). Blocks with a row that has no live
// key (padding rows, rows entirely at bf16 min) process every tile and get the reference's uniform
// average.
#pragma once

#include <cstdint>

namespace vlattn {
namespace attn_sm90 {

enum TileKind : uint8_t { kTileDead = 0, kTileZero = 1, kTileMixed = 2 };

constexpr float kTauDead = -1.2676506002282294e30f;  // -2^100
constexpr float kTauLive = -6.338253001141147e29f;   // -2^99
constexpr int kLiveWordsPerBlock = 4;                 // 128 rows -> 4 x 32-bit row sets

struct MaskSummaryParams {
  const uint16_t* mask;  // bf16 bits
  int64_t mask_batch_stride, mask_row_stride;
  int seqlen_q, seqlen_k;
  bool causal;
  int m_blocks, n_blocks;
  uint8_t* kinds;      // [mask batches, m_blocks, n_blocks]
  uint32_t* live;      // [mask batches, m_blocks, 4], zeroed before the launch
};

// One CTA of 4 warps per (n, m, mask batch) tile. Warp w scans rows 32w .. 32w+31 of the tile; lane l
// reads columns l, l+32, l+64, l+96 of each row (each load instruction covers 64 contiguous bytes; the
// row stride may be odd, so loads are 2-byte scalars).
template <int kBlockM, int kBlockN>
__global__ void __launch_bounds__(128) mask_summary_kernel(const MaskSummaryParams p) {
  static_assert(kBlockM == 128 && kBlockN % 32 == 0, "4 warps x 32 rows, 32 lanes x (kBlockN/32) columns");
  constexpr int kColsPerLane = kBlockN / 32;
  const int n = blockIdx.x, m = blockIdx.y, b = blockIdx.z;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int row0 = m * kBlockM + warp * 32;
  const int col0 = n * kBlockN;
  const uint16_t* base = p.mask + int64_t(b) * p.mask_batch_stride;

  bool all_dead = true, all_zero = true;
  uint32_t live_bits = 0;
  for (int r = 0; r < 32; ++r) {
    const int i = row0 + r;
    if (i >= p.seqlen_q) break;  // warp-uniform
    const uint16_t* row = base + int64_t(i) * p.mask_row_stride;
    bool live = false;
#pragma unroll
    for (int c = 0; c < kColsPerLane; ++c) {
      const int j = col0 + c * 32 + lane;
      const bool visible = j < p.seqlen_k && !(p.causal && j > i);
      if (visible) {
        const float v = __uint_as_float(uint32_t(__ldg(row + j)) << 16);
        all_dead &= v <= kTauDead;
        all_zero &= v == 0.f;
        live |= v >= kTauLive;
      }
    }
    if (__any_sync(0xffffffffu, live)) live_bits |= 1u << r;
  }
  const bool dead = __syncthreads_and(all_dead);
  const bool zero = __syncthreads_and(all_zero);
  const int64_t block = int64_t(b) * p.m_blocks + m;
  if (threadIdx.x == 0) p.kinds[block * p.n_blocks + n] = dead ? kTileDead : (zero ? kTileZero : kTileMixed);
  if (lane == 0 && live_bits != 0) atomicOr(&p.live[block * kLiveWordsPerBlock + warp], live_bits);
}

}  // namespace attn_sm90
}  // namespace vlattn
