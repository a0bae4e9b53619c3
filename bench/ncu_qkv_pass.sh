#!/usr/bin/env bash
# Every kernel of one workload's QKV op under Nsight Compute (launches serialized: each kernel's own duration),
# and the RoPE pass kernels' full sections (the details page: DRAM throughput, issue, stall reasons) with the
# first pass kernel's SASS source page (gzip'd CSV; bench/ncu_source_groups.py reads it). The op runs 3 times
# (bench/ncu_target.py); the third call's kernels are the ones listed, the second call's pass kernels the ones
# profiled in full.
#
#   OUT=... bash bench/ncu_qkv_pass.sh [problem, default 034] [sorted-by-SOL index, default 8 = 034 B4 Lq512]
set -u
problem=${1:-034}
idx=${2:-8}
OUT=${OUT:-$PWD/gpu_out}
tag=${problem}_${idx}
ncu --metrics gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,dram__bytes.sum \
  python3 bench/ncu_target.py qkv "$problem" "$idx" > "$OUT/ncu_qkv_all_$tag.log" 2>&1
echo "== every kernel of the QKV op ($problem sorted index $idx), third call: name, grid, us, DRAM %, DRAM bytes"
python3 bench/ncu_kernel_rows.py "$OUT/ncu_qkv_all_$tag.log" --last-of 3 --units \
  --metrics gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,dram__bytes.sum
# The pass kernels of the second call, in full.
source "$(dirname "$0")/ncu_report.sh"
ncu_report "ncu_pass_$tag" rope_rows --launch-skip 2 --launch-count 2 -- python3 bench/ncu_target.py qkv "$problem" "$idx"
echo "== the pass kernels in full"
grep -E "qkv_rope_rows|Duration|DRAM Throughput|Memory Throughput|Executed Ipc Active|Issue Slots Busy|No Eligible|Warp Cycles Per Issued|Achieved Occupancy|Theoretical Occupancy|L2 Hit|L1/TEX Hit" \
  "$OUT/ncu_pass_${tag}_details.log" | head -40
