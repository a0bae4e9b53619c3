#!/usr/bin/env bash
# The sixty-first session, one device call, any GPU:
#
#   run(command="bash bench/pending/call61.sh <sha>", carry=[".whl", "prebuilt"])
#
# On an H200: call60.sh's README run and epilogue A/B (the table is still d0279b1's), nothing else.
# On an H100: the GEMM tuner over every projection shape and config (`python3 -m vlattn.tune`, ~60 s), then the GEMM
# mode of the bench (`--mode gemm`, cuBLAS in the same process). Neither has ever run on an H100: the dispatcher
# applies the H200's tuned table there. Prediction (bench/NOTES.md, sixty-first session): the H100 tuner's winner
# equals the H200 table's entry on >= 7 of its 9 shapes, and no shape outside the table has a config >= 5% faster
# than the analytic pick; vlattn.linear 0.95-0.99x cuBLAS geomean on the H100.
# Only all61.tar.gz comes back.
set -uo pipefail
A=${1:?sha}
R=${OUT:?OUT}
cd "$(dirname "$0")/../.."
case $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1) in
  *H200*) PROBE_SKIP=1 bash bench/pending/call60.sh "$A"; exit ;;
  *)
    OUT=$R/gemm VLATTN_COMMIT=$A CALL_BUDGET_S=330 PROBE_TIMEOUT_S=300 \
      PROBE_CMDS="python3 -m vlattn.tune --out \$OUT/tune_h100.json; python3 -m vlattn.bench --mode gemm --json \$OUT/gemm_h100.json --plot \$OUT/gemm_h100.png" \
      scripts/gpu_check.sh probe ;;
esac
cd "$R" && d=$(ls -d gemm 2>/dev/null; true) && [ -n "$d" ] && tar czf all61.tar.gz $d && rm -rf $d
