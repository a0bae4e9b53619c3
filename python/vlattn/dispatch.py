"""Shape -> GEMM config, in the order: memo -> tuned table -> analytic fallback -> safe default.

The tuned table (data/gemm_tuned_h200.json) maps "M,N,K" to a config name measured best on an
H200; `VLATTN_LOG=1` prints each decision once. Config names come from gemm_configs.py, the same
list setup.py compiled.
"""
from __future__ import annotations

import functools
import json
import math
import os
import sys
from importlib import resources

from .gemm_configs import BY_NAME, DEFAULT_CONFIG

_TUNED_FILE = "gemm_tuned_h200.json"


def _log_enabled() -> bool:
    return os.environ.get("VLATTN_LOG", "") not in ("", "0")


@functools.lru_cache(maxsize=None)
def tuned_table() -> dict[tuple[int, int, int], str]:
    """Entries of the committed tuned table whose config is still in gemm_configs.py."""
    try:
        text = resources.files("vlattn").joinpath("data", _TUNED_FILE).read_text()
    except (FileNotFoundError, OSError):
        return {}
    table = {}
    for key, name in json.loads(text).get("entries", {}).items():
        if name in BY_NAME:
            m, n, k = (int(v) for v in key.split(","))
            table[(m, n, k)] = name
    return table


def _tiles(m: int, n: int, tile: tuple[int, int, int]) -> int:
    return math.ceil(m / tile[0]) * math.ceil(n / tile[1])


def analytic_config(m: int, n: int, k: int, sm_count: int) -> str:
    """Wave-count heuristic until the tuned table covers a shape.

    - Fewer 128x128 tiles than half the SMs: most SMs would idle while the weights stream, so
      split K (stream-K) to put every SM on a share of the K loop.
    - Enough 128x256 tiles for a full wave: the larger tile re-reads A half as often.
    - Under one wave of 128x128 tiles: 64x128 ping-pong doubles the tile count.
    """
    if _tiles(m, n, (128, 128, 64)) * 2 <= sm_count and k >= 1024:
        return "t128x128x64_c1x1_coop_streamk"
    if _tiles(m, n, (128, 256, 64)) >= sm_count:
        return "t128x256x64_c1x1_coop"
    if _tiles(m, n, (128, 128, 64)) < sm_count:
        return "t64x128x64_c1x1_pingpong"
    return DEFAULT_CONFIG


@functools.lru_cache(maxsize=4096)
def select_gemm_config(m: int, n: int, k: int, sm_count: int, compiled: frozenset[str]) -> str:
    """`compiled`: the config names this build has (VLATTN_GEMM_CONFIGS can build a subset)."""
    name = tuned_table().get((m, n, k))
    source = "tuned"
    if name is None or name not in compiled:
        name, source = analytic_config(m, n, k, sm_count), "analytic"
    if name not in compiled:
        name, source = (DEFAULT_CONFIG if DEFAULT_CONFIG in compiled else min(compiled)), "default"
    if _log_enabled():
        print(f"vlattn: gemm M={m} N={n} K={k} -> {name} ({source})", file=sys.stderr)
    return name
