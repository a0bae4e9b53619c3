#!/usr/bin/env bash
# The device call for bench/pending/0001-0003 (README.md beside this file: what each command measures and the
# predictions). Run on the device from the branch `pending` (scripts/device_prep.sh pending; git checkout pending),
# carrying [".whl", "prebuilt"] with exactly main's and pending's module slots:
#
#   bash bench/pending/call53.sh <main sha> <pending sha>
#
# b1 = the pending tree (tests, then every probe); a1 = main's tree (the patches reversed in place: its own slot),
# the two ncu readings only. Results under $OUT/{b1,a1} and $OUT/all.tar.gz.
set -uo pipefail
A=${1:?main sha}
B=${2:?pending sha}
R=${OUT:?OUT}
cd "$(dirname "$0")/../.."

N="ncu --cache-control all --clock-control none -k regex:qkv_rope_splitk --metrics gpu__time_duration.sum,dram__bytes_read.sum --launch-skip 1 --launch-count 2 python3 bench/ncu_target.py qkv 007 0 | grep -E 'gpu__|dram__'"
NA="ncu -k regex:attention_kernel --metrics gpu__time_duration.sum --launch-skip 1 --launch-count 1 python3 bench/ncu_target.py attention 034 13 | grep gpu__"
L="python3 -m vlattn.bench --mode layers --backends native --baselines= --iters 40 --rounds 2"
T="python3 bench/probe_timeline.py --modes ahead,graph --reps 7 --workloads 007:10,034:15"

P="python3 bench/probe_splitk_timeline.py --calls 5; $N; VLATTN_TMA_PREFETCH=0 $N; $NA"
P="$P; $L --workloads 007:10,007:15,007:0,007:8,007:11,034:15,034:0,034:2,034:8 --switch VLATTN_TMA_PREFETCH=1,0"
P="$P; python3 bench/probe_oproj_fused.py --iters 30"
P="$P; $L --workloads 007:10,007:15,034:15 --switch VLATTN_OPROJ_SPLITK=1,0"
P="$P; VLATTN_OPROJ_SPLITK=0 $T; VLATTN_OPROJ_SPLITK=1 $T"
P="$P; $L --workloads 007:15,007:0,007:8,007:11,034:15,034:0,034:2 --switch VLATTN_QKV_PLAN=1,0"
P="$P; python3 bench/probe_qkv.py --iters 20 --max-m 1568 --configs splitk2d,splitk4,m256k2,m256k3,m256k4,grouped,gemm"

OUT=$R/b1 VLATTN_COMMIT=$B PROBE_CMDS="$P" scripts/gpu_check.sh probe -p no:cacheprovider tests/test_pdl.py \
  tests/test_qkv.py tests/test_dev.py tests/test_ops.py \
  -k "prefetch or trace or splitk or dev or back_to_back or oproj or native_out"

for p in 0003 0002 0001; do git apply -R bench/pending/$p-*.patch || { echo "call53: reversing $p failed"; exit 3; }; done
OUT=$R/a1 VLATTN_COMMIT=$A PROBE_CMDS="$N; $NA" scripts/gpu_check.sh probe
cd "$R" && tar czf all.tar.gz a1 b1
