"""The `composite` backend: cuBLAS projections, PyTorch RoPE (the reference's bf16 rounding) and
SDPA. Runs on any CUDA GPU (and CPU); also the baseline the bench compares against.

`linear` is a parameter so the `native` backend can run the same layer with the sm_90a GEMMs
while its fused attention kernel is not there yet (issue 4).
"""
from __future__ import annotations

from typing import Callable, Sequence

import torch
import torch.nn.functional as F
from torch import Tensor

from . import reference
from .reference import MROPE_SECTION, ROPE_THETA, THW_SPLIT

HEAD_DIM = 128
Linear = Callable[..., Tensor]


def _heads(x: Tensor, weight: Tensor, bias: Tensor | None, linear: Linear) -> Tensor:
    """[B, S, hidden] -> [B, H, S, D] view of the projection."""
    bsz, seq_len, _ = x.shape
    return linear(x, weight, bias).view(bsz, seq_len, -1, HEAD_DIM).transpose(1, 2)


def sdpa(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, causal: bool, scale: float) -> Tensor:
    """GQA attention through SDPA (PyTorch picks flash / cuDNN / efficient / math)."""
    if mask is not None and causal:
        # SDPA takes one or the other: fold the causal rule into the additive mask.
        q_len, kv_len = q.shape[-2], k.shape[-2]
        above = torch.ones(q_len, kv_len, dtype=torch.bool, device=q.device).triu(1)
        mask, causal = mask.masked_fill(above, float("-inf")), False
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal, scale=scale,
                                          enable_gqa=q.shape[1] != k.shape[1])


def _output(o: Tensor, o_weight: Tensor, linear: Linear, out: Tensor | None) -> Tensor:
    bsz, num_heads, q_len, _ = o.shape
    o = o.transpose(1, 2).reshape(bsz, q_len, num_heads * HEAD_DIM)
    if out is None:
        return linear(o, o_weight, None)
    return linear(o, o_weight, None, out=out)


@torch.no_grad()
def mrope_self_attention(hidden_states, q_weight, q_bias, k_weight, k_bias, v_weight, v_bias, o_weight, cos, sin,
                         attention_mask=None, *, mrope_section: Sequence[int] = MROPE_SECTION, causal: bool = False,
                         linear: Linear = F.linear, out: Tensor | None = None) -> Tensor:
    q = _heads(hidden_states, q_weight, q_bias, linear)
    k = _heads(hidden_states, k_weight, k_bias, linear)
    v = _heads(hidden_states, v_weight, v_bias, linear)
    cos_c, sin_c = reference.mrope_cos_sin_combined(cos, sin, mrope_section)
    q, k = reference.apply_rotary(q, cos_c, sin_c), reference.apply_rotary(k, cos_c, sin_c)
    o = sdpa(q, k, v, attention_mask, causal, HEAD_DIM ** -0.5)
    return _output(o, o_weight, linear, out)


@torch.no_grad()
def vision_cross_attention(language_hidden_states, vision_hidden_states, language_position_ids, vision_grid_thw,
                           q_proj_weight, q_proj_bias, k_proj_weight, k_proj_bias, v_proj_weight, v_proj_bias,
                           o_proj_weight, *, rope_theta: float = ROPE_THETA, thw_split: Sequence[int] = THW_SPLIT,
                           linear: Linear = F.linear, out: Tensor | None = None) -> Tensor:
    q = _heads(language_hidden_states, q_proj_weight, q_proj_bias, linear)
    k = _heads(vision_hidden_states, k_proj_weight, k_proj_bias, linear)
    v = _heads(vision_hidden_states, v_proj_weight, v_proj_bias, linear)
    q_cos, q_sin = reference.rope_1d_cos_sin(language_position_ids, HEAD_DIM, rope_theta, q.dtype)
    q = reference.apply_rotary(q, q_cos, q_sin)
    k_cos, k_sin = reference.rope_3d_cos_sin(vision_grid_thw, thw_split, rope_theta, k.dtype)
    k = reference.apply_rotary_segments(k, k_cos, k_sin, thw_split)
    o = sdpa(q, k, v, None, False, HEAD_DIM ** -0.5)
    return _output(o, o_proj_weight, linear, out)
