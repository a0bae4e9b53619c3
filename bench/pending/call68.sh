#!/usr/bin/env bash
# The sixty-eighth session's first device call, any GPU (kind nvidia-h200; carry [".whl", "prebuilt"]):
#
#   run(command="bash bench/pending/call68.sh <sha>", carry=[".whl", "prebuilt"], kind="nvidia-h200")
#
# On an H200: the README run and the tuner (call65.sh PARTS=h200, ~215 s). On any GPU, then: the Q GEMM's RoPE
# epilogue cost with each kernel alone under Nsight Compute (bench/ncu_qkv_kernels.sh: no PDL overlap, no side-stream
# neighbour), VLATTN_QKV_GEMM_EPI 1 (the rule), 0 (plain GEMMs + the RoPE pass), 5 (the rule on the cooperative tile),
# on 007 B64 S256 and 034 B32 Lq373 (sorted index 14 / 13). The thirty-seventh session's H200 ncu run read q 657.8 µs
# with the epilogue against 656.8 plain (007 B64 S256); the sixty-seventh session's timelines read 5–17% between them.
# Timelines carry overlap; this reads the kernels themselves on the current code (~150 s).
set -uo pipefail
A=${1:?sha}
R=${OUT:?OUT}
cd "$(dirname "$0")/../.."
OUT=$R PARTS=h200 bash bench/pending/call65.sh "$A"  # its h200 part runs only on an H200 (elsewhere it says so, ~1 s)
# Then (any GPU) the GPU tests of this session's validation fixes first (tests/test_validation.py's sm_90 cases and
# test_ops.py, ~60 s), then the ncu reads.
# On an H200 (after the README run and the tuner) only the tests fit; the ncu reads run elsewhere.
NCU="bash bench/ncu_qkv_kernels.sh 14 '1 0 5' 007; bash bench/ncu_qkv_kernels.sh 13 '1 0' 034"
case "$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)" in *H200*) NCU= ;; esac
OUT=$R/epi VLATTN_COMMIT=$A CALL_BUDGET_S=${EPI_BUDGET_S:-300} TEST_TIMEOUT_S=120 PROBE_TIMEOUT_S=150 \
  PROBE_CMDS="$NCU" scripts/gpu_check.sh probe tests/test_validation.py tests/test_ops.py
(cd "$R" && tar czf epi68.tar.gz epi && rm -rf epi)
