#!/usr/bin/env bash
# The sixtieth session, one device call, any GPU:
#
#   run(command="bash bench/pending/call60.sh <sha>", carry=[".whl", "prebuilt"], kind="nvidia-h200")
#
# On an H200: the README run (readme_run.sh, ~300 s), then the epilogue A/B (`--switch VLATTN_QKV_GEMM_EPI=1,0` on
# 007's 4096+ row layers, ~90 s; the H100 read the RoPE pass 1-2% faster there, the H200 had measured the opposite).
# On any GPU: the placement probe (call59c.sh: bench/micro/launch_probe.cu section 4, ~40 s; its prediction is there).
# README_SKIP=1 / EPI_SKIP=1 / PROBE_SKIP=1 leave those parts out (a short call when little device time is left;
# the probe was measured on an H100 in the sixtieth session, so the sixty-first skips it).
# Only all60.tar.gz comes back (the device returns at most 8 files).
set -uo pipefail
A=${1:?sha}
R=${OUT:?OUT}
cd "$(dirname "$0")/../.."
[ -n "${PROBE_SKIP:-}" ] || { mkdir -p "$R/probe" && OUT=$R/probe timeout 120 bash bench/pending/call59c.sh; }
case $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1) in
  *H200*)
    [ -n "${README_SKIP:-}" ] || README_BUDGET_S=${README_BUDGET_S:-300} bash bench/pending/readme_run.sh "$A" call60
    L='python3 -m vlattn.bench --mode layers --baselines "" --backends native --iters 40 --warmup 3 --rounds 4 --no-check'
    [ -n "${EPI_SKIP:-}" ] || OUT=$R/epi VLATTN_COMMIT=$A CALL_BUDGET_S=90 PROBE_TIMEOUT_S=80 \
      PROBE_CMDS="$L --switch VLATTN_QKV_GEMM_EPI=1,0 --workloads 007:3,007:13,007:2,007:12,007:7,007:1,007:4 --json \$OUT/epi.json; PYTHONPATH=python python3 bench/ab_summary.py \$OUT/epi.json" \
      scripts/gpu_check.sh probe ;;
  *) echo "call60: not an H200: no README run, no epilogue A/B" ;;
esac
cd "$R" && d=$(ls -d readme epi probe 2>/dev/null; true) && tar czf all60.tar.gz $d && rm -rf $d
