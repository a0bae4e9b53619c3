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

from .gemm_configs import (BY_NAME, DEFAULT_CONFIG, GEMM_CONFIGS, MIN_KBLOCKS_PER_SPLIT, SPLIT_FIXED_KBLOCKS,
                           SPLIT_STEP_KBLOCKS, SPLITS, TILE_OVERHEAD_KBLOCKS, GemmConfig, is_valid_name, parse_name,
                           split_name)

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
        if is_valid_name(name):
            m, n, k = (int(v) for v in key.split(","))
            table[(m, n, k)] = name
    return table


def estimated_cost(config: GemmConfig, m: int, n: int, k: int, sm_count: int, splits: int = 1) -> float:
    """Wave model, in k-blocks of a 128x128 tile: whole waves of work units (output tiles, times
    `splits` for split-K), each costing its area x (its k-blocks + the tile overhead) over the config's
    efficiency; split-K adds one serialized partial per extra split and a fixed per-call cost. Partial
    last waves cost a full wave, which is what makes 541 x 3584 (140 tiles of 128x128 on 132 SMs)
    slow with 128x128 and fast with 64x128. csrc/ops/linear.cpp (gemm_analytic_pick) is the same
    model in C++: tests/test_gemm.py checks that the two agree."""
    tm, tn, tk = config.tile
    tiles = math.ceil(m / tm) * math.ceil(n / tn)
    k_blocks = max(1, math.ceil(k / tk))
    waves = math.ceil(tiles * splits / sm_count)
    per_unit = math.ceil(k_blocks / splits) + TILE_OVERHEAD_KBLOCKS
    if splits > 1:
        per_unit += SPLIT_STEP_KBLOCKS * (splits - 1)
    cost = waves * (tm * tn / (128 * 128)) * per_unit / config.efficiency
    return cost + (SPLIT_FIXED_KBLOCKS if splits > 1 else 0.0)


def _candidates(k: int, allowed: set[str]):
    """(config, splits): persistent configs whole, stream-K configs split (their heuristic
    decomposition is left to the tuned table: slower on every small-M shape measured)."""
    for c in GEMM_CONFIGS:
        if c.name not in allowed:
            continue
        if c.scheduler == "persistent":
            yield c, 1
        else:
            k_blocks = math.ceil(k / c.tile[2])
            yield from ((c, s) for s in SPLITS if k_blocks >= s * MIN_KBLOCKS_PER_SPLIT)


def analytic_config(m: int, n: int, k: int, sm_count: int, candidates: Iterable[str] | None = None) -> str | None:
    """The (config, split) with the lowest wave-model cost among ``candidates`` (default: all
    compiled configs; a stream-K config in it brings its split variants)."""
    allowed = set(BY_NAME if candidates is None else (parse_name(c)[0] for c in candidates if is_valid_name(c)))
    pool = list(_candidates(k, allowed))
    if not pool:
        return None
    best = min(pool, key=lambda cs: (estimated_cost(cs[0], m, n, k, sm_count, cs[1]), cs[1], cs[0].name != DEFAULT_CONFIG))
    return split_name(best[0].name, best[1])


@functools.lru_cache(maxsize=4096)
def select_gemm_config(m: int, n: int, k: int, sm_count: int, compiled: frozenset[str]) -> str:
    """`compiled`: the config names this build has (VLATTN_GEMM_CONFIGS can build a subset)."""
    name = tuned_table().get((m, n, k))
    source = "tuned"
    if name is None or not is_valid_name(name, compiled):
        name, source = analytic_config(m, n, k, sm_count, compiled), "analytic"
    if name is None:  # no candidate (a stream-K-only build and K too short to split)
        name, source = (DEFAULT_CONFIG if DEFAULT_CONFIG in compiled else min(compiled)), "default"
    if _log_enabled():
        print(f"vlattn: gemm M={m} N={n} K={k} -> {name} ({source})", file=sys.stderr)
    return name
