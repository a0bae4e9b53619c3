#!/usr/bin/env bash
# The sixty-second session's second call, any GPU:
#
#   run(command="[EPI_SKIP=1] bash bench/pending/call62b.sh <sha>", carry=[".whl", "prebuilt"])
#
# On an H200: call60.sh's README run (and its epilogue A/B unless EPI_SKIP=1), nothing else.
# On any other GPU: is the large layers' eager - graph excess (034 B32 Lq373 +43..+81 µs in call 1's four processes)
# a property of a process that also ran the baselines? The layers mode on 034 B32 Lq373, 007 B64 S256, 034 Lq 4096 in
# two processes: native columns only ("quiet"), then with every baseline ("full"). Prediction (bench/NOTES.md,
# sixty-second session): quiet eager - graph <= 15 µs on all three; full >= 30 µs on at least two.
set -uo pipefail
A=${1:?sha}
R=${OUT:?OUT}
cd "$(dirname "$0")/../.."
case $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1) in
  *H200*) PROBE_SKIP=1 bash bench/pending/call60.sh "$A"; exit ;;
esac
B="python3 -m vlattn.bench --mode layers --workloads 034:12,007:1,034:5"
OUT=$R/quiet VLATTN_COMMIT=$A CALL_BUDGET_S=${CALL_BUDGET_S:-300} PROBE_TIMEOUT_S=120 \
  PROBE_CMDS="$B --baselines '' --json \$OUT/quiet1.json; $B --json \$OUT/full1.json; $B --baselines '' --json \$OUT/quiet2.json" \
  scripts/gpu_check.sh probe
cd "$R" && d=$(ls -d quiet 2>/dev/null; true) && [ -n "$d" ] && tar czf all62b.tar.gz $d && rm -rf $d
