"""Where CUTLASS is and the flags every sm_90a translation unit is compiled with: read by setup.py
(the build) and by tests/test_codegen.py (which must compile exactly what ships). A plain module,
loaded by path: no torch, no package import.
"""
from __future__ import annotations

import importlib.util
import os
import pathlib


def cutlass_root() -> pathlib.Path | None:
    """CUTLASS source root (include/, tools/util/include/): $CUTLASS_PATH, else the pinned
    `nvidia-cutlass` wheel's cutlass_library/source; None when neither has include/cutlass/cutlass.h."""
    env = os.environ.get("CUTLASS_PATH")
    if env:
        root = pathlib.Path(env)
    else:
        spec = importlib.util.find_spec("cutlass_library")
        if spec is None or spec.origin is None:
            return None
        root = pathlib.Path(spec.origin).parent / "source"
    return root if (root / "include" / "cutlass" / "cutlass.h").exists() else None


# Every translation unit: CUTLASS's TMA descriptor encodes call cuTensorMapEncodeTiled by name
# (csrc/launch/driver_entry.cpp resolves it once) instead of looking the driver entry point up on
# every encode. The same macro everywhere keeps CUTLASS's inline wrappers one definition.
DIRECT_DRIVER_CALL = "-DCUTLASS_ENABLE_DIRECT_CUDA_DRIVER_CALL=1"

# The nvcc flags that decide the device code (setup.py adds the ABI, line info and warnings).
DEVICE_FLAGS = [
    "-O3",
    "-std=c++17",  # .cu files include only CUTLASS/CuTe (no torch headers); C++17 is its baseline
    "-DNDEBUG",  # FA3: "otherwise performance is severely impacted"
    DIRECT_DRIVER_CALL,
    # wgmma, TMA and setmaxnreg exist only on the arch-specific target; plain sm_90 compiles
    # CUTLASS's sm90 kernels to empty bodies.
    "-gencode=arch=compute_90a,code=sm_90a",
    "--expt-relaxed-constexpr",  # CuTe calls constexpr host functions from device code
    "--expt-extended-lambda",
    # torch adds these to every nvcc call; CUTLASS's bf16/half types need the operators.
    "-U__CUDA_NO_HALF_OPERATORS__",
    "-U__CUDA_NO_HALF_CONVERSIONS__",
    "-U__CUDA_NO_BFLOAT16_CONVERSIONS__",
    "-U__CUDA_NO_HALF2_OPERATORS__",
]
