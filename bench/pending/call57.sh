#!/usr/bin/env bash
# The next session's first call (written in the fifty-sixth): a host-time probe on any GPU, then the README run on
# main on an H200 only.
#
#   run(command="bash bench/pending/call57.sh <main sha>", carry=[".whl", "prebuilt"], kind="nvidia-h200")
#
# First, on any GPU, probe_host's timers on the bench's eager callable (~60 s). Then on an H100 it says so and exits;
# on an H200: the layers command of the README (every workload, every baseline) into $OUT/readme/layers.{json,png};
# then, here,
# `python bench/readme_table.py <json>` and the README bullets. Predictions (fifty-sixth session's NOTES, plan 1):
# 034 B8 Lq128 graph ~165 us (203.6 in d0279b1's table: the stream collision), the small 007 layers' graph replay
# -2 to -4 us (the split-key kernel), no cell flagged by the graph-replay check.
set -uo pipefail
A=${1:?main sha}
R=${OUT:?OUT}
cd "$(dirname "$0")/../.."
# Any GPU (~60 s): the bench's eager callable against probe_host's own (NOTES plan item 3, fifty-sixth session).
# SKIP_HOST=1 skips it (a retry for an H200 after the probe already ran on an H100).
mkdir -p "$R/host"
[ "${SKIP_HOST:-0}" = 1 ] || OUT=$R/host VLATTN_COMMIT=$A CALL_BUDGET_S=${HOST_BUDGET_S:-120} PROBE_TIMEOUT_S=100 \
  PROBE_CMDS='python3 bench/probe_host.py --iters 30 --trace 10 --workloads 007:8,007:6,034:0' scripts/gpu_check.sh probe
README_BUDGET_S=${README_BUDGET_S:-280} bash bench/pending/readme_run.sh "$A" call57
cd "$R" && tar czf all.tar.gz $(ls -d host readme 2>/dev/null)
