#!/usr/bin/env bash
# The device calls for bench/pending/0001-0004 (README.md beside this file: what each command measures and the
# predictions). Run on the device from the branch `pending` (scripts/device_prep.sh pending; git checkout pending),
# carrying [".whl", "prebuilt"] with exactly main's and pending's module slots:
#
#   bash bench/pending/call54.sh <main sha> <pending sha> b     # 0001-0003's probes on the pending tree (~9 min)
#   bash bench/pending/call54.sh <main sha> <pending sha> ca    # 0004 (split keys): tests, A/Bs; then main's ncu
#   bash bench/pending/call54.sh <main sha> <pending sha> x     # all four in one call, by priority (~9.5 min)
#
# b: 0001-0003's tests and probes (0004's switch is off by default, so these measure what call53.sh's stage b, the
#    fifty-third session's call, was written to measure).
# c: 0004's GPU tests (under a timeout: a new kernel), then the attention alone under ncu with the switch at 1 and
#    0, the layers' A/B in one process and two timelines. a: main's tree (the four patches reversed in place: its
#    own slot), the split-K kernel cold and 034 Lq 4096's attention under ncu. Results under $OUT/{b1,c1,a1}.
set -uo pipefail
A=${1:?main sha}
B=${2:?pending sha}
STAGES=${3:-b}
R=${OUT:?OUT}
cd "$(dirname "$0")/../.."

N="ncu --cache-control all --clock-control none -k regex:qkv_rope_splitk --metrics gpu__time_duration.sum,dram__bytes_read.sum --launch-skip 1 --launch-count 2 python3 bench/ncu_target.py qkv 007 0 | grep -E 'gpu__|dram__'"
NA="ncu -k regex:attention_kernel --metrics gpu__time_duration.sum --launch-skip 1 --launch-count 1 python3 bench/ncu_target.py attention 034 13 | grep gpu__"
L="python3 -m vlattn.bench --mode layers --backends native --baselines= --iters 40 --rounds 2"
T="python3 bench/probe_timeline.py --modes ahead,graph --reps 7 --workloads 007:10,034:15"

# Each stage's probes, named once (stage x runs them all, by priority).
K="ncu -k regex:'attention_kernel|split_keys|kv_resident' --metrics gpu__time_duration.sum --launch-skip 1 --launch-count 1"
G="grep -E 'gpu__|split_keys|attention_kernel|kv_resident'"
# 0004, a new kernel: its commands under short timeouts, so that a hang costs seconds, not the call. ncu of the
# attention alone (the per-unit, resident or split-key build) at sorted-by-SOL index 0 (007 B1 S128, 034 B2 Lq128).
SK_NCU_007="VLATTN_ATTN_SPLIT_KEYS=1 timeout 60 $K python3 bench/ncu_target.py attention 007 0 | $G; VLATTN_ATTN_SPLIT_KEYS=0 $K python3 bench/ncu_target.py attention 007 0 | $G"
SK_NCU_034="VLATTN_ATTN_SPLIT_KEYS=1 timeout 60 $K python3 bench/ncu_target.py attention 034 0 | $G; VLATTN_ATTN_SPLIT_KEYS=0 $K python3 bench/ncu_target.py attention 034 0 | $G"
SK_AB="timeout 120 $L --workloads 007:10,007:15,034:15 --switch VLATTN_ATTN_SPLIT_KEYS=1,0; VLATTN_ATTN_SPLIT_KEYS=0 $T; VLATTN_ATTN_SPLIT_KEYS=1 timeout 90 $T; timeout 60 $L --workloads 007:0 --switch VLATTN_ATTN_SPLIT_KEYS=2,0"
# The last A/B: 007 B4 S128 (224 CTAs, past one wave: the rule's mode 1 leaves it) with mode 2 against 0, the
# reach question of the next step.
# Its shared-memory exchange under racecheck, both builds the rule takes (64 keys masked: 007 B1 S128; 128 keys
# unmasked with a tail: 034 B2 Lq128). ncu_target.py's q, k, v come from the reference's projections, so cuBLAS
# runs under racecheck too (its reports in nvjet_* kernels are noise): only the summary and split_keys lines kept.
R1="compute-sanitizer --tool racecheck python3 bench/ncu_target.py attention"
R2="grep -E 'SUMMARY|split_keys' | tail -6"
SK_RACE="VLATTN_ATTN_SPLIT_KEYS=2 timeout 90 $R1 007 0 | $R2; VLATTN_ATTN_SPLIT_KEYS=2 timeout 90 $R1 034 0 | $R2"
PREFETCH_AB="$L --workloads 007:10,007:15,007:0,007:8,007:11,034:15,034:0,034:2,034:8 --switch VLATTN_TMA_PREFETCH=1,0"
OPROJ_AB="$L --workloads 007:10,007:15,034:15 --switch VLATTN_OPROJ_SPLITK=1,0"
OPROJ_PROBE="python3 bench/probe_oproj_fused.py --iters 30"
TRACE="python3 bench/probe_splitk_timeline.py --calls 5; $N; VLATTN_TMA_PREFETCH=0 $N; $NA"
PLAN_AB="$L --workloads 007:15,007:0,007:8,007:11,034:15,034:0,034:2 --switch VLATTN_QKV_PLAN=1,0"
TESTS_B="prefetch or trace or splitk or dev or back_to_back or oproj or native_out"

case $STAGES in *b*)
  P="$TRACE; $PREFETCH_AB; $OPROJ_PROBE; $OPROJ_AB; VLATTN_OPROJ_SPLITK=0 $T; VLATTN_OPROJ_SPLITK=1 $T; $PLAN_AB"
  P="$P; python3 bench/probe_qkv.py --iters 20 --max-m 1568 --configs splitk2d,splitk4,m256k2,m256k3,m256k4,grouped,gemm"
  OUT=$R/b1 VLATTN_COMMIT=$B PROBE_CMDS="$P" CALL_BUDGET_S=${B_BUDGET_S:-560} scripts/gpu_check.sh probe \
    -p no:cacheprovider tests/test_pdl.py tests/test_qkv.py tests/test_dev.py tests/test_ops.py -k "$TESTS_B" ;;
esac
case $STAGES in *c*)
  OUT=$R/c1 VLATTN_COMMIT=$B PROBE_CMDS="$SK_NCU_007; $SK_NCU_034; $SK_AB" CALL_BUDGET_S=${C_BUDGET_S:-330} \
    TEST_TIMEOUT_S=150 scripts/gpu_check.sh probe \
    -p no:cacheprovider tests/test_attention.py tests/test_dev.py -k "split_keys or dev_switch" ;;
esac
case $STAGES in *x*)
  # One call for all four on the pending tree (the device time left after failed starts, 54th session), by
  # priority: 0004's tests and A/Bs, 0002's, 0003's, then 0001's trace and the cold split-K readings.
  # X_SK=0 (56th session: 0004 has landed, its A/Bs ran in the 55th) leaves out 0004's ncu and A/B, keeps racecheck.
  P="$SK_RACE; $PREFETCH_AB; $OPROJ_AB; $OPROJ_PROBE; $TRACE; $PLAN_AB"
  [ "${X_SK:-1}" = 0 ] || P="$SK_NCU_007; $SK_AB; $P"
  OUT=$R/x1 VLATTN_COMMIT=$B PROBE_CMDS="$P" CALL_BUDGET_S=${X_BUDGET_S:-560} TEST_TIMEOUT_S=170 scripts/gpu_check.sh probe \
    -p no:cacheprovider tests/test_attention.py tests/test_pdl.py tests/test_qkv.py tests/test_dev.py tests/test_ops.py \
    -k "${X_K:-split_keys or $TESTS_B}" ;;
esac
case $STAGES in *a*)
  for p in 0004 0003 0002 0001; do
    ls bench/pending/$p-*.patch >/dev/null 2>&1 || continue
    git apply -R bench/pending/$p-*.patch || { echo "call54: reversing $p failed"; exit 3; }
  done
  OUT=$R/a1 VLATTN_COMMIT=$A PROBE_CMDS="$N; $NA" CALL_BUDGET_S=${A_BUDGET_S:-150} scripts/gpu_check.sh probe ;;
esac
cd "$R" && tar czf all.tar.gz $(ls -d a1 b1 c1 x1 2>/dev/null)
