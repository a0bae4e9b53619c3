#!/usr/bin/env bash
# Where a one-tile attention launch spends its time (007 B1 S128: 28 CTAs, one 128 x 128 key tile each; the layer's
# timeline has it end ~13 µs after the QKV for ~5 µs of work). Profiles the mask summary pre-pass and the attention
# kernel of `vlattn.attention` on that workload's q / k / v / mask, three ways:
#   1. --set full with ncu's defaults (clocks locked at base, caches flushed): details page, headline lines;
#   2. the same launch with --cache-control none --clock-control none: the SM-active window against the elapsed time;
#   3. the launch statistics of both kernels (grid, shared memory, registers, waves).
#
#   OUT=... bash bench/ncu_small_chain.sh [sorted-by-SOL index of 007, default 0 = B1 S128]
set -u
idx=${1:-0}
OUT=${OUT:-$PWD/gpu_out}
M="gpu__time_duration.sum,sm__cycles_elapsed.max,sm__cycles_active.max,sm__cycles_active.avg,smsp__inst_executed.sum,launch__grid_size,launch__registers_per_thread,launch__shared_mem_per_block_dynamic,sm__warps_active.avg.pct_of_peak_sustained_active"
source "$(dirname "$0")/ncu_report.sh"
ncu_report "ncu_chain_$idx" 'attention_kernel|mask_summary' --launch-skip 2 --launch-count 2 -- \
  python3 bench/ncu_target.py attention 007 "$idx"
echo "== full set, base clocks, caches flushed"
grep -E "attention_kernel|mask_summary|Duration|Elapsed Cycles|SM Active Cycles|Executed Ipc Active|Issue Slots Busy|Executed Instructions  |No Eligible|Warp Cycles Per Issued|Registers Per|Dynamic Shared|Waves Per SM|Grid Size|Achieved Occupancy|DRAM Throughput|L2 Hit|Stall" \
  "$OUT/ncu_chain_${idx}_details.log" | head -60
echo "== metrics, clocks and caches as the layer sees them"
ncu_layer_metrics "$M" 'attention_kernel|mask_summary' --launch-skip 2 --launch-count 2 -- \
  python3 bench/ncu_target.py attention 007 "$idx"
