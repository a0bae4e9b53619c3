#!/usr/bin/env bash
# The sixty-seventh session, one device call, any GPU (kind nvidia-h200; carry [".whl", "prebuilt"]):
#
#   run(command="bash bench/pending/call67.sh <sha>", carry=[".whl", "prebuilt"], kind="nvidia-h200")
#
# On an H200 first the README run (call65.sh PARTS=h200readme, ~125 s). Then on any GPU (prediction in
# bench/NOTES.md, sixty-seventh session), with the module of this tree (the stacked QKV launch, default on):
#  1. tests: the stacked kernel against the per-group one and the reference (test_qkv.py -k "stacked or
#     epilogue"), the layers' benchmark rule on 007's workloads (test_ops.py -k "benchmark_rule and 007 and native");
#  2. per-kernel GPU timelines (graph replay) of 007's three layers from 8192 rows, stacked (default) and per-group
#     (VLATTN_QKV_STACKED=0), and without the RoPE epilogue (VLATTN_QKV_GEMM_EPI=0: plain GEMMs + the RoPE pass) and
#     on the 128 x 256 cooperative epilogue tile (=3), to see each Q GEMM's duration at the GPU's own clock;
#  3. the layers A/B in one process (`--switch VLATTN_QKV_STACKED=1,0`, graph replay and eager, 4 rounds);
#  4. the one-GEMM floors: cuBLAS and vlattn.linear over concatenated weights (N = 4608) and Q's shape alone.
# STACKED_SKIP=1 leaves 1-4 out.
set -uo pipefail
A=${1:?sha}
R=${OUT:?OUT}
cd "$(dirname "$0")/../.."
case $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1) in
  *H200*) OUT=$R PARTS=h200readme bash bench/pending/call65.sh "$A" ;;
  *) echo "call67: not an H200: no README run" ;;
esac
if [ -z "${STACKED_SKIP:-}" ]; then
  T='python3 bench/probe_timeline.py --modes graph --reps 8 --workloads 007:1,007:7,007:4,034:12'
  L='python3 -m vlattn.bench --mode layers --baselines "" --backends native --iters 30 --warmup 3 --rounds 4 --no-check'
  OUT=$R/stacked VLATTN_COMMIT=$A CALL_BUDGET_S=330 PROBE_TIMEOUT_S=120 TEST_TIMEOUT_S=150 \
    PROBE_CMDS="$T; VLATTN_QKV_STACKED=0 $T; VLATTN_QKV_GEMM_EPI=0 $T; VLATTN_QKV_GEMM_EPI=3 $T; $L --switch VLATTN_QKV_STACKED=1,0 --workloads 007:1,007:7,007:4 --json \$OUT/stacked_ab.json; PYTHONPATH=python python3 bench/ab_summary.py \$OUT/stacked_ab.json; python3 bench/probe_timeline.py --reps 8 --gemms 16384x4608x3584+b,16384x3584x3584+b --configs auto" \
    scripts/gpu_check.sh probe tests/test_qkv.py tests/test_ops.py -k "stacked or epilogue or (benchmark_rule and 007 and native)"
  (cd "$R" && tar czf stacked67.tar.gz stacked && rm -rf stacked)
fi
