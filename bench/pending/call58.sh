#!/usr/bin/env bash
# The fifty-eighth session's first measuring call (any GPU), from main's module in prebuilt/:
#
#   run(command="bash bench/pending/call58.sh <sha>", carry=[".whl", "prebuilt"])
#
# 1. compute-sanitizer racecheck and memcheck on the split-key attention kernel (its shared-memory exchange between
#    the two consumer warpgroups had not been raced since it landed in the fifty-fifth session): the 64-key build
#    (007 B1 S128), the 128-key build (007 B1 S256), 034 B2 Lq128 (unmasked, a tail tile), the Sq 65 edge.
# 2. Two stale-rule A/Bs in one process each (graph replay and eager per value, interleaved; native only):
#    - VLATTN_QKV_EPI_POS1D=1,2 on the four 034 layers whose q launch has >= 8192 rows (B64 Lq256, B32 Lq373,
#      B16 Lq512, Lq 8192): 034's q on the 128 x 256 cooperative epilogue tile instead of 128 x 128 ping-pong.
#      Last measured in the thirty-first session (timeline: B64 Lq256's q 47 us faster; layers did not follow).
#    - VLATTN_ATTN_TAIL_SPLIT=1,2 on 034 Lq 4096 (the split was a loss there in the forty-first session, before
#      the forty-fourth session's faster combine kernel).
# Then the README run on an H200 only (bench/pending/readme_run.sh) when README=1.
set -uo pipefail
A=${1:?sha}
R=${OUT:?OUT}
cd "$(dirname "$0")/../.."
T=tests/test_attention.py::test_split_keys_kernel_matches_reference
S="$T[B1_Hq28_Hkv4_Sq128_Sk128_causal_min_cFalse_bFalse] $T[B1_Hq28_Hkv4_Sq256_Sk256_causal_min_cFalse_bFalse]"
S="$S $T[B2_Hq32_Hkv8_Sq128_Sk196_None_cFalse_bFalse] $T[B2_Hq8_Hkv2_Sq65_Sk40_random_cTrue_bFalse]"
OUT=$R/san VLATTN_COMMIT=$A CALL_BUDGET_S=${SAN_BUDGET_S:-150} SANITIZE_TIMEOUT_S=120 SANITIZE_TOOLS="racecheck memcheck" \
  SANITIZE_TESTS="$S" scripts/gpu_check.sh sanitize
B='python3 -m vlattn.bench --mode layers --baselines "" --backends native --iters 20 --rounds 4'
OUT=$R/ab VLATTN_COMMIT=$A CALL_BUDGET_S=${AB_BUDGET_S:-330} PROBE_TIMEOUT_S=300 \
  PROBE_CMDS="$B --switch VLATTN_QKV_EPI_POS1D=1,2 --workloads 034:1,034:12,034:4,034:10 --json \$OUT/pos1d.json; $B --switch VLATTN_ATTN_TAIL_SPLIT=1,2 --workloads 034:5 --json \$OUT/tail.json" \
  scripts/gpu_check.sh probe
[ "${README:-0}" = 1 ] && README_BUDGET_S=${README_BUDGET_S:-280} bash bench/pending/readme_run.sh "$A" call58
cd "$R" && tar czf all.tar.gz $(ls -d san ab readme 2>/dev/null)
