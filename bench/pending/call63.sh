#!/usr/bin/env bash
# The sixty-third session, one device call, any GPU (~120 s; on an H200 ~520 s):
#
#   run(command="bash bench/pending/call63.sh <sha>", carry=[".whl", "prebuilt"], kind="nvidia-h200")
#
# 1. call62c.sh (034 Lq 4096's eager vs graph attention: modes in both orders, then PDL off; prediction in
#    bench/NOTES.md, sixty-second session).
# 2. 007 B64 S256's host marks (`probe_host.py --trace 30`): what the ~20 us between the clock's start and the first
#    launch is spent on (prediction in bench/NOTES.md, sixty-third session).
# 3. On an H200 only: call60.sh's README run and epilogue A/B (the README table is still d0279b1's).
# Only all63.tar.gz comes back.
set -uo pipefail
A=${1:?sha}
R=${OUT:?OUT}
cd "$(dirname "$0")/../.."
mkdir -p "$R/tl" "$R/host"
OUT=$R/tl CALL_BUDGET_S=170 bash bench/pending/call62c.sh "$A"
OUT=$R/host VLATTN_COMMIT=$A CALL_BUDGET_S=80 PROBE_TIMEOUT_S=60 \
  PROBE_CMDS="python3 bench/probe_host.py --iters 30 --trace 30 --workloads 007:1,034:5" \
  scripts/gpu_check.sh probe
case $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1) in
  *H200*) OUT=$R PROBE_SKIP=1 bash bench/pending/call60.sh "$A" ;;
  *) echo "call63: not an H200: no README run" ;;
esac
cd "$R" && d=$(ls -d tl host all60.tar.gz 2>/dev/null; true) && tar czf all63.tar.gz $d && rm -rf tl host all60.tar.gz
