#!/usr/bin/env bash
# The persistent GEMM's tile order (raster, swizzle) on the large projection shapes: one tuner run
# per setting of the development knobs VLATTN_GEMM_RASTER / VLATTN_GEMM_SWIZZLE (csrc/launch/
# gemm_params.h), each in its own process (the knobs are read once per process).
#   bench/probe_tile_order.sh [config] [min-m] [iters]
set -uo pipefail
config=${1:-t128x256x64_c2x1_coop}
min_m=${2:-8192}
iters=${3:-10}
for setting in "" VLATTN_GEMM_RASTER=m VLATTN_GEMM_RASTER=n VLATTN_GEMM_SWIZZLE=2 VLATTN_GEMM_SWIZZLE=4 \
               VLATTN_GEMM_SWIZZLE=8; do
  echo "== tile order: ${setting:-default (heuristic raster, swizzle 1)}"
  # shellcheck disable=SC2086
  env $setting python3 -m vlattn.tune --iters "$iters" --warmup 3 --min-m "$min_m" --configs "$config" \
    --out "/tmp/tile_order_${setting:-default}.json" | grep -v "^wrote"
  python3 - "/tmp/tile_order_${setting:-default}.json" "$config" <<'PY'
import json, sys
t = json.load(open(sys.argv[1]))["timings"]
ours = sum(v["us"][sys.argv[2]] or float("nan") for v in t.values())
cub = sum(v["cublas_us"] for v in t.values())
print(f"   sum over {len(t)} shapes: ours {ours:.1f} us, cuBLAS {cub:.1f} us, x cuBLAS {cub / ours:.3f}")
PY
done
