#!/usr/bin/env bash
# The device call for the measurements that wait on a GPU, by the GPU that comes (one call, results under $OUT):
#
#   run(command="bash bench/device_call.sh <sha>", carry=[".whl", "prebuilt"], kind="nvidia-h200", timeout_s=600)
#
# Pass the sha literally: inside the device copy, git HEAD is the session's starting commit, not the tree sent.
# PARTS picks what runs, in this order whatever the order given; without PARTS, H200_PARTS on an H200 and OTHER_PARTS
# elsewhere (one call that does the right thing by whichever GPU comes); their defaults:
#   H200:  "readme gemm"  (~125 s + ~230 s on a warm machine; "tune" ~90 s)
#   other: "tests"        (nothing H200-only: the issues' targets are H200 numbers)
#
#   tests   the GPU tests of TESTS (default: the validation cases, the refused-config message, the component ops;
#           `tests/` for the whole suite, then SUITE_JOBS=3 is set and the cap is 340 s: 275 cut one shard), any GPU.
#   eager   bench/probe_host.py on the seven small 007 layers and two small 034 ones (host / gpu / cold / graph µs of
#           the bench's own callable), then its torch.profiler host ranges on 007 B1 S512, any GPU (~60 s).
#   readme  the README's layers run (`vlattn.bench --mode layers --budget-s 200`, JSON and plot), H200 only:
#           then here `python bench/readme_table.py <layers.json>` and the README's bullets.
#   tune    the GEMM tuner (`python3 -m vlattn.tune --iters 30 $TUNE_ARGS --out $OUT/tune/tune_full.json`; TUNE_ARGS e.g.
#           "--min-m 2048 --configs a,b" for a partial run, which is read, not committed), H200 only: compare it with the
#           committed table here (`python bench/compare_tuned.py <json>`) and commit it as
#           python/vlattn/data/gemm_tuned_h200.json if it should replace it (then rebuild: setup.py bakes the entries in).
#   gemm    `vlattn-bench --mode gemm` (issue 3's table, against cuBLAS in the same run) on the committed table,
#           H200 only.
#
# Budget: each part caps its own time (gpu_check.sh's CALL_BUDGET_S); PARTS=readme alone when little device time is
# left. Every part leaves one tarball in $OUT (the device tool returns at most 8 files).
set -uo pipefail
A=${1:?usage: device_call.sh <sha>}
R=${OUT:?OUT}
cd "$(dirname "$0")/.."
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
case "$GPU" in
  *H200*) h200=1; PARTS=${PARTS:-${H200_PARTS:-readme gemm}} ;;
  *) h200=0; PARTS=${PARTS:-${OTHER_PARTS:-tests}} ;;
esac
echo "device_call: $GPU: parts $PARTS"
PARTS=" $PARTS "
want() { [[ $PARTS == *" $1 "* ]]; }
only_h200() {  # an H200 part asked for elsewhere: say so and skip it
  [ $h200 = 1 ] && return 0
  echo "device_call: $1 is an H200 measurement; $GPU: skipped"
  return 1
}
pack() { (cd "$R" && tar czf "$1.tar.gz" "$1" && rm -rf "$1"); }
if want tests; then
  TESTS=${TESTS:-tests/test_validation.py tests/test_qkv.py::test_bad_section_and_split tests/test_ops.py}
  budget=${TESTS_BUDGET_S:-150}; jobs=1
  case "$TESTS" in tests | tests/) budget=${TESTS_BUDGET_S:-340}; jobs=3 ;; esac
  mkdir -p "$R/tests"
  # shellcheck disable=SC2086  # TESTS is a list of pytest paths
  OUT=$R/tests VLATTN_COMMIT=$A CALL_BUDGET_S=$budget TEST_TIMEOUT_S=$((budget - 10)) SUITE_JOBS=$jobs \
    scripts/gpu_check.sh probe $TESTS
  pack tests
fi
probe_part() {  # name, call budget (s), the probe command ($OUT is the part's folder): one part, if asked for
  want "$1" || return 0
  mkdir -p "$R/$1"
  OUT=$R/$1 VLATTN_COMMIT=$A CALL_BUDGET_S=$2 PROBE_TIMEOUT_S=$(($2 - 30)) PROBE_CMDS=$3 scripts/gpu_check.sh probe
  pack "$1"
}
h200_part() {  # probe_part's arguments: a part that runs on an H200 only
  want "$1" && only_h200 "$1" || return 0
  probe_part "$@"
}
# shellcheck disable=SC2016  # $OUT is expanded by gpu_check.sh, per part
probe_part eager 150 'python3 bench/probe_host.py --iters 30 --workloads 007:10,007:15,007:0,007:8,007:11,007:14,007:9,034:15,034:0; python3 bench/probe_host.py --iters 10 --workloads 007:8 --ranges 50'
# shellcheck disable=SC2016  # $OUT is expanded by gpu_check.sh, per part
h200_part readme "${README_BUDGET_S:-300}" \
  'python3 -m vlattn.bench --mode layers --budget-s 200 --json $OUT/layers.json --plot $OUT/layers.png'
h200_part tune "${TUNE_BUDGET_S:-230}" "python3 -m vlattn.tune --iters 30 ${TUNE_ARGS:-} --out \$OUT/tune_full.json 2>&1 | tee \$OUT/tune_full.log"
# shellcheck disable=SC2016
h200_part gemm 260 'python3 -m vlattn.bench --mode gemm --json $OUT/gemm.json --plot $OUT/gemm.png 2>&1 | tee $OUT/gemm.log'
exit 0
