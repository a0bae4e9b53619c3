#!/usr/bin/env bash
# ncu of 007 B32 S128's attention (sorted-by-SOL index 9: 896 one-tile units) on both kernels: the per-unit
# attention_kernel (VLATTN_ATTN_RESIDENT=0) and kv_resident_kernel (the rule's pick there). Writes each one's
# details page and the resident kernel's SASS source page (per-instruction counters, gzip'd CSV: read it with
# bench/ncu_source_groups.py) under $OUT, and prints the headline counters.
#
#   OUT=... bash bench/ncu_resident.sh [sorted-by-SOL index, default 9]
set -u
idx=${1:-9}
OUT=${OUT:-$PWD/gpu_out}
source "$(dirname "$0")/ncu_report.sh"
VLATTN_ATTN_RESIDENT=0 ncu_report "ncu_unit_$idx" attention_kernel --launch-skip 1 --launch-count 1 -- \
  python3 bench/ncu_target.py attention 007 "$idx"
ncu_report "ncu_res_$idx" kv_resident --launch-skip 1 --launch-count 1 -- python3 bench/ncu_target.py attention 007 "$idx"
for k in unit res; do
  echo "== $k"
  grep -E "attention_kernel|kv_resident|Duration|Executed Ipc Active|Issue Slots Busy|Executed Instructions  |No Eligible|Warp Cycles Per Issued|Registers Per|Achieved Occupancy|DRAM Throughput|L2 Hit" \
    "$OUT/ncu_${k}_${idx}_details.log" | head -20
done
