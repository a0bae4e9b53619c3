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

from typing import Iterable

from .gemm_configs import BY_NAME, DEFAULT_CONFIG, GEMM_CONFIGS, GemmConfig

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


# Relative mainloop throughput of a full tile, by (tile, schedule). Calibrated on the H200 smoke run
# of 2026-11-30 (all four configs timed on 7 projection shapes, cold L2; bench/NOTES.md): with these,
# the wave model below picks the measured-best persistent config on every one of those shapes.
_TILE_EFFICIENCY = {
    ((128, 256, 64), "cooperative"): 1.0,
    ((128, 128, 64), "cooperative"): 0.95,
    ((64, 128, 64), "pingpong"): 0.85,
}


def estimated_cost(config: GemmConfig, m: int, n: int, sm_count: int) -> float:
    """Wave model: whole waves of persistent tiles, each costing its area over its efficiency.
    Partial last waves cost a full wave, which is what makes 541 x 3584 (140 tiles of 128x128 on
    132 SMs) slow with 128x128 and fast with 64x128."""
    tm, tn, _ = config.tile
    tiles = math.ceil(m / tm) * math.ceil(n / tn)
    waves = math.ceil(tiles / sm_count)
    return waves * tm * tn / _TILE_EFFICIENCY.get((config.tile, config.schedule), 0.9)


def analytic_config(m: int, n: int, k: int, sm_count: int, candidates: Iterable[str] | None = None) -> str | None:
    """The persistent config with the lowest wave-model cost among ``candidates`` (default: all).

    Stream-K is left to the tuned table: on every small-M shape measured (M = 128..541) the 64x128
    ping-pong tile was faster (e.g. 128x3584x3584: 18.6 µs vs 27.3 µs stream-K, 2026-11-30)."""
    allowed = set(BY_NAME if candidates is None else candidates)
    pool = [c for c in GEMM_CONFIGS if c.scheduler == "persistent" and c.name in allowed]
    if not pool:
        return None
    return min(pool, key=lambda c: (estimated_cost(c, m, n, sm_count), c.name != DEFAULT_CONFIG)).name


@functools.lru_cache(maxsize=4096)
def select_gemm_config(m: int, n: int, k: int, sm_count: int, compiled: frozenset[str]) -> str:
    """`compiled`: the config names this build has (VLATTN_GEMM_CONFIGS can build a subset)."""
    name = tuned_table().get((m, n, k))
    source = "tuned"
    if name is None or name not in compiled:
        name, source = analytic_config(m, n, k, sm_count, compiled), "analytic"
    if name is None:  # nothing persistent compiled: only stream-K builds
        name, source = (DEFAULT_CONFIG if DEFAULT_CONFIG in compiled else min(compiled)), "default"
    if _log_enabled():
        print(f"vlattn: gemm M={m} N={n} K={k} -> {name} ({source})", file=sys.stderr)
    return name
