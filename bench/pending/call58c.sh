#!/usr/bin/env bash
# The fifty-eighth session's confirmation of call58b's audit hits (any GPU): each switch in one process, 40 calls per
# column over 4 rounds, on the hit workloads and their neighbours:
#   VLATTN_QKV_GEMM_EPI=1,0     007 from 4096 rows (B32 S128 read 0.954 graph / 0.948 eager with the pass; B32 S256, B64 S256 0.974 graph)
#   VLATTN_ATTN_SPLIT_KEYS=1,0  007 B1 S256 (0.963 / 0.929 without the split-key kernel), B1 S128, 034 B2 Lq128
#   VLATTN_ATTN_PERSISTENT=1,2  034 B2 Lq128 (0.974 / 0.942 on the persistent grid), B2 Lq256
#
#   run(command="bash bench/pending/call58c.sh <sha>", carry=[".whl", "prebuilt"])
set -uo pipefail
A=${1:?sha}
R=${OUT:?OUT}
cd "$(dirname "$0")/../.."
B='python3 -m vlattn.bench --mode layers --baselines "" --backends native --iters 40 --warmup 3 --rounds 4 --no-check'
C="$B --switch VLATTN_QKV_GEMM_EPI=1,0 --workloads 007:3,007:13,007:2,007:12,007:7,007:1,007:4 --json \$OUT/epi.json"
C="$C; $B --switch VLATTN_ATTN_SPLIT_KEYS=1,0 --workloads 007:15,007:10,034:15 --json \$OUT/splitkeys.json"
C="$C; $B --switch VLATTN_ATTN_PERSISTENT=1,2 --workloads 034:15,034:0 --json \$OUT/persistent.json"
C="$C; python3 bench/rule_audit.py --min-gain 0.01 \$OUT/epi.json \$OUT/splitkeys.json \$OUT/persistent.json"
C="$C; PYTHONPATH=python python3 bench/ab_summary.py \$OUT/epi.json; PYTHONPATH=python python3 bench/ab_summary.py \$OUT/splitkeys.json; PYTHONPATH=python python3 bench/ab_summary.py \$OUT/persistent.json"
OUT=$R/confirm VLATTN_COMMIT=$A CALL_BUDGET_S=${CONFIRM_BUDGET_S:-400} PROBE_TIMEOUT_S=200 PROBE_CMDS="$C" \
  scripts/gpu_check.sh probe
cd "$R" && tar czf all.tar.gz confirm
