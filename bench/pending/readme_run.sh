#!/usr/bin/env bash
# The README's layers run, on an H200 only, for the device-call scripts in bench/pending (called from the repository
# root with OUT set):
#
#   bash bench/pending/readme_run.sh <sha> <name>    # results under $OUT/readme; <name> prefixes the H100 message
#
# Then, here: `python bench/readme_table.py <json>` and the README bullets. README_BUDGET_S caps the call (default 300).
set -uo pipefail
A=${1:?sha}
NAME=${2:?caller name}
R=${OUT:?OUT}
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
case $gpu in
  *H200*)
    budget=${README_BUDGET_S:-300}
    OUT=$R/readme VLATTN_COMMIT=$A CALL_BUDGET_S=$budget PROBE_TIMEOUT_S=$((budget - 30)) \
      PROBE_CMDS='python3 -m vlattn.bench --mode layers --budget-s 200 --json $OUT/layers.json --plot $OUT/layers.png' \
      scripts/gpu_check.sh probe ;;
  *) echo "$NAME: $gpu, not an H200: no README run" ;;
esac
