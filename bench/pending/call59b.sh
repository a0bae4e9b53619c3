#!/usr/bin/env bash
# The fifty-ninth session: call59.sh with a wider timeline (call58h.sh's question on both layers where the split-key
# kernel is fast alone but not in the layer chain):
#
#   run(command="bash bench/pending/call59b.sh <sha>", carry=[".whl", "prebuilt"], kind="nvidia-h200")
#
# 1. Any GPU: probe_timeline, graph replay, 007 B1 S256 and 034 B2 Lq128 under VLATTN_ATTN_SPLIT_KEYS = 1 (the rule:
#    B1 S256 staged, B2 Lq128 split), 2 (B1 S256 split) and 0 (B2 Lq128 staged), two processes each.
#    Prediction (bench/NOTES.md, fifty-eighth session): on the split-key kernel the O projection ends >= 2 us later
#    after the attention's end than on the staged kernel, at both layers.
# 2. H200 only: the epilogue A/B (SKIP_EPI=1 leaves it out) and the README run, as call59.sh.
set -uo pipefail
A=${1:?sha}
R=${OUT:?OUT}
cd "$(dirname "$0")/../.."
P='python3 bench/probe_timeline.py --modes graph --reps 7 --workloads 007:15,034:15'
OUT=$R/tl VLATTN_COMMIT=$A CALL_BUDGET_S=${TL_BUDGET_S:-180} PROBE_TIMEOUT_S=50 \
  PROBE_CMDS="VLATTN_ATTN_SPLIT_KEYS=1 $P; VLATTN_ATTN_SPLIT_KEYS=2 $P; VLATTN_ATTN_SPLIT_KEYS=0 $P; VLATTN_ATTN_SPLIT_KEYS=1 $P; VLATTN_ATTN_SPLIT_KEYS=2 $P; VLATTN_ATTN_SPLIT_KEYS=0 $P" \
  scripts/gpu_check.sh probe
case $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1) in
  *H200*)
    [ -n "${SKIP_EPI:-}" ] || {
    B='python3 -m vlattn.bench --mode layers --baselines "" --backends native --iters 40 --warmup 3 --rounds 4 --no-check'
    OUT=$R/epi VLATTN_COMMIT=$A CALL_BUDGET_S=90 PROBE_TIMEOUT_S=80 \
      PROBE_CMDS="$B --switch VLATTN_QKV_GEMM_EPI=1,0 --workloads 007:3,007:13,007:2,007:12,007:7,007:1,007:4 --json \$OUT/epi.json; PYTHONPATH=python python3 bench/ab_summary.py \$OUT/epi.json" \
      scripts/gpu_check.sh probe; }
    README_BUDGET_S=${README_BUDGET_S:-300} bash bench/pending/readme_run.sh "$A" call59b ;;
  *) echo "call59b: not an H200: the timeline only" ;;
esac
cd "$R" && tar czf all59.tar.gz $(ls -d tl epi readme 2>/dev/null)
