#!/usr/bin/env bash
# The fifty-seventh session's third A/B call: the layer scratch block's cap (VLATTN_LAYER_SCRATCH=N: an N MB cap),
# from the branch scratchcap carrying its module slot in prebuilt/:
#
#   run(command="bash bench/pending/call57c.sh <sha>", carry=[".whl", "prebuilt"], kind="nvidia-h200")
#
# 1. The scratch and dev-switch tests.
# 2. The bench's layers mode, native only, --switch VLATTN_LAYER_SCRATCH=128,1 on the eight layers whose bound lies
#    between 64 and 128 MB (007 at 4096 rows; 034 at 2048-2164 text rows), twice (two processes, two seeds).
# 3. On an H200 only: the README run (the default is unchanged on this branch: the cap stays 64 MB).
# Prediction (bench/NOTES.md, fifty-seventh session): eager -2 to -8 us per layer with the 128 MB cap (the first
# launch's allocations leave the lead), graph +-1%; kept only if the eight's eager sum falls >= 0.5% in both runs.
set -uo pipefail
A=${1:?sha}
R=${OUT:?OUT}
cd "$(dirname "$0")/../.."
B='python3 -m vlattn.bench --mode layers --baselines "" --switch VLATTN_LAYER_SCRATCH=128,1 --workloads 007:3,007:13,007:2,034:14,034:9,034:13,034:3,034:6'
OUT=$R/ab VLATTN_COMMIT=$A CALL_BUDGET_S=${AB_BUDGET_S:-200} TEST_TIMEOUT_S=90 PROBE_TIMEOUT_S=80 \
  PROBE_CMDS="$B --seed 1 --json \$OUT/ab1.json; $B --seed 2 --json \$OUT/ab2.json" \
  scripts/gpu_check.sh probe -p no:cacheprovider tests/test_dev.py tests/test_ops.py -k "scratch or switch or environment"
bash bench/pending/readme_run.sh "$A" call57c
cd "$R" && tar czf all.tar.gz $(ls -d ab readme 2>/dev/null)
