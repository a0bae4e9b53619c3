// Development switches: the knobs behind the measured dispatch rules, named by their environment
// variables (VLATTN_QKV_GEMM_EPI, VLATTN_ATTN_PERSISTENT, ...). Each starts from its variable, read
// once when any switch is first used, or from its default, and can be changed in-process
// (set_dev_switch; Python: vlattn.dev_switches / vlattn.set_dev_switch), so that an A/B runs both arms
// in one process on the same clocks: across processes this machine's per-call clock state moved the
// large layers by 3-5%, more than the changes being measured (bench/NOTES.md twenty-fifth session).
// A read is one relaxed atomic load. A change applies to the calls that start after it; a CUDA graph
// keeps what its capture chose. Host only.
#pragma once

#include <cstdint>

namespace vlattn {

enum class DevSwitch : int {
  kQkvGemmMinM,        // VLATTN_QKV_GEMM_MIN_M: rows from which config "gemm" is automatic; 0 = never
  kQkvGemmStreams,     // VLATTN_QKV_GEMM_STREAMS: the last group's GEMM on a second stream (1 rule, 0 never, 2 always;
                       // 3 the groups after the first as one grouped GEMM after it)
  kQkvPairWaves,       // VLATTN_QKV_PAIR_WAVES: equal groups side by side picked as a pair
  kQkvTuned,           // VLATTN_QKV_TUNED: plain GEMMs alone take the tuned table's entry for their shape
  kQkvRopeMerge,       // VLATTN_QKV_ROPE_MERGE: one RoPE pass for both of 034's launches on the all-GEMMs plan
  kQkvRopeTable,       // VLATTN_QKV_ROPE_TABLE: 0 never, 1 rule, 2 always a cos/sin table first
  kQkvPassWidth,       // VLATTN_QKV_PASS_WIDTH: heads per block of the RoPE pass, 0 rule, N a forced run of N
  kQkvGemmEpi,         // VLATTN_QKV_GEMM_EPI: 0 off, 1 rule, 2 / 3 / 4 a forced epilogue tile
  kQkvEpiPos1D,        // VLATTN_QKV_EPI_POS1D: 034's q in the epilogue GEMM via a table: 0 off, 1 rule, 2 coop tile
  kQkvPlan,            // VLATTN_QKV_PLAN: the op-level plans
  kQkvGroupedMinM,     // VLATTN_QKV_GROUPED_MIN_M: rows from which 007 takes the grouped plan
  kQkvGroupedMaxM,     // VLATTN_QKV_GROUPED_MAX_M: rows from which it runs per launch again (with the grouped tail)
  kQkvVTokenMajor,     // VLATTN_QKV_V_TOKEN_MAJOR: the cross layer's v straight from its GEMM, token-major
  kAttnSimple,         // VLATTN_ATTN_SIMPLE: the plain consumer loop (diagnosis)
  kAttnMaskSmem,       // VLATTN_ATTN_MASK_SMEM: stage aligned masks in shared memory
  kAttnLeanZero,       // VLATTN_ATTN_LEAN_ZERO: 0 off, 1 rule, 2 always
  kAttnPack,           // VLATTN_ATTN_PACK: GQA packing, 0 never, 1 when fewer units, 2 always
  kAttnPersistent,     // VLATTN_ATTN_PERSISTENT: 0 one CTA per unit, 1 rule, 2 always persistent
  kAttnBn,             // VLATTN_ATTN_BN: keys per step, 0 rule, 1 the 128-or-176 rule, 128/144/160/176
  kAttnResident,       // VLATTN_ATTN_RESIDENT: K/V-resident kernel for <= 256 keys, 0 never, 1 rule, 2 always
  kAttnTailSplit,      // VLATTN_ATTN_TAIL_SPLIT: key split of the persistent grid's last wave, 0 never, 1 rule, 2 always
  kAttnDiagHalf,       // VLATTN_ATTN_DIAG_HALF: the resident kernel's diagonal tiles, upper keys skipped for the first 64 rows
  kAttnTmaO,           // VLATTN_ATTN_TMA_O: the resident kernel's O stored by its producer thread with TMA
  kAttnWalkCache,      // VLATTN_ATTN_WALK_CACHE: the resident kernel's tile walks once per q-block
  kPdl,                // VLATTN_PDL: programmatic dependent launch between our kernels
  kAttnSplitKeys,      // VLATTN_ATTN_SPLIT_KEYS: the split-key kernel for short launches, 0 never, 1 rule, 2 whenever eligible
  kLayerScratch,       // VLATTN_LAYER_SCRATCH: a small layer's intermediates from one block (ops/scratch.h)
  kCount
};

// The switch's current value (flags read 1 / 0).
int64_t dev_switch(DevSwitch s);
inline bool dev_switch_on(DevSwitch s) { return dev_switch(s) != 0; }

// By variable name: sets the value and returns true, with the previous value in *previous (if given);
// false when no switch has that name.
bool set_dev_switch(const char* name, int64_t value, int64_t* previous = nullptr);

// The table, for listing: name, default, current value.
int dev_switch_count();
const char* dev_switch_name(int i);
int64_t dev_switch_default(int i);
int64_t dev_switch_value(int i);

}  // namespace vlattn
