#!/usr/bin/env bash
# The sixty-seventh session, one device call, any GPU (kind nvidia-h200; carry [".whl", "prebuilt"]):
#
#   run(command="bash bench/pending/call67.sh <sha>", carry=[".whl", "prebuilt"], kind="nvidia-h200")
#
# On an H200 first the README run (call65.sh PARTS=h200readme, ~125 s). Then on any GPU the QKV-stage probe
# (prediction in bench/NOTES.md, sixty-seventh session): per-kernel GPU timelines (graph replay) of 007's three
# large layers with the per-launch plan of today (Q, K on the caller's stream, V on a side stream) and with
# 007's grouped plan forced to every row count (VLATTN_QKV_GROUPED_MAX_M: one grouped GEMM of Q, K and V, then a
# RoPE pass), with the side stream off (VLATTN_QKV_GEMM_STREAMS=0: Q, K, V back to back, so Q's duration is its
# own), and the one-GEMM floors: cuBLAS and vlattn.linear over concatenated weights (N = 4608).
# QKV_SKIP=1 leaves the probe out.
set -uo pipefail
A=${1:?sha}
R=${OUT:?OUT}
cd "$(dirname "$0")/../.."
case $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1) in
  *H200*) OUT=$R PARTS=h200readme bash bench/pending/call65.sh "$A" ;;
  *) echo "call67: not an H200: no README run" ;;
esac
if [ -z "${QKV_SKIP:-}" ]; then
  T='python3 bench/probe_timeline.py --modes graph --reps 8 --workloads 007:1,007:7,007:4'
  OUT=$R/qkv VLATTN_COMMIT=$A CALL_BUDGET_S=200 PROBE_TIMEOUT_S=90 \
    PROBE_CMDS="$T; VLATTN_QKV_GEMM_STREAMS=0 $T; VLATTN_QKV_GROUPED_MAX_M=1000000 $T; python3 bench/probe_timeline.py --reps 8 --gemms 16384x4608x3584+b,8192x4608x3584+b,17312x4608x3584+b,16384x3584x3584+b,16384x512x3584+b --configs auto,t128x128x64_c1x1_coop" \
    scripts/gpu_check.sh probe
  (cd "$R" && tar czf qkv67.tar.gz qkv && rm -rf qkv)
fi
