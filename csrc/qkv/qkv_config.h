// Named tile configurations of the fused QKV kernel and the rule that picks one by shape, as a plain
// header (no CUDA or torch) so that tests/cpp can check the rule on the workload shapes.
#pragma once

#include <algorithm>
#include <cstdint>

namespace vlattn {

// How a group's output is rotated (QkvGroup::rope, csrc/qkv/qkv_params.h).
enum class RopeMode : int32_t {
  kNone = 0,     // V: bias only
  kTable = 1,    // 007 mRoPE: cos/sin tables [3, B, S, 128], plane per channel from mrope_section
  kPos1D = 2,    // 034 Q: rotate-half over the full head at position pos1d[b, s]
  kPos3D = 3,    // 034 K: three rotate-halves over channel segments split[0..3) at pos3d[b, s, seg]
};

// Named tile configurations of the fused kernel (csrc/ops/qkv.cpp maps their names; qkv_auto_config
// below picks one by shape).
enum class QkvConfig : int32_t {
  kM128 = 0,    // persistent ping-pong, 128-row tiles (a warpgroup per tile)
  kM64 = 1,     // persistent ping-pong, 64-row tiles: twice the tiles for mid M
  kSplitK2 = 2, // 128-row tiles, K split over a cluster of 2 / 3 / 4 CTAs: small M
  kSplitK3 = 3,
  kSplitK4 = 4,
  kC256 = 5,    // persistent, 128 x 256 tiles (a head pair), two warpgroups on one tile: large M
  kM128Mc = 6,  // kM128 in clusters of 2 CTAs along M, weight tile multicast to both: large M
  kSplitK2D = 7,  // kSplitK2/3/4 with a 6-stage ring (192 KB in flight instead of 128): small M
  kSplitK3D = 8,
  kSplitK4D = 9,
  kM256K1 = 10,   // 256-row tiles (both warpgroups, 128 rows each), K split over 1..4 CTAs: the weight
  kM256K2 = 11,   // tile is read once per 256 rows (half the weight fill of 128-row tiles)
  kM256K3 = 12,
  kM256K4 = 13,
  // Not the fused kernel: the projections on the CUTLASS GEMMs of vlattn.linear (bias in their
  // epilogue, bf16 y[M, N] per group in a workspace), then one kernel applying RoPE to y and storing
  // head-major (qkv_rope_rows_sm90). Same rounding pattern as the fused epilogue (F.linear's one
  // rounding, then the reference's RoPE); for large M, where the CUTLASS mainloop is faster (770 vs
  // ~520 TFLOP/s on the H200) than the extra y round trip costs. Named "gemm"; automatic from
  // kQkvGemmMinRows rows on (VLATTN_QKV_GEMM_MIN_M overrides: csrc/ops/qkv.cpp).
  kGemmRope = 14,
  // Not the fused kernel either: every projection of the op (007: Q, K, V; 034: Q of the text and K, V
  // of the vision tokens) in one CUTLASS grouped GEMM launch (qkv_grouped.h) with 128 x 192
  // cooperative or 64 x 192 ping-pong tiles, then the RoPE pass of kGemmRope. Named "grouped128" /
  // "grouped64"; "grouped" picks the tile by wave count (grouped_tile_for below).
  kGrouped128 = 15,
  kGrouped64 = 16,
};

// Rows of one launch (007: B*S; 034: B*Lq for Q, B*Lv for K/V) from which the automatic choice is
// kGemmRope. H200, 2026-11-30 (probe_qkv, bench/NOTES.md sixth session): gemm 97.9-100.2 us vs fused
// 103.6-104.0 at 007 M=1024, 875 vs 1066 at M=16384; 034 Lq 512 | Lv 784 137.0 vs 127.6 (fused wins).
constexpr int64_t kQkvGemmMinRows = 1024;

// Which GEMM with the bias + RoPE + head-major-store epilogue (qkv/gemm_rope_epi.h) config kGemmRope
// runs for a launch of m rows whose groups all take table RoPE or none (007), instead of CUTLASS's
// TMA-store epilogue into y plus the RoPE pass. H200, graph replay, pass -> epilogue:
// - 4096 rows, 64 x 256 ping-pong: -4.5 to -7.1% per layer with 16-byte stores (bench/NOTES.md fifteenth
//   session call 1: B4 S1024 538.7 -> 500.6 us, B8 S512 496.6 -> 461.2, B1 S4096 736.6 -> 703.5;
//   -1.9 to -5.1% with the fourteenth session's 4-byte stores).
// - 2048 rows: neither tile faster (ping-pong -0.7%, cooperative +6.2%): the pass stays.
// - >= 8192 rows until the twenty-fifth session, 128 x 256 cooperative (its mainloop is the faster one
//   there; the 64 x 256 ping-pong Q GEMM read 638 us against 542 at 16384 rows): B64 S256 1642.6 ->
//   1615.3 (-1.7%), B32 S541 2072.0 -> 2059.8 (-0.6%); 8192 rows: fifteenth session call 2.
// - 034 kept the pass until the thirty-first session (its q needs 1-D positions, which cost ~50 us per
//   tile computed in the epilogue; its v alone was not faster). Since then its q launch takes the
//   epilogue GEMM by the same rule, its cos/sin from a table kernel first (VLATTN_QKV_EPI_POS1D).
// - >= 8192 rows since the twenty-sixth session, 128 x 128 ping-pong (one head per tile, two 64-row atoms
//   per warpgroup; the epilogue under the other warpgroup's mainloop with a 128-row tile's operand reuse).
//   Cross-process runs could not decide it (twenty-fifth session calls 3-5: -2.2%, then within the
//   3-5% drift between calls); in-process A/Bs against the 128 x 256 cooperative tile (bench --switch
//   VLATTN_QKV_GEMM_EPI=1,4, graph replay medians of 3 and 5 rounds, bench/NOTES.md twenty-sixth
//   session calls 1-2): B32 S541 -4.9% / -4.7%, B64 S256 -2.5% / -3.1%, B32 S256 (8192 rows) -0.2% /
//   -2.7%; at 4096 rows (B1 S4096, B4 S1024, B8 S512) within +-1.3% of the 64 x 256 tile, which stays.
//   VLATTN_QKV_GEMM_EPI=3 forces the cooperative tile (the old rule) for A/Bs.
enum class QkvEpiTile { kNone, kPingPong64x256, kCoop128x256, kPingPong128x128 };
inline QkvEpiTile qkv_gemm_epi_tile(int64_t m) {
  if (m >= 8192) return QkvEpiTile::kPingPong128x128;
  if (m >= 4096) return QkvEpiTile::kPingPong64x256;
  return QkvEpiTile::kNone;
}

// Whether config kGemmRope's last group GEMM runs on a second stream beside the others (csrc/ops/qkv.cpp), for
// a launch of m rows; pair: two equal-width groups (034's K and V on the vision tokens), else 007's Q, K, V (the
// side stream takes V). H200, in-process A/Bs of VLATTN_QKV_GEMM_STREAMS (bench/NOTES.md fortieth session calls
// 1-3; graph replay, side -> back to back):
// - From 8192 rows side by side: 007 B32 S256 / B64 S256 / B32 S541 +1.1 / +1.2 / +1.1% back to back (45 calls;
//   eager +0.3 to +0.6%), 034's pairs at 12544-25088 rows within -0.3 / +0.7%.
// - 034's pair at 4096-8191 rows back to back: Lq 4096 (6272 vision rows; k ‖ v 172 us from q's end against
//   2 x 75 alone) 1393.0 -> 1292.1 us (-7.2%, eager -2.9%), each GEMM on its tuned tile alone.
// - 007 at 2048-8191 rows back to back (v after q and k): B2 S1024 -1.4%, B8 S512 -3.8%, B4 S1024 -4.2%, B1 S4096
//   -0.6% (B32 S128 +1.2%: the same QKV shapes as B8 S512, so noise).
// - Below that side by side: 034's pairs at 392-1568 rows +1.7 to +16% back to back (B2 Lq128 76.3 -> 88.6 us),
//   007 at 1024 rows (the seventh session; 007 launches below 2048 rows take the grouped plan by default).
// VLATTN_QKV_GEMM_STREAMS: 1 (default) this rule, 0 never, 2 always (A/B arms).
inline bool qkv_gemm_side_stream(int64_t m, bool pair) {
  if (m >= 8192) return true;
  return pair ? m < 4096 : m < 2048;
}

// 007's grouped plan (qkv_op_plan, below) stops below this many rows: from 1024 007 runs per launch, config
// kGemmRope with the grouped tail (qkv_gemm_tail_grouped). H200, forty-fifth session (bench/NOTES.md): at 1024
// rows the grouped plan's 200 tiles of 128 x 192 take two waves on 132 SMs, where Q alone is one wave of
// 128 x 224 tiles and K and V one of 64 x 192.
constexpr int64_t kQkvGroupedMaxRows = 1024;

// Whether config kGemmRope runs its first group's GEMM alone and every other group in one grouped GEMM
// launch after it (csrc/ops/qkv.cpp launch_gemm_rope), instead of a GEMM per group: 007's launch (Q, K, V)
// from 1024 rows, where the grouped plan stops (kQkvGroupedMaxRows), to 2047, where its last GEMM would
// otherwise go on a side stream. H200, forty-fifth session (bench/NOTES.md): 007 at 1024 rows, Q one wave of
// 128 x 224 tiles, then K and V one wave of 64 x 192 tiles; in-process A/B against the grouped plan
// (VLATTN_QKV_GROUPED_MAX_M 2048 vs 1024, graph replay, two calls): B8 S128 -6.8 / -4.0%, B4 S256 -0.4 / -2.6%,
// B1 S1024 -0.9 / -1.8%. Not for 034's vision launch (K and V: two groups, side by side as a pair). VLATTN_QKV_GEMM_STREAMS: 1 (default) this rule, 3 always where the grouped
// GEMM takes the groups, 0 / 2 never.
inline bool qkv_gemm_tail_grouped(int64_t m, int groups, int64_t grouped_max_rows = kQkvGroupedMaxRows) {
  return groups >= 3 && m >= grouped_max_rows && m < 2048;
}

// The automatic choice ("" / "auto"): by the number of 128-row output tiles (M rows x heads) against
// the SM count. heads: the launch's total heads (Q + K + V groups); even_groups: every group has an
// even head count (the 128 x 256 head-pair tiles need it). Measured on the H200: bench/NOTES.md run 7.
inline QkvConfig qkv_auto_config(int64_t m, int64_t heads, int sm_count, bool even_groups) {
  const int64_t tiles128 = heads * ((m + 127) / 128);
  if (tiles128 <= 0 || sm_count <= 0) return QkvConfig::kM128;  // nothing to launch (M = 0) / no SM count
  // Few tiles: split K so that (nearly) every SM streams weights; each split keeps >= 14 k tiles.
  // Two splits run on the 6-stage ring (H200, 2026-11-30: probe_qkv 034 B2 128/196 72.1 us vs 76.2;
  // the bench then measured them equal, 69.4 vs 68.8: kept, not slower).
  if (2 * tiles128 <= sm_count) {
    const int64_t splits = std::min<int64_t>(4, sm_count / tiles128);
    return splits >= 4 ? QkvConfig::kSplitK4 : splits == 3 ? QkvConfig::kSplitK3 : QkvConfig::kSplitK2D;
  }
  // Half a wave to one wave of 128-row tiles: 256-row tiles split three ways when they fit in one
  // wave (007 M=256: 40.0 us vs 48.2 for m64), else 128-row tiles split two ways on the deep ring
  // (034 M=512 + 784: 112.5 / 106.5 us vs 139.1 / 137.4 for m64). bench/NOTES.md, run 7.
  if (tiles128 < sm_count) {
    const int64_t tiles256 = heads * ((m + 255) / 256);
    return 3 * tiles256 <= sm_count ? QkvConfig::kM256K3 : QkvConfig::kSplitK2D;
  }
  // One to two waves of 128-row tiles: 128 x 256 head-pair tiles with both warpgroups on one tile
  // fit in a single wave (H200, 2026-11-30: 007 M=512 66 us vs 72 for m128; 034 M=1024|1568 173 vs
  // 189). Beyond, the ping-pong kernel was faster (M=4096: 270 vs 314; M=16384: 1031 vs 1113).
  if (even_groups && tiles128 <= 2LL * sm_count) return QkvConfig::kC256;
  return QkvConfig::kM128;
}

// The grouped GEMM's tile by a wave model: 128 x 192 tiles cost one unit per wave; a ping-pong CTA
// works through its 64 x 192 tiles one mainloop at a time (the other warpgroup's epilogue overlaps),
// so a wave of those costs half a unit, plus 10% for reading the weight tile once per 64 rows instead
// of once per 128. rows_cols: (M, N) of each problem. The 10% is a guess until measured
// (bench/NOTES.md, eighth session).
// Output tiles of tile_m x tile_n over every problem (M, N) of rows_cols.
inline int64_t grouped_tiles(const int64_t (*rows_cols)[2], int count, int64_t tile_m, int64_t tile_n) {
  int64_t tiles = 0;
  for (int i = 0; i < count; ++i)
    tiles += ((rows_cols[i][0] + tile_m - 1) / tile_m) * ((rows_cols[i][1] + tile_n - 1) / tile_n);
  return tiles;
}

inline QkvConfig grouped_tile_for(const int64_t (*rows_cols)[2], int count, int sm_count) {
  const int64_t t128 = grouped_tiles(rows_cols, count, 128, 192), t64 = grouped_tiles(rows_cols, count, 64, 192);
  if (sm_count <= 0) return QkvConfig::kGrouped128;
  const int64_t waves128 = (t128 + sm_count - 1) / sm_count;
  const int64_t waves64 = (t64 + sm_count - 1) / sm_count;
  return waves64 * 55 < waves128 * 100 ? QkvConfig::kGrouped64 : QkvConfig::kGrouped128;
}

// The op-level plan, chosen before the per-launch rule above. launch_rows: rows of each launch
// (007: one, B*S; 034: two, B*Lq then B*Lv); rows_cols: (M, N) of every projection. H200,
// 2026-11-30 (bench/NOTES.md eighth session, probe_qkv, cold, per-launch auto -> plan):
//   007, 512 <= M < 2048: one grouped GEMM (M=512 55.3 -> 46.5 us, 613 54.4 -> 46.2, 1024 76.9 ->
//     74.0); from 2048 rows the per-launch two-pass path is faster (127.4 vs 140.1). Since the
//     sixteenth session also 129-511 rows (kQkvGroupedMinRows below).
//   034, fewer than 2048 rows in all: both launches two-pass (B2 Lq128 73.0 -> 62.8, B1 Lq512 110.4 ->
//     92.2), the grouped GEMM in between (64.7, 98.3).
//   034, from 4096 rows, when the grouped 128 x 192 tiles fill their last wave to >= 90% within 8
//     waves: one grouped GEMM (5184 rows, 652 tiles = 4.94 waves: 256.9 -> 230.9); at 6084 rows
//     (746 tiles, 5.65 waves) it lost (250.1 vs 260.9), at 10368 (1292 tiles) too (414.9 vs 460.5).
enum class QkvPlan : int32_t { kPerLaunch = 0, kGrouped = 1, kGemmAll = 2 };

// grouped_min_rows: the fewest rows of a single launch (007) that take the grouped plan
// (VLATTN_QKV_GROUPED_MIN_M in csrc/ops/qkv.cpp moves it for an A/B). Below 512 rows the plan runs
// 64 x 192 tiles (grouped_plan_tile). H200, 2026-12-01, graph replay, same-call A/B of the bound (bench/NOTES.md sixteenth
// session call 3): 007 B1 S256 76.3 -> 69.4 us with the plan (-9%; m256k3 before); B1 S128 52.3 ->
// 57.4 (+10%: 50 grouped tiles against split-K's 108 CTAs), so 128 rows keep the fused split-K kernel.
// 129-255 rows take the plan without a measurement of their own: the fused rule runs the same m256k3
// grid there as at 256 rows (36 head tiles of 256 rows, K split 3 ways) while the grouped GEMM has at
// most the 100 tiles of 256 rows, one wave either way.
constexpr int64_t kQkvGroupedMinRows = 129;

// The grouped plan's tile: 64 x 192 for a single launch (007) below 512 rows (M=256: 100 tiles, one
// wave, where 128 x 192 would leave 82 SMs idle with 50), else 128 x 192 (the eighth session's plan).
inline QkvConfig grouped_plan_tile(int launches, int64_t first_launch_rows) {
  return launches == 1 && first_launch_rows < 512 ? QkvConfig::kGrouped64 : QkvConfig::kGrouped128;
}
// grouped_max_rows: 007's plan stops there (VLATTN_QKV_GROUPED_MAX_M moves it; 2048 = the rule before the
// forty-fifth session).
inline QkvPlan qkv_op_plan(const int64_t* launch_rows, int launches, const int64_t (*rows_cols)[2], int count,
                           int sm_count, int64_t grouped_min_rows = kQkvGroupedMinRows,
                           int64_t grouped_max_rows = kQkvGroupedMaxRows) {
  if (sm_count <= 0 || count <= 0) return QkvPlan::kPerLaunch;
  int64_t total = 0;
  for (int i = 0; i < launches; ++i) total += launch_rows[i];
  if (launches == 1)
    return total >= grouped_min_rows && total < grouped_max_rows ? QkvPlan::kGrouped : QkvPlan::kPerLaunch;
  if (total < 2048) return total > 0 ? QkvPlan::kGemmAll : QkvPlan::kPerLaunch;
  if (total < 4096) return QkvPlan::kPerLaunch;
  const int64_t tiles = grouped_tiles(rows_cols, count, 128, 192);
  const int64_t waves = (tiles + sm_count - 1) / sm_count;
  const int64_t last = tiles - (waves - 1) * sm_count;  // tiles in the last wave
  return waves <= 8 && last * 10 >= sm_count * 9 ? QkvPlan::kGrouped : QkvPlan::kPerLaunch;
}

// Whether the RoPE pass over `rows` rows (its launches' rows together) first computes the position
// modes' cos/sin into a table with a kernel of one thread per (row, channel) (rope_table_kernel) and
// reads them from it, instead of computing 8 accurate cosf/sinf pairs per thread inside the pass.
// Few rows leave the pass a latency chain: at 034 B2 Lq128 (648 rows) it took 15 us for ~3 MB (ncu:
// ~1300 instructions per warp at ~15 cycles each). H200, 2026-12-01, graph replay, same-call A/B of
// VLATTN_QKV_ROPE_TABLE 0 vs 2 (bench/NOTES.md seventeenth session call 9): the all-GEMMs plan's one
// pass, B2 Lq128 87.7 -> 83.7 us (table 3.3 + pass 9.3 against the pass's 15.0), B2 Lq256 112.5 -> 108.4,
// B1 Lq512 116.3 -> 111.6; per-launch passes of 1024 and 1568 rows (B8 Lq128) 182.0 -> 180.6; the grouped
// plan's passes of 2048-3920 rows lost (B8 Lq256 362.4 -> 366.2, B4 Lq541 439.8 -> 448.4). The extra launch
// and allocation are host time: eager medians moved +0.5 to +4 us there, inside that run's round spread.
constexpr int64_t kRopeTableMaxRows = 2048;
inline bool qkv_rope_table_pays(int64_t rows) { return rows > 0 && rows < kRopeTableMaxRows; }

// The position mode whose cos/sin one table per launch can hold, from the modes of the launch's groups:
// the one of kPos1D / kPos3D they use, kNone when they use neither or both (the pass then computes
// them itself). 034: the text's launch kPos1D, the vision tokens' kPos3D (K) with kNone (V); 007 none.
inline RopeMode rope_table_mode(const RopeMode* modes, int count) {
  bool d1 = false, d3 = false;
  for (int g = 0; g < count; ++g) {
    d1 = d1 || modes[g] == RopeMode::kPos1D;
    d3 = d3 || modes[g] == RopeMode::kPos3D;
  }
  return d1 == d3 ? RopeMode::kNone : d1 ? RopeMode::kPos1D : RopeMode::kPos3D;
}

// The RoPE pass of kGemmRope / kGrouped (qkv_rope_rows_kernel, csrc/qkv/sm90_qkv_rope.cuh, whose
// constants static_assert these): blocks of 16 rows, heads walked 4 at a time, 4 resident blocks per SM.
constexpr int kRopePassRows = 16;
constexpr int kRopePassStepHeads = 4;
constexpr int kRopePassBlocksPerSm = 4;

// Heads per block of the RoPE pass, per group: the widest run (4, 8, 16, .. heads, capped at each
// group's head count rounded up to 4) with which the largest group alone still gives every SM its
// kRopePassBlocksPerSm resident blocks. Wider runs compute each row's cos/sin once for more heads and
// keep a block's copy ring streaming longer; the largest group bounds the pass's time, so its blocks
// must fill the machine (sizing by all groups' blocks gave 007 M=4096 one 28-head block per row block,
// about 2 per SM: bench/NOTES.md, ninth session). Small M keeps runs of 4 (007 M=128: 8 row blocks x 7).
// forced_width > 0 (VLATTN_QKV_PASS_WIDTH, an A/B) replaces the rule's width: rounded up to a multiple of
// a step, then capped per group like the rule's.
inline void rope_pass_heads_per_block(int64_t rows, const int* heads, int groups, int sm_count, int* per_group,
                                      int forced_width = 0) {
  const int64_t row_blocks = (rows + kRopePassRows - 1) / kRopePassRows;
  const int64_t slots = int64_t(sm_count > 0 ? sm_count : 132) * kRopePassBlocksPerSm;
  int max_heads = 0;
  for (int g = 0; g < groups; ++g) max_heads = std::max(max_heads, heads[g]);
  int width = kRopePassStepHeads;
  if (forced_width > 0)
    width = (std::min(forced_width, 1 << 20) + kRopePassStepHeads - 1) / kRopePassStepHeads * kRopePassStepHeads;
  else
    while (width < max_heads && row_blocks * ((max_heads + 2 * width - 1) / (2 * width)) >= slots) width *= 2;
  for (int g = 0; g < groups; ++g) {
    const int rounded = (heads[g] + kRopePassStepHeads - 1) / kRopePassStepHeads * kRopePassStepHeads;
    per_group[g] = std::min(width, rounded);
  }
}

}  // namespace vlattn
