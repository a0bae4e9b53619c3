#!/usr/bin/env bash
# The fifty-eighth session: where the split-key kernel's 3 us go at 007 B1 S256 inside the layer (it is 1.7 us faster
# alone): GPU timelines in graph replay, the rule (staged kernel) against mode 2 (split keys), one process each, twice.
#
#   run(command="bash bench/pending/call58h.sh <sha>", carry=[".whl", "prebuilt"])
#
# Prediction (bench/NOTES.md): with split keys the O projection starts later after the attention's start and ends
# >= 2 us later after the attention's end than with the staged kernel (its CTAs park on fewer free SMs).
set -uo pipefail
A=${1:?sha}
R=${OUT:?OUT}
cd "$(dirname "$0")/../.."
P='python3 bench/probe_timeline.py --modes graph --reps 7 --workloads 007:15'
OUT=$R/tl VLATTN_COMMIT=$A CALL_BUDGET_S=${TL_BUDGET_S:-150} PROBE_TIMEOUT_S=40 \
  PROBE_CMDS="VLATTN_ATTN_SPLIT_KEYS=1 $P; VLATTN_ATTN_SPLIT_KEYS=2 $P; VLATTN_ATTN_SPLIT_KEYS=1 $P; VLATTN_ATTN_SPLIT_KEYS=2 $P" \
  scripts/gpu_check.sh probe
cd "$R" && tar czf all.tar.gz tl
