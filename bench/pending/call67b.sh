#!/usr/bin/env bash
# The sixty-seventh session, second call, any GPU (kind nvidia-h200; carry [".whl"]; builds on the device):
#
#   run(command="bash bench/pending/call67b.sh <sha>", carry=[".whl"], kind="nvidia-h200")
#
# The RoPE-epilogue tile from 8192 rows, in one process (prediction in bench/NOTES.md, sixty-seventh session):
# `--switch VLATTN_QKV_GEMM_EPI=1,5,3` (1 the rule: 128 x 128 ping-pong from 8192 rows; 5 the rule with the
# 128 x 256 cooperative tile there; 3 the cooperative tile for every group that can take it, from 4096 rows) on the
# layers whose QKV launches have >= 4096 rows, graph replay and eager, 4 rounds. Tests first: test_qkv's
# epilogue tests (the cooperative tile's exactness and bit-neutrality); then the 32 layers' benchmark rule under
# VLATTN_QKV_GEMM_EPI=5. Short budget: ARMS=1,5, WL=<fewer workloads>, RULE_SKIP=1 (the second part out), TESTS_SKIP=1
# (no tests before the A/B).
set -uo pipefail
A=${1:?sha}
R=${OUT:?OUT}
cd "$(dirname "$0")/../.."
TARGS=(tests/test_qkv.py -k epilogue)
[ -z "${TESTS_SKIP:-}" ] || TARGS=()
L='python3 -m vlattn.bench --mode layers --baselines "" --backends native --iters 30 --warmup 3 --rounds 4 --no-check'
OUT=$R/tile VLATTN_COMMIT=$A CALL_BUDGET_S=540 PROBE_TIMEOUT_S=240 TEST_TIMEOUT_S=120 \
  PROBE_CMDS="$L --switch VLATTN_QKV_GEMM_EPI=${ARMS:-1,5,3} --workloads ${WL:-007:1,007:7,007:4,034:1,034:12,034:10,034:4,007:12,007:13,007:2,034:5} --json \$OUT/tile_ab.json; PYTHONPATH=python python3 bench/ab_summary.py \$OUT/tile_ab.json" \
  scripts/gpu_check.sh probe "${TARGS[@]}"
# Then the 32 layers' benchmark rule with mode 5 as the rule would make it (the cooperative tile from 8192 rows).
[ -n "${RULE_SKIP:-}" ] || OUT=$R/tile5 VLATTN_COMMIT=$A VLATTN_QKV_GEMM_EPI=5 CALL_BUDGET_S=200 TEST_TIMEOUT_S=180 \
  scripts/gpu_check.sh probe tests/test_ops.py -k "benchmark_rule and native"
(cd "$R" && tar czf tile67.tar.gz tile $(ls -d tile5 2>/dev/null) && rm -rf tile tile5)
