#!/usr/bin/env bash
# Where 007's split-K QKV kernel spends the ~5 µs above its stream + MMA floor at small M (docs/design/qkv_small_m.md
# § 6: 007 B1 S128 ~22.5 µs under ncu against ~17.7 for the weight stream with the MMA spin). Profiles
# `qkv_rope_splitk` of `vlattn.mrope_qkv` (the layer's QKV op, automatic config) on one workload, three ways:
#   1. --set full (clocks at base, caches flushed): the details page's headline lines and the SASS source page,
#      grouped by execution count (bench/ncu_source_groups.py: the mainloop, the reduction, the epilogue);
#   2. clocks as a layer sees them, twice: L2 flushed first (what the bench's cold calls give this kernel, the
#      layer's first) and L2 as the previous call left it (the weights mostly there): duration against SM-active cycles;
#   3. the launch statistics (grid, cluster, shared memory, registers).
#
#   OUT=... bash bench/ncu_qkv_splitk.sh [sorted-by-SOL index of 007, default 0 = B1 S128]
# (an A/B of a switch: one run per value, each with its own OUT, e.g. VLATTN_QKV_SPLITK_PUSH=0 OUT=$OUT/pull ...)
set -u
idx=${1:-0}
OUT=${OUT:-$PWD/gpu_out}
mkdir -p "$OUT"
M="gpu__time_duration.sum,sm__cycles_elapsed.max,sm__cycles_active.max,sm__cycles_active.avg,dram__bytes_read.sum,smsp__inst_executed.sum,launch__grid_size,launch__cluster_dim_x,launch__registers_per_thread,launch__shared_mem_per_block_dynamic"
source "$(dirname "$0")/ncu_report.sh"
ncu_report "ncu_splitk_$idx" 'qkv_rope_splitk' --launch-skip 2 --launch-count 1 -- python3 bench/ncu_target.py qkv 007 "$idx"
echo "== full set, base clocks, caches flushed"
grep -E "qkv_rope_splitk|Duration|Elapsed Cycles|SM Active Cycles|Executed Ipc Active|Issue Slots Busy|No Eligible|Warp Cycles Per Issued|Registers Per|Dynamic Shared|Grid Size|Cluster Size|DRAM Throughput|Memory Throughput|L2 Hit|Stall" \
  "$OUT/ncu_splitk_${idx}_details.log" | head -50
echo "== source page by execution count"
python3 "$(dirname "$0")/ncu_source_groups.py" "$OUT/ncu_splitk_${idx}_source.csv.gz" --groups 10 2>&1 | head -80
echo "== metrics, the layer's clocks, L2 flushed (the bench's cold call)"
NCU_LAYER_CACHE=all ncu_layer_metrics "$M" qkv_rope_splitk --launch-skip 2 --launch-count 1 -- python3 bench/ncu_target.py qkv 007 "$idx"
echo "== metrics, the layer's clocks, L2 as the previous call left it"
ncu_layer_metrics "$M" qkv_rope_splitk --launch-skip 2 --launch-count 1 -- python3 bench/ncu_target.py qkv 007 "$idx"
