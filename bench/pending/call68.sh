#!/usr/bin/env bash
# The sixty-eighth session's device call, any GPU (kind nvidia-h200; carry [".whl", "prebuilt"]):
#
#   run(command="bash bench/pending/call68.sh <sha>", carry=[".whl", "prebuilt"], kind="nvidia-h200")
#
# 1. (any GPU, ~100 s) the GPU tests of this session's validation fixes: tests/test_validation.py (its sm_90
#    cases: the native path's layer contract, cos/sin and out= views bitwise against contiguous calls, backward
#    raising), test_qkv.py::test_bad_section_and_split (the refused-config message) and test_ops.py.
# 2. On an H200: the README run and the tuner (call65.sh PARTS=${PARTS68:-h200}, ~215–300 s; a short budget:
#    PARTS68=h200readme). Elsewhere: the Q GEMM's RoPE epilogue cost, each kernel alone under Nsight Compute
#    (bench/ncu_qkv_kernels.sh; VLATTN_QKV_GEMM_EPI 1 / 0 / 5 on 007 B64 S256, 1 / 0 on 034 B32 Lq373, ~150 s). The
#    thirty-seventh session's H200 ncu run read q 657.8 µs with the epilogue against 656.8 plain; the sixty-seventh
#    session's timelines 5–17% (timelines carry overlap).
set -uo pipefail
A=${1:?sha}
R=${OUT:?OUT}
cd "$(dirname "$0")/../.."
OUT=$R/tests VLATTN_COMMIT=$A CALL_BUDGET_S=${TESTS_BUDGET_S:-150} TEST_TIMEOUT_S=$(( ${TESTS_BUDGET_S:-150} - 10 )) \
  scripts/gpu_check.sh probe tests/test_validation.py tests/test_qkv.py::test_bad_section_and_split tests/test_ops.py
(cd "$R" && tar czf tests68.tar.gz tests && rm -rf tests)
case "$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)" in
  *H200*) OUT=$R PARTS=${PARTS68:-h200} bash bench/pending/call65.sh "$A" ;;
  *) OUT=$R/epi VLATTN_COMMIT=$A CALL_BUDGET_S=${EPI_BUDGET_S:-200} PROBE_TIMEOUT_S=150 \
       PROBE_CMDS="bash bench/ncu_qkv_kernels.sh 14 '1 0 5' 007; bash bench/ncu_qkv_kernels.sh 13 '1 0' 034" \
       scripts/gpu_check.sh probe
     (cd "$R" && tar czf epi68.tar.gz epi && rm -rf epi) ;;
esac
