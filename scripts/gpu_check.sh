#!/usr/bin/env bash
# One call on a bare H200 machine: build the extension, run the GPU tests and the bench, and leave
# logs and JSON under $OUT (default ./gpu_out). Carry the nvidia-cutlass wheel in .whl/ (the machine
# has no network): see README "Developing on the GPU machine".
#
#   scripts/gpu_check.sh [all|final|build|test|bench|tune|sanitize|probe] [extra pytest args...]
#   final: all, then sanitize
#   probe: build, run the GPU tests given as args (or PROBE_TESTS; only those: pass tests/ for the suite), then each `;`-separated
#          command of PROBE_CMDS (e.g. "python3 bench/probe_qkv.py --iters 10"), logs under $OUT.
#   all and final run the PROBE_CMDS too when set (after the bench / the sanitizers).
# Logs end up in $OUT/logs.tar.gz (the device tool returns at most 8 files); JSON, junit.xml, plots
# and summary.txt stay as they are, unless more than 8 files are left: then all but summary.txt,
# logs.tar.gz and junit.xml travel in extras.tar.gz.
# Environment: OUT, CALL_BUDGET_S (default 560: caps every stage's timeout), MAX_JOBS (default 16),
#              PREBUILT (default 1: install the carried prebuilt/ module that matches this tree instead of building,
#              scripts/prebuilt.py; 0 always builds),
#              BENCH_ARGS (extra vlattn-bench args), TEST_PATHS (default tests/), TEST_TIMEOUT_S (default 360: the whole suite took > 270 s on 2026-12-01),
#              SUITE_PART (1 or 2: one half of the suite by file, when TEST_PATHS is not set; the whole suite,
#              ~370 s on 2026-12-04, no longer fits beside a build in one call: part 1 took 212 s, part 2 156 s),
#              SUITE_JOBS (default 1: n pytest processes on the GPU, each a shard of the selected tests;
#              pytest.log then lists each shard's result line and failures, pytest_<i>.log has the rest;
#              with 3 the whole suite but test_codegen.py took 166 s on 2026-12-05),
#              SANITIZE_TESTS (both tools) / SANITIZE_RACECHECK_TESTS (racecheck's default subset) /
#              SANITIZE_TOOLS / SANITIZE_TIMEOUT_S, BENCH_TIMEOUT_S, SANITIZE_ENV (VAR=value pairs for the sanitized pytest only, e.g.
#              VLATTN_ATTN_PERSISTENT=2), SANITIZE_FLAGS (extra compute-sanitizer flags). Do not
#              filter racecheck with --kernel-name: on the H200 (CUDA 13.0) the uninstrumented
#              reference kernels then die with "Internal Sanitizer Error ... hardware exception"
#              (bench/NOTES.md run 10); racecheck's reports inside cuBLAS's nvjet_* kernels are noise.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/gpu_out}
mkdir -p "$OUT"
what=${1:-all}; shift || true
export PYTHONUNBUFFERED=1 PYTHONPATH="$PWD/python${PYTHONPATH:+:$PYTHONPATH}"
status=0

log() { echo "== $(date +%T) $*" | tee -a "$OUT/summary.txt"; }

# Every stage's timeout is capped by what is left of CALL_BUDGET_S (default 560 s: the device tool
# cuts a call off at 600 s or at the session's remaining device time, and a cut-off call returns no
# logs, since they are packed at the end). cap N prints min(N, seconds left - 20), at least 1.
CALL_BUDGET_S=${CALL_BUDGET_S:-560}
cap() {
  local left=$((CALL_BUDGET_S - SECONDS - 20))
  [ "$left" -lt 1 ] && left=1
  [ "$1" -lt "$left" ] && echo "$1" || echo "$left"
}

setup_env() {
  if ls .whl/*.whl >/dev/null 2>&1; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
      || { log "wheel install failed"; exit 2; }
    export PYTHONPATH="$PYTHONPATH:/tmp/site"
  fi
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv > "$OUT/gpu.txt" 2>&1
  # The device copy's git HEAD is the session's base commit under newer files (bench/README.md), so a stamp
  # taken from it there is wrong: the thirty-ninth session's VLATTN_COMMIT=$(git rev-parse ...) stamped three
  # calls' results with a commit two sessions old. Say so in the summary (results are kept either way).
  local head
  head=$(git rev-parse --short HEAD 2>/dev/null || true)
  if [ -z "${VLATTN_COMMIT:-}" ]; then
    log "VLATTN_COMMIT unset: results are stamped from this copy's git, stale on a device copy (pass the sha as a literal)"
  elif [ -n "$head" ] && [ "${VLATTN_COMMIT:0:7}" = "${head:0:7}" ] \
      && [ -n "$(git status --porcelain --untracked-files=no 2>/dev/null | head -1)" ]; then
    log "VLATTN_COMMIT=$VLATTN_COMMIT is this copy's git HEAD, whose tracked files differ from it: a stale stamp? (pass the sha as a literal)"
  fi
  python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, torch.cuda.get_device_name(),
               'cxx11abi', torch._C._GLIBCXX_USE_CXX11_ABI)" | tee -a "$OUT/summary.txt"
}

build() {
  # A module built on the CPU machine for this tree and torch (scripts/prebuild.sh; carry `prebuilt`) saves the
  # 130-200 s build; scripts/prebuilt.py installs it only if it matches, and says why not. PREBUILT=0: build.
  # Not for bench/ab_overlay.sh, whose arms rebuild in place: ninja's objects must be this machine's.
  local overlay=0
  case "${PROBE_CMDS:-}" in *ab_overlay*) overlay=1 ;; esac
  if [ "${PREBUILT:-1}" != 0 ] && [ -d prebuilt ] && [ $overlay = 0 ]; then
    local msg rc
    msg=$(timeout "$(cap 120)" python3 scripts/prebuilt.py unpack --root . --dir prebuilt --warnings "$OUT/build_warnings.txt" 2>&1)
    rc=$?
    log "$msg"
    if [ $rc -eq 0 ] && timeout "$(cap 120)" python3 scripts/prebuilt.py smoke --root . | tee -a "$OUT/summary.txt"; then
      return
    fi
    log "prebuilt module not used: building"
    rm -f python/vlattn/_C.*.so
  fi
  log "build (MAX_JOBS=${MAX_JOBS:-16})"
  local t0=$SECONDS
  MAX_JOBS=${MAX_JOBS:-16} python3 setup.py build_ext --inplace > "$OUT/build.log" 2>&1
  local rc=$?
  grep -E "Registers are spilled|ptxas (warning|error)|error:|C7513" "$OUT/build.log" | sort | uniq -c | head -40 > "$OUT/build_warnings.txt"
  # C7513: ptxas serialized a kernel's wgmma (clean compile, same bits, 20-48% slower: bench/NOTES.md
  # twenty-first session); tests/test_codegen.py fails on it, this line shows it on every device build.
  log "build rc=$rc in $((SECONDS - t0)) s; ptxas spills: $(grep -c "Registers are spilled" "$OUT/build.log"); wgmma serialized (C7513): $(grep -c "C7513" "$OUT/build.log")"
  [ $rc -eq 0 ] || { tail -40 "$OUT/build.log"; exit 3; }
  python3 -c "import vlattn, json; print(json.dumps(vlattn.extension_info()))" | tee -a "$OUT/summary.txt"
}

# The suite in two halves by file (SUITE_PART): the fused QKV, layer and host-side tests; the GEMM, attention,
# dispatch and bench tests. Every tests/test_*.py but test_codegen.py belongs to exactly one (tests/test_bench.py
# checks that against this script).
SUITE_PART_1="tests/test_qkv.py tests/test_ops.py tests/test_pdl.py tests/test_cpp.py tests/test_reference.py tests/test_validation.py tests/test_prebuilt.py"
SUITE_PART_2="tests/test_gemm.py tests/test_attention.py tests/test_dispatch.py tests/test_dev.py tests/test_bench.py"
case "${SUITE_PART:-}" in
  ""|1|2) ;;
  *) log "SUITE_PART must be 1 or 2; got '${SUITE_PART}'"; exit 2 ;;
esac
suite_part_paths() {
  case "${SUITE_PART:-}" in
    1) echo "$SUITE_PART_1" ;;
    2) echo "$SUITE_PART_2" ;;
  esac
}

run_tests() {
  local part jobs=${SUITE_JOBS:-1}
  part=$(suite_part_paths)
  [ -n "$part" ] && [ -z "${TEST_PATHS:-}" ] && TEST_PATHS="$part"
  case "$jobs" in
    [1-8]) ;;
    *) log "SUITE_JOBS must be 1..8; got '$jobs'"; status=1; return ;;
  esac
  log "pytest (SUITE_JOBS=$jobs)"
  # tests/test_codegen.py compiles two translation units with ptxas -v (CPU work, ~1 min each on one
  # core): CI runs it; here it ate the whole test slot of the sixth session's final call.
  # SUITE_JOBS=n: n pytest processes on the one GPU, shard i of n each (VLATTN_TEST_SHARD, tests/conftest.py):
  # the tests time nothing, and the suite is mostly short kernels and host work, which n processes overlap.
  local t=$(cap "${TEST_TIMEOUT_S:-360}") i rc=0 shard_rc
  local -a pids=()
  for ((i = 0; i < jobs; i++)); do
    local tag=""
    [ "$jobs" -gt 1 ] && tag="_$i"
    # shellcheck disable=SC2086
    VLATTN_TEST_SHARD=$([ "$jobs" -gt 1 ] && echo "$i/$jobs") timeout "$t" python3 -m pytest -q -rfEs \
      ${TEST_PATHS:-tests/} --ignore=tests/test_codegen.py --junitxml="$OUT/junit$tag.xml" "$@" \
      > "$OUT/pytest$tag.log" 2>&1 &
    pids+=($!)
  done
  for ((i = 0; i < jobs; i++)); do
    wait "${pids[$i]}"
    shard_rc=$?
    [ "$shard_rc" -gt "$rc" ] && rc=$shard_rc
  done
  if [ "$jobs" -gt 1 ]; then
    # One junit.xml and one pytest.log as with a single process (the shards' own files go into the logs).
    python3 - "$OUT" "$jobs" <<'PYEOF'
import sys
import xml.etree.ElementTree as ET
out, jobs = sys.argv[1], int(sys.argv[2])
root = ET.Element("testsuites")
for i in range(jobs):
    try:
        tree = ET.parse(f"{out}/junit_{i}.xml")
    except (OSError, ET.ParseError) as e:
        print(f"shard {i}: no junit ({e})")
        continue
    node = tree.getroot()
    root.extend(list(node) if node.tag == "testsuites" else [node])
ET.ElementTree(root).write(f"{out}/junit.xml", encoding="utf-8", xml_declaration=True)
PYEOF
    rm -f "$OUT"/junit_*.xml
    for ((i = 0; i < jobs; i++)); do
      echo "== shard $i/$jobs: $(tail -1 "$OUT/pytest_$i.log")"
      grep -E "^(FAILED|ERROR) " "$OUT/pytest_$i.log"
    done > "$OUT/pytest.log"
    cat "$OUT/pytest.log"
    for ((i = 0; i < jobs; i++)); do tail -25 "$OUT/pytest_$i.log"; done
    log "pytest rc=$rc: $(grep '^== shard' "$OUT/pytest.log" | cut -c4- | tr '\n' ' ')"
  else
    tail -25 "$OUT/pytest.log"
    log "pytest rc=$rc: $(tail -1 "$OUT/pytest.log")"
  fi
  [ $rc -eq 0 ] || status=1
}

run_bench() {
  log "bench"
  # shellcheck disable=SC2086
  timeout "$(cap "${BENCH_TIMEOUT_S:-300}")" python3 -m vlattn.bench --mode all --json "$OUT/bench.json" \
    --plot "$OUT/bench.png" ${BENCH_ARGS:-} > "$OUT/bench.log" 2>&1
  local rc=$?
  tail -60 "$OUT/bench.log"
  log "bench rc=$rc"
  [ $rc -eq 0 ] || status=1
}

run_tune() {
  log "tune"
  timeout "$(cap "${TUNE_TIMEOUT_S:-300}")" python3 -m vlattn.tune --out "$OUT/gemm_tuned_h200.json" > "$OUT/tune.log" 2>&1
  local rc=$?
  tail -5 "$OUT/tune.log"
  log "tune rc=$rc (copy \$OUT/gemm_tuned_h200.json to python/vlattn/data/ to commit it)"
  [ $rc -eq 0 ] || status=1
}

run_sanitize() {
  # memcheck and racecheck on small and tail shapes; slow, so a subset. SANITIZE_TESTS overrides the
  # pytest selection (default: every GEMM config, attention tails with masks and the summary paths,
  # fused QKV tails on every config).
  log "compute-sanitizer"
  local rc=0 tool
  local tests=${SANITIZE_TESTS:-"tests/test_gemm.py::test_each_config tests/test_attention.py::test_tails[17-129] tests/test_attention.py::test_tails[129-1] tests/test_qkv.py::test_mrope_tails_and_configs tests/test_qkv.py::test_cross_tails_no_bias_other_split"}
  # racecheck is ~10x slower than memcheck: the full list above did not finish in 80 s on the H200
  # (fifth session), these three did in 31 s (0 hazards with VLATTN_ATTN_PERSISTENT=2).
  local race_tests=${SANITIZE_RACECHECK_TESTS:-"tests/test_attention.py::test_tails[17-129] tests/test_attention.py::test_tails[129-1] tests/test_attention.py::test_more_units_than_sms"}
  for tool in ${SANITIZE_TOOLS:-memcheck racecheck}; do
    [ "$tool" = racecheck ] && [ -z "${SANITIZE_TESTS:-}" ] && tests=$race_tests
    # shellcheck disable=SC2086
    timeout "$(cap "${SANITIZE_TIMEOUT_S:-240}")" env ${SANITIZE_ENV:-} compute-sanitizer --tool "$tool" --error-exitcode 99 \
      ${SANITIZE_FLAGS:-} python3 -m pytest -q -x $tests > "$OUT/sanitize_$tool.log" 2>&1 || rc=$?
    log "compute-sanitizer $tool rc=$rc: $(grep -E 'SUMMARY|passed|failed' "$OUT/sanitize_$tool.log" | tail -2 | tr '\n' ' ')"
  done
  [ $rc -eq 0 ] || status=1
}

run_probe() {
  # Only the tests named (PROBE_TESTS or args), not TEST_PATHS' default tests/ as well: that ran the whole
  # suite (276 s) in the twenty-third session's call 4, when only tests/test_bench.py was asked for.
  # PROBE_TESTS is split on spaces: quoted pytest arguments (-k "a or b") go after `probe` as arguments
  # (twenty-sixth session, call 1: `-k 'a or b'` in PROBE_TESTS ran no test).
  case "${PROBE_TESTS:-}" in
    *"'"*|*'"'*) log "PROBE_TESTS has quotes: no tests run (pass quoted pytest arguments after 'probe')"; status=1 ;;
    *) if [ -n "${SUITE_PART:-}" ]; then run_tests "$@"
       elif [ -n "${PROBE_TESTS:-}$*" ]; then TEST_PATHS="${TEST_PATHS:- }" run_tests ${PROBE_TESTS:-} "$@"; fi ;;
  esac
  local i=0 cmd
  IFS=';' read -ra cmds <<< "${PROBE_CMDS:-}"
  for cmd in "${cmds[@]}"; do
    i=$((i + 1))
    log "probe $i: $cmd"
    timeout "$(cap "${PROBE_TIMEOUT_S:-300}")" bash -c "$cmd" > "$OUT/probe_$i.log" 2>&1
    local rc=$?
    tail -50 "$OUT/probe_$i.log"
    log "probe $i rc=$rc"
    [ $rc -eq 0 ] || status=1
  done
}

# PROBE_CMDS is split on ';' (run_probe), so a loop or an if written inline falls apart into pieces that each
# fail ("for s in a b" / "do ..." / "done"), and read stops at a newline (later lines would be dropped). Refuse
# such a PROBE_CMDS before the build, not after the tests: put compound commands in a script, or write them out.
check_probe_cmds() {
  local piece first
  case "${PROBE_CMDS:-}" in
    *$'\n'*) log "PROBE_CMDS has a newline: only its first line would run; nothing run"; exit 2 ;;
  esac
  IFS=';' read -ra pieces <<< "${PROBE_CMDS:-}"
  for piece in "${pieces[@]}"; do
    read -r first _ <<< "$piece"
    case "$first" in
      do|done|then|fi|else|elif|esac|"}")
        log "PROBE_CMDS is split on ';', which cuts a compound command at '$piece': put loops and ifs in a script, or write the commands out; nothing run"
        exit 2 ;;
    esac
  done
}

setup_env
[ -z "${PROBE_CMDS:-}" ] || check_probe_cmds
case "$what" in
  build) build ;;
  test) build; run_tests "$@" ;;
  bench) build; run_bench ;;
  tune) build; run_tune ;;
  sanitize) build; run_sanitize ;;
  probe) build; run_probe "$@" ;;
  all) build; run_tests "$@"; run_bench; [ -z "${PROBE_CMDS:-}" ] || run_probe ;;
  final) build; run_tests "$@"; run_bench; run_sanitize; [ -z "${PROBE_CMDS:-}" ] || run_probe ;;
  *) echo "usage: $0 [all|final|build|test|bench|tune|sanitize|probe]"; exit 2 ;;
esac
log "done status=$status"
# At most 8 files come back from the device machine: the logs travel as one archive (summary.txt stays).
( cd "$OUT" && logs=$(ls -- *.log build_warnings.txt gpu.txt 2>/dev/null; true) && [ -n "$logs" ] \
    && tar czf logs.tar.gz $logs && rm -f $logs )
# If more than 8 files are left (e.g. a probe's A/B wrote one JSON per arm and round), everything but
# summary.txt, logs.tar.gz and junit.xml goes into extras.tar.gz: otherwise the tool may drop the logs
# (fifteenth session, call 1: nine JSON files pushed out logs.tar.gz and the pytest result was lost).
( cd "$OUT" && [ "$(find . -maxdepth 1 -type f | wc -l)" -gt 8 ] \
    && extras=$(find . -maxdepth 1 -type f ! -name summary.txt ! -name logs.tar.gz ! -name junit.xml -printf '%f\n') \
    && tar czf extras.tar.gz $extras && rm -f $extras && echo "== packed $(echo $extras | wc -w) files into extras.tar.gz" >> summary.txt )
exit $status
