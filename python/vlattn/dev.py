"""Development switches: the knobs behind vlattn's measured dispatch rules (csrc/launch/dev_switch.h).

Each switch is named by its environment variable (``VLATTN_QKV_GEMM_EPI``, ``VLATTN_ATTN_PERSISTENT``,
...), starts from it (read once, when a switch is first used) or from its default, and can be changed
in-process. A change applies to the calls that start after it; a CUDA graph keeps what its capture
chose. Meant for A/Bs that interleave both arms in one process (``python -m vlattn.bench --switch``):
across processes the H200's per-call clock state moved the large layers by 3-5% (bench/NOTES.md,
twenty-fifth session). Every switch only picks among implementations of the same result; most give
the same bits (see each one's comment in the C++ sources).

    from vlattn import dev
    with dev.switch("VLATTN_ATTN_PERSISTENT", 2):
        out = vlattn.attention(q, k, v)
"""
from __future__ import annotations

import contextlib
from typing import Iterator

from . import _ext


def switches() -> dict[str, dict[str, int]]:
    """{name: {"value": current, "default": built-in default}} of every switch."""
    c = _ext.require("vlattn.dev.switches")
    return {name: {"value": value, "default": default} for name, value, default in c.dev_switches()}


def get_switch(name: str) -> int:
    table = switches()
    if name not in table:
        raise ValueError(f"vlattn.dev: unknown switch {name!r}; the switches are {', '.join(table)}")
    return table[name]["value"]


def set_switch(name: str, value: int) -> int:
    """Set switch ``name`` (on/off switches take 0 / non-zero) and return its previous value."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"vlattn.dev.set_switch: value must be an int, got {type(value).__name__}")
    return _ext.require("vlattn.dev.set_switch").set_dev_switch(name, value)


@contextlib.contextmanager
def switch(name: str, value: int) -> Iterator[None]:
    """Switch ``name`` at ``value`` inside the block, restored on exit."""
    previous = set_switch(name, value)
    try:
        yield
    finally:
        set_switch(name, previous)
