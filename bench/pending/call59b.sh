#!/usr/bin/env bash
# The fifty-ninth session: why the split-key attention kernel, faster alone (ncu: 007 B1 S256 11.9 against 13.6 us,
# 034 B2 Lq128 ~5 us), is no faster or slower inside the layer chain (fifty-eighth session). Replaces call59.sh
# (written in the fifty-eighth session, never run; its epilogue A/B is EPI_AB=1 here).
#
#   run(command="bash bench/pending/call59b.sh <sha>", carry=[".whl", "prebuilt"], kind="nvidia-h200")
#
# On an H200 first the README run (bench/pending/readme_run.sh, ~300 s; README_SKIP=1 leaves it out), and with
# EPI_AB=1 `--switch VLATTN_QKV_GEMM_EPI=1,0` on 007's 4096+ row layers (~90 s: the H100 read the RoPE pass 1-2% faster
# than the epilogue GEMM at 4096 rows, where the H200 had measured the opposite). Then, on any GPU:
# 1. In-process A/B, 007 B1 S256 and 034 B2 Lq128, VLATTN_ATTN_SPLIT_KEYS = 2 (split keys at both) against 0 (the
#    staged per-unit kernel at both), once with PDL (the default) and once with VLATTN_PDL=0.
#    Prediction (the reading that the PDL-launched O projection parks its CTAs on the SMs the split-key grid leaves
#    free: 20 of 132 at B1 S256, 4 at B2 Lq128): with PDL, split - staged ~ +3 us (007) and ~ 0 (034); without PDL
#    the split-key kernel's lead alone shows: split - staged <= -1 us at both. Refuted if split - staged is the same
#    (within 1 us) with and without PDL at both layers. (Run on an H100 in the fifty-ninth session: confirmed.)
# 2. probe_timeline, graph replay, both layers, SPLIT_KEYS 2 and 0, one process each: where the time goes. Left out
#    after a README run (the device time is short) unless TL_AFTER_README=1.
# Only all59.tar.gz comes back (the device returns at most 8 files).
set -uo pipefail
A=${1:?sha}
R=${OUT:?OUT}
cd "$(dirname "$0")/../.."
L='python3 -m vlattn.bench --mode layers --baselines "" --backends native --iters 40 --warmup 3 --rounds 4 --no-check'
S='PYTHONPATH=python python3 bench/ab_summary.py'
readme=0
case $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1) in
  *H200*)
    [ -n "${README_SKIP:-}" ] || { readme=1; README_BUDGET_S=${README_BUDGET_S:-300} bash bench/pending/readme_run.sh "$A" call59b; }
    [ -z "${EPI_AB:-}" ] || OUT=$R/epi VLATTN_COMMIT=$A CALL_BUDGET_S=90 PROBE_TIMEOUT_S=80 \
      PROBE_CMDS="$L --switch VLATTN_QKV_GEMM_EPI=1,0 --workloads 007:3,007:13,007:2,007:12,007:7,007:1,007:4 --json \$OUT/epi.json; $S \$OUT/epi.json" \
      scripts/gpu_check.sh probe ;;
  *) echo "call59b: not an H200: no README run" ;;
esac
B="$L --workloads 007:15,034:15 --switch VLATTN_ATTN_SPLIT_KEYS=2,0"
OUT=$R/ab VLATTN_COMMIT=$A CALL_BUDGET_S=${AB_BUDGET_S:-110} PROBE_TIMEOUT_S=45 \
  PROBE_CMDS="$B --json \$OUT/pdl1.json; VLATTN_PDL=0 $B --json \$OUT/pdl0.json; $S \$OUT/pdl1.json; $S \$OUT/pdl0.json" \
  scripts/gpu_check.sh probe
if [ "$readme" = 0 ] || [ -n "${TL_AFTER_README:-}" ]; then
  P='python3 bench/probe_timeline.py --modes graph --reps 7 --workloads 007:15,034:15'
  OUT=$R/tl VLATTN_COMMIT=$A CALL_BUDGET_S=${TL_BUDGET_S:-90} PROBE_TIMEOUT_S=40 \
    PROBE_CMDS="VLATTN_ATTN_SPLIT_KEYS=2 $P; VLATTN_ATTN_SPLIT_KEYS=0 $P" \
    scripts/gpu_check.sh probe
fi
cd "$R" && d=$(ls -d readme epi ab tl 2>/dev/null; true) && tar czf all59.tar.gz $d && rm -rf $d
