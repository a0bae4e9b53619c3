#!/usr/bin/env bash
# The sixtieth session: the O projection's real GEMM after a predecessor of P CTAs (bench/micro/o_after_spin.py),
# any GPU, ~30 s after the module's install:
#
#   run(command="bash bench/pending/call60c.sh <sha>", carry=[".whl", "prebuilt"])
#
# Prediction: the spin-kernel dependents of launch_probe (sections 4-6) read a flat tail in P and G. If the GEMM's
# late CTAs cost no more than those, "added" stays within +-1 us from P = 28 to P = 132; if it grows by >= 2 us
# from P = 56 to P = 112, the GEMM's CTAs that start after the predecessor pay something a spin kernel does not
# (the prologue, the pipeline's fill), and that is the split-key chain's O tail (bench/NOTES.md, fifty-ninth session).
set -uo pipefail
A=${1:?sha}
R=${OUT:?OUT}
cd "$(dirname "$0")/../.."
NVCC=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
"$NVCC" -O3 -std=c++17 -shared -Xcompiler -fPIC -gencode=arch=compute_90a,code=sm_90a bench/micro/spin_lib.cu -o /tmp/spin_lib.so
VLATTN_COMMIT=$A CALL_BUDGET_S=${CALL_BUDGET_S:-150} PROBE_TIMEOUT_S=90 \
  PROBE_CMDS="python3 bench/micro/o_after_spin.py --lib /tmp/spin_lib.so | tee \$OUT/o_after_spin.log" \
  scripts/gpu_check.sh probe
