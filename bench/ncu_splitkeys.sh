#!/usr/bin/env bash
# ncu of the split-key attention kernel against the per-unit staged kernel at 007 B1 S128 (one key tile: the rule's
# split-key launch) and B1 S256 (two tiles: the rule's staged launch since the fifty-eighth session; split keys forced
# with VLATTN_ATTN_SPLIT_KEYS=2), attention alone (bench/ncu_target.py, sorted-by-SOL indices 0 and 1), caches flushed.
# Prints each kernel's duration, L2 -> SM traffic and issue headlines; writes the details pages under $OUT.
#
#   OUT=... bash bench/ncu_splitkeys.sh
set -u
OUT=${OUT:-$PWD/gpu_out}
source "$(dirname "$0")/ncu_report.sh"
for idx in 0 1; do
  VLATTN_ATTN_SPLIT_KEYS=2 ncu_report "sk_split_$idx" split_keys --launch-skip 1 --launch-count 1 -- \
    python3 bench/ncu_target.py attention 007 "$idx"
  VLATTN_ATTN_SPLIT_KEYS=0 ncu_report "sk_unit_$idx" attention_kernel --launch-skip 1 --launch-count 1 -- \
    python3 bench/ncu_target.py attention 007 "$idx"
done
M=gpu__time_duration.sum,lts__t_bytes.sum,l1tex__m_xbar2l1tex_read_bytes.sum,dram__bytes_read.sum,sm__cycles_active.max
for idx in 0 1; do
  echo "== bytes, 007 index $idx (split, then per-unit)"
  VLATTN_ATTN_SPLIT_KEYS=2 NCU_LAYER_CACHE=all ncu_layer_metrics "$M" split_keys --launch-skip 1 --launch-count 1 -- \
    python3 bench/ncu_target.py attention 007 "$idx"
  VLATTN_ATTN_SPLIT_KEYS=0 NCU_LAYER_CACHE=all ncu_layer_metrics "$M" attention_kernel --launch-skip 1 --launch-count 1 -- \
    python3 bench/ncu_target.py attention 007 "$idx"
done
for f in "$OUT"/sk_*_details.log; do
  echo "== $(basename "$f")"
  grep -E "split_keys_kernel|attention_kernel|^ +Duration|L2 Cache Throughput|L1/TEX Hit|L2 Hit Rate|Mem Busy|Max Bandwidth|Memory Throughput|Executed Ipc Active|Issue Slots Busy|No Eligible|Warp Cycles Per Issued|Grid Size|Registers Per|Dynamic Shared" \
    "$f" | head -24
done
