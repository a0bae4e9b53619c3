#!/usr/bin/env bash
# The fifty-ninth session: why the split-key attention kernel, faster alone (ncu: 007 B1 S256 11.9 against 13.6 us,
# 034 B2 Lq128 ~5 us), is no faster or slower inside the layer chain (fifty-eighth session).
#
#   run(command="bash bench/pending/call59b.sh <sha>", carry=[".whl", "prebuilt"], kind="nvidia-h200")
#
# On an H200 first the README run (bench/pending/readme_run.sh, ~300 s; README_SKIP=1 leaves it out). Then, on any GPU:
# 1. In-process A/B, 007 B1 S256 and 034 B2 Lq128, VLATTN_ATTN_SPLIT_KEYS = 2 (split keys at both) against 0 (the
#    staged per-unit kernel at both), once with PDL (the default) and once with VLATTN_PDL=0.
#    Prediction (the reading that the PDL-launched O projection parks its CTAs on the SMs the split-key grid leaves
#    free: 20 of 132 at B1 S256, 4 at B2 Lq128): with PDL, split - staged ~ +3 us (007) and ~ 0 (034); without PDL
#    the split-key kernel's lead alone shows: split - staged <= -1 us at both. Refuted if split - staged is the same
#    (within 1 us) with and without PDL at both layers.
# 2. probe_timeline, graph replay, both layers, SPLIT_KEYS 2 and 0, one process each: where the time goes.
set -uo pipefail
A=${1:?sha}
R=${OUT:?OUT}
cd "$(dirname "$0")/../.."
readme=0
case $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1) in
  *H200*) [ -n "${README_SKIP:-}" ] || { readme=1; README_BUDGET_S=${README_BUDGET_S:-300} bash bench/pending/readme_run.sh "$A" call59b; } ;;
  *) echo "call59b: not an H200: no README run" ;;
esac
B='python3 -m vlattn.bench --mode layers --baselines "" --backends native --iters 40 --warmup 3 --rounds 4 --no-check --workloads 007:15,034:15 --switch VLATTN_ATTN_SPLIT_KEYS=2,0'
S='PYTHONPATH=python python3 bench/ab_summary.py'
OUT=$R/ab VLATTN_COMMIT=$A CALL_BUDGET_S=${AB_BUDGET_S:-110} PROBE_TIMEOUT_S=45 \
  PROBE_CMDS="$B --json \$OUT/pdl1.json; VLATTN_PDL=0 $B --json \$OUT/pdl0.json; $S \$OUT/pdl1.json; $S \$OUT/pdl0.json" \
  scripts/gpu_check.sh probe
# After a README run the timeline waits (TL_AFTER_README=1 runs it anyway): the device time is short.
[ "$readme" = 1 ] && [ -z "${TL_AFTER_README:-}" ] && { cd "$R" && tar czf all59.tar.gz $(ls -d readme ab 2>/dev/null) && rm -rf readme ab; exit 0; }
P='python3 bench/probe_timeline.py --modes graph --reps 7 --workloads 007:15,034:15'
OUT=$R/tl VLATTN_COMMIT=$A CALL_BUDGET_S=${TL_BUDGET_S:-90} PROBE_TIMEOUT_S=40 \
  PROBE_CMDS="VLATTN_ATTN_SPLIT_KEYS=2 $P; VLATTN_ATTN_SPLIT_KEYS=0 $P" \
  scripts/gpu_check.sh probe
cd "$R" && tar czf all59.tar.gz $(ls -d readme ab tl 2>/dev/null) && rm -rf readme ab tl
