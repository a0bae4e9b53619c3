#!/usr/bin/env bash
# Where a small-M GEMM's time goes, ours against cuBLAS, on one "M N K bias" shape per argument:
# Nsight Compute's speed-of-light, memory and warp-state sections (caches flushed before each profiled
# kernel, clocks left alone), for cuBLAS's kernels and for vlattn.linear's pick.
#   PYTHONPATH=python bench/ncu_small_m.sh "392 1024 4096 bias" "128 512 3584 bias"
# (a loop, so it lives in a script: gpu_check.sh splits PROBE_CMDS at every ';').
set -u
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD/python${PYTHONPATH:+:$PYTHONPATH}"
for shape in "$@"; do
  for who in cublas-mnk linear-mnk; do
    echo "=== $who $shape"
    # shellcheck disable=SC2086
    ncu --clock-control none -k regex:'nvjet|gemm|xmma|splitK|reduce|Kernel|Sm90|cutlass|device_kernel' \
      --launch-skip 1 --launch-count 1 --section SpeedOfLight --section MemoryWorkloadAnalysis \
      --section LaunchStats --section WarpStateStats --section SchedulerStats \
      python3 bench/ncu_target.py $who $shape 2>&1 | grep -E '^  [A-Za-z_].*Context|Section:|^    [A-Za-z].*  +[-0-9.,]+$|==ERR|rror' | head -80
  done
done
