// Host unit tests for csrc/kernels/rope.h (RoPE channel maps), csrc/kernels/gemm_config.h (config
// legality), csrc/attention/attention_rules.h and csrc/qkv/qkv_config.h (the attention launch rules and
// the fused QKV config rule on the workload shapes). Driven by tests/test_cpp.py: `--list` prints case names, `NAME` runs one.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "attention/attention_rules.h"
#include "attention/mask_kinds.h"
#include "kernels/gemm_config.h"
#include "kernels/rope.h"
#include "ops/overlap.h"
#include "qkv/qkv_config.h"

using namespace vlattn;

namespace {

struct Case {
  const char* name;
  std::function<bool(std::string&)> fn;
};

#define EXPECT(cond)                                                        \
  do {                                                                      \
    if (!(cond)) {                                                          \
      err = std::string(__FILE__ ":") + std::to_string(__LINE__) + ": " #cond; \
      return false;                                                         \
    }                                                                       \
  } while (0)

// Seed 007 split: channels [0,32) plane 0, [32,80) plane 1, [80,128) plane 2.
bool mrope_seed_split(std::string& err) {
  const int s[] = {32, 48, 48};
  for (int c = 0; c < 128; ++c) EXPECT(rope::mrope_plane(c, s, 3) == (c < 32 ? 0 : c < 80 ? 1 : 2));
  EXPECT(rope::mrope_plane(128, s, 3) == -1);
  EXPECT(rope::mrope_plane(-1, s, 3) == -1);
  return true;
}

// HF Qwen2.5-VL split [16,24,24] doubled: the plane pattern repeats on the second half, so a
// channel and its rotate-half partner (c +- 64) always read the same plane.
bool mrope_hf_split_pairs_share_plane(std::string& err) {
  const int s[] = {16, 24, 24, 16, 24, 24};
  for (int c = 0; c < 64; ++c) {
    EXPECT(rope::mrope_plane(c, s, 6) == rope::mrope_plane(c + 64, s, 6));
    EXPECT(rope::mrope_plane(c, s, 6) == (c < 16 ? 0 : c < 40 ? 1 : 2));
  }
  return true;
}

bool rotate_half_full_head(std::string& err) {
  for (int c = 0; c < 128; ++c) {
    rope::Pair p = rope::rotate_half_pair(c, 0, 128);
    EXPECT(p.partner == (c < 64 ? c + 64 : c - 64));
    EXPECT(p.sign == (c < 64 ? -1 : 1));
    EXPECT(p.freq == c % 64);
    // Involution: the partner's partner is c, with the opposite sign.
    rope::Pair q = rope::rotate_half_pair(p.partner, 0, 128);
    EXPECT(q.partner == c && q.sign == -p.sign && q.freq == p.freq);
  }
  return true;
}

// 034 K: pairs (j, j+21) in t, (42+j, 63+j) in h, (84+j, 106+j) in w, as DESIGN.md lists them.
bool thw_segments_seed_pairs(std::string& err) {
  const int split[] = {42, 42, 44};
  for (int c = 0; c < 128; ++c) {
    rope::Segment s = rope::thw_segment(c, split);
    EXPECT(s.index == (c < 42 ? 0 : c < 84 ? 1 : 2));
    rope::Pair p = rope::rotate_half_pair(c, s.base, s.width);
    rope::Segment ps = rope::thw_segment(p.partner, split);
    EXPECT(ps.index == s.index);  // rotation never crosses a segment
  }
  EXPECT(rope::rotate_half_pair(0, 0, 42).partner == 21);
  EXPECT(rope::rotate_half_pair(42, 42, 42).partner == 63);
  EXPECT(rope::rotate_half_pair(84, 84, 44).partner == 106);
  EXPECT(rope::rotate_half_pair(127, 84, 44).partner == 105);
  EXPECT(rope::rotate_half_pair(127, 84, 44).freq == 21);
  EXPECT(rope::thw_segment(128, split).index == -1);
  return true;
}

// The RoPE pass's pair numbering (rope::thw_pair_index): for every even split summing to 128 the first-half
// channels map one to one onto pairs 0..63, a pair's two channels share segment and frequency, and the
// second-half channels have none.
bool thw_pair_index_bijection(std::string& err) {
  const int splits[][3] = {{42, 42, 44}, {44, 42, 42}, {2, 2, 124}, {124, 2, 2}, {64, 32, 32}, {20, 54, 54}};
  for (const auto& sp : splits) {
    int first_of[64];
    for (int& f : first_of) f = -1;
    for (int c = 0; c < 128; ++c) {
      const rope::Segment seg = rope::thw_segment(c, sp);
      const rope::Pair pr = rope::rotate_half_pair(c, seg.base, seg.width);
      const int p = rope::thw_pair_index(c, sp);
      EXPECT((p >= 0) == (pr.sign < 0));
      if (p < 0) continue;
      EXPECT(p < 64 && first_of[p] == -1);
      first_of[p] = c;
      const rope::Segment ps = rope::thw_segment(pr.partner, sp);
      EXPECT(ps.index == seg.index);
      EXPECT(rope::rotate_half_pair(pr.partner, ps.base, ps.width).freq == pr.freq);
      EXPECT(rope::thw_pair_index(pr.partner, sp) == -1);
    }
    for (int p = 0; p < 64; ++p) EXPECT(first_of[p] >= 0);
  }
  return true;
}

// Legal configs compile (their static_asserts hold); the illegal ones are compile-fail cases in
// tests/test_cpp.py. Values are read back to keep the instantiations alive.
bool gemm_configs_legal(std::string& err) {
  using Coop = Sm90GemmConfig<128, 128, 64, 1, 1, Schedule::kCooperative, TileSched::kPersistent, 0>;
  using Wide = Sm90GemmConfig<128, 256, 64, 1, 1, Schedule::kCooperative, TileSched::kPersistent, 0>;
  using Ping = Sm90GemmConfig<64, 128, 64, 1, 1, Schedule::kPingpong, TileSched::kPersistent, 0>;
  using SK = Sm90GemmConfig<128, 128, 64, 1, 1, Schedule::kCooperative, TileSched::kStreamK, 4>;
  using Epi64 = Sm90GemmConfig<128, 256, 64, 2, 1, Schedule::kCooperative, TileSched::kPersistent, 0, 64>;
  using PSplit = Sm90GemmConfig<64, 64, 64, 1, 1, Schedule::kPingpong, TileSched::kParallelSplitK, 0>;
  EXPECT(Coop::kSmemBytesPerStage == 32768);
  EXPECT(PSplit::kTileSched == TileSched::kParallelSplitK && PSplit::kSmemBytesPerStage == 16384);
  EXPECT(Wide::kEpiN == 0 && Epi64::kEpiN == 64);
  EXPECT(Wide::kSmemBytesPerStage == 49152);
  EXPECT(Ping::kTileM == 64 && SK::kStages == 4);
  return true;
}

// An attention launch as the layers make it: q/k/v from the QKV kernel, the benchmark's masks.
AttentionParams attn(int b, int hq, int hkv, int sq, int sk, bool mask, bool causal = false) {
  static const uint16_t kMaskStorage[8] alignas(16) = {};
  AttentionParams p;
  p.batch = b, p.heads_q = hq, p.heads_kv = hkv, p.seqlen_q = sq, p.seqlen_k = sk;
  p.mask = mask ? kMaskStorage : nullptr;  // 16-byte aligned
  p.mask_row_stride = sk;
  p.mask_batch_stride = int64_t(sq) * sk;
  p.causal = causal;
  p.sm_count = 132;
  return p;
}

// The pre-pass runs where bench/NOTES.md measured it paying: 007 shapes with >= 3 key tiles beyond a
// wave, unaligned masks (S 541/613) with >= 3 tiles, two tiles only from 4 waves on.
bool attention_summary_rule(std::string& err) {
  using attn_rules::summary_runs;
  EXPECT(!summary_runs(attn(1, 28, 4, 128, 128, true)));    // one key tile: nothing to skip
  EXPECT(!summary_runs(attn(4, 28, 4, 256, 256, true)));    // 2 tiles, 224 CTAs < 4 waves
  EXPECT(summary_runs(attn(32, 28, 4, 256, 256, true)));    // 2 tiles, 1792 CTAs
  EXPECT(!summary_runs(attn(1, 28, 4, 512, 512, true)));    // aligned, 112 CTAs: one wave
  EXPECT(summary_runs(attn(1, 28, 4, 613, 613, true)));     // odd row stride: not 16-byte staged
  EXPECT(summary_runs(attn(1, 28, 4, 4096, 4096, true)));   // 896 CTAs
  EXPECT(!summary_runs(attn(1, 32, 8, 8192, 12544, false)));  // no mask
  AttentionParams noskip = attn(1, 28, 4, 4096, 4096, true);
  noskip.skip = false;
  EXPECT(!summary_runs(noskip));
  return true;
}

// Persistent grid for uniform units beyond one wave, for a global-memory mask over 8 waves
// (bench/NOTES.md run 8, fifth session) and for a staged mask of at most two key tiles over 8 waves
// (twenty-sixth session).
bool attention_persistent_rule(std::string& err) {
  using attn_rules::pack_plan;
  using attn_rules::persistent_pays;
  auto units = [](const AttentionParams& p) { return pack_plan(p, 0, false).units; };
  const AttentionParams b8 = attn(8, 32, 8, 128, 196, false);  // 256 units
  EXPECT(units(b8) == 256 && persistent_pays(b8, units(b8), false));
  const AttentionParams big = attn(1, 32, 8, 8192, 12544, false);  // 2048 units
  EXPECT(persistent_pays(big, units(big), false));
  const AttentionParams b2 = attn(2, 32, 8, 256, 392, false);  // 128 units: one wave
  EXPECT(units(b2) == 128 && !persistent_pays(b2, units(b2), false));
  const AttentionParams masked = attn(32, 28, 4, 541, 541, true);  // 4480 units, masked
  EXPECT(units(masked) == 4480 && persistent_pays(masked, units(masked), false));  // mask from global memory
  EXPECT(!persistent_pays(masked, units(masked), true));                            // staged mask, 5 key tiles
  // Staged masks: two key tiles in 8+ waves only (twenty-sixth session).
  const AttentionParams b64 = attn(64, 28, 4, 256, 256, true), b32 = attn(32, 28, 4, 256, 256, true);
  EXPECT(units(b64) == 3584 && persistent_pays(b64, units(b64), true));
  EXPECT(units(b32) == 1792 && persistent_pays(b32, units(b32), true));
  const AttentionParams b32s128 = attn(32, 28, 4, 128, 128, true), b4 = attn(4, 28, 4, 256, 256, true);
  EXPECT(units(b32s128) == 896 && !persistent_pays(b32s128, units(b32s128), true));  // under 8 waves
  EXPECT(!persistent_pays(b4, units(b4), true));
  const AttentionParams b8s512 = attn(8, 28, 4, 512, 512, true);  // 896 units of 4 key tiles
  EXPECT(!persistent_pays(b8s512, units(b8s512), true));
  const AttentionParams b128s384 = attn(128, 28, 4, 384, 384, true);  // many waves, 3 key tiles
  EXPECT(!persistent_pays(b128s384, units(b128s384), true));
  const AttentionParams masked613 = attn(1, 28, 4, 613, 613, true);               // 140 units: ~one wave
  EXPECT(!persistent_pays(masked613, units(masked613), false));
  const AttentionParams causal = attn(4, 32, 8, 4096, 4096, false, true);
  EXPECT(!persistent_pays(causal, units(causal), false));
  return true;
}

// The per-unit staged-mask kernel's kLean build from four key tiles beyond one wave of CTAs
// (bench/NOTES.md nineteenth session), or from two key tiles in at least eight waves (twenty-second).
bool attention_lean_staged_rule(std::string& err) {
  using attn_rules::lean_staged_pays;
  EXPECT(!lean_staged_pays(attn(32, 28, 4, 128, 128, true)));  // one tile
  EXPECT(lean_staged_pays(attn(64, 28, 4, 256, 256, true)));   // two tiles, 3584 CTAs (27 waves)
  EXPECT(lean_staged_pays(attn(32, 28, 4, 256, 256, true)));   // two tiles, 1792 CTAs (13.6 waves)
  EXPECT(!lean_staged_pays(attn(4, 28, 4, 256, 256, true)));   // two tiles, 224 CTAs
  EXPECT(!lean_staged_pays(attn(16, 28, 4, 256, 256, true)));  // two tiles, 896 CTAs: below 8 waves
  EXPECT(!lean_staged_pays(attn(64, 28, 4, 128, 128, true)));  // one tile, however many waves
  EXPECT(!lean_staged_pays(attn(4, 28, 4, 384, 384, true)));   // three: not measured, kept as before
  EXPECT(!lean_staged_pays(attn(1, 28, 4, 512, 512, true)));   // 112 CTAs: one wave
  EXPECT(lean_staged_pays(attn(8, 28, 4, 512, 512, true)));
  EXPECT(lean_staged_pays(attn(1, 28, 4, 1024, 1024, true)));  // 224 CTAs
  EXPECT(lean_staged_pays(attn(1, 28, 4, 4096, 4096, true)));
  EXPECT(lean_staged_pays(attn(2, 28, 4, 300, 400, true)));    // by key tiles (Sk 400: 4), 168 CTAs
  return true;
}

// GQA packing: off by default; mode 1 packs only with strictly fewer units; never with a pre-pass
// or one query head per KV head.
bool attention_pack_rule(std::string& err) {
  using attn_rules::pack_plan;
  const AttentionParams p541 = attn(4, 32, 8, 541, 980, false);  // G 4: 640 units, packed 544
  EXPECT(!pack_plan(p541, 0, false).packed && pack_plan(p541, 0, false).units == 640);
  const attn_rules::PackPlan on = pack_plan(p541, 1, false);
  EXPECT(on.packed && on.rows == 32 && on.blocks == 17 && on.units == 544);
  const AttentionParams p128 = attn(1, 28, 4, 128, 128, false);  // G 7: 28 units, packed 4 x 8 = 32
  EXPECT(!pack_plan(p128, 1, false).packed);
  const attn_rules::PackPlan forced = pack_plan(p128, 2, false);
  EXPECT(forced.packed && forced.rows == 18 && forced.blocks == 8 && forced.units == 32);
  const AttentionParams decode = attn(8, 28, 4, 1, 1024, false);  // 224 units, packed 32
  EXPECT(pack_plan(decode, 1, false).packed && pack_plan(decode, 1, false).units == 32);
  EXPECT(!pack_plan(p541, 2, true).packed);                        // the pre-pass runs: 128-row blocks
  EXPECT(!pack_plan(attn(2, 8, 8, 300, 300, false), 2, false).packed);  // G 1
  const attn_rules::PackPlan g3 = pack_plan(attn(1, 6, 2, 250, 77, false), 2, false);  // G 3: 42 rows
  EXPECT(g3.packed && g3.rows == 42 && g3.blocks == 6 && g3.units == 12);
  return true;
}

// The K/V-resident kernel: at most two 128-key tiles, chunks of query heads by waves x (heads x q-blocks + 1),
// used (mode 1) where that beats the per-unit grid's waves x 2, always when eligible (mode 2), never (mode 0).
bool attention_resident_rule(std::string& err) {
  using attn_rules::resident_plan;
  const attn_rules::ResidentPlan b32 = resident_plan(attn(32, 28, 4, 128, 128, true), 1, 0);  // 007 B32 S128
  EXPECT(b32.use && b32.heads == 7 && b32.chunks == 1 && b32.ctas == 128 && b32.units_per_cta == 7);
  const attn_rules::ResidentPlan b64 = resident_plan(attn(64, 28, 4, 256, 256, true), 1, 0);  // 007 B64 S256
  EXPECT(b64.use && b64.heads == 7 && b64.ctas == 256 && b64.units_per_cta == 14);
  EXPECT(resident_plan(attn(32, 28, 4, 256, 256, true), 1, 0).use);  // 128 CTAs of 14 units
  const attn_rules::ResidentPlan b1 = resident_plan(attn(1, 28, 4, 128, 128, true), 1, 0);  // one unit per CTA
  EXPECT(!b1.use && b1.heads == 1 && b1.ctas == 28);
  EXPECT(resident_plan(attn(1, 28, 4, 128, 128, true), 2, 0).use);                  // forced
  EXPECT(!resident_plan(attn(1, 28, 4, 256, 256, true), 1, 0).use);  // 56 per-unit CTAs run side by side
  EXPECT(resident_plan(attn(4, 28, 4, 256, 256, true), 1, 0).use);   // 224 per-unit CTAs, 112 resident
  const attn_rules::ResidentPlan b8 = resident_plan(attn(8, 28, 4, 128, 128, true), 1, 0);  // 224 CTAs at 1 head
  EXPECT(b8.use && b8.heads == 2 && b8.chunks == 4 && b8.ctas == 128);
  EXPECT(!resident_plan(attn(4, 28, 4, 128, 128, true), 1, 0).use);  // 112 per-unit CTAs: one wave either way
  const attn_rules::ResidentPlan x16 = resident_plan(attn(16, 32, 8, 128, 196, false), 1, 0);  // 034 B16 Lq128
  EXPECT(x16.use && x16.heads == 4 && x16.ctas == 128);
  EXPECT(resident_plan(attn(8, 32, 8, 128, 196, false), 1, 0).use);   // 034 B8 Lq128: 2 heads, 128 CTAs
  EXPECT(!resident_plan(attn(2, 32, 8, 128, 196, false), 1, 0).use);  // 64 CTAs of one unit
  EXPECT(!resident_plan(attn(32, 28, 4, 128, 128, true), 0, 0).use);  // mode 0
  EXPECT(!resident_plan(attn(4, 28, 4, 257, 257, true), 2, 0).use);   // three key tiles
  EXPECT(!resident_plan(attn(16, 32, 8, 128, 196, false), 2, 176).use);  // a forced wider key tile
  EXPECT(resident_plan(attn(4, 28, 4, 300, 200, false, true), 1, 0).use);  // causal flag, Sq > Sk: 3 q-blocks
  // The pre-pass always runs for it with a mask and skipping on (its CAUSAL / ZERO tiles need no loads).
  EXPECT(attn_rules::summary_runs(attn(1, 28, 4, 128, 128, true), true));
  EXPECT(!attn_rules::summary_runs(attn(1, 28, 4, 128, 128, false), true));
  return true;
}

// The last wave's key split: the plan for 034's long launches and the short ones, and for many shapes that the
// CTAs' items (the kernel's own enumeration) cover every tile of every unit exactly once, the main units whole, each
// piece of a cut unit in its own slot below slots(), no CTA over ceil(total / grid) tail tiles.
bool attention_tail_split_rule(std::string& err) {
  using attn_rules::tail_split_plan;
  const attn_rules::TailSplit lq8192 = tail_split_plan(2048, 132, 98, 1);  // 034 Lq 8192: 32 x 64 units, Lk 12544
  EXPECT(lq8192.use && lq8192.main_units == 1980 && lq8192.tail_units == 68 && lq8192.total == 6664 &&
         lq8192.saved_tiles == 47 && lq8192.max_pieces == 3);
  const attn_rules::TailSplit lq4096 = tail_split_plan(1024, 132, 49, 1);  // 034 Lq 4096, Lk 6272: measured a loss
  EXPECT(!lq4096.use && lq4096.tail_units == 100 && lq4096.saved_tiles == 11 && tail_split_plan(1024, 132, 49, 2).use);
  EXPECT(tail_split_plan(160, 132, 33, 1).use);  // 28 tail units of 33 tiles: 26 saved
  EXPECT(!tail_split_plan(2048, 132, 5, 1).use);   // 034 B16 Lq512 (Lk 784 at 160 keys): 2 tiles saved
  EXPECT(tail_split_plan(2048, 132, 5, 2).use);    // forced
  EXPECT(!tail_split_plan(2048, 132, 98, 0).use);  // mode 0
  EXPECT(!tail_split_plan(132, 132, 98, 2).use);   // one full wave: no tail
  EXPECT(!tail_split_plan(264, 132, 98, 2).use);   // two full waves
  EXPECT(!tail_split_plan(100, 100, 98, 2).use);   // grid = units
  EXPECT(!tail_split_plan(2048, 132, 1, 2).use);   // one key tile: nothing to cut
  EXPECT(!tail_split_plan(263, 132, 98, 2).use);   // 131 tail units on 132 CTAs: no CTA saves a tile
  for (int grid : {3, 7, 132})
    for (long long units : {grid + 1LL, 2LL * grid + 1, 5LL * grid - 1, 2048LL})
      for (int tiles : {2, 3, 5, 7, 49, 98, 99, 1000}) {
        const attn_rules::TailSplit s = tail_split_plan(units, grid, tiles, 2);
        if (!s.use) continue;
        std::vector<int> seen(size_t(units) * tiles, 0), slot_used(size_t(s.slots()), 0);
        const int cap = (s.total + grid - 1) / grid;
        EXPECT(s.chunk == cap && s.chunk <= s.tiles);
        for (int cta = 0; cta < grid; ++cta) {
          int tail_tiles = 0;
          for (int i = 0;; ++i) {
            const attn_rules::TailItem it = attn_rules::tail_split_item(s.main_units, s.tiles, s.total, s.chunk,
                                                                        s.max_pieces, i, cta, grid);
            if (i >= s.main_count()) EXPECT(i - s.main_count() < 2 || it.u < 0);  // the kernel keeps two tail items
            if (it.u < 0 || it.u >= units) break;
            const int nb = it.n_begin, ne = it.n_end < 0 ? tiles : it.n_end;
            EXPECT(0 <= nb && nb < ne && ne <= tiles);
            if (it.u < s.main_units) EXPECT(it.u % grid == cta && nb == 0 && ne == tiles && it.slot < 0);
            else tail_tiles += ne - nb;
            EXPECT((it.slot < 0) == (nb == 0 && ne == tiles));
            if (it.slot >= 0) {
              EXPECT(it.slot < s.slots() && it.slot / s.max_pieces == it.u - s.main_units && slot_used[it.slot]++ == 0);
            }
            for (int n = nb; n < ne; ++n) ++seen[size_t(it.u) * tiles + n];
          }
          EXPECT(tail_tiles <= cap);
        }
        for (int c : seen) EXPECT(c == 1);
      }
  return true;
}

// The whole launch plan (attn_rules::launch_plan) on the 32 workloads' attention launches under the default
// switches: which kernel build each runs (the dispatch the H200 numbers in bench/NOTES.md were measured on), and
// over a sweep of shapes and switch values the properties launch() relies on: a tail split only on the persistent
// unmasked 128-key kernel, over the plan's own grid; the resident kernel exactly where its plan says; a staged
// mask only in the staged builds; the diagnosis loop never persistent; grids within CUDA's limits.
bool attention_launch_plan(std::string& err) {
  using attn_rules::AttnKernel;
  using attn_rules::LaunchPlan;
  using attn_rules::LaunchSwitches;
  struct Expect {
    int b, hq, hkv, sq, sk;
    bool mask;
    AttnKernel kernel;
    bool persistent;
    int block_n;
    bool split;
  };
  // (lean builds: the staged per-unit kernel is lean from 4 key tiles beyond a wave, attn_rules::lean_staged_pays)
  constexpr AttnKernel kRes = AttnKernel::kResident, kStg = AttnKernel::kStaged, kGlb = AttnKernel::kGlobalMask,
                       kPln = AttnKernel::kPlain, kSpk = AttnKernel::kSplitKeys;
  const Expect table[] = {
      // 007 (mask [B, 1, S, S]; S 541 / 613 rows are not 16-byte aligned: read from global memory)
      {4, 28, 4, 128, 128, true, kStg, false, 128, false},     {64, 28, 4, 256, 256, true, kRes, false, 128, false},
      {4, 28, 4, 1024, 1024, true, kStg, false, 128, false},   {32, 28, 4, 128, 128, true, kRes, false, 128, false},
      {32, 28, 4, 541, 541, true, kGlb, true, 128, false},     {2, 28, 4, 1024, 1024, true, kStg, false, 128, false},
      {1, 28, 4, 1024, 1024, true, kStg, false, 128, false},   {32, 28, 4, 256, 256, true, kRes, false, 128, false},
      {1, 28, 4, 512, 512, true, kStg, false, 128, false},     {4, 28, 4, 256, 256, true, kRes, false, 128, false},
      {1, 28, 4, 128, 128, true, kSpk, false, 128, false},     {1, 28, 4, 613, 613, true, kGlb, false, 128, false},
      {1, 28, 4, 4096, 4096, true, kStg, false, 128, false},   {8, 28, 4, 512, 512, true, kStg, false, 128, false},
      {8, 28, 4, 128, 128, true, kRes, false, 128, false},     {1, 28, 4, 256, 256, true, kStg, false, 128, false},
      // 034 (no mask)
      {2, 32, 8, 256, 392, false, kPln, false, 144, false},    {64, 32, 8, 256, 392, false, kPln, true, 144, false},
      {1, 32, 8, 512, 784, false, kPln, false, 160, false},    {2, 32, 8, 1024, 1568, false, kPln, true, 176, false},
      {16, 32, 8, 512, 784, false, kPln, true, 160, false},    {1, 32, 8, 4096, 6272, false, kPln, true, 128, false},
      {4, 32, 8, 541, 980, false, kPln, true, 176, false},     {2, 32, 8, 512, 784, false, kPln, true, 160, false},
      {8, 32, 8, 128, 196, false, kRes, false, 128, false},    {8, 32, 8, 256, 392, false, kPln, true, 144, false},
      {1, 32, 8, 8192, 12544, false, kPln, true, 128, true},   {1, 32, 8, 1024, 1568, false, kPln, true, 176, false},
      {32, 32, 8, 373, 588, false, kPln, true, 160, false},    {4, 32, 8, 512, 784, false, kPln, true, 160, false},
      {16, 32, 8, 128, 196, false, kRes, false, 128, false},   {2, 32, 8, 128, 196, false, kSpk, false, 128, false},
  };
  for (const Expect& e : table) {
    const AttentionParams p = attn(e.b, e.hq, e.hkv, e.sq, e.sk, e.mask);  // mask rows of Sk elements
    const LaunchPlan plan = attn_rules::launch_plan(p, LaunchSwitches{});
    if (plan.kernel != e.kernel || plan.persistent != e.persistent || plan.block_n != e.block_n ||
        plan.split.use != e.split) {
      err = "launch plan for B" + std::to_string(e.b) + " Sq" + std::to_string(e.sq) + " Sk" + std::to_string(e.sk) +
            ": kernel " + std::to_string(int(plan.kernel)) + " persistent " + std::to_string(plan.persistent) +
            " block_n " + std::to_string(plan.block_n) + " split " + std::to_string(plan.split.use);
      return false;
    }
  }
  // Invalid dimensions plan no launch.
  EXPECT(attn_rules::launch_plan(attn(1, 28, 3, 128, 128, false), LaunchSwitches{}).kernel == AttnKernel::kNone);
  EXPECT(attn_rules::launch_plan(attn(0, 28, 4, 128, 128, false), LaunchSwitches{}).kernel == AttnKernel::kNone);

  // The split-key kernel (VLATTN_ATTN_SPLIT_KEYS; the rule by default): its rule takes the short launches whose 64-row
  // CTAs fit one wave (007 B1 S128: 56, 034 B2 Lq128: 128 on 132 SMs) and, under a mask or the causal flag, have one
  // key tile (not 007 B1 S256: 112 CTAs but two tiles, measured slower split in the 58th session), not 007 B4 S128
  // (224) or 034 B2 Lq256 (392 keys); mode 2 takes every launch of at most 256 keys at 128-key tiles.
  {
    LaunchSwitches sk0, sk1, sk2;
    sk0.split_keys = 0;
    sk1.split_keys = 1;
    sk2.split_keys = 2;
    auto kernel = [](int b, int hq, int hkv, int sq, int sk, bool mask, const LaunchSwitches& sw) {
      return attn_rules::launch_plan(attn(b, hq, hkv, sq, sk, mask), sw).kernel;
    };
    EXPECT(kernel(1, 28, 4, 128, 128, true, sk1) == AttnKernel::kSplitKeys);
    EXPECT(kernel(1, 28, 4, 256, 256, true, sk1) == AttnKernel::kStaged);  // masked, two key tiles: not split
    EXPECT(kernel(1, 28, 4, 256, 256, false, sk1) == AttnKernel::kSplitKeys);
    EXPECT(kernel(1, 28, 4, 256, 256, true, sk2) == AttnKernel::kSplitKeys);
    EXPECT(attn_rules::launch_plan(attn(1, 28, 4, 256, 256, false, true), sk1).kernel != AttnKernel::kSplitKeys);
    EXPECT(attn_rules::launch_plan(attn(1, 28, 4, 128, 128, false, true), sk1).kernel == AttnKernel::kSplitKeys);
    EXPECT(kernel(2, 32, 8, 128, 196, false, sk1) == AttnKernel::kSplitKeys);
    EXPECT(kernel(4, 28, 4, 128, 128, true, sk1) == AttnKernel::kStaged);
    EXPECT(kernel(2, 32, 8, 256, 392, false, sk1) == AttnKernel::kPlain);
    EXPECT(kernel(4, 28, 4, 128, 128, true, sk2) == AttnKernel::kSplitKeys);
    EXPECT(kernel(1, 28, 4, 128, 257, true, sk2) != AttnKernel::kSplitKeys);
    // Off: the kernels these shapes ran before (the per-unit staged and plain builds).
    EXPECT(kernel(1, 28, 4, 128, 128, true, sk0) == AttnKernel::kStaged);
    EXPECT(kernel(1, 28, 4, 256, 256, true, sk0) == AttnKernel::kStaged);
    EXPECT(kernel(2, 32, 8, 128, 196, false, sk0) == AttnKernel::kPlain);
    const LaunchPlan plan = attn_rules::launch_plan(attn(1, 28, 4, 256, 256, true), sk2);
    EXPECT(!plan.summary && !plan.resident.use && plan.grid[0] == 28 * 4 && plan.grid[1] == 1 && plan.grid[2] == 1);
  }

  std::vector<LaunchSwitches> switch_sets(12);
  switch_sets[10].split_keys = 0;
  switch_sets[11].split_keys = 2;
  switch_sets[1].simple = true;
  switch_sets[2].persistent = 0;
  switch_sets[3].persistent = 2;
  switch_sets[4].pack = 2;
  switch_sets[5].bn = 176;
  switch_sets[6].resident = 2;
  switch_sets[7].tail_split = 2;
  switch_sets[8].lean_zero = 2;
  switch_sets[9].mask_smem = 0;
  switch_sets[6].diag_half = false;  // with resident = 2: the resident kernel without its two arguments
  switch_sets[6].tma_o = false;
  switch_sets[6].walk_cache = false;
  switch_sets[6].lean_zero = 0;
  switch_sets[6].split_keys = 0;     // the resident kernel wherever eligible, short launches included
  const int seqs[] = {1, 100, 128, 129, 256, 257, 392, 541, 613, 1024, 1568, 4096, 6272, 12544};
  const int heads[][2] = {{28, 4}, {32, 8}, {8, 8}, {16, 2}};
  for (int b : {1, 3, 64})
    for (const auto& h : heads)
      for (int sq : seqs)
        for (int sk : {128, 256, 541, 1568, 12544})
          for (int mask_kind = 0; mask_kind < 3; ++mask_kind)  // none, aligned rows, unaligned rows
            for (bool causal : {false, true})
              for (const LaunchSwitches& sw : switch_sets) {
                AttentionParams p = attn(b, h[0], h[1], sq, sk, mask_kind > 0, causal);
                if (mask_kind == 2) p.mask_row_stride = sk | 1;
                const LaunchPlan plan = attn_rules::launch_plan(p, sw);
                EXPECT(plan.kernel != AttnKernel::kNone);
                EXPECT((plan.kernel == AttnKernel::kResident) == plan.resident.use);
                // The resident kernel's arguments follow their switches; no other kernel reads them.
                EXPECT(plan.diag_half == (plan.kernel == AttnKernel::kResident && sw.diag_half));
                EXPECT(plan.tma_o_store == (plan.kernel == AttnKernel::kResident && sw.tma_o));
                EXPECT(plan.walk_cache == (plan.kernel == AttnKernel::kResident && sw.walk_cache));
                EXPECT(plan.lean_zero == (sw.lean_zero >= 1));  // every kernel, the resident one included
                if (plan.kernel == AttnKernel::kResident) {
                  EXPECT(!sw.simple && plan.grid[0] == plan.resident.ctas && !plan.split.use);
                  continue;
                }
                EXPECT((plan.kernel == AttnKernel::kSplitKeys) == (sw.split_keys >= 1 && !sw.simple &&
                                                                   attn_rules::split_keys_use(p, sw.split_keys, sw.bn)));
                if (plan.kernel == AttnKernel::kSplitKeys) {
                  EXPECT(sk <= 256 && !plan.summary && !plan.split.use && !plan.pack.packed &&
                         plan.grid[0] == attn_rules::split_keys_ctas(p) && plan.grid[1] == 1 && plan.grid[2] == 1);
                  continue;
                }
                EXPECT(plan.stage_mask ==
                       (plan.kernel == AttnKernel::kStaged || plan.kernel == AttnKernel::kSimpleStaged));
                EXPECT(sw.simple || (p.mask == nullptr) == (plan.kernel == AttnKernel::kPlain));
                EXPECT(!sw.simple || ((plan.kernel == AttnKernel::kSimple || plan.kernel == AttnKernel::kSimpleStaged) &&
                                      !plan.persistent && plan.block_n == 128));
                EXPECT(plan.block_n == 128 || (plan.kernel == AttnKernel::kPlain && !p.causal));
                EXPECT(!plan.pack.packed || !plan.stage_mask);
                // The builds that exist: the staged diagnosis loop, the persistent staged and every global-mask
                // kernel are lean, the plain ones are not.
                if (plan.kernel == AttnKernel::kGlobalMask || plan.kernel == AttnKernel::kSimpleStaged ||
                    (plan.kernel == AttnKernel::kStaged && plan.persistent))
                  EXPECT(plan.lean);
                if (plan.kernel == AttnKernel::kPlain || plan.kernel == AttnKernel::kSimple) EXPECT(!plan.lean);
                if (plan.split.use)
                  EXPECT(plan.kernel == AttnKernel::kPlain && plan.persistent && plan.block_n == 128 &&
                         !plan.pack.packed && !p.causal && plan.split.grid == plan.grid[0] &&
                         plan.split.main_units % plan.split.grid == 0 &&
                         plan.split.main_units + plan.split.tail_units == plan.pack.units);
                if (plan.persistent)
                  EXPECT(plan.grid[0] == std::min<long long>(plan.pack.units, 132) && plan.grid[1] == 1 &&
                         plan.grid[2] == 1);
                else
                  EXPECT(plan.grid[0] * plan.grid[1] * plan.grid[2] == plan.pack.units && plan.grid[1] <= 65535 &&
                         plan.grid[2] <= 65535);
              }
  return true;
}

// Key-tile width: 144 / 160 / 176 only without a mask and without the causal flag; below 4096 keys the
// width of least 88 x steps + padded keys (mode 0), or the older 128-or-176 rule (mode 1: 176 where it pads
// to at most 1.2x the keys of 128); VLATTN_ATTN_BN's forced widths never override the mask / causal
// restriction.
bool attention_block_n_rule(std::string& err) {
  using attn_rules::block_n;
  auto width = [](int sk, int mode) { return block_n(attn(4, 32, 8, 512, sk, false), mode); };
  // mode 0: 034's key lengths and the edges
  EXPECT(width(392, 0) == 144 && width(588, 0) == 160 && width(784, 0) == 160);
  EXPECT(width(980, 0) == 176 && width(1568, 0) == 176 && width(176, 0) == 176 && width(352, 0) == 176);
  EXPECT(width(196, 0) == 128 && width(353, 0) == 128 && width(128, 0) == 128 && width(100, 0) == 128);
  EXPECT(width(129, 0) == 144 && width(160, 0) == 160);  // one tile of the narrowest width that holds it
  EXPECT(width(6272, 0) == 128 && width(12544, 0) == 128 && width(4096, 0) == 128);  // long key sequences
  // mode 1: the rule of 128 and 176 only
  auto wide = [&](int sk) { return width(sk, 1) == 176; };
  EXPECT(wide(392) && wide(588) && wide(784) && wide(980) && wide(1568) && wide(176) && wide(352));
  EXPECT(!wide(128) && !wide(196) && !wide(353) && !wide(100));  // one tile; 1.375x the padded keys
  EXPECT(!wide(6272) && !wide(12544) && !wide(4096));                // long key sequences
  EXPECT(wide(129) && wide(4095 - 4095 % 176));
  EXPECT(width(392, 1) == 176 && width(129, 1) == 176 && width(196, 1) == 128);
  // forced widths
  EXPECT(block_n(attn(2, 32, 8, 128, 128, false), 176) == 176);
  EXPECT(block_n(attn(1, 32, 8, 8192, 12544, false), 176) == 176);
  EXPECT(block_n(attn(4, 32, 8, 512, 784, false), 128) == 128);
  EXPECT(block_n(attn(4, 32, 8, 512, 784, false), 144) == 144);
  EXPECT(block_n(attn(4, 32, 8, 512, 392, false), 160) == 160);
  EXPECT(block_n(attn(1, 28, 4, 2048, 2048, true), 0) == 128);    // mask
  EXPECT(block_n(attn(1, 28, 4, 2048, 2048, true), 176) == 128);
  EXPECT(block_n(attn(1, 28, 4, 2048, 2048, true), 144) == 128);
  EXPECT(block_n(attn(1, 28, 4, 2048, 2048, true), 1) == 128);
  EXPECT(block_n(attn(1, 28, 4, 2048, 2048, false, true), 176) == 128);  // causal
  EXPECT(block_n(attn(1, 28, 4, 2048, 2048, false, true), 160) == 128);
  EXPECT(block_n(attn(4, 32, 8, 512, 784, false), 64) == 160);   // not a width: the rule
  EXPECT(block_n(attn(4, 32, 8, 512, 784, false), 152) == 160);  // not a multiple of 16: the rule
  return true;
}

// The fused QKV rule on the workload shapes (H200: 132 SMs). 007: Q 28 + K 4 + V 4 = 36 heads, one
// launch with M = B x S; 034: Q from text (32 heads, M = B x Lq) and K + V from vision (16 heads,
// M = B x Lv) in two launches.
bool qkv_auto_rule(std::string& err) {
  using C = QkvConfig;
  auto pick = [](int64_t m, int64_t heads) { return qkv_auto_config(m, heads, 132, true); };
  EXPECT(pick(128, 36) == C::kSplitK3);    // 36 tiles: three K splits
  EXPECT(pick(256, 36) == C::kM256K3);     // 72 tiles: 36 256-row tiles x 3 (40.0 vs 48.2 us on m64)
  EXPECT(pick(512, 36) == C::kC256);       // 144 tiles: one to two waves
  EXPECT(pick(613, 36) == C::kC256);
  EXPECT(pick(1024, 36) == C::kM128);      // 288 tiles
  EXPECT(pick(256, 32) == C::kSplitK2D);   // 034 text, B2 Lq128: 64 tiles
  EXPECT(pick(512, 32) == C::kSplitK2D);   // 128 tiles; 64 256-row tiles x 3 > one wave
  EXPECT(pick(392, 16) == C::kSplitK2D);   // 034 vision, B2 Lv196
  EXPECT(pick(784, 16) == C::kSplitK2D);   // 112 tiles
  EXPECT(pick(64, 16) == C::kSplitK4);     // 16 tiles: four splits at most
  EXPECT(qkv_auto_config(1024, 36, 132, false) == C::kM128);  // odd head groups: no head-pair tiles
  EXPECT(qkv_auto_config(512, 35, 132, false) == C::kM128);
  EXPECT(qkv_auto_config(0, 36, 132, true) == C::kM128);      // M = 0: no division by zero
  return true;
}

// The op-level plan on the workload shapes (H200: 132 SMs) and the grouped GEMM's tile choice.
bool qkv_plan_rule(std::string& err) {
  using P = QkvPlan;
  auto plan007 = [](int64_t m) {
    const int64_t rows[1] = {m};
    const int64_t rc[3][2] = {{m, 3584}, {m, 512}, {m, 512}};
    return qkv_op_plan(rows, 1, rc, 3, 132);
  };
  auto plan034 = [](int64_t mq, int64_t mkv) {
    const int64_t rows[2] = {mq, mkv};
    const int64_t rc[3][2] = {{mq, 4096}, {mkv, 1024}, {mkv, 1024}};
    return qkv_op_plan(rows, 2, rc, 3, 132);
  };
  EXPECT(plan007(128) == P::kPerLaunch);  // split-K fused
  EXPECT(plan007(129) == P::kGrouped);
  EXPECT(plan007(256) == P::kGrouped);
  EXPECT(plan007(512) == P::kGrouped);
  EXPECT(plan007(613) == P::kGrouped);
  EXPECT(plan007(1023) == P::kGrouped);
  EXPECT(plan007(1024) == P::kPerLaunch);  // B8 S128, B4 S256, B1 S1024: Q alone, then K and V grouped
  EXPECT(plan007(2047) == P::kPerLaunch);
  EXPECT(plan007(2048) == P::kPerLaunch);
  EXPECT(plan034(256, 392) == P::kGemmAll);      // B2 Lq128
  EXPECT(plan034(512, 784) == P::kGemmAll);      // 1296 rows
  EXPECT(plan034(1024, 1568) == P::kPerLaunch);  // 2592 rows
  EXPECT(plan034(2048, 3136) == P::kGrouped);    // 5184 rows: 652 tiles, 4.94 waves
  EXPECT(plan034(2164, 3920) == P::kPerLaunch);  // 6084 rows: 5.65 waves
  EXPECT(plan034(4096, 6272) == P::kPerLaunch);  // 9.8 waves
  EXPECT(plan034(0, 0) == P::kPerLaunch);
  const int64_t none[1][2] = {{0, 0}};
  EXPECT(qkv_op_plan(nullptr, 0, none, 0, 132) == P::kPerLaunch);
  // Tiles: 007 M=256 -> 50 tiles of 128 x 192 (one wave) vs 100 of 64 x 192 (one wave at half the cost).
  const int64_t m256[3][2] = {{256, 3584}, {256, 512}, {256, 512}};
  EXPECT(grouped_tile_for(m256, 3, 132) == QkvConfig::kGrouped64);
  const int64_t m512[3][2] = {{512, 3584}, {512, 512}, {512, 512}};
  EXPECT(grouped_tile_for(m512, 3, 132) == QkvConfig::kGrouped128);
  // The A/B knob moves 007's grouped plan bound (VLATTN_QKV_GROUPED_MIN_M).
  const int64_t r256[1] = {256}, r128[1] = {128};
  EXPECT(qkv_op_plan(r256, 1, m256, 3, 132, 512) == P::kPerLaunch);
  EXPECT(qkv_op_plan(r128, 1, m256, 3, 132, 128) == P::kGrouped);
  // VLATTN_QKV_GROUPED_MAX_M moves the upper bound: 2048 is the rule before the grouped tail.
  const int64_t r1024[1] = {1024};
  const int64_t m1024[3][2] = {{1024, 3584}, {1024, 512}, {1024, 512}};
  EXPECT(qkv_op_plan(r1024, 1, m1024, 3, 132, kQkvGroupedMinRows, 2048) == P::kGrouped);
  EXPECT(!qkv_gemm_tail_grouped(1024, 3, 2048));
  // The plan's tile: 64 x 192 for 007 below 512 rows, 128 x 192 otherwise (and for 034's two launches).
  EXPECT(grouped_plan_tile(1, 129) == QkvConfig::kGrouped64);
  EXPECT(grouped_plan_tile(1, 511) == QkvConfig::kGrouped64);
  EXPECT(grouped_plan_tile(1, 512) == QkvConfig::kGrouped128);
  EXPECT(grouped_plan_tile(2, 256) == QkvConfig::kGrouped128);
  // The RoPE pass reads precomputed cos/sin below 2048 rows: 034's all-GEMMs plan (B2 Lq128: 256 + 392
  // rows in one pass; B1 Lq512: 512 + 784) and per-launch passes of 1024 / 1568 rows; not the grouped
  // plan's passes of 2048 rows and more (measured slower there); never an empty pass.
  EXPECT(qkv_rope_table_pays(256 + 392));
  EXPECT(qkv_rope_table_pays(512 + 784));
  EXPECT(qkv_rope_table_pays(1568));
  EXPECT(!qkv_rope_table_pays(2048));
  EXPECT(!qkv_rope_table_pays(3136));
  EXPECT(!qkv_rope_table_pays(0));
  // One table per launch, for its one position mode: 034's text (1-D) and vision (t/h/w K beside V);
  // none for 007's table RoPE, for a launch mixing both position modes, or without groups.
  const RopeMode text[1] = {RopeMode::kPos1D}, vision[2] = {RopeMode::kPos3D, RopeMode::kNone};
  const RopeMode mrope[3] = {RopeMode::kTable, RopeMode::kTable, RopeMode::kNone};
  const RopeMode mixed[2] = {RopeMode::kPos1D, RopeMode::kPos3D};
  EXPECT(rope_table_mode(text, 1) == RopeMode::kPos1D);
  EXPECT(rope_table_mode(vision, 2) == RopeMode::kPos3D);
  EXPECT(rope_table_mode(mrope, 3) == RopeMode::kNone);
  EXPECT(rope_table_mode(mixed, 2) == RopeMode::kNone);
  EXPECT(rope_table_mode(text, 0) == RopeMode::kNone);
  return true;
}

// Which GEMM with the RoPE epilogue 007's projections take (qkv_gemm_epi_tile): the pass below 4096
// rows, 64 x 256 ping-pong at the 4096-row workloads (B32 S128, B8 S512, B4 S1024, B1 S4096), 128 x 128
// ping-pong from 8192 rows (bench/NOTES.md, fifteenth session calls 1-2, twenty-sixth session calls 1-2).
bool qkv_epi_rule(std::string& err) {
  EXPECT(qkv_gemm_epi_tile(1024) == QkvEpiTile::kNone);
  EXPECT(qkv_gemm_epi_tile(2048) == QkvEpiTile::kNone);            // B2 S1024
  EXPECT(qkv_gemm_epi_tile(4095) == QkvEpiTile::kNone);
  EXPECT(qkv_gemm_epi_tile(4096) == QkvEpiTile::kPingPong64x256);  // B32 S128, B8 S512, B4 S1024, B1 S4096
  EXPECT(qkv_gemm_epi_tile(8191) == QkvEpiTile::kPingPong64x256);
  EXPECT(qkv_gemm_epi_tile(8192) == QkvEpiTile::kPingPong128x128);  // B32 S256
  EXPECT(qkv_gemm_epi_tile(16384) == QkvEpiTile::kPingPong128x128); // B64 S256
  EXPECT(qkv_gemm_epi_tile(17312) == QkvEpiTile::kPingPong128x128); // B32 S541
  return true;
}

// Whether config kGemmRope's last GEMM runs on a second stream (qkv_gemm_side_stream): from 8192 rows and
// below 2048 (007's three groups) / 4096 (034's K / V pair) side by side, back to back between
// (bench/NOTES.md, fortieth session calls 1-3).
bool qkv_side_stream_rule(std::string& err) {
  // The grouped tail takes 007's launch (three groups) at 1024-2047 rows, the side stream's range there.
  EXPECT(!qkv_gemm_tail_grouped(1023, 3));
  EXPECT(qkv_gemm_tail_grouped(1024, 3));
  EXPECT(qkv_gemm_tail_grouped(2047, 3));
  EXPECT(!qkv_gemm_tail_grouped(2048, 3));  // B2 S1024: back to back
  EXPECT(!qkv_gemm_tail_grouped(1568, 2));  // 034's vision launch: its K / V pair side by side
  EXPECT(qkv_gemm_side_stream(1024, false));   // 007 M=1024 (config "gemm"): v beside q and k
  EXPECT(qkv_gemm_side_stream(2047, false));
  EXPECT(!qkv_gemm_side_stream(2048, false));  // 007 B2 S1024: back to back
  EXPECT(!qkv_gemm_side_stream(4096, false));  // B8 S512, B4 S1024, B1 S4096, B32 S128
  EXPECT(!qkv_gemm_side_stream(8191, false));
  EXPECT(qkv_gemm_side_stream(8192, false));   // B32 S256
  EXPECT(qkv_gemm_side_stream(16384, false));  // B64 S256
  EXPECT(qkv_gemm_side_stream(17312, false));  // B32 S541
  EXPECT(qkv_gemm_side_stream(392, true));     // 034 B2 Lq128's vision launch
  EXPECT(qkv_gemm_side_stream(1568, true));    // B8 Lq128, B2 Lq512, B1 Lq1024
  EXPECT(qkv_gemm_side_stream(4095, true));
  EXPECT(!qkv_gemm_side_stream(4096, true));
  EXPECT(!qkv_gemm_side_stream(6272, true));   // 034 Lq 4096: back to back
  EXPECT(!qkv_gemm_side_stream(8191, true));
  EXPECT(qkv_gemm_side_stream(8192, true));
  EXPECT(qkv_gemm_side_stream(12544, true));   // 034 B16 Lq512, Lq 8192
  EXPECT(qkv_gemm_side_stream(25088, true));   // 034 B64 Lq256
  return true;
}

// The RoPE pass's heads per block on the shapes measured on the H200 (bench/NOTES.md, ninth session).
bool rope_pass_runs(std::string& err) {
  auto runs = [](int64_t rows, std::vector<int> heads) {
    std::vector<int> out(heads.size());
    rope_pass_heads_per_block(rows, heads.data(), static_cast<int>(heads.size()), 132, out.data());
    return out;
  };
  using V = std::vector<int>;
  EXPECT(runs(8192, {32}) == V({16}));            // 034 Lq 8192, Q: 512 row blocks x 2 runs fill 528 slots
  EXPECT(runs(12544, {8, 8}) == V({8, 8}));       // its K/V launch: a whole group per block
  EXPECT(runs(4096, {28, 4, 4}) == V({8, 4, 4})); // 007 M=4096: Q in runs of 8 (by the largest group)
  EXPECT(runs(17312, {28, 4, 4}) == V({28, 4, 4}));  // 007 B32 S541: whole groups
  EXPECT(runs(1024, {28, 4, 4}) == V({4, 4, 4}));    // 007 M=1024: 64 row blocks, runs of 4
  EXPECT(runs(128, {28, 4, 4}) == V({4, 4, 4}));
  EXPECT(runs(4300, {30, 5, 5}) == V({16, 8, 8}));   // test_gemm_rope_pass_head_runs: 16 + 14, 5 in one run
  EXPECT(runs(4300, {5, 5}) == V({4, 4}));           // ... its 034 K/V launch
  EXPECT(runs(0, {28, 4, 4}) == V({4, 4, 4}));       // no rows: no division, the narrowest run
  EXPECT(runs(1 << 20, {3}) == V({4}));              // never wider than the group rounded up to a step
  // A forced width (VLATTN_QKV_PASS_WIDTH): rounded up to a step, capped per group like the rule's.
  auto forced = [](int64_t rows, std::vector<int> heads, int width) {
    std::vector<int> out(heads.size());
    rope_pass_heads_per_block(rows, heads.data(), static_cast<int>(heads.size()), 132, out.data(), width);
    return out;
  };
  EXPECT(forced(2048, {32}, 8) == V({8}));            // 034 B4 Lq512's q pass: 512 blocks instead of 1024
  EXPECT(forced(3136, {8, 8}, 8) == V({8, 8}));       // its k/v pass: a whole group per block
  EXPECT(forced(3136, {8, 8}, 6) == V({8, 8}));       // rounded up to a step
  EXPECT(forced(2048, {32}, 1) == V({4}));
  EXPECT(forced(2048, {28, 4, 4}, 64) == V({28, 4, 4}));
  EXPECT(forced(8192, {32}, 0) == runs(8192, {32}));  // 0: the rule
  return true;
}

// ---- mask tile kinds (attention/mask_kinds.h): the pre-pass's rule, entry by entry and per tile ----
constexpr float kBf16Min = -3.3895313892515355e38f;

// Entries of single values at (row i, key j).
bool mask_kinds_entries(std::string& err) {
  using namespace attn_sm90;
  // Zero below / on the diagonal keeps ZERO and CAUSAL; -0 counts as zero.
  EXPECT(entry_kind_bits(0.f, 5, 5) == 6u);
  EXPECT(entry_kind_bits(-0.f, 5, 2) == 6u);
  // Zero above the diagonal keeps ZERO only.
  EXPECT(entry_kind_bits(0.f, 5, 6) == 2u);
  // Dead values above the diagonal keep DEAD and CAUSAL; below it DEAD only.
  for (float dead : {kTauDead, kBf16Min, -INFINITY}) {
    EXPECT(entry_kind_bits(dead, 5, 6) == 5u);
    EXPECT(entry_kind_bits(dead, 5, 5) == 1u);
  }
  // Just above tau_dead (-2^99: live) or any other value keeps nothing.
  EXPECT(entry_kind_bits(kTauLive, 5, 6) == 0u);
  EXPECT(entry_kind_bits(1.f, 5, 5) == 0u);
  EXPECT(entry_kind_bits(-1e-30f, 5, 2) == 0u);
  EXPECT(entry_live(kTauLive) && entry_live(0.f) && !entry_live(kTauDead) && !entry_live(-INFINITY));
  // Precedence of the AND-ed bits.
  EXPECT(tile_kind(kKindBitsAll) == kTileDead);
  EXPECT(tile_kind(6u) == kTileZero);
  EXPECT(tile_kind(5u) == kTileDead);
  EXPECT(tile_kind(4u) == kTileCausal);
  EXPECT(tile_kind(2u) == kTileZero);
  EXPECT(tile_kind(0u) == kTileMixed);
  return true;
}

// A 128 x 128 tile (q-block m, key tile n) of a mask given as a function, classified as the pre-pass
// does: entries outside Sq x Sk and, under the causal flag, right of the diagonal are not visible.
template <class F>
attn_sm90::TileKind classify(F mask, int m, int n, int sq, int sk, bool causal) {
  uint32_t bits = attn_sm90::kKindBitsAll;
  for (int i = 128 * m; i < 128 * m + 128; ++i)
    for (int j = 128 * n; j < 128 * n + 128; ++j)
      if (i < sq && j < sk && !(causal && j > i)) bits &= attn_sm90::entry_kind_bits(mask(i, j), i, j);
  return attn_sm90::tile_kind(bits);
}

bool mask_kinds_tiles(std::string& err) {
  using namespace attn_sm90;
  auto causal_min = [](int i, int j) { return j > i ? kBf16Min : 0.f; };
  auto causal_inf = [](int i, int j) { return j > i ? -INFINITY : 0.f; };
  // The benchmark's mask (S 541): diagonal tiles CAUSAL, below ZERO, above DEAD, the Sk tail's diagonal too.
  for (int m = 0; m < 5; ++m)
    for (int n = 0; n < 5; ++n) {
      const TileKind want = n == m ? kTileCausal : n < m ? kTileZero : kTileDead;
      EXPECT(classify(causal_min, m, n, 541, 541, false) == want);
      EXPECT(classify(causal_inf, m, n, 541, 541, false) == want);
    }
  // Under the causal flag the diagonal's upper part is not visible: ZERO.
  EXPECT(classify(causal_min, 1, 1, 541, 541, true) == kTileZero);
  EXPECT(classify(causal_min, 0, 1, 541, 541, true) == kTileDead);  // nothing visible
  // Not causal-shaped: a live value above the diagonal, a nonzero one below, a shifted diagonal.
  EXPECT(classify([&](int i, int j) { return (i == 3 && j == 90) ? kTauLive : causal_min(i, j); }, 0, 0, 541, 541,
                  false) == kTileMixed);
  EXPECT(classify([&](int i, int j) { return (i == 90 && j == 3) ? 0.5f : causal_min(i, j); }, 0, 0, 541, 541,
                  false) == kTileMixed);
  EXPECT(classify([](int i, int j) { return j > i + 1 ? kBf16Min : 0.f; }, 0, 0, 541, 541, false) == kTileMixed);
  // -0 below the diagonal and tau_dead above: CAUSAL; a non-square mask (Sq 300, Sk 700): q-block 2's tile 2.
  EXPECT(classify([](int i, int j) { return j > i ? kTauDead : -0.f; }, 1, 1, 541, 541, false) == kTileCausal);
  EXPECT(classify(causal_min, 2, 2, 300, 700, false) == kTileCausal);
  EXPECT(classify(causal_min, 2, 3, 300, 700, false) == kTileDead);
  // All zero: ZERO everywhere (the diagonal's upper zeros keep ZERO, not CAUSAL).
  EXPECT(classify([](int, int) { return 0.f; }, 1, 1, 541, 541, false) == kTileZero);
  return true;
}

// out= overlap checks (ops/overlap.h) against a brute force over every element's bytes, plus the cases
// the ops meet: out = x, a view of the weight, column slices of one buffer, broadcast rows.
bool row_span_overlap(std::string& err) {
  auto brute_share = [](const RowSpan& a, const RowSpan& b) {
    for (int64_t i = 0; i < a.rows; ++i)
      for (int64_t c = 0; c < a.cols; ++c)
        for (int64_t j = 0; j < b.rows; ++j)
          for (int64_t d = 0; d < b.cols; ++d) {
            const int64_t x = a.base + (i * a.ld + c) * a.itemsize, y = b.base + (j * b.ld + d) * b.itemsize;
            if (x < y + b.itemsize && y < x + a.itemsize) return true;
          }
    return false;
  };
  auto brute_self = [](const RowSpan& s) {
    for (int64_t i = 0; i < s.rows; ++i)
      for (int64_t j = i + 1; j < s.rows; ++j)
        for (int64_t c = 0; c < s.cols; ++c)
          for (int64_t d = 0; d < s.cols; ++d)
            if (i * s.ld + c == j * s.ld + d) return true;
    return false;
  };
  // Every small layout: bases 0-11 elements apart, 0-3 rows, 0-4 columns, row strides 0-6 (bf16).
  int checked = 0;
  for (int64_t off = 0; off < 12; ++off)
    for (int64_t ar = 0; ar <= 3; ++ar)
      for (int64_t ac = 0; ac <= 4; ++ac)
        for (int64_t al = 0; al <= 6; al += 2)
          for (int64_t br = 0; br <= 3; ++br)
            for (int64_t bc = 0; bc <= 4; ++bc)
              for (int64_t bl = 0; bl <= 6; ++bl) {
                const RowSpan a{1000, ar, ac, al, 2}, b{1000 + 2 * off, br, bc, bl, 2};
                EXPECT(row_spans_share_memory(a, b) == brute_share(a, b));
                EXPECT(row_spans_share_memory(b, a) == brute_share(a, b));
                ++checked;
              }
  EXPECT(checked == 12 * 4 * 5 * 4 * 4 * 5 * 7);
  for (int64_t r = 0; r <= 4; ++r)
    for (int64_t c = 0; c <= 5; ++c)
      for (int64_t l = 0; l <= 7; ++l) EXPECT(row_span_self_overlaps(RowSpan{0, r, c, l, 2}) == brute_self({0, r, c, l, 2}));
  // The ops' cases, at real sizes: out = x (M 541, N = K 3584), out inside the weight, two column slices of
  // one [M, N + K] buffer (disjoint), the same slices one element too wide (shared), separate allocations.
  const int64_t m = 541, n = 3584, k = 3584, base = int64_t(1) << 40;
  EXPECT(row_spans_share_memory({base, m, n, n, 2}, {base, m, k, k, 2}));
  EXPECT(row_spans_share_memory({base + 2 * 64 * k, m, n, n, 2}, {base, n, k, k, 2}));
  EXPECT(!row_spans_share_memory({base, m, n, n + k, 2}, {base + 2 * n, m, k, n + k, 2}));
  EXPECT(row_spans_share_memory({base, m, n + 1, n + k, 2}, {base + 2 * n, m, k, n + k, 2}));
  EXPECT(!row_spans_share_memory({base, m, n, n, 2}, {base + 2 * m * n, m, k, k, 2}));
  EXPECT(row_spans_share_memory({base, m, n, n, 2}, {base + 2 * (m * n - 1), 1, n, n, 2}));
  EXPECT(row_span_self_overlaps({base, m, n, 0, 2}));   // an expanded (broadcast) out
  EXPECT(!row_span_self_overlaps({base, 1, n, 0, 2}));  // one row: nothing shared
  EXPECT(!row_span_self_overlaps({base, m, n, n, 2}));
  return true;
}

const Case kCases[] = {
    {"mrope_seed_split", mrope_seed_split},
    {"mrope_hf_split_pairs_share_plane", mrope_hf_split_pairs_share_plane},
    {"rotate_half_full_head", rotate_half_full_head},
    {"thw_segments_seed_pairs", thw_segments_seed_pairs},
    {"thw_pair_index_bijection", thw_pair_index_bijection},
    {"gemm_configs_legal", gemm_configs_legal},
    {"qkv_plan_rule", qkv_plan_rule},
    {"qkv_epi_rule", qkv_epi_rule},
    {"qkv_side_stream_rule", qkv_side_stream_rule},
    {"attention_summary_rule", attention_summary_rule},
    {"attention_persistent_rule", attention_persistent_rule},
    {"attention_pack_rule", attention_pack_rule},
    {"attention_lean_staged_rule", attention_lean_staged_rule},
    {"attention_block_n_rule", attention_block_n_rule},
    {"attention_resident_rule", attention_resident_rule},
    {"attention_tail_split_rule", attention_tail_split_rule},
    {"attention_launch_plan", attention_launch_plan},
    {"qkv_auto_rule", qkv_auto_rule},
    {"rope_pass_runs", rope_pass_runs},
    {"mask_kinds_entries", mask_kinds_entries},
    {"mask_kinds_tiles", mask_kinds_tiles},
    {"row_span_overlap", row_span_overlap},
};

}  // namespace

#ifdef VLATTN_ILLEGAL_CONFIG
// Compile-fail probes: tests/test_cpp.py defines one of these and expects the static_assert text.
#if VLATTN_ILLEGAL_CONFIG == 1
template struct vlattn::Sm90GemmConfig<64, 128, 64, 1, 1, Schedule::kCooperative, TileSched::kPersistent, 0>;
#elif VLATTN_ILLEGAL_CONFIG == 2
template struct vlattn::Sm90GemmConfig<64, 128, 64, 1, 1, Schedule::kPingpong, TileSched::kStreamK, 0>;
#elif VLATTN_ILLEGAL_CONFIG == 3
template struct vlattn::Sm90GemmConfig<128, 256, 128, 1, 1, Schedule::kCooperative, TileSched::kPersistent, 3>;
#elif VLATTN_ILLEGAL_CONFIG == 4
template struct vlattn::Sm90GemmConfig<128, 100, 64, 1, 1, Schedule::kCooperative, TileSched::kPersistent, 0>;
#elif VLATTN_ILLEGAL_CONFIG == 5
template struct vlattn::Sm90GemmConfig<128, 256, 64, 1, 1, Schedule::kCooperative, TileSched::kPersistent, 0, 48>;
#elif VLATTN_ILLEGAL_CONFIG == 6
template struct vlattn::Sm90GemmConfig<64, 64, 64, 1, 1, Schedule::kPingpong, TileSched::kParallelSplitK, 0, 0, true>;
#endif
#endif

int main(int argc, char** argv) {
  if (argc == 2 && std::strcmp(argv[1], "--list") == 0) {
    for (const Case& c : kCases) std::printf("%s\n", c.name);
    return 0;
  }
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s --list | CASE\n", argv[0]);
    return 2;
  }
  for (const Case& c : kCases) {
    if (std::strcmp(argv[1], c.name) == 0) {
      std::string err;
      if (c.fn(err)) return 0;
      std::fprintf(stderr, "FAILED %s: %s\n", c.name, err.c_str());
      return 1;
    }
  }
  std::fprintf(stderr, "unknown case %s\n", argv[1]);
  return 2;
}
