#!/usr/bin/env bash
# The fifty-seventh session's A/B of the layer scratch block (VLATTN_LAYER_SCRATCH, csrc/ops/scratch.h), one call
# from the branch carrying the change, with its module slot in prebuilt/:
#
#   run(command="bash bench/pending/call57b.sh <sha>", carry=[".whl", "prebuilt"])
#
# 1. The scratch test, the dev-switch tests and the layers' graph / token-major / out= tests.
# 2. probe_host, one process per arm, 0 1 0 1 (host: GPU held busy, so the host path alone; gpu; cold = the bench's
#    timer; graph), on seven small layers.
# 3. The bench's layers mode, native only, --switch VLATTN_LAYER_SCRATCH=1,0 in one process (eager and graph
#    replay per value, interleaved), on the twelve layers below ~1600 rows.
# 4. The whole GPU suite (SUITE_JOBS=3).
# Predictions (bench/NOTES.md, fifty-seventh session): probe_host host column -6 to -12 us per layer; gpu and graph
# +-1 us; the bench's eager -3 to -10 us on the host-bound small layers of a slow host, ~0 on a fast one.
set -uo pipefail
A=${1:?sha}
R=${OUT:?OUT}
cd "$(dirname "$0")/../.."
H="python3 bench/probe_host.py --iters 30 --workloads 007:10,007:15,007:8,007:6,034:15,034:0,034:2"
B='python3 -m vlattn.bench --mode layers --baselines "" --switch VLATTN_LAYER_SCRATCH=1,0 --workloads 007:10,007:15,007:0,007:8,007:11,007:6,034:15,034:0,034:2,034:8,034:7,034:11 --json $OUT/ab.json'
OUT=$R/ab VLATTN_COMMIT=$A CALL_BUDGET_S=${AB_BUDGET_S:-330} TEST_TIMEOUT_S=150 PROBE_TIMEOUT_S=120 \
  PROBE_CMDS="VLATTN_LAYER_SCRATCH=0 $H; VLATTN_LAYER_SCRATCH=1 $H; VLATTN_LAYER_SCRATCH=0 $H; VLATTN_LAYER_SCRATCH=1 $H; $B" \
  scripts/gpu_check.sh probe -p no:cacheprovider tests/test_dev.py tests/test_ops.py \
  -k "scratch or switch or environment or cuda_graph or v_token_major or grouped_tail or native_out or opcheck_layers"
OUT=$R/suite VLATTN_COMMIT=$A CALL_BUDGET_S=${SUITE_BUDGET_S:-250} SUITE_JOBS=3 TEST_TIMEOUT_S=230 \
  scripts/gpu_check.sh test -p no:cacheprovider
cd "$R" && tar czf all.tar.gz ab suite
