#!/usr/bin/env bash
# The fifty-eighth session's last call: on an H200 the README's layers run (bench/pending/readme_run.sh); on any other
# GPU the whole GPU suite on main's final module instead (SUITE_JOBS=3).
#
#   run(command="bash bench/pending/call58f.sh <sha>", carry=[".whl", "prebuilt"], kind="nvidia-h200")
set -uo pipefail
A=${1:?sha}
R=${OUT:?OUT}
cd "$(dirname "$0")/../.."
case $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1) in
  *H200*) README_BUDGET_S=${README_BUDGET_S:-330} bash bench/pending/readme_run.sh "$A" call58f ;;
  *) OUT=$R/suite VLATTN_COMMIT=$A CALL_BUDGET_S=${SUITE_BUDGET_S:-330} SUITE_JOBS=3 TEST_TIMEOUT_S=300 \
       scripts/gpu_check.sh test -p no:cacheprovider ;;
esac
cd "$R" && tar czf all.tar.gz $(ls -d readme suite 2>/dev/null)
