#!/usr/bin/env bash
# Which kernel cuBLAS runs (name = tile, stages, cluster, split) and its time, for each "M N K [bias]"
# argument, no extension build needed: PYTHONPATH=python bench/ncu_cublas_shapes.sh "392 1024 4096 bias" ...
# (a loop, so it lives in a script: gpu_check.sh splits PROBE_CMDS at every ';').
set -u
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD/python${PYTHONPATH:+:$PYTHONPATH}"
for shape in "$@"; do
  echo "=== $shape"
  # shellcheck disable=SC2086
  ncu -k regex:'nvjet|gemm|xmma|splitK|reduce|Kernel' --launch-count 6 \
    --metrics gpu__time_duration.sum,launch__grid_size,launch__block_size,launch__cluster_dim_x,launch__cluster_dim_y \
    python3 bench/ncu_target.py cublas-mnk $shape 2>&1 | grep -E 'Context|gpu__time|grid_size|block_size|cluster_dim|==ERR'
done
