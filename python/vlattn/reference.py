"""Exact PyTorch references for the two vlattn layers, generalized.

With default arguments, ``mrope_self_attention`` and ``vision_cross_attention`` reproduce the
SOL-ExecBench seed references (``<seeds>/007_*/reference.py`` and ``<seeds>/034_*/reference.py``)
bit for bit: the same torch ops run in the same order on the same dtypes, so every bf16 rounding
happens exactly where the seed rounds. Several details that look arbitrary are kept for that
reason, e.g. 007 multiplies the scores by ``head_dim ** -0.5`` while 034 divides them by
``math.sqrt(head_dim)``: the two fp32 results can differ in the last bit, which can flip a bf16
rounding.

``compute_dtype=torch.float32`` runs the same math on fp32 copies of every floating input with no
intermediate bf16 rounding: the stricter "fp32 reference" of the numerics contract (DESIGN.md).

The stages (``mrope_qkv``, ``vision_qkv``, ``attention``) are public so that fused kernels can be
tested stage by stage against the very tensors the layer references are built from.
"""

from __future__ import annotations

import importlib.util
import itertools
import math
import os
from pathlib import Path
from types import ModuleType
from typing import Sequence

import torch
import torch.nn.functional as F

Tensor = torch.Tensor

#: Problem key -> seed directory name under the SOL-ExecBench seeds directory.
PROBLEMS = {
    "007": "007_multimodal_rotary_embedding_attention",
    "034": "034_vision_language_cross_attention_fusion",
}

#: 007 seed: channel split of head_dim over the t/h/w cos/sin planes (its [16, 24, 24] doubled).
MROPE_SECTION = (32, 48, 48)
#: HF Qwen2.5-VL: ``mrope_section * 2`` with mrope_section = [16, 24, 24] (list repetition).
MROPE_SECTION_HF = (16, 24, 24, 16, 24, 24)
#: 034 seed: channel segments of K rotated by the t, h and w positions.
THW_SPLIT = (42, 42, 44)
ROPE_THETA = 10000.0


def problem_key(problem: str) -> str:
    """Normalize ``"007"`` / ``"007_multimodal_rotary_embedding_attention"`` to ``"007"``."""
    if problem in PROBLEMS:
        return problem
    for key, name in PROBLEMS.items():
        if problem == name:
            return key
    raise ValueError(f"unknown problem {problem!r}; expected one of {sorted(PROBLEMS)} or their full names")


def seeds_dir() -> Path | None:
    """The SOL-ExecBench seeds directory: $VLATTN_SEEDS_DIR, else ``<repo>/../shared/sol_execbench``
    found from this file (a source tree) or from the working directory (an installed package run
    from a checkout)."""
    env = os.environ.get("VLATTN_SEEDS_DIR")
    if env:
        return Path(env) if Path(env).is_dir() else None
    # python/vlattn/reference.py -> parents[2] is the repository root of a source tree.
    for repo in (Path(__file__).resolve().parents[2], Path.cwd()):
        path = repo.parent / "shared" / "sol_execbench"
        if path.is_dir():
            return path
    return None


def load_seed(problem: str) -> ModuleType | None:
    """Import the seed's reference.py (exposing ``run``, and ``get_inputs`` for 034); None if absent."""
    key = problem_key(problem)
    root = seeds_dir()
    if root is None:
        return None
    path = root / PROBLEMS[key] / "reference.py"
    if not path.is_file():
        return None
    spec = importlib.util.spec_from_file_location(f"_vlattn_seed_{key}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# --------------------------------------------------------------------------------------------
# Building blocks (shared by both layers; each mirrors the seeds' expressions exactly)
# --------------------------------------------------------------------------------------------

def _cast(t: Tensor | None, dtype: torch.dtype | None) -> Tensor | None:
    """Cast floating tensors to the compute dtype; integer positions, None and dtype=None pass through."""
    if t is None or dtype is None or not t.is_floating_point():
        return t
    return t.to(dtype)


def _heads(weight: Tensor, head_dim: int, what: str) -> int:
    if weight.shape[0] % head_dim:
        raise ValueError(f"{what}.shape[0] = {weight.shape[0]} is not a multiple of head_dim = {head_dim}")
    return weight.shape[0] // head_dim


def _check_gqa(q_weight: Tensor, k_weight: Tensor, head_dim: int) -> None:
    num_heads = _heads(q_weight, head_dim, "q weight")
    num_kv_heads = _heads(k_weight, head_dim, "k weight")
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads = {num_heads} is not a multiple of num_kv_heads = {num_kv_heads}")


def _project_heads(x: Tensor, weight: Tensor, bias: Tensor | None, head_dim: int) -> Tensor:
    """F.linear, then [B, S, H*D] -> [B, H, S, D] as a (non-contiguous) view, like the seeds."""
    bsz, seq_len, _ = x.shape
    return F.linear(x, weight, bias).view(bsz, seq_len, -1, head_dim).transpose(1, 2)


def rotate_half(x: Tensor) -> Tensor:
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2 :]
    return torch.cat((-x2, x1), dim=-1)


def apply_rotary(x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    """Rotate-half RoPE; in bf16 each product and the sum are rounded, as in the seeds."""
    return (x * cos) + (rotate_half(x) * sin)


def apply_rotary_segments(x: Tensor, cos: Tensor, sin: Tensor, split: Sequence[int]) -> Tensor:
    """Independent rotate-half RoPEs on consecutive channel segments of widths ``split`` (034's K):
    pairs never cross a segment boundary."""
    bounds = [0, *itertools.accumulate(split)]
    return torch.cat(
        [apply_rotary(x[..., a:b], cos[..., a:b], sin[..., a:b]) for a, b in zip(bounds[:-1], bounds[1:])], dim=-1
    )


def repeat_kv(x: Tensor, n_rep: int) -> Tensor:
    """[B, Hkv, S, D] -> [B, Hkv*n_rep, S, D]; query head h reads KV head h // n_rep."""
    if n_rep == 1:
        return x
    bsz, num_kv_heads, seq_len, head_dim = x.shape
    x = x[:, :, None, :, :].expand(bsz, num_kv_heads, n_rep, seq_len, head_dim)
    return x.reshape(bsz, num_kv_heads * n_rep, seq_len, head_dim)


def mrope_cos_sin_combined(
    cos: Tensor, sin: Tensor, mrope_section: Sequence[int] = MROPE_SECTION
) -> tuple[Tensor, Tensor]:
    """Select, per channel, the t/h/w plane of the [3, B, S, D] cos/sin tables -> [B, 1, S, D] each.

    ``mrope_section`` splits the D channels into consecutive chunks; chunk i reads plane ``i % 3``.
    """
    section = list(mrope_section)
    if cos.shape[0] != 3 or sin.shape != cos.shape:
        raise ValueError(f"cos/sin must both be [3, B, S, D]; got {tuple(cos.shape)} and {tuple(sin.shape)}")
    if sum(section) != cos.shape[-1]:
        raise ValueError(f"mrope_section {section} must sum to head_dim = {cos.shape[-1]}")
    cos_splits = cos.split(section, dim=-1)
    sin_splits = sin.split(section, dim=-1)
    cos_combined = torch.cat([m[i % 3] for i, m in enumerate(cos_splits)], dim=-1).unsqueeze(1)
    sin_combined = torch.cat([m[i % 3] for i, m in enumerate(sin_splits)], dim=-1).unsqueeze(1)
    return cos_combined, sin_combined


def _inv_freq(dim: int, theta: float, device: torch.device) -> Tensor:
    return 1.0 / (theta ** (torch.arange(0, dim, 2, dtype=torch.float32, device=device) / dim))


def rope_1d_cos_sin(position_ids: Tensor, head_dim: int, theta: float, dtype: torch.dtype) -> tuple[Tensor, Tensor]:
    """1D rotate-half tables at integer positions [B, S] -> cos, sin [B, 1, S, head_dim] in ``dtype``.

    Angles are computed in fp32 and only the cos/sin values are rounded to ``dtype`` (034 seed).
    """
    if head_dim % 2:
        raise ValueError(f"RoPE width must be even; got {head_dim}")
    freqs = position_ids.unsqueeze(1).unsqueeze(-1).float() * _inv_freq(head_dim, theta, position_ids.device)
    emb = torch.cat([freqs, freqs], dim=-1)
    return emb.cos().to(dtype), emb.sin().to(dtype)


def rope_3d_cos_sin(
    grid_thw: Tensor, thw_split: Sequence[int], theta: float, dtype: torch.dtype
) -> tuple[Tensor, Tensor]:
    """Tables for three independent 1D RoPEs: channel segment i (width thw_split[i]) at position
    ``grid_thw[..., i]``, each with its own inv_freq over its own width. Returns cos, sin
    [B, 1, Lv, sum(thw_split)]; rotate-half pairs stay inside a segment (see ``vision_qkv``).
    """
    if len(thw_split) != 3:
        raise ValueError(f"thw_split must have 3 segments (t, h, w); got {tuple(thw_split)}")
    tables = [rope_1d_cos_sin(grid_thw[..., i], dim, theta, dtype) for i, dim in enumerate(thw_split)]
    return torch.cat([c for c, _ in tables], dim=-1), torch.cat([s for _, s in tables], dim=-1)


def _output_projection(o: Tensor, o_weight: Tensor) -> Tensor:
    """[B, Hq, S, D] -> [B, S, Hq*D] -> x Wo^T (no bias)."""
    bsz, num_heads, q_len, head_dim = o.shape
    o = o.transpose(1, 2).contiguous().reshape(bsz, q_len, num_heads * head_dim)
    return F.linear(o, o_weight)


# --------------------------------------------------------------------------------------------
# Stages
# --------------------------------------------------------------------------------------------

@torch.no_grad()
def mrope_qkv(
    hidden_states: Tensor,
    q_weight: Tensor,
    q_bias: Tensor | None,
    k_weight: Tensor,
    k_bias: Tensor | None,
    v_weight: Tensor,
    v_bias: Tensor | None,
    cos: Tensor,
    sin: Tensor,
    *,
    mrope_section: Sequence[int] = MROPE_SECTION,
    head_dim: int = 128,
    compute_dtype: torch.dtype | None = None,
) -> tuple[Tensor, Tensor, Tensor]:
    """007 stage 1+2: Q/K/V projections, multimodal RoPE on Q and K. Returns q [B, Hq, S, D],
    k and v [B, Hkv, S, D] (v without RoPE), as strided views like the seed."""
    hidden_states, q_weight, q_bias, k_weight, k_bias, v_weight, v_bias, cos, sin = (
        _cast(t, compute_dtype) for t in (hidden_states, q_weight, q_bias, k_weight, k_bias, v_weight, v_bias, cos, sin)
    )
    _check_gqa(q_weight, k_weight, head_dim)
    q = _project_heads(hidden_states, q_weight, q_bias, head_dim)
    k = _project_heads(hidden_states, k_weight, k_bias, head_dim)
    v = _project_heads(hidden_states, v_weight, v_bias, head_dim)
    cos_combined, sin_combined = mrope_cos_sin_combined(cos, sin, mrope_section)
    return apply_rotary(q, cos_combined, sin_combined), apply_rotary(k, cos_combined, sin_combined), v


@torch.no_grad()
def vision_qkv(
    language_hidden_states: Tensor,
    vision_hidden_states: Tensor,
    language_position_ids: Tensor,
    vision_grid_thw: Tensor,
    q_proj_weight: Tensor,
    q_proj_bias: Tensor | None,
    k_proj_weight: Tensor,
    k_proj_bias: Tensor | None,
    v_proj_weight: Tensor,
    v_proj_bias: Tensor | None,
    *,
    rope_theta: float = ROPE_THETA,
    thw_split: Sequence[int] = THW_SPLIT,
    head_dim: int = 128,
    compute_dtype: torch.dtype | None = None,
) -> tuple[Tensor, Tensor, Tensor]:
    """034 stage 1+2: Q from language tokens with 1D RoPE over the full head_dim; K, V from vision
    tokens, K with the t/h/w segment RoPE (``thw_split``). Returns q [B, Hq, Lq, D], k, v [B, Hkv, Lv, D].
    """
    (language_hidden_states, vision_hidden_states, q_proj_weight, q_proj_bias,
     k_proj_weight, k_proj_bias, v_proj_weight, v_proj_bias) = (
        _cast(t, compute_dtype) for t in (language_hidden_states, vision_hidden_states, q_proj_weight, q_proj_bias,
                                          k_proj_weight, k_proj_bias, v_proj_weight, v_proj_bias)
    )
    _check_gqa(q_proj_weight, k_proj_weight, head_dim)
    if sum(thw_split) != head_dim or any(d % 2 for d in thw_split):
        raise ValueError(f"thw_split {tuple(thw_split)} must be even widths summing to head_dim = {head_dim}")
    q = _project_heads(language_hidden_states, q_proj_weight, q_proj_bias, head_dim)
    k = _project_heads(vision_hidden_states, k_proj_weight, k_proj_bias, head_dim)
    v = _project_heads(vision_hidden_states, v_proj_weight, v_proj_bias, head_dim)

    # Tables are rounded to the activations' dtype: bf16 in the seed, fp32 (unrounded) for the fp32 reference.
    q_cos, q_sin = rope_1d_cos_sin(language_position_ids, head_dim, rope_theta, q.dtype)
    q = apply_rotary(q, q_cos, q_sin)

    k_cos, k_sin = rope_3d_cos_sin(vision_grid_thw, thw_split, rope_theta, k.dtype)
    return q, apply_rotary_segments(k, k_cos, k_sin, thw_split), v


@torch.no_grad()
def attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    attention_mask: Tensor | None = None,
    *,
    causal: bool = False,
    scale: float | None = None,
    scale_mode: str = "mul",
) -> Tensor:
    """GQA attention as the seeds compute it: q [B, Hq, Sq, D], k/v [B, Hkv, Sk, D] -> o [B, Hq, Sq, D].

    - scores = q k^T, then ``* scale`` (scale_mode "mul", default head_dim**-0.5: seed 007) or
      ``/ scale`` (scale_mode "div", default math.sqrt(head_dim): seed 034), in q's dtype.
    - ``attention_mask``: additive [B or 1, 1, Sq, >=Sk] in q's dtype (only its first Sk columns are read).
    - ``causal``: after the mask, keys j > i are set to -inf (top-left aligned when Sq != Sk, so no row
      is ever fully masked by the causal rule alone).
    - softmax in fp32, probabilities cast back to q's dtype before P v.
    """
    bsz, num_heads, q_len, head_dim = q.shape
    num_kv_heads, kv_len = k.shape[1], k.shape[2]
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads = {num_heads} is not a multiple of num_kv_heads = {num_kv_heads}")
    k = repeat_kv(k, num_heads // num_kv_heads)
    v = repeat_kv(v, num_heads // num_kv_heads)

    scores = torch.matmul(q, k.transpose(2, 3))
    if scale_mode == "mul":
        scores = scores * (head_dim ** -0.5 if scale is None else scale)
    elif scale_mode == "div":
        scores = scores / (math.sqrt(head_dim) if scale is None else scale)
    else:
        raise ValueError(f"scale_mode must be 'mul' or 'div'; got {scale_mode!r}")
    if attention_mask is not None:
        scores = scores + attention_mask[:, :, :, :kv_len]
    if causal:
        above_diagonal = torch.ones(q_len, kv_len, dtype=torch.bool, device=q.device).triu(1)
        scores = scores.masked_fill(above_diagonal, float("-inf"))
    probs = F.softmax(scores, dim=-1, dtype=torch.float32).to(q.dtype)
    return torch.matmul(probs, v)


# --------------------------------------------------------------------------------------------
# Layers
# --------------------------------------------------------------------------------------------

@torch.no_grad()
def mrope_self_attention(
    hidden_states: Tensor,
    q_weight: Tensor,
    q_bias: Tensor | None,
    k_weight: Tensor,
    k_bias: Tensor | None,
    v_weight: Tensor,
    v_bias: Tensor | None,
    o_weight: Tensor,
    cos: Tensor,
    sin: Tensor,
    attention_mask: Tensor | None = None,
    *,
    mrope_section: Sequence[int] = MROPE_SECTION,
    causal: bool = False,
    head_dim: int = 128,
    compute_dtype: torch.dtype | None = None,
) -> Tensor:
    """007: GQA self-attention with multimodal RoPE (Qwen2.5-VL). Returns [B, S, hidden].

    Head counts come from the weights (q_weight.shape[0] // head_dim, k_weight.shape[0] // head_dim).
    ``compute_dtype=None`` is the exact seed (bf16 in, bf16 out); ``torch.float32`` the fp32 reference.
    """
    q, k, v = mrope_qkv(
        hidden_states, q_weight, q_bias, k_weight, k_bias, v_weight, v_bias, cos, sin,
        mrope_section=mrope_section, head_dim=head_dim, compute_dtype=compute_dtype,
    )
    o = attention(q, k, v, _cast(attention_mask, compute_dtype), causal=causal, scale_mode="mul")
    return _output_projection(o, _cast(o_weight, compute_dtype))


@torch.no_grad()
def vision_cross_attention(
    language_hidden_states: Tensor,
    vision_hidden_states: Tensor,
    language_position_ids: Tensor,
    vision_grid_thw: Tensor,
    q_proj_weight: Tensor,
    q_proj_bias: Tensor | None,
    k_proj_weight: Tensor,
    k_proj_bias: Tensor | None,
    v_proj_weight: Tensor,
    v_proj_bias: Tensor | None,
    o_proj_weight: Tensor,
    *,
    rope_theta: float = ROPE_THETA,
    thw_split: Sequence[int] = THW_SPLIT,
    head_dim: int = 128,
    compute_dtype: torch.dtype | None = None,
) -> Tensor:
    """034: language-to-vision GQA cross-attention (1D RoPE on Q, t/h/w RoPE on K, no mask).
    Returns [B, Lq, hidden]. Same head inference and ``compute_dtype`` meaning as mrope_self_attention.
    """
    q, k, v = vision_qkv(
        language_hidden_states, vision_hidden_states, language_position_ids, vision_grid_thw,
        q_proj_weight, q_proj_bias, k_proj_weight, k_proj_bias, v_proj_weight, v_proj_bias,
        rope_theta=rope_theta, thw_split=thw_split, head_dim=head_dim, compute_dtype=compute_dtype,
    )
    o = attention(q, k, v, scale_mode="div")
    return _output_projection(o, _cast(o_proj_weight, compute_dtype))
