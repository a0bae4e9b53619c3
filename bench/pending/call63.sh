#!/usr/bin/env bash
# The sixty-third session, one device call, any GPU (~250 s; on an H200 ~650 s):
#
#   run(command="bash bench/pending/call63.sh <sha>", carry=[".whl", "prebuilt"], kind="nvidia-h200")
#
# 0. The parallel split-K GEMM configs (a9efa1b, never GPU-run): their tests (tests/test_gemm.py -k
#    "parallel_split or invalid"), memcheck on two of them, then the tuner on every shape up to 1568 rows with
#    them against the small-M configs the table picks today (prediction in bench/NOTES.md, sixty-third session).
# 1. 007 B64 S256's host marks (`probe_host.py --trace 30`).
# 2. call62c.sh (034 Lq 4096's eager vs graph attention: modes in both orders, then PDL off; prediction in
#    bench/NOTES.md, sixty-second session).
# 3. On an H200 only: call60.sh's README run and epilogue A/B (the README table is still d0279b1's).
# psplit.tar.gz, host.tar.gz, tl.tar.gz and all60.tar.gz come back, each packed as its part ends.
# PARTS="0" (or any subset of 0 1 2 3) runs only those parts, for a call with little device time left.
set -uo pipefail
A=${1:?sha}
PARTS=" ${PARTS:-0 1 2 3} "
want() { [[ $PARTS == *" $1 "* ]]; }
R=${OUT:?OUT}
cd "$(dirname "$0")/../.."
mkdir -p "$R/psplit" "$R/tl" "$R/host"
P=t64x64x64_c1x1_pingpong_psplit
C="t64x64x64_c1x1_pingpong,t64x128x64_c1x1_pingpong,t64x112x64_c2x1_pingpong_e16_swap,t128x128x64_c1x1_coop"
C="$C,t128x112x64_c1x1_coop_e16,t128x144x64_c1x1_coop_e16"
for s in 2 4 8 16; do C="$C,$P/splitk$s,t64x128x64_c1x1_pingpong_psplit/splitk$s"; done
MC="compute-sanitizer --tool memcheck --error-exitcode 9 python3 -m pytest -q -p no:cacheprovider tests/test_gemm.py"
want 0 && OUT=$R/psplit VLATTN_COMMIT=$A CALL_BUDGET_S=200 PROBE_TIMEOUT_S=120 \
  PROBE_CMDS="$MC -k 'parallel_split_k_exact or parallel_split_k_strided'; python3 -m vlattn.tune --max-m 1568 --iters 30 --configs $C --out \$OUT/tune_psplit.json" \
  scripts/gpu_check.sh probe -p no:cacheprovider tests/test_gemm.py -k "parallel_split or invalid"
pack() { (cd "$R" && [ -d "$1" ] && tar czf "$1.tar.gz" "$1" && rm -rf "$1"); }  # each part as it ends:
pack psplit                                                                # a timeout loses only the last
want 1 && OUT=$R/host VLATTN_COMMIT=$A CALL_BUDGET_S=80 PROBE_TIMEOUT_S=60 \
  PROBE_CMDS="python3 bench/probe_host.py --iters 30 --trace 30 --workloads 007:1,034:5" \
  scripts/gpu_check.sh probe
pack host
want 2 && OUT=$R/tl CALL_BUDGET_S=170 bash bench/pending/call62c.sh "$A"
pack tl
if want 3; then case $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1) in
  *H200*) OUT=$R PROBE_SKIP=1 bash bench/pending/call60.sh "$A" ;;
  *) echo "call63: not an H200: no README run" ;;
esac; fi
