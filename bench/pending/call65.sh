#!/usr/bin/env bash
# The sixty-fifth session, device calls on one warm H200 (each issued as soon as the one before returns):
#
#   run(command="PARTS=auto1 bash bench/pending/call65.sh <sha>", carry=[".whl", "prebuilt"], kind="nvidia-h200")
#   run(command="PARTS=auto2 bash bench/pending/call65.sh <sha>", carry=[".whl", "prebuilt"])
# auto1 is "readme tune" on an H200 (~125 s measured on an H100, capped at 300, + ~90 s; the README run first: the
# H200 table is eleven sessions old, and a failed start may leave budget for one call only), "suite" on an H100; auto2 is "suite gemm" on an H200,
# "gemm" on an H100; `PARTS=h200` is auto1's H200 parts and nothing on another GPU (once the H100 suite has run).
# Or name the parts: PARTS="suite gemm".
#
# tune:   the full GEMM tuner (`python3 -m vlattn.tune --iters 30`, with the sixty-fourth session's rule that times a
#         parallel split-K config only where its whole-K grid is under one wave), then the table decision below.
#         Prediction (bench/NOTES.md, sixty-fifth session): the H100's picks, i.e. parallel split-K at
#         128x512x3584+b, 256x512x3584+b and 392x1024x4096+b with >= 5% over the best whole-K config, the other 9
#         entries unchanged.
# readme: the README run (readme_run.sh; EPI_SKIP=0 adds call60.sh's epilogue A/B, ~90 s).
# suite:  the whole GPU suite (SUITE_JOBS=3 gpu_check.sh test; on a3a04f4 one shard of three ran past a 210 s cap).
# gemm:   `vlattn-bench --mode gemm` on the table decided (the tuner's JSON kept in /tmp/vlattn65 by a call before).
#
# The decision: if the H200 tuner picks a `_psplit/` config for all three shapes, the table becomes
# what bench/pending/pred65_table.py writes (the committed table plus the H100's three entries; prebuilt/ holds its
# module, so nothing builds here); otherwise the committed table stays. The tuner's JSON is also kept in
# /tmp/vlattn65 so a later call on the same warm machine makes the same decision (a fresh machine: the
# committed table).
set -uo pipefail
A=${1:?sha}
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
PARTS=${PARTS:-auto1}
case "$PARTS:$GPU" in  # auto1 / auto2: what the first / second call on this kind of GPU should run
  auto1:*H200* | h200:*H200*) PARTS="readme tune" ;;
  auto1:*) PARTS="suite" ;;  # the H100 tuner picks are known (three runs agree)
  auto2:*H200*) PARTS="suite gemm" ;;
  auto2:*) PARTS="gemm" ;;
  h200readme:*H200*) PARTS="readme" ;;  # the README run alone (~125 s on a warm machine: when the budget is short)
  h200*:*) echo "call65: $GPU is not an H200: nothing run"; exit 0 ;;  # h200 / h200readme elsewhere (~1 s)
esac
echo "call65: $GPU: parts $PARTS"
PARTS=" $PARTS "  # run in the order below whatever the order given
want() { [[ $PARTS == *" $1 "* ]]; }
R=${OUT:?OUT}
cd "$(dirname "$0")/../.."
KEEP=/tmp/vlattn65
mkdir -p "$KEEP"
decide() {  # copies the predicted table over the committed one when the tuner's JSON says so
  [ -f "$KEEP/tune_full.json" ] || { echo "call65: no tuner JSON: committed table"; return; }
  python3 - "$KEEP/tune_full.json" <<'EOF' && python3 bench/pending/pred65_table.py
import json, sys
e = json.load(open(sys.argv[1]))["entries"]
keys = ("128,512,3584", "256,512,3584", "392,1024,4096")
picks = {k: e.get(k, "(no entry: the fallback)") for k in keys}
ok = all("_psplit/" in v for v in picks.values())
print("call65: tuner picks", picks, "->", "predicted table (pred65)" if ok else "committed table")
sys.exit(0 if ok else 1)
EOF
}
if want readme; then  # the layers don't read the three entries (bench/NOTES.md): the committed table is fine
  decide | tee "$R/decision.txt"
  OUT=$R PROBE_SKIP=1 EPI_SKIP=${EPI_SKIP:-1} README_BUDGET_S=${README_BUDGET_S:-300} bash bench/pending/call60.sh "$A"
fi
if want suite; then  # the whole GPU suite on this commit's module (~180 s in three processes)
  mkdir -p "$R/suite"
  OUT=$R/suite VLATTN_COMMIT=$A CALL_BUDGET_S=275 TEST_TIMEOUT_S=250 SUITE_JOBS=3 scripts/gpu_check.sh test
  (cd "$R" && tar czf suite65.tar.gz suite && rm -rf suite)
fi
if want tune; then
  mkdir -p "$R/tune"
  OUT=$R/tune VLATTN_COMMIT=$A CALL_BUDGET_S=230 PROBE_TIMEOUT_S=200 \
    PROBE_CMDS="python3 -m vlattn.tune --iters 30 --out \$OUT/tune_full.json 2>&1 | tee \$OUT/tune_full.log" \
    scripts/gpu_check.sh probe
  cp "$R/tune/tune_full.json" "$KEEP/" 2>/dev/null
  decide | tee -a "$R/tune/decision.txt"
  (cd "$R" && tar czf tune65.tar.gz tune && rm -rf tune)
fi
if want gemm; then
  decide | tee "$R/decision_gemm.txt"
  mkdir -p "$R/gemm"
  OUT=$R/gemm VLATTN_COMMIT=$A CALL_BUDGET_S=260 PROBE_TIMEOUT_S=230 \
    PROBE_CMDS="python3 -m vlattn.bench --mode gemm --json \$OUT/gemm.json --plot \$OUT/gemm.png 2>&1 | tee \$OUT/gemm.log" \
    scripts/gpu_check.sh probe
  git checkout -- python/vlattn/data/gemm_tuned_h200.json 2>/dev/null || true
  (cd "$R" && tar czf gemm65.tar.gz gemm && rm -rf gemm)
fi
