#!/usr/bin/env bash
# The fifty-eighth session's check of the split-key rule change (0e1d9d0: masked or causal launches split only at one
# key tile), any GPU, then the README run on an H200 only:
#
#   run(command="bash bench/pending/call58d.sh <sha>", carry=[".whl", "prebuilt"], kind="nvidia-h200")
#
# 1. Tests: the split-key and launch-plan tests, the layers' benchmark-rule tests at the short 007 shapes, test_cpp.
# 2. In one process, --switch VLATTN_ATTN_SPLIT_KEYS=1,2 (2 = the rule before the change) on 007 B1 S256, B1 S128 and
#    034 B2 Lq128. Prediction: B1 S256 -3 us in graph replay and eager (63 against 66: call58c's 0-against-1 reading);
#    B1 S128 and B2 Lq128 within +-1% (the same plan in both arms).
# 3. On an H200: the README's layers run (bench/pending/readme_run.sh); on another GPU: set C of the rule audit
#    (bench/pending/call58b.sh), under $OUT/c.
set -uo pipefail
A=${1:?sha}
R=${OUT:?OUT}
cd "$(dirname "$0")/../.."
B='python3 -m vlattn.bench --mode layers --baselines "" --backends native --iters 40 --warmup 3 --rounds 4 --no-check'
OUT=$R/sk VLATTN_COMMIT=$A CALL_BUDGET_S=${SK_BUDGET_S:-200} TEST_TIMEOUT_S=120 PROBE_TIMEOUT_S=60 \
  PROBE_CMDS="$B --switch VLATTN_ATTN_SPLIT_KEYS=1,2 --workloads 007:15,007:10,034:15 --json \$OUT/sk.json; PYTHONPATH=python python3 bench/ab_summary.py \$OUT/sk.json" \
  scripts/gpu_check.sh probe -p no:cacheprovider tests/test_attention.py tests/test_ops.py tests/test_cpp.py \
  -k "split_keys or launch_plan or cpp or (benchmark_rule and 007 and native) or fp32_rule"
case $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1) in
  *H200*) README_BUDGET_S=${README_BUDGET_S:-300} bash bench/pending/readme_run.sh "$A" call58d ;;
  *) OUT=$R/c AUDIT_BUDGET_S=${AUDIT_BUDGET_S:-320} bash bench/pending/call58b.sh "$A" C ;;
esac
cd "$R" && tar czf all.tar.gz $(ls -d sk readme c 2>/dev/null)
