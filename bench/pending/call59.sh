#!/usr/bin/env bash
# Written in the fifty-eighth session for the next one's first call (one machine start for three questions):
#
#   run(command="bash bench/pending/call59.sh <main sha>", carry=[".whl", "prebuilt"], kind="nvidia-h200")
#
# 1. Any GPU (~70 s): the GPU timeline of 007 B1 S256 with the rule (staged kernel) against split keys forced
#    (bench/pending/call58h.sh: why the split-key kernel, 1.7 us faster alone, is 3 us slower in the layer).
# 2. H200 only (~60 s): --switch VLATTN_QKV_GEMM_EPI=1,0 on 007's 4096+ row layers (the H100 read the RoPE pass 1-2%
#    faster than the epilogue GEMM at 4096 rows, where the H200 had measured the opposite).
# 3. H200 only (~280 s): the README's layers run (bench/pending/readme_run.sh). Then, here, `python
#    bench/readme_table.py <json>` and the README bullets.
set -uo pipefail
A=${1:?sha}
R=${OUT:?OUT}
cd "$(dirname "$0")/../.."
OUT=$R TL_BUDGET_S=90 bash bench/pending/call58h.sh "$A"
case $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1) in
  *H200*)
    B='python3 -m vlattn.bench --mode layers --baselines "" --backends native --iters 40 --warmup 3 --rounds 4 --no-check'
    OUT=$R/epi VLATTN_COMMIT=$A CALL_BUDGET_S=90 PROBE_TIMEOUT_S=80 \
      PROBE_CMDS="$B --switch VLATTN_QKV_GEMM_EPI=1,0 --workloads 007:3,007:13,007:2,007:12,007:7,007:1,007:4 --json \$OUT/epi.json; PYTHONPATH=python python3 bench/ab_summary.py \$OUT/epi.json" \
      scripts/gpu_check.sh probe
    README_BUDGET_S=${README_BUDGET_S:-300} bash bench/pending/readme_run.sh "$A" call59 ;;
  *) echo "call59: not an H200: the timeline only" ;;
esac
cd "$R" && tar czf all59.tar.gz $(ls -d tl epi readme 2>/dev/null)
