#!/usr/bin/env bash
# The fifty-eighth session: ncu of the split-key kernel against the per-unit staged kernel at 007 B1 S128 / S256
# (bench/ncu_splitkeys.sh), any GPU. Question: is the split kernel's loss at two key tiles its L2 -> SM bytes (each of
# its 112 CTAs loads both K / V tiles: twice the per-unit grid's)? Prediction: at S256 the split kernel moves ~2x the
# per-unit kernel's L2 -> SM bytes and is longer; at S128 ~2x too but shorter (its chain halves).
#
#   run(command="bash bench/pending/call58g.sh <sha>", carry=[".whl", "prebuilt"])
set -uo pipefail
A=${1:?sha}
R=${OUT:?OUT}
cd "$(dirname "$0")/../.."
OUT=$R/ncu VLATTN_COMMIT=$A CALL_BUDGET_S=${NCU_BUDGET_S:-240} PROBE_TIMEOUT_S=200 \
  PROBE_CMDS="OUT=\$OUT bash bench/ncu_splitkeys.sh" scripts/gpu_check.sh probe
cd "$R" && tar czf all.tar.gz ncu
