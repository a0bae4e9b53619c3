#!/usr/bin/env bash
# The rule audit (any GPU; first run in the fifty-eighth session): each dispatch switch against its rule on all 32
# workloads, one process per switch (eager and graph replay per value, interleaved), then bench/rule_audit.py's screen:
#
#   run(command="bash bench/rule_audit.sh <sha> [A|B|C]", carry=[".whl", "prebuilt"])
#
# Set A: the stream, persistent-grid, resident-kernel, key-width and RoPE-table rules; set B: the tuned table, the
# pair's waves, the split-key kernel, the epilogue GEMM, lean ZERO tiles, the grouped plan's upper bound; set C: the
# op-level plans, the merged RoPE pass, token-major v, the staged mask, the resident kernel's three switches, PDL, the
# grouped plan's and the GEMM path's lower bounds, 034's q on the epilogue GEMM, GQA packing.
# Prediction (bench/NOTES.md, fifty-eighth session): no alternative faster by >= 2% in both graph replay and eager on
# any workload, except where a rule's own comment names a near tie.
set -uo pipefail
A=${1:?sha}
SET=${2:-A}
R=${OUT:?OUT}
cd "$(dirname "$0")/.."
B='python3 -m vlattn.bench --mode layers --baselines "" --backends native --iters 10 --warmup 2 --rounds 2 --no-check --warmup-s 1'
if [ "$SET" = A ]; then
  SW="VLATTN_QKV_GEMM_STREAMS=1,0,2 VLATTN_ATTN_PERSISTENT=1,0,2 VLATTN_ATTN_RESIDENT=1,0,2 VLATTN_ATTN_BN=0,1 VLATTN_QKV_ROPE_TABLE=1,0,2"
elif [ "$SET" = C ]; then
  SW="VLATTN_QKV_PLAN=1,0 VLATTN_QKV_ROPE_MERGE=1,0 VLATTN_QKV_V_TOKEN_MAJOR=1,0 VLATTN_ATTN_MASK_SMEM=1,0 VLATTN_ATTN_DIAG_HALF=1,0 VLATTN_ATTN_TMA_O=1,0 VLATTN_ATTN_WALK_CACHE=1,0 VLATTN_PDL=1,0 VLATTN_QKV_GROUPED_MIN_M=129,257,513 VLATTN_QKV_GEMM_MIN_M=1024,512,2048 VLATTN_QKV_EPI_POS1D=1,0 VLATTN_ATTN_PACK=0,1"
else
  SW="VLATTN_QKV_TUNED=1,0 VLATTN_QKV_PAIR_WAVES=1,0 VLATTN_ATTN_SPLIT_KEYS=1,0,2 VLATTN_QKV_GEMM_EPI=1,0 VLATTN_ATTN_LEAN_ZERO=1,0,2 VLATTN_QKV_GROUPED_MAX_M=1024,2048"
fi
CMDS=""
for s in $SW; do
  n=${s%%=*}
  CMDS="$CMDS$B --switch $s --json \$OUT/audit_${n#VLATTN_}.json; "
done
CMDS="${CMDS}python3 bench/rule_audit.py \$OUT/audit_*.json > \$OUT/audit.txt; cat \$OUT/audit.txt"
OUT=$R/audit VLATTN_COMMIT=$A CALL_BUDGET_S=${AUDIT_BUDGET_S:-540} PROBE_TIMEOUT_S=${SWEEP_TIMEOUT_S:-100} PROBE_CMDS="$CMDS" \
  scripts/gpu_check.sh probe
cd "$R" && tar czf all.tar.gz audit
