#!/usr/bin/env bash
# Each kernel's own duration (Nsight Compute serializes the launches: no overlap with a neighbour, unlike the
# graph timelines, whose PDL-chained durations include the predecessor's tail) of a layer's QKV op (config "gemm"),
# one workload, under each value of VLATTN_QKV_GEMM_EPI given: 1 = the rule (RoPE in the GEMM epilogue from 4096
# rows), 0 = plain GEMMs + the RoPE pass, 2 / 3 / 4 a forced epilogue tile (csrc/ops/qkv.cpp). The third of
# the script's three calls is the one to read (the first two warm up).
#
#   OUT=... bash bench/ncu_qkv_kernels.sh [sorted-by-SOL index, default 14] [values, default "1 0"] [problem, default 007]
# (sorted-by-SOL index 14: 007 B64 S256, 034 B64 Lq256; 13: 007 B32 S256, 034 B32 Lq373; 15: 034 Lq 8192)
set -u
idx=${1:-14}
values=${2:-"1 0"}
problem=${3:-007}
OUT=${OUT:-$PWD/gpu_out}
for v in $values; do
  log="$OUT/ncu_qkv_${problem}_${idx}_epi$v.log"
  VLATTN_QKV_GEMM_EPI=$v ncu --metrics gpu__time_duration.sum,sm__cycles_elapsed.max,smsp__cycles_active.avg \
    python3 bench/ncu_target.py qkv "$problem" "$idx" gemm > "$log" 2>&1
  echo "== VLATTN_QKV_GEMM_EPI=$v ($problem sorted index $idx): kernel (CUTLASS: cluster, tile), grid, duration us, cycles"
  python3 bench/ncu_kernel_rows.py "$log" --match qkv,cutlass --metrics gpu__time_duration.sum,sm__cycles_elapsed.max
done
