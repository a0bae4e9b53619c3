#!/usr/bin/env bash
# The sixty-second session, one device call, any GPU:
#
#   run(command="bash bench/pending/call62.sh <sha>", carry=[".whl", "prebuilt"])
#
# On an H200: call60.sh's README run and epilogue A/B (the README table is still d0279b1's), nothing else.
# On any other GPU: the GC question inside a process like the README run's (bench/micro/gc_probe.py): the layers
# mode with every baseline (torch.compile's objects included) on seven GPU-bound layers, in four processes with the
# collector on, off, on, off. Prediction (bench/NOTES.md, sixty-second session) there.
# Only all62.tar.gz comes back (or call60.sh's all60.tar.gz on an H200).
set -uo pipefail
A=${1:?sha}
R=${OUT:?OUT}
cd "$(dirname "$0")/../.."
case $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1) in
  *H200*) PROBE_SKIP=1 bash bench/pending/call60.sh "$A"; exit ;;
esac
W=034:9,034:13,034:12,034:5,007:13,007:3,007:1
G="python3 bench/micro/gc_probe.py"
B="--mode layers --workloads $W --budget-s ${GC_BUDGET_S:-75}"
OUT=$R/gc VLATTN_COMMIT=$A CALL_BUDGET_S=${CALL_BUDGET_S:-420} PROBE_TIMEOUT_S=110 \
  PROBE_CMDS="$G --gc on --log \$OUT/on1.json -- $B --json \$OUT/b_on1.json; $G --gc off --log \$OUT/off1.json -- $B --json \$OUT/b_off1.json; $G --gc on --log \$OUT/on2.json -- $B --json \$OUT/b_on2.json; $G --gc off --log \$OUT/off2.json -- $B --json \$OUT/b_off2.json" \
  scripts/gpu_check.sh probe
cd "$R" && d=$(ls -d gc 2>/dev/null; true) && [ -n "$d" ] && tar czf all62.tar.gz $d && rm -rf $d
