#!/usr/bin/env bash
# The fifty-seventh session's fourth A/B: the K / V pair's second stream from c10's pool (main) or the thread's own
# (VLATTN_QKV_OWN_STREAM=1, read once per process), from the branch ownstream with its slot in prebuilt/:
#
#   run(command="bash bench/pending/call57d.sh <sha>", carry=[".whl", "prebuilt"])
#
# 1. The side-stream and graph tests under VLATTN_QKV_OWN_STREAM=1.
# 2. probe_host --trace, one process per arm, 0 1 0 1, on the side-stream layers (034 B2 Lq128, B2 Lq256, B1 Lq512,
#    B8 Lq128) and one without (007 B1 S512).
# Prediction (bench/NOTES.md): the side GEMM's launch 9.5 -> ~4.5 us, host -3 to -6 us on the four 034 layers,
# 007 unchanged, gpu / graph +-1 us; refuted if the side launch does not drop by >= 2 us in both rounds.
set -uo pipefail
A=${1:?sha}
R=${OUT:?OUT}
cd "$(dirname "$0")/../.."
H="python3 bench/probe_host.py --iters 30 --trace 10 --workloads 034:15,034:0,034:2,034:8,007:8"
OUT=$R/ab VLATTN_COMMIT=$A CALL_BUDGET_S=${AB_BUDGET_S:-300} TEST_TIMEOUT_S=100 PROBE_TIMEOUT_S=60 \
  PROBE_CMDS="VLATTN_QKV_OWN_STREAM=0 $H; VLATTN_QKV_OWN_STREAM=1 $H; VLATTN_QKV_OWN_STREAM=0 $H; VLATTN_QKV_OWN_STREAM=1 $H" \
  VLATTN_QKV_OWN_STREAM=1 scripts/gpu_check.sh probe -p no:cacheprovider tests/test_qkv.py tests/test_ops.py \
  -k "side_stream or cuda_graph or gemm_config or scratch"
cd "$R" && tar czf all.tar.gz ab
