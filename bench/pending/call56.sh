#!/usr/bin/env bash
# The fifty-sixth session's device call, run from the branch `pending` (= main + 0001, the split-K trace) carrying
# [".whl", "prebuilt"] with main's and pending's module slots:
#
#   bash bench/pending/call56.sh <main sha> <pending sha>
#
# 1. (pending tree) 0001's GPU tests and the landed split-key kernel's tests; racecheck of the split-key exchange,
#    both builds the rule takes, with the full report kept (the 55th-session form kept only the summary lines, and
#    its three hazards per run could not be placed); the cold split-K QKV kernel under ncu (trace off).
# 2. (main's tree: 0001 reversed in place, main's slot) the same ncu reading, then pending's again, then main's
#    again: 0001's neutrality bar is the trace-off kernel within +-0.3 us of main's, cold, both pairs.
# 3. On an H200 only: the README run on main's tree (vlattn.bench --mode layers: every workload, all baselines).
# Results under $OUT/{p1,m1,p2,m2,readme}; $OUT/all.tar.gz packs them.
set -uo pipefail
A=${1:?main sha}
B=${2:?pending sha}
R=${OUT:?OUT}
cd "$(dirname "$0")/../.."
P1=$(ls bench/pending/0001-*.patch)
N="ncu --cache-control all --clock-control none -k regex:qkv_rope_splitk --metrics gpu__time_duration.sum,dram__bytes_read.sum --launch-skip 1 --launch-count 2 python3 bench/ncu_target.py qkv 007 0 | grep -E 'gpu__|dram__'"
# racecheck's full report into the probe log (gpu_check keeps each probe's whole output in logs.tar.gz).
RC="VLATTN_ATTN_SPLIT_KEYS=2 timeout 90 compute-sanitizer --tool racecheck --print-limit 20 python3 bench/ncu_target.py attention"
# Where a small layer's eager call spends its host time (the H200 README run's eager - graph gaps: 034 B2 Lq256 27 us,
# B1 Lq512 22, 007 B1 S1024 21.5, B1 S128 7).
H="python3 bench/probe_host.py --iters 30 --trace 10 --workloads 034:0,034:2,034:15,007:10,007:6"
OUT=$R/p1 VLATTN_COMMIT=$B PROBE_CMDS="$RC 007 0; $RC 034 0; $N; $H" CALL_BUDGET_S=${P_BUDGET_S:-190} TEST_TIMEOUT_S=120 \
  scripts/gpu_check.sh probe -p no:cacheprovider tests/test_qkv.py tests/test_dev.py tests/test_attention.py \
  -k "trace or splitk or dev or split_keys"
git apply -R "$P1" || { echo "call56: reversing 0001 failed"; exit 3; }
OUT=$R/m1 VLATTN_COMMIT=$A PROBE_CMDS="$N" CALL_BUDGET_S=45 scripts/gpu_check.sh probe
git apply "$P1" && OUT=$R/p2 VLATTN_COMMIT=$B PROBE_CMDS="$N" CALL_BUDGET_S=45 scripts/gpu_check.sh probe
git apply -R "$P1" && OUT=$R/m2 VLATTN_COMMIT=$A PROBE_CMDS="$N" CALL_BUDGET_S=45 scripts/gpu_check.sh probe
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  OUT=$R/readme VLATTN_COMMIT=$A CALL_BUDGET_S=${README_BUDGET_S:-250} PROBE_TIMEOUT_S=230 \
    PROBE_CMDS='python3 -m vlattn.bench --mode layers --budget-s 190 --json $OUT/layers.json --plot $OUT/layers.png' \
    scripts/gpu_check.sh probe
else
  echo "call56: not an H200: no README run"
fi
cd "$R" && tar czf all.tar.gz $(ls -d p1 m1 p2 m2 readme 2>/dev/null)
