#!/usr/bin/env bash
# Each kernel's own duration (Nsight Compute serializes the launches: no overlap with a neighbour, unlike the
# graph timelines, whose PDL-chained durations include the predecessor's tail) of 007's QKV op, one workload,
# under each value of VLATTN_QKV_GEMM_EPI given: 1 = the rule (RoPE in the GEMM epilogue from 4096 rows), 0 = plain
# GEMMs + the RoPE pass. The third of the script's three calls is the one to read (the first two warm up).
#
#   OUT=... bash bench/ncu_qkv_kernels.sh [sorted-by-SOL index, default 14 = B64 S256] [values, default "1 0"]
set -u
idx=${1:-14}
values=${2:-"1 0"}
OUT=${OUT:-$PWD/gpu_out}
for v in $values; do
  VLATTN_QKV_GEMM_EPI=$v ncu --metrics gpu__time_duration.sum,sm__cycles_elapsed.max,smsp__cycles_active.avg \
    python3 bench/ncu_target.py qkv 007 "$idx" gemm > "$OUT/ncu_qkv_${idx}_epi$v.log" 2>&1
  echo "== VLATTN_QKV_GEMM_EPI=$v (007 sorted index $idx): kernel (CUTLASS: cluster, tile), grid, duration us, cycles"
  python3 bench/ncu_kernel_rows.py "$OUT/ncu_qkv_${idx}_epi$v.log" --match qkv,cutlass \
    --metrics gpu__time_duration.sum,sm__cycles_elapsed.max
done
