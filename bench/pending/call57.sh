#!/usr/bin/env bash
# The next session's first call (written in the fifty-sixth): the README run on main, on an H200 only.
#
#   run(command="bash bench/pending/call57.sh <main sha>", carry=[".whl", "prebuilt"], kind="nvidia-h200")
#
# On an H100 it says so and exits in a second (the call then costs only the machine's start). On an H200: the
# layers command of the README (every workload, every baseline) into $OUT/readme/layers.{json,png}; then, here,
# `python bench/readme_table.py <json>` and the README bullets. Predictions (fifty-sixth session's NOTES, plan 1):
# 034 B8 Lq128 graph ~165 us (203.6 in d0279b1's table: the stream collision), the small 007 layers' graph replay
# -2 to -4 us (the split-key kernel), no cell flagged by the graph-replay check.
set -uo pipefail
A=${1:?main sha}
R=${OUT:?OUT}
cd "$(dirname "$0")/../.."
name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
case $name in *H200*) ;; *) echo "call57: $name, not an H200: no README run"; exit 0 ;; esac
OUT=$R/readme VLATTN_COMMIT=$A CALL_BUDGET_S=${README_BUDGET_S:-280} PROBE_TIMEOUT_S=250 \
  PROBE_CMDS='python3 -m vlattn.bench --mode layers --budget-s 200 --json $OUT/layers.json --plot $OUT/layers.png' \
  scripts/gpu_check.sh probe
