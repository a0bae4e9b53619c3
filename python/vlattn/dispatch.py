"""Shape -> GEMM config, in the order: memo -> tuned table -> analytic fallback -> safe default.

The tuned table (data/gemm_tuned_h200.json) maps "M,N,K" to a config name measured best on an
H200; it serves the H100 too (the tuner run there on 2026-12-06 kept all 9 entries and found no shape where
the dispatched config was >= 5% slower than the fastest: bench/compare_tuned.py, docs/results.md). On
2026-12-07 the H100's tuner kept the 9 again and added three parallel split-K entries (128 and 256 x 512 x 3584,
392 x 1024 x 4096; 9-16% faster there); they are not in this table until an H200 tuner run agrees.
`VLATTN_LOG=1` prints each decision once. Config names come from gemm_configs.py, the same
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

from .gemm_configs import BY_NAME, DEFAULT_CONFIG, GEMM_CONFIGS, GemmConfig, is_valid_name, parse_name

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


def estimated_cost(config: GemmConfig, m: int, n: int, sm_count: int, concurrent: int = 1) -> float:
    """Wave model: whole waves of persistent tiles, each costing its area over the config's
    efficiency (gemm_configs.py). Partial last waves cost a full wave, which is what makes 541 x 3584
    (140 tiles of 128x128 on 132 SMs) slow with 128x128 and fast with 64x128. ``concurrent`` equal
    GEMMs running side by side (the QKV 'gemm' config's K and V on two streams) put all their tiles
    in the same waves. csrc/ops/linear.cpp (gemm_analytic_pick, for the QKV 'gemm' config) is the
    same model in C++; tests/test_dispatch.py checks that the two agree."""
    tm, tn = config.out_tile()
    waves = math.ceil(config.tile_count(m, n) * max(concurrent, 1) / sm_count)
    return waves * tm * tn / config.efficiency


def analytic_config(m: int, n: int, k: int, sm_count: int, candidates: Iterable[str] | None = None,
                    concurrent: int = 1) -> str | None:
    """The persistent rule config (``rule=True``) with the lowest wave-model cost among ``candidates``
    (default: all).

    Stream-K is left to the tuned table, in both forms: its own decomposition measured slower than
    the 64x128 ping-pong tile on every small-M shape, and so did every '/splitk<N>' on every
    projection shape (H200, 2026-11-30, python -m vlattn.tune: e.g. 128x512x3584 ping-pong 14.8 us,
    split 2/3/4/8 19.3/18.9/20.1/26.1 us; bench/NOTES.md, sixth session)."""
    allowed = set(BY_NAME if candidates is None else (parse_name(c)[0] for c in candidates if is_valid_name(c)))
    pool = [c for c in GEMM_CONFIGS if c.scheduler == "persistent" and c.rule and c.name in allowed]
    if not pool:
        return None
    return min(pool, key=lambda c: (estimated_cost(c, m, n, sm_count, concurrent), c.name != DEFAULT_CONFIG)).name


@functools.lru_cache(maxsize=4096)
def select_gemm_config(m: int, n: int, k: int, sm_count: int, compiled: frozenset[str]) -> str:
    """`compiled`: the config names this build has (VLATTN_GEMM_CONFIGS can build a subset)."""
    name = tuned_table().get((m, n, k))
    source = "tuned"
    if name is None or not is_valid_name(name, compiled):
        name, source = analytic_config(m, n, k, sm_count, compiled), "analytic"
    if name is None:  # nothing persistent compiled: only stream-K builds
        name, source = (DEFAULT_CONFIG if DEFAULT_CONFIG in compiled else min(compiled)), "default"
    if _log_enabled():
        print(f"vlattn: gemm M={m} N={n} K={k} -> {name} ({source})", file=sys.stderr)
    return name
