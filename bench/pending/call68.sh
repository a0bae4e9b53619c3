#!/usr/bin/env bash
# The next session's first device call, any GPU (kind nvidia-h200; carry [".whl", "prebuilt"]):
#
#   run(command="bash bench/pending/call68.sh <sha>", carry=[".whl", "prebuilt"], kind="nvidia-h200")
#
# On an H200: the README run and the tuner first (call65.sh PARTS=h200, ~215 s). On any GPU: the Q GEMM's epilogue
# cost per kernel, its arms interleaved in one process (bench/NOTES.md, sixty-seventh session, "Next session"):
# VLATTN_QKV_GEMM_EPI 1 (the rule), 0 (plain GEMMs + the RoPE pass), 5 (the rule on the cooperative tile), graph
# replay, 4 rounds of 6 calls per arm, on 007 B64 S256, 034 B32 Lq373 and 034 B64 Lq256 (~40 s).
set -uo pipefail
A=${1:?sha}
R=${OUT:?OUT}
cd "$(dirname "$0")/../.."
OUT=$R PARTS=h200 bash bench/pending/call65.sh "$A"  # its h200 part runs only on an H200 (elsewhere it says so, ~1 s)
OUT=$R/epi VLATTN_COMMIT=$A CALL_BUDGET_S=150 PROBE_TIMEOUT_S=120 \
  PROBE_CMDS="python3 bench/probe_timeline.py --modes graph --reps 6 --rounds 4 --switch VLATTN_QKV_GEMM_EPI=1,0,5 --workloads 007:1,034:12,034:1" \
  scripts/gpu_check.sh probe
(cd "$R" && tar czf epi68.tar.gz epi && rm -rf epi)
