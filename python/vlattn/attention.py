"""vlattn.attention: the fused GQA attention kernel (sm_90a) as a Python function and a torch op.

    o = vlattn.attention.attention(q, k, v, mask=None, causal=False, scale=None, skip=True)

q [B, Hq, Sq, 128], k/v [B, Hkv, Sk, 128] bf16 CUDA tensors (Hq % Hkv == 0) with a contiguous head_dim and
batch/head/seq strides that are multiples of 8 elements (so a token-major [B, S, H, 128] projection output
viewed with ``.transpose(1, 2)``, or a fused QKV buffer split by heads, is read in place); mask optional
additive bf16 [B or 1, 1, Sq, >= Sk]; returns o [B, Sq, Hq*128] bf16 (token-major, the O projection's
input). Same values as ``reference.attention(q, k, v, mask, causal=causal, scale=scale)
.transpose(1, 2).reshape(B, Sq, -1)`` up to the kernel's fp32 rounding (it does not round the scores
to bf16), except that a row whose keys are all -inf gives 0 where the reference gives NaN.

Environment (development switches: ``vlattn.dev`` changes them in-process): ``VLATTN_ATTN_SIMPLE=1`` selects the kernel's plain consumer loop
(no softmax/GEMM overlap, no warpgroup ping-pong) for diagnosis; masks that are 16-byte aligned (pointer and
strides) have their mixed tiles staged in shared memory, others are read element-wise from global memory;
``VLATTN_ATTN_MASK_SMEM`` = 0 never stages (the value 2, which once also staged
unaligned masks, now means the default). Results are bitwise identical either way.

The op is ``torch.ops.vlattn.attention`` (schema in csrc/ops/attention.cpp); this module registers its
fake (meta) implementation for torch.compile when the extension is loaded.
"""
from __future__ import annotations

import torch
from torch import Tensor

from . import _ext

HEAD_DIM = 128
OP_NAME = "vlattn::attention"


def attention(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None = None, *, causal: bool = False,
              scale: float | None = None, skip: bool = True) -> Tensor:
    """Fused GQA attention; see the module docstring. ``skip=False`` disables exact mask-tile skipping
    (for measurement; results are bitwise identical either way)."""
    _ext.require("vlattn.attention")
    return torch.ops.vlattn.attention(q, k, v, mask, causal=causal, scale=scale, skip=skip)


def _op_defined() -> bool:
    """True when the loaded extension defines vlattn::attention (an older build may not)."""
    if not _ext.available():
        return False
    try:
        torch.ops.vlattn.attention
    except (AttributeError, RuntimeError):
        return False
    return True


def _register_fake() -> None:
    if not _op_defined():
        return

    @torch.library.register_fake(OP_NAME)
    def _attention_fake(q, k, v, mask=None, *, causal=False, scale=None, skip=True):
        batch, heads_q, seqlen_q, _ = q.shape
        return q.new_empty(batch, seqlen_q, heads_q * HEAD_DIM)


_register_fake()
