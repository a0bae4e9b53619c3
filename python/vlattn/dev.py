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


# The split-K QKV kernels' development trace (csrc/qkv/qkv_trace.h): per CTA, 8 int64 slots.
SPLITK_TRACE_SLOTS = 8
SPLITK_TRACE_NAMES = ("start", "first_stage", "last_stage", "partials_barrier", "epilogue", "end", "smid", "rank")
_splitk_trace_buffer = None  # kept alive while the kernels may write into it


def splitk_trace(buffer=None) -> None:
    """Make the split-K QKV kernels (``mrope_qkv``/``vision_qkv`` at <= 128 rows per launch, and their
    configs ``splitk*`` / ``m256k*``) stamp each CTA's progress into ``buffer``: a contiguous int64 CUDA
    tensor of shape [ctas, 8] (slots: SPLITK_TRACE_NAMES; times in %globaltimer ns, then the SM id and the
    cluster rank). CTA i writes row i, CTAs beyond the buffer's rows nothing. ``None`` turns it off. For
    development (bench/probe_splitk_timeline.py): the buffer stays referenced here until the next call."""
    global _splitk_trace_buffer
    import torch

    c = _ext.require("vlattn.dev.splitk_trace")
    if buffer is None:  # off, on the current device
        if _splitk_trace_buffer is not None:
            torch.cuda.synchronize(_splitk_trace_buffer.device)
        c.splitk_trace(0, 0)
        _splitk_trace_buffer = None
        return
    if not isinstance(buffer, torch.Tensor):
        raise TypeError(f"vlattn.dev.splitk_trace: buffer must be a torch.Tensor or None, got {type(buffer).__name__}")
    if (buffer.dtype != torch.int64 or buffer.device.type != "cuda" or buffer.dim() != 2
            or buffer.shape[1] != SPLITK_TRACE_SLOTS or buffer.shape[0] < 1 or not buffer.is_contiguous()):
        raise ValueError("vlattn.dev.splitk_trace: buffer must be a contiguous int64 CUDA tensor of shape "
                         f"[ctas >= 1, {SPLITK_TRACE_SLOTS}]; got {buffer.dtype} on {buffer.device}, shape "
                         f"{list(buffer.shape)}, contiguous={buffer.is_contiguous()}")
    torch.cuda.synchronize(buffer.device)  # no launch still writing into the previous buffer
    with torch.cuda.device(buffer.device):  # the trace is per device: the buffer's
        c.splitk_trace(buffer.data_ptr(), buffer.shape[0])
    _splitk_trace_buffer = buffer
