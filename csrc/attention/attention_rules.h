// Launch decisions of the sm_90a attention kernel, as plain host functions (no CUDA/CuTe headers) so
// that tests/cpp can check them: the mask pre-pass, the persistent grid, GQA packing, the key-tile width,
// the K/V-resident kernel, the tail split, and launch_plan, which combines them into the one plan
// sm90_attention.cuh launches and sizes its workspace from. Each rule carries the H200 measurement it
// came from.
#pragma once

#include <algorithm>
#include <climits>
#include <cstdint>

#include "attention/attention_params.h"

namespace vlattn {
namespace attn_rules {

constexpr int kBlockM = 128;  // query rows per tile (sm90_attention.cuh static_asserts AttnConfig agrees)
constexpr int kBlockN = 128;  // keys per tile (mask tiles, causal; the default)
constexpr int kBlockNWide = 176;  // the widest key tile of the unmasked, non-causal kernels (also 144, 160)

constexpr int ceil_div(int a, int b) { return (a + b - 1) / b; }

inline long long sm_count_or_h200(const AttentionParams& p) { return p.sm_count > 0 ? p.sm_count : 132; }

// CTAs of the per-unit grid without GQA packing: one per (batch, query head, 128-row q-block).
inline long long q_block_ctas(const AttentionParams& p) {
  return (long long)p.batch * p.heads_q * ceil_div(p.seqlen_q, kBlockM);
}

// 16-byte aligned mask pointer and strides that are multiples of 8 elements: MIXED mask tiles can be
// staged in shared memory with 16-byte copies (the aligned layout).
inline bool mask_vec16(const AttentionParams& p) {
  return reinterpret_cast<uintptr_t>(p.mask) % 16 == 0 && p.mask_batch_stride % 8 == 0 && p.mask_row_stride % 8 == 0;
}

// Whether the mask pre-pass (one kernel) can pay for itself. With one key tile per q-block nothing is
// ever skipped (a DEAD tile would leave rows without a live key); with two, only a big grid gains more
// than the two launches cost. Measured on the H200 (2026-11-30, bench attention mode): skip on/off
// 007[B=8,S=128] 53 / 24 us, [B=4,S=256] 61 / 40, [B=32,S=256] 204 / 251, [B=1,S=613] 58 / 113.
// Results are bitwise identical either way.
//
// With MIXED tiles staged in shared memory (aligned masks) a masked tile costs little more than a ZERO
// one, and in a single wave the CTA with the most live tiles (the last q-block of a causal mask) sets
// the time whatever the others skip: there the pre-pass only adds its launch (H200 2026-11-30,
// 007[B=1,S=512], 112 CTAs: skip 32.8 us, no pre-pass 21.2). With the element-wise global path it
// paid even then (31.3 vs 39.4).
inline bool summary_pays(const AttentionParams& p) {
  const int n_blocks = ceil_div(p.seqlen_k, kBlockN);
  if (n_blocks < 2) return false;
  const long long ctas = q_block_ctas(p);
  const long long sms = sm_count_or_h200(p);
  if (n_blocks >= 3) return ctas > sms || !mask_vec16(p);
  return ctas >= 4 * sms;
}

// Whether the pre-pass runs for p: a mask, skipping on, and it pays; always for the K/V-resident kernel
// (`resident`), where its CAUSAL and ZERO tiles save the per-element mask loads of MIXED ones (that kernel
// has no staged mask tiles) and its launch overlaps the previous kernel inside a layer.
inline bool summary_runs(const AttentionParams& p, bool resident = false) {
  if (p.mask == nullptr || !p.skip || p.seqlen_q < 1 || p.seqlen_k < 1 || p.batch < 1) return false;
  return resident || summary_pays(p);
}

// Whether the persistent grid (one CTA per SM striding over the work units, static round robin) beats
// one CTA per unit. Measured on the H200 (attention bench, PERSISTENT=2 vs 0 in one run, bench/NOTES.md
// run 8 and fifth session):
// - uniform units (no mask, not causal: 034) gain 1-7.5% wherever there are more units than SMs (B8
//   Lq128: 26.5 -> 24.6 us, B64 Lq256: 384.7 -> 359.1; Lq 8192 x Lk 12544 even);
// - a mask read from global memory (not staged: unaligned rows) with many waves of units gains 4-13%
//   (007 B32 S541, 4480 units: 740 -> 642, 731 -> 701, 742 -> 664 in three runs), but loses 10-25%
//   near one wave (B1 S613, 140 units: 35.5 -> 44.3), so it needs at least 8 waves;
// - staged masks and the causal flag lose up to 40%: the units differ in length (skipped tiles, the
//   diagonal), static round robin cannot balance them like the hardware's dispatch, and the persistent
//   staged-mask kernel spills (a dynamic unit counter, measured in the fifth session, did not help);
// - except short staged-mask units in many waves (twenty-sixth session, after the early Q release, the
//   rotated consumer loop and the lean ZERO tiles; in-process A/B, bench/probe_attn_shapes.py --switch
//   VLATTN_ATTN_PERSISTENT=1,2, two calls): two key tiles, 8+ waves gain, B64 S256 (3584 units) 246.5 ->
//   210.8 / 226.9 -> 208.6 us, B32 S256 (1792) 131.7 -> 122.8 / 132.4 -> 117.1; one key tile under 8
//   waves is a coin toss (B32 S128, 896 units: +2.6% / -4.9%), few waves lose (B4 S256, 224 units: 26.9 ->
//   28.9), longer units tie or lose (B8 S512 83.2 / 83.3; the causal-like B4 S1024, B1 S4096: +3 to +28%
//   in the twenty-fifth session). Same units: the CTAs' fixed cost (prologue, Q / K / mask latency,
//   epilogue) is what the persistent CTA hides under its next unit.
constexpr int kPersistentStagedMaxTiles = 2;
constexpr int kPersistentMinWaves = 8;
inline bool persistent_pays(const AttentionParams& p, long long units, bool staged_mask) {
  if (p.causal) return false;
  const long long sms = sm_count_or_h200(p);
  if (staged_mask)
    return ceil_div(p.seqlen_k, kBlockN) <= kPersistentStagedMaxTiles && units >= kPersistentMinWaves * sms;
  return p.mask == nullptr ? units > sms : units >= kPersistentMinWaves * sms;
}

// Key split of the persistent grid's last partial wave (docs/design/attention_sm90.md §22-23). Without a mask
// and without the causal flag every unit has the same `tiles` key tiles, so a grid of G CTAs over `units` units
// (static round robin) ends on a wave of units % G units while the other SMs idle: 3.0-3.4% of 034's long
// attention launches (Lq 8192: 2048 units = 15.52 per SM). The split runs the first main_units = G x
// floor(units / G) units whole, round robin as before, and lays the tail_units after them end to end as one
// range of total = tail_units x tiles key tiles, CTA c taking [c x chunk, min((c + 1) x chunk, total)) with chunk
// = ceil(total / G): at most chunk tiles where a CTA used to run `tiles` (chunk <= tiles, so a CTA's range meets
// at most two units). A unit cut between CTAs has each piece write its unnormalized O and its rows' max and sum
// to a slot of the workspace (tail unit t, piece i: slot t x max_pieces + i), and a combine kernel merges them.
// mode (VLATTN_ATTN_TAIL_SPLIT): 0 never; 1 (default) where a CTA saves at least kTailSplitMinTiles key tiles; 2
// whenever some unit is cut and a CTA saves at least one tile. Measured on the H200 (ncu, clocks at base, attention
// kernel + combine kernel, bench/NOTES.md forty-first session): Lq 8192 (98 -> 51 tiles per CTA) 3.12 -> 3.07 + 0.012
// ms; Lq 4096 (49 -> 38) 795 -> 797 + 12 µs, a loss: the pieces' own costs (a second Q load and pipeline fill per
// CTA, fp32 partial stores) and the combine kernel eat about a dozen tiles' worth. The kernel's range arithmetic is
// 32-bit: the plan gives up where total + chunk or tail_units x max_pieces reach 2^31.
constexpr int kTailSplitMinTiles = 24;
struct TailSplit {
  bool use = false;
  int grid = 0;
  int main_units = 0;   // a multiple of grid
  int tail_units = 0;
  int tiles = 0;        // key tiles per unit
  int total = 0;        // tail_units x tiles
  int chunk = 0;        // tail tiles per CTA: ceil(total / grid)
  int max_pieces = 0;   // CTAs sharing one tail unit, at most: partial slots per tail unit
  int saved_tiles = 0;  // tiles - chunk: what the longest CTA no longer runs
  int main_count() const { return grid > 0 ? main_units / grid : 0; }
  long long slots() const { return (long long)tail_units * max_pieces; }
};

// The pieces of tail unit t: CTAs first .. last.
constexpr int tail_first_cta(int t, int tiles, int chunk) { return t * tiles / chunk; }
constexpr int tail_last_cta(int t, int tiles, int chunk) { return ((t + 1) * tiles - 1) / chunk; }

// A persistent CTA's item i under the split: unit u (-1: the CTA has no item i), its key tiles [n_begin, n_end)
// (n_end < 0: all) and the partial slot its piece writes (-1: the whole unit, stored by the normal epilogue).
// Items 0 .. main_units / grid - 1 are the round robin's units cta + i x grid; then one item per tail unit the
// CTA's range meets. attention_kernel walks its items with this (constexpr: device code calls it).
struct TailItem {
  int u, n_begin, n_end, slot;
};
constexpr TailItem tail_split_item(int main_units, int tiles, int total, int chunk, int max_pieces, int i, int cta,
                                   int grid) {
  const int main_count = main_units / grid;
  if (i < main_count) return {cta + i * grid, 0, -1, -1};
  const int lo = cta * chunk;
  const int hi = lo + chunk < total ? lo + chunk : total;
  const int t = lo / tiles + (i - main_count);
  const int start = t * tiles;
  if (lo >= total || start >= hi) return {-1, 0, 0, -1};
  const int n_begin = (lo > start ? lo : start) - start;
  const int n_end = (hi < start + tiles ? hi : start + tiles) - start;
  const bool whole = n_begin == 0 && n_end == tiles;
  return {main_units + t, n_begin, n_end, whole ? -1 : t * max_pieces + (cta - tail_first_cta(t, tiles, chunk))};
}

inline TailSplit tail_split_plan(long long units, long long grid, int tiles, int mode) {
  TailSplit s;
  if (mode <= 0 || grid < 1 || grid > INT_MAX || tiles < 2 || units <= grid || units > INT_MAX) return s;
  const long long tail = units % grid;
  if (tail == 0) return s;
  const long long total = tail * tiles, chunk = (total + grid - 1) / grid;
  if (total + chunk >= INT_MAX || tail * (tiles / chunk + 2) >= INT_MAX) return s;
  s.grid = int(grid);
  s.tail_units = int(tail);
  s.main_units = int(units - tail);
  s.tiles = tiles;
  s.total = int(total);
  s.chunk = int(chunk);
  s.saved_tiles = tiles - s.chunk;
  for (int t = 0; t < s.tail_units; ++t)
    s.max_pieces = std::max(s.max_pieces, tail_last_cta(t, tiles, s.chunk) - tail_first_cta(t, tiles, s.chunk) + 1);
  s.use = s.max_pieces >= 2 && s.saved_tiles >= (mode >= 2 ? 1 : kTailSplitMinTiles);
  return s;
}

// Whether the per-unit staged-mask kernel runs its kLean build (ZERO tiles inside the keys and below the
// causal diagonal skip the per-key checks; same bits). That build needs the softmax step forced inline,
// which costs short units and single waves. Measured on the H200 (2026-12-01, bench/NOTES.md nineteenth
// session calls 4-5, 007's mask, attention alone, cold L2, VLATTN_ATTN_LEAN_ZERO 0 -> 2 for this kernel):
// B4 S1024 137.7 -> 126.1 us, B2 S1024 79.2 -> 74.5, B1 S1024 54.0 -> 50.5, B8 S512 97.0 -> 93.3, B1
// S4096 341 -> 297; slower with two key tiles (B4 S256 27.0 -> 30.8, B1 S256 15.9 -> 17.0) and in a
// single wave of CTAs (B1 S512, 112 CTAs: 22.1 -> 24.1). So: from four key tiles, beyond one wave.
// On the rotated consumer loop (no spill in either build), CUDA-graph replay, LEAN_ZERO 1 -> 2, three
// rounds (bench/NOTES.md twenty-second session, call 4): two key tiles in many waves gain, B64 S256 (3584
// CTAs) 232.5 -> 223.7 us and B32 S256 (1792) 126.0 -> 122.1; B4 S256 (224 CTAs) 27.0 -> 27.2, B1 S256,
// B1 S512 and the one-tile B32 S128 / B8 S128 / B1 S128 +0.5 to +5%. Hence also: two tiles and at least
// eight waves.
constexpr int kLeanStagedMinTiles = 4;
constexpr int kLeanStagedManyWavesMinTiles = 2;
constexpr int kLeanStagedManyWaves = 8;
inline bool lean_staged_pays(const AttentionParams& p) {
  const long long ctas = q_block_ctas(p);
  const long long sms = sm_count_or_h200(p);
  const long long tiles = ceil_div(p.seqlen_k, kBlockN);
  return (tiles >= kLeanStagedMinTiles && ctas > sms) ||
         (tiles >= kLeanStagedManyWavesMinTiles && ctas >= kLeanStagedManyWaves * sms);
}

// Keys per pipeline step. Widths other than 128 are allowed only without a mask and without the causal
// flag (mask tiles, their summary and the causal diagonal are 128 wide). mode (VLATTN_ATTN_BN): 0 = the
// rule, 1 = the rule before the 144 / 160-key kernels (128 or 176 only), 128 / 144 / 160 / 176 = that
// width wherever it is allowed (anything else: the rule).
// What the H200 measured for 128 against 176 (2026-12-01, same-call A/B of bench/probe_attn_width.py, cold
// L2, 034 shapes; bench/NOTES.md twelfth session):
// - 176 wins 5-9% where the keys pad about as well: Lk 392 (B64 361 -> 334 us), 784 (B16 262 -> 238),
//   980 (93 -> 89), 1568 (108 -> 98), 176 (87 -> 63: one tile instead of two), 352 (102 -> 84); also
//   Lk 588 (312 -> 302), where 176 pads to 704 keys against 640;
// - it loses or ties where 176 pads to 1.375x the keys of 128 (Lk 353: 104 -> 108; Lk 196: 13.2 ->
//   13.7, 23.9 -> 23.9);
// - it ties or loses on long key sequences (Lk 6272: 642 -> 640, Lk 12544: 2566 -> 2608 us): those
//   kernels run 0.6-2.6 ms at ~650 TFLOP/s, bound by something the step width does not change.
// Those readings fit time ~ steps x (a step's fixed cost) + padded keys x (a key's cost), with a step's
// fixed cost worth 77 (Lk 392) to 100 (Lk 588) keys. So below 4096 keys the rule takes the width of
// least kStepKeys x steps + padded keys among 128, 144, 160 and 176 (ties to the wider): Lk 392 -> 144
// (3 steps of 432 keys against 176's 528), 588 and 784 -> 160, 980 and 1568 -> 176, 196 -> 128.
// Measured against mode 1 in one process (2026-12-02, bench/NOTES.md twenty-seventh session call 2):
// attention alone Lk 392 -7 to -10%, 588 and 784 -5 to -6%; the 034 layers -0.8 to -1.7% (graph replay),
// B4 Lq512 +0.2% (rounds split).
constexpr int kWideMaxKeys = 4096;
constexpr int kStepKeys = 88;
constexpr int kKeyTileWidths[] = {128, 144, 160, 176};

inline bool wide_allowed(const AttentionParams& p) { return p.mask == nullptr && !p.causal; }

inline bool is_key_tile_width(int n) {
  for (int w : kKeyTileWidths)
    if (n == w) return true;
  return false;
}

inline int block_n(const AttentionParams& p, int mode) {
  if (!wide_allowed(p)) return kBlockN;
  if (is_key_tile_width(mode)) return mode;
  if (p.seqlen_k <= kBlockN || p.seqlen_k >= kWideMaxKeys) return kBlockN;
  if (mode == 1) {  // 128 or 176 only: 176 when it pads to at most 1.2x the keys of 128
    const long long padded_wide = (long long)ceil_div(p.seqlen_k, kBlockNWide) * kBlockNWide;
    const long long padded = (long long)ceil_div(p.seqlen_k, kBlockN) * kBlockN;
    return 5 * padded_wide <= 6 * padded ? kBlockNWide : kBlockN;
  }
  int best = kBlockN;
  long long best_cost = LLONG_MAX;
  for (int w : kKeyTileWidths) {
    const long long steps = ceil_div(p.seqlen_k, w);
    const long long cost = steps * (kStepKeys + w);
    if (cost <= best_cost) best = w, best_cost = cost;
  }
  return best;
}

// GQA packing: a unit is (KV head, rows = floor(128 / G) positions, batch) instead of (query head,
// 128 positions, batch). mode (VLATTN_ATTN_PACK): 0 = never (default), 1 = when it makes strictly fewer
// units, 2 = whenever eligible. Eligible: G >= 2 and no mask pre-pass (its blocks are 128 rows), and the
// block count fits the grid's y dimension. Off by default: slower on 7 of 8 shapes probed on the H200
// (2026-11-30, bench/NOTES.md run 11), faster only where the unpacked grid exceeded a wave.
struct PackPlan {
  bool packed = false;
  int rows = kBlockM;          // query positions per unit
  int blocks = 0;              // position blocks per (batch, head)
  long long units = 0;         // work units of the launch, packed or not
};

inline PackPlan pack_plan(const AttentionParams& p, int mode, bool summary) {
  PackPlan plan;
  plan.blocks = ceil_div(p.seqlen_q, kBlockM);
  plan.units = (long long)p.heads_q * plan.blocks * p.batch;
  if (p.heads_kv < 1 || p.heads_q % p.heads_kv != 0) return plan;
  const int group = p.heads_q / p.heads_kv;
  if (mode <= 0 || group < 2 || summary) return plan;
  const int rows = kBlockM / group;
  if (rows < 1) return plan;
  const int blocks = ceil_div(p.seqlen_q, rows);
  const long long units = (long long)p.heads_kv * blocks * p.batch;
  if (blocks > 65535 || (mode == 1 && units >= plan.units)) return plan;
  plan.packed = true;
  plan.rows = rows;
  plan.blocks = blocks;
  plan.units = units;
  return plan;
}

// The K/V-resident kernel (sm90_attention_resident.cuh) for key sequences of at most two 128-key tiles: a
// CTA per (batch, KV head, chunk of `heads` query heads) keeps the KV head's K and V in shared memory and
// runs the chunk's units (query head x 128-row q-block) back to back, their Q tiles through a 3-stage
// ring, in one rotated loop over the CTA's (unit, key tile) pairs. Eligible: at most kResidentMaxKeyTiles
// key tiles, 128-key tiles (block_n's choice: below 257 keys the rule always picks 128 since every width
// takes two steps; a forced wider VLATTN_ATTN_BN keeps the per-unit kernels); it is decided before GQA packing, which it excludes. mode (VLATTN_ATTN_RESIDENT):
// 0 = never, 1 (default) = the rule below, 2 = whenever eligible.
// The chunk: the head count h (1..G) minimizing waves(h) x (h x q-blocks + 1), the 1 standing for a CTA's
// fixed cost (launch, prologue, the K / V loads, about one unit's time), ties to the larger h (fewer
// K / V loads). 007 (G = 7): B32 S128 -> 7 heads, 128 CTAs; B64 S256 -> 7, 256 CTAs; B8 S128 -> 2, 128 CTAs.
// The rule (mode 1) takes it where that cost is below the per-unit grid's, waves x (1 + 1): in a single wave
// the resident CTA would run in series units that the per-unit grid runs side by side (007 B1 S256, attention
// alone: 23.9 -> 32.6 µs with it forced). H200, 2026-12-04, same-process A/Bs (bench/NOTES.md thirty-fifth
// session calls 4-5; the kernel with its staged 16-byte epilogue), µs, per-unit (or persistent) -> resident:
// attention alone 007 B32 S128 60.7 -> 50.4, B4 S256 26.9 -> 24.5, B64 S256 204.0 -> 188.3, 034 B16 Lq128 40.1 ->
// 35.8, B8 Lq128 24.0 -> 21.6, 007 B8 S128 21.1 -> 22.7; layers in graph replay 007 B32 S128 429.4 -> 397.2, B4 S256
// 134.4 -> 128.6, B8 S128 129.0 -> 127.1, B32 S256 765.9 -> 756.4, B64 S256 1732.4 -> 1726.4, 034 B16 Lq128 342.6 ->
// 336.2, B8 Lq128 174.6 -> 172.1. With the units as one stream of key tiles (call 6, attention alone, forced):
// B32 S128 61.4 -> 47.8, B64 S256 203.8 -> 180.6, 034 B16 Lq128 40.2 -> 35.0, B4 S256 26.9 -> 25.8.
constexpr int kResidentMaxKeyTiles = 2;
constexpr int kResidentMinUnits = 2;
struct ResidentPlan {
  bool use = false;
  int heads = 0;        // query heads per CTA
  int chunks = 0;       // CTAs per (batch, KV head): ceil(G / heads)
  long long ctas = 0;   // batch x Hkv x chunks
  int units_per_cta = 0;
};

inline ResidentPlan resident_plan(const AttentionParams& p, int mode, int bn_mode) {
  ResidentPlan plan;
  if (mode <= 0 || p.heads_kv < 1 || p.heads_q % p.heads_kv != 0 || p.batch < 1 || p.seqlen_q < 1 ||
      p.seqlen_k < 1)
    return plan;
  if (ceil_div(p.seqlen_k, kBlockN) > kResidentMaxKeyTiles || block_n(p, bn_mode) != kBlockN) return plan;
  const int group = p.heads_q / p.heads_kv;
  const long long m_blocks = ceil_div(p.seqlen_q, kBlockM);
  const long long sms = sm_count_or_h200(p);
  long long best_cost = LLONG_MAX;
  for (int h = 1; h <= group; ++h) {
    const int chunks = ceil_div(group, h);
    if (h > 1 && ceil_div(group, h - 1) == chunks) continue;  // same chunking as a smaller h: skip
    const long long ctas = (long long)p.batch * p.heads_kv * chunks;
    const long long waves = (ctas + sms - 1) / sms;
    const long long cost = waves * (h * m_blocks + 1);
    if (cost <= best_cost) {
      best_cost = cost;
      plan.heads = h;
      plan.chunks = chunks;
      plan.ctas = ctas;
    }
  }
  plan.units_per_cta = int(std::min<long long>(INT_MAX, plan.heads * m_blocks));
  if (plan.ctas > INT_MAX) return ResidentPlan{};
  if (mode >= 2) {
    plan.use = true;
    return plan;
  }
  const long long units = q_block_ctas(p);
  const long long per_unit_cost = (units + sms - 1) / sms * 2;
  plan.use = plan.units_per_cta >= kResidentMinUnits && best_cost < per_unit_cost;
  return plan;
}


// The split-key kernel (sm90_attention_splitkeys.cuh; design § 26): a CTA per (query head, 64-row q-block, batch),
// both consumer warpgroups on the same 64 rows, each over half of the keys (at most 256 in all), the halves combined
// in shared memory. For launches whose 128-row grid leaves most SMs idle, where a unit's time is one warp's
// dependent chain (007 B1 S128: 28 CTAs on 132 SMs). Eligible: at most 256 keys, 128-key tiles (block_n's choice;
// a forced wider VLATTN_ATTN_BN keeps the other kernels). mode (VLATTN_ATTN_SPLIT_KEYS): 0 = never, 1 = the
// rule (the default): eligible, its CTAs fit one wave (at most one per SM), and a masked or causal launch has one
// key tile (at most 128 keys); 2 = whenever eligible. Measured (H100, 55th session, bench/NOTES.md): the rule's
// shapes lower in graph replay (007 B1 S128 -3.5 us, B1 S256 -1.8, 034 B2 Lq128 -4.2); past one wave it loses (007
// B4 S128, 224 CTAs, mode 2: +4.4 us), hence the wave bound. Re-measured on main (58th session, H100, in-process,
// 40 calls in 4 rounds, mode 1 then against 0): 007 B1 S128 46.7 / 50.0 us graph replay, 55.4 / 57.0 eager; 034 B2
// Lq128 83.6 / 83.6, 97.2 / 99.2; but 007 B1 S256 (masked, two key tiles) 66.1 / 63.1 and 79.3 / 75.6, the split
// kernel slower in every round, although alone (ncu, caches flushed) it is the faster one there too: 11.9 against
// 13.6 us. So the loss is the chain's: a reading, not measured, is that its 112 CTAs leave 20 SMs for the PDL-launched
// O projection's CTAs to park on (56 at B1 S128). Hence the one-tile bound for masks.
// Not bitwise the same as the other kernels (a row's sum in two parts, combined in fp32): within the contract.
constexpr int kSplitKeysMaxKeys = 2 * kBlockN;
constexpr int kSplitKeysRows = 64;
inline long long split_keys_ctas(const AttentionParams& p) {
  return (long long)p.batch * p.heads_q * ceil_div(p.seqlen_q, kSplitKeysRows);
}
inline bool split_keys_use(const AttentionParams& p, int mode, int bn_mode) {
  if (mode <= 0 || p.batch < 1 || p.heads_q < 1 || p.seqlen_q < 1 || p.seqlen_k < 1) return false;
  if (p.seqlen_k > kSplitKeysMaxKeys || block_n(p, bn_mode) != kBlockN) return false;
  if (mode >= 2) return true;
  if ((p.mask != nullptr || p.causal) && p.seqlen_k > kBlockN) return false;
  return split_keys_ctas(p) <= sm_count_or_h200(p);
}

// The whole launch decision for p, from the rules above and the switch values (VLATTN_ATTN_*). attention_plan builds
// it once per call, sizes the scratch from it and hands the same plan to the launch, so the two cannot disagree;
// tests/cpp pins which kernel each workload shape runs.
// Every value of every switch gives the same bits; the defaults are the rules.
struct LaunchSwitches {
  bool simple = false;  // VLATTN_ATTN_SIMPLE=1: the plain (non-overlapped) consumer loop, 128-key tiles, one CTA
                        // per unit, no resident kernel (diagnosis)
  int mask_smem = 1;    // VLATTN_ATTN_MASK_SMEM: 0 = read MIXED mask tiles from global memory, 1 or 2 = stage them
                        // in shared memory when the mask is 16-byte aligned (mask_vec16)
  int lean_zero = 1;    // VLATTN_ATTN_LEAN_ZERO: 0 = every masked-path tile checks its keys, 1 = the kLean builds
                        // skip them on ZERO tiles and the per-unit staged kernel is lean where lean_staged_pays,
                        // 2 = lean for every per-unit staged launch
  int pack = 0;         // VLATTN_ATTN_PACK: pack_plan's mode
  int persistent = 1;   // VLATTN_ATTN_PERSISTENT: 0 = one CTA per unit (3-D grid), 1 = persistent_pays, 2 = always
                        // the persistent grid (not with the simple loop)
  int bn = 0;           // VLATTN_ATTN_BN: block_n's mode
  int resident = 1;     // VLATTN_ATTN_RESIDENT: resident_plan's mode
  int tail_split = 1;   // VLATTN_ATTN_TAIL_SPLIT: tail_split_plan's mode
  bool diag_half = true;  // VLATTN_ATTN_DIAG_HALF: the resident kernel's CAUSAL diagonal tiles take the lower-key
                          // softmax and P V in the warpgroup of the block's first 64 rows (a kernel argument)
  bool tma_o = true;      // VLATTN_ATTN_TMA_O: the resident kernel's producer stores O with TMA (a kernel argument)
  bool walk_cache = true; // VLATTN_ATTN_WALK_CACHE: the resident kernel's walks once per q-block (a kernel argument)
  int split_keys = 1;     // VLATTN_ATTN_SPLIT_KEYS: split_keys_use's mode
};

// The kernel build a launch runs (sm90_attention.cuh's attention_kernel<kBN, kPipelined, kMaskSmem, kPersistent,
// kLean>, or the K/V-resident kernel), with LaunchPlan's block_n, persistent and lean naming the rest.
enum class AttnKernel : int {
  kNone = 0,      // the parameters describe no launch (launch() rejects them first)
  kResident,      // kv_resident_kernel<mask != nullptr>
  kSimple,        // <128, false, false, false, false>: the diagnosis loop
  kSimpleStaged,  // <128, false, true, false, true>: the diagnosis loop, staged mask
  kPlain,         // <block_n, true, false, persistent, false>: no mask (the split tail: persistent, 128 keys)
  kGlobalMask,    // <128, true, false, persistent, true>: a mask read from global memory
  kStaged,        // <128, true, true, persistent, lean>: MIXED mask tiles staged in shared memory
  kSplitKeys,     // split_keys_kernel<64 or 128 keys per warpgroup, mask != nullptr>: 64-row units, keys split
};

struct LaunchPlan {
  AttnKernel kernel = AttnKernel::kNone;
  ResidentPlan resident;
  bool summary = false;     // the mask pre-pass runs first (summary_runs)
  PackPlan pack;            // units of the per-unit and persistent kernels (GQA packing or not)
  bool stage_mask = false;  // MIXED tiles staged in shared memory (aligned mask, not packed)
  bool persistent = false;  // the 1-D grid of min(units, SMs) CTAs
  bool lean_zero = false;   // the kLean builds skip the per-key checks on ZERO tiles (a kernel argument)
  bool lean = false;        // the kLean template flag of `kernel`
  int block_n = kBlockN;    // keys per pipeline step
  long long grid[3] = {0, 1, 1};
  TailSplit split;          // the persistent grid's last wave cut by keys (kPlain at 128 keys only)
  bool diag_half = false;   // kResident: its CAUSAL diagonal tiles' lower-key softmax and P V (a kernel argument)
  bool tma_o_store = false;  // kResident: its producer stores each unit's staged O with TMA (a kernel argument)
  bool walk_cache = false;   // kResident: its walks computed once per q-block, with at most two (a kernel argument)
};

inline LaunchPlan launch_plan(const AttentionParams& p, const LaunchSwitches& sw) {
  LaunchPlan plan;
  if (!sw.simple) plan.resident = resident_plan(p, sw.resident, sw.bn);
  plan.summary = summary_runs(p, plan.resident.use);
  if (p.batch < 1 || p.heads_q < 1 || p.heads_kv < 1 || p.seqlen_q < 1 || p.seqlen_k < 1 ||
      p.heads_q % p.heads_kv != 0)
    return plan;
  // The resident kernel reads lean_zero too (its ZERO tiles without per-key checks).
  plan.lean_zero = sw.lean_zero >= 1;
  if (!sw.simple && split_keys_use(p, sw.split_keys, sw.bn)) {
    plan.kernel = AttnKernel::kSplitKeys;  // no mask pre-pass, no resident K / V, no packing
    plan.resident = ResidentPlan{};
    plan.summary = false;
    plan.grid[0] = split_keys_ctas(p);
    return plan;
  }
  if (plan.resident.use) {
    plan.kernel = AttnKernel::kResident;
    plan.grid[0] = plan.resident.ctas;
    plan.diag_half = sw.diag_half;
    plan.tma_o_store = sw.tma_o;
    plan.walk_cache = sw.walk_cache;
    return plan;
  }
  const bool lean_staged = sw.lean_zero >= 2 || (sw.lean_zero == 1 && lean_staged_pays(p));
  plan.pack = pack_plan(p, sw.pack, plan.summary);
  plan.stage_mask = p.mask != nullptr && sw.mask_smem >= 1 && mask_vec16(p) && !plan.pack.packed;
  const long long units = plan.pack.units;
  plan.persistent =
      !sw.simple && (sw.persistent >= 2 || (sw.persistent == 1 && persistent_pays(p, units, plan.stage_mask)));
  if (plan.persistent) {
    plan.grid[0] = std::min<long long>(units, sm_count_or_h200(p));
  } else if (plan.pack.packed) {
    plan.grid[0] = p.heads_kv, plan.grid[1] = plan.pack.blocks, plan.grid[2] = p.batch;
  } else {
    plan.grid[0] = p.heads_q, plan.grid[1] = ceil_div(p.seqlen_q, kBlockM), plan.grid[2] = p.batch;
  }
  plan.block_n = sw.simple ? kBlockN : block_n(p, sw.bn);
  if (sw.simple) {
    plan.kernel = plan.stage_mask ? AttnKernel::kSimpleStaged : AttnKernel::kSimple;
    plan.lean = plan.stage_mask;
  } else if (p.mask == nullptr) {
    plan.kernel = AttnKernel::kPlain;
    if (plan.persistent && !plan.pack.packed && !p.causal && plan.block_n == kBlockN)
      plan.split = tail_split_plan(units, plan.grid[0], ceil_div(p.seqlen_k, kBlockN), sw.tail_split);
  } else if (plan.stage_mask) {
    plan.kernel = AttnKernel::kStaged;
    plan.lean = plan.persistent || lean_staged;
  } else {
    plan.kernel = AttnKernel::kGlobalMask;
    plan.lean = true;
  }
  return plan;
}

}  // namespace attn_rules
}  // namespace vlattn
