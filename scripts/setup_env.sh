#!/usr/bin/env bash
# Fresh machine -> working install: a virtualenv (.venv, or $VENV) with the pinned dependencies and
# vlattn built from this checkout. Needs CUDA 13.0's nvcc (/usr/local/cuda or $CUDA_HOME); no GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-.venv}
if [ ! -x "$VENV/bin/python" ]; then
  "${PYTHON:-python3}" -m venv "$VENV"
fi
"$VENV/bin/python" -m pip install -q -r requirements.txt
export CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
if [ -z "${MAX_JOBS:-}" ]; then
  # One CUTLASS sm_90a GEMM translation unit peaks near 3 GB of compiler memory.
  mem_gb=$(awk '/MemAvailable/ {print int($2 / 1048576)}' /proc/meminfo)
  jobs=$(( mem_gb / 4 )); cores=$(nproc)
  (( jobs > cores )) && jobs=$cores
  (( jobs < 1 )) && jobs=1
  export MAX_JOBS=$jobs
fi
echo "vlattn: building with MAX_JOBS=$MAX_JOBS, CUDA_HOME=$CUDA_HOME"
# --no-build-isolation: compile against the torch in this venv, the one that will load the .so.
"$VENV/bin/python" -m pip install --no-build-isolation --no-deps .
"$VENV/bin/python" -c "import vlattn, json; print('vlattn', vlattn.__version__, json.dumps(vlattn.extension_info()))"
