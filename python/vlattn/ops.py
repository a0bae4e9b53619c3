"""Public ops: validation, backend choice, and the Python implementations registered for the
C++ schemas in csrc/torch_bindings.cpp (torch.ops.vlattn.*), with their fake implementations.

Backends (DESIGN.md):
- ``native``: the sm_90a kernels (Hopper): the fused QKV + bias + RoPE projection kernel, the GQA
  attention kernel (additive mask with exact tile skipping) and the CUTLASS O projection.
- ``composite``: cuBLAS + PyTorch RoPE + SDPA, any CUDA GPU.
- ``reference``: the exact bf16 reference (vlattn.reference); the CPU backend.
Choice: the ``backend=`` argument, else ``VLATTN_BACKEND``, else automatic; never silent: each
automatic choice is logged once, a fall-back away from ``native`` on a Hopper GPU is a warning.
"""
from __future__ import annotations

import functools
import logging
import math
import os
import sys
from dataclasses import dataclass
from typing import Sequence

import torch
from torch import Tensor

from . import _ext, composite, dispatch, reference
from .reference import MROPE_SECTION, ROPE_THETA, THW_SPLIT

HEAD_DIM = 128
BACKENDS = ("native", "composite", "reference")
logger = logging.getLogger("vlattn")
if os.environ.get("VLATTN_LOG", "") not in ("", "0"):
    _handler = logging.StreamHandler(sys.stderr)
    _handler.setFormatter(logging.Formatter("%(name)s: %(message)s"))
    logger.addHandler(_handler)
    logger.setLevel(logging.INFO)


# --------------------------------------------------------------------------------------------
# Validation: every failure names the argument and what was expected.
# --------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Dims:
    batch: int
    q_len: int
    kv_len: int
    hidden: int
    out_hidden: int
    num_heads: int
    num_kv_heads: int
    rope_chunks: int = 0  # mrope_section's entry count (007)


MAX_NATIVE_ROPE_CHUNKS = 16


def _fail(op: str, msg: str) -> None:
    raise ValueError(f"vlattn.{op}: {msg}")


def _check_tensor(op: str, name: str, t, shape: Sequence[int | None], dtype: torch.dtype, device: torch.device,
                  contiguous: bool = False) -> None:
    """``shape`` entries of None accept any size."""
    if not isinstance(t, Tensor):
        _fail(op, f"{name} must be a torch.Tensor; got {type(t).__name__}")
    if t.dtype != dtype:
        _fail(op, f"{name} must be {dtype}; got {t.dtype}")
    if t.device != device:
        _fail(op, f"{name} must be on {device} (the device of the first input); got {t.device}")
    want = "[" + ", ".join("*" if s is None else str(s) for s in shape) + "]"
    if t.dim() != len(shape) or any(s is not None and s != d for s, d in zip(shape, t.shape)):
        _fail(op, f"{name} must have shape {want}; got {list(t.shape)}")
    if contiguous and not t.is_contiguous():
        _fail(op, f"{name} must be contiguous (a PyTorch Linear parameter layout); got strides {list(t.stride())}")


def _check_activation(op: str, name: str, t, axes: str, device: torch.device | None = None,
                      batch: int | None = None, hidden: int | None = None) -> tuple[int, int, int]:
    """A bf16 [batch, tokens, hidden] activation (``axes`` names the dims in messages)."""
    if not isinstance(t, Tensor) or t.dim() != 3:
        _fail(op, f"{name} must be a 3-D [{axes}] tensor; got {getattr(t, 'shape', type(t).__name__)}")
    expect = (t.shape[0] if batch is None else batch, t.shape[1], t.shape[2] if hidden is None else hidden)
    _check_tensor(op, name, t, expect, torch.bfloat16, t.device if device is None else device)
    if t.shape[2] == 0:
        _fail(op, f"{name} must have a non-empty hidden dimension")
    return tuple(t.shape)


def _check_heads(op: str, name: str, rows: int) -> int:
    if rows == 0 or rows % HEAD_DIM:
        _fail(op, f"{name} must have a positive multiple of head_dim = {HEAD_DIM} rows; got {rows}")
    return rows // HEAD_DIM


def _check_projections(op: str, x: Tensor, weights: dict[str, Tensor | None], hidden: int,
                       device: torch.device) -> tuple[int, int, int]:
    """Q/K/V/O weights and biases (names as the op's arguments, in q, k, v, o order)."""
    (qw, qwt), (qb, qbt), (kw, kwt), (kb, kbt), (vw, vwt), (vb, vbt), (ow, owt) = weights.items()
    for name, w in ((qw, qwt), (kw, kwt), (vw, vwt), (ow, owt)):
        if not isinstance(w, Tensor) or w.dim() != 2:
            _fail(op, f"{name} must be a 2-D tensor; got {getattr(w, 'shape', type(w).__name__)}")
    num_heads = _check_heads(op, qw, qwt.shape[0])
    num_kv_heads = _check_heads(op, kw, kwt.shape[0])
    if num_heads % num_kv_heads:
        _fail(op, f"query heads ({num_heads}, from {qw}) must be a multiple of KV heads ({num_kv_heads}, from {kw})")
    bf16 = torch.bfloat16
    _check_tensor(op, qw, qwt, (num_heads * HEAD_DIM, hidden), bf16, device, contiguous=True)
    _check_tensor(op, kw, kwt, (num_kv_heads * HEAD_DIM, hidden), bf16, device, contiguous=True)
    _check_tensor(op, vw, vwt, (num_kv_heads * HEAD_DIM, hidden), bf16, device, contiguous=True)
    _check_tensor(op, ow, owt, (None, num_heads * HEAD_DIM), bf16, device, contiguous=True)
    _check_tensor(op, qb, qbt, (num_heads * HEAD_DIM,), bf16, device, contiguous=True)
    _check_tensor(op, kb, kbt, (num_kv_heads * HEAD_DIM,), bf16, device, contiguous=True)
    _check_tensor(op, vb, vbt, (num_kv_heads * HEAD_DIM,), bf16, device, contiguous=True)
    if owt.shape[0] == 0:
        _fail(op, f"{ow} must have at least one output row; got {list(owt.shape)}")
    return num_heads, num_kv_heads, owt.shape[0]


def _int_list_arg(op: str, name: str, values) -> list:
    """A sequence argument as a list (its entries are checked by _check_int_list)."""
    if type(values) is list or type(values) is tuple:  # the usual case first: host time of small layers
        return list(values)
    if isinstance(values, (str, bytes, Tensor)) or not hasattr(values, "__iter__"):
        _fail(op, f"{name} must be a sequence of ints; got {type(values).__name__}")
    return list(values)


def _theta_arg(op: str, value) -> float:
    """rope_theta as a float (its range is checked by validate_vision_cross_attention)."""
    if isinstance(value, (bool, str, bytes)) or not isinstance(value, (int, float)) and not hasattr(value, "__float__"):
        _fail(op, f"rope_theta must be a number; got {type(value).__name__}")
    return float(value)


def _check_int_list(op: str, name: str, values, *, count: int | None, even: bool) -> list[int]:
    values = _int_list_arg(op, name, values)
    if (count is not None and len(values) != count) or not values:
        _fail(op, f"{name} must have {count or 'at least 1'} entries; got {values}")
    if any(not isinstance(v, int) or v <= 0 or (even and v % 2) for v in values):
        _fail(op, f"{name} entries must be positive{' even' if even else ''} ints; got {values}")
    if sum(values) != HEAD_DIM:
        _fail(op, f"{name} must sum to head_dim = {HEAD_DIM}; got {values} (sum {sum(values)})")
    return values


def validate_mrope_self_attention(hidden_states, q_weight, q_bias, k_weight, k_bias, v_weight, v_bias, o_weight,
                                  cos, sin, attention_mask, mrope_section, causal) -> Dims:
    op = "mrope_self_attention"
    bsz, seq_len, hidden = _check_activation(op, "hidden_states", hidden_states, "batch, seq_len, hidden")
    device = hidden_states.device
    num_heads, num_kv_heads, out_hidden = _check_projections(op, hidden_states, {
        "q_weight": q_weight, "q_bias": q_bias, "k_weight": k_weight, "k_bias": k_bias,
        "v_weight": v_weight, "v_bias": v_bias, "o_weight": o_weight}, hidden, device)
    _check_tensor(op, "cos", cos, (3, bsz, seq_len, HEAD_DIM), torch.bfloat16, device)
    _check_tensor(op, "sin", sin, (3, bsz, seq_len, HEAD_DIM), torch.bfloat16, device)
    if attention_mask is not None:
        _check_tensor(op, "attention_mask", attention_mask, (None, 1, seq_len, seq_len), torch.bfloat16, device)
        if attention_mask.shape[0] not in (1, bsz):
            _fail(op, f"attention_mask must be [batch (= {bsz}) or 1, 1, {seq_len}, {seq_len}]; "
                      f"got {list(attention_mask.shape)}")
    sections = _check_int_list(op, "mrope_section", mrope_section, count=None, even=False)
    if not isinstance(causal, bool):
        _fail(op, f"causal must be a bool; got {type(causal).__name__}")
    return Dims(bsz, seq_len, seq_len, hidden, out_hidden, num_heads, num_kv_heads, len(sections))


def validate_vision_cross_attention(language_hidden_states, vision_hidden_states, language_position_ids,
                                    vision_grid_thw, q_proj_weight, q_proj_bias, k_proj_weight, k_proj_bias,
                                    v_proj_weight, v_proj_bias, o_proj_weight, rope_theta, thw_split) -> Dims:
    op = "vision_cross_attention"
    bsz, q_len, hidden = _check_activation(op, "language_hidden_states", language_hidden_states,
                                           "batch, lang_seq_len, hidden")
    device = language_hidden_states.device
    _, kv_len, _ = _check_activation(op, "vision_hidden_states", vision_hidden_states,
                                     "batch, vision_seq_len, hidden", device, bsz, hidden)
    if kv_len == 0 and q_len > 0:
        _fail(op, "vision_hidden_states must have at least one token: attention over 0 keys is undefined")
    _check_tensor(op, "language_position_ids", language_position_ids, (bsz, q_len), torch.int64, device)
    _check_tensor(op, "vision_grid_thw", vision_grid_thw, (bsz, kv_len, 3), torch.int64, device)
    num_heads, num_kv_heads, out_hidden = _check_projections(op, language_hidden_states, {
        "q_proj_weight": q_proj_weight, "q_proj_bias": q_proj_bias, "k_proj_weight": k_proj_weight,
        "k_proj_bias": k_proj_bias, "v_proj_weight": v_proj_weight, "v_proj_bias": v_proj_bias,
        "o_proj_weight": o_proj_weight}, hidden, device)
    if not isinstance(rope_theta, (int, float)) or not math.isfinite(rope_theta) or rope_theta <= 1.0:
        _fail(op, f"rope_theta must be a finite number > 1; got {rope_theta}")
    _check_int_list(op, "thw_split", thw_split, count=3, even=True)
    return Dims(bsz, q_len, kv_len, hidden, out_hidden, num_heads, num_kv_heads)


def _byte_span(t: Tensor) -> tuple[int, int]:
    """[first, last + 1) byte addresses of a non-empty tensor's elements (PyTorch strides are >= 0)."""
    start = t.data_ptr()
    return start, start + (sum((n - 1) * st for n, st in zip(t.shape, t.stride())) + 1) * t.element_size()


def _self_overlapping(t: Tensor) -> bool:
    """True when two elements of t may share memory: its dims, by increasing stride, must each step past
    everything the smaller ones reach (conservative: a layout this cannot prove disjoint counts as shared)."""
    reach = 0  # elements spanned by the dims taken so far, minus one
    for stride, size in sorted((st, n) for n, st in zip(t.shape, t.stride()) if n > 1):
        if stride <= reach:
            return True
        reach += (size - 1) * stride
    return False


def _check_out(op: str, out: Tensor, dims: Dims, like: Tensor, o_name: str, o_weight: Tensor) -> None:
    _check_tensor(op, "out", out, (dims.batch, dims.q_len, dims.out_hidden), torch.bfloat16, like.device)
    if out.numel() == 0:
        return
    # The output projection's CTAs write out while they read the O weight, each element once: neither may be shared.
    if _self_overlapping(out):
        _fail(op, f"out must not have elements that share memory (an expanded or overlapping view); got shape "
                  f"{list(out.shape)} with strides {list(out.stride())}")
    (lo, hi), (w_lo, w_hi) = _byte_span(out), _byte_span(o_weight)
    if lo < w_hi and w_lo < hi:
        _fail(op, f"out must not share memory with {o_name} (the output projection reads it while writing out)")


# --------------------------------------------------------------------------------------------
# Backends
# --------------------------------------------------------------------------------------------

def _as_device(device) -> torch.device:
    if isinstance(device, Tensor):
        return device.device
    if device is None:
        return torch.device("cuda", torch.cuda.current_device()) if torch.cuda.is_available() else torch.device("cpu")
    device = torch.device(device)
    if device.type == "cuda" and device.index is None:
        device = torch.device("cuda", torch.cuda.current_device())
    return device


@functools.lru_cache(maxsize=None)
def _native_unavailable_reason(device: torch.device) -> str | None:
    """None when the native backend can run on ``device``, else why not."""
    if device.type != "cuda":
        return f"native kernels need a CUDA device; got {device}"
    return _cuda_native_unavailable_reason(device.index if device.index is not None else torch.cuda.current_device())


@functools.lru_cache(maxsize=None)
def _cuda_native_unavailable_reason(index: int) -> str | None:
    # Fixed for the process (the extension loaded or not; a device's capability): computed once per
    # device instead of on every layer call (host time the benchmark sees).
    if not _ext.available():
        return f"the compiled extension did not load ({_ext.LOAD_ERROR})"
    major, minor = torch.cuda.get_device_capability(index)
    if (major, minor) != (9, 0):
        return f"native kernels are built for sm_90a (Hopper); cuda:{index} is sm_{major}{minor}"
    return None


def _shape_unavailable_reason(dims: Dims) -> str | None:
    # TMA rows must be 16-byte multiples: the GEMM K (hidden) and N (output hidden) dims.
    if dims.hidden % 8 or dims.out_hidden % 8:
        return f"hidden sizes must be multiples of 8 for TMA; got {dims.hidden} -> {dims.out_hidden}"
    if dims.rope_chunks > MAX_NATIVE_ROPE_CHUNKS:  # the QKV kernels' channel -> plane map (csrc/ops/qkv.cpp)
        return f"mrope_section has {dims.rope_chunks} chunks; the native kernels take at most {MAX_NATIVE_ROPE_CHUNKS}"
    return None


def available_backends(device=None) -> list[str]:
    """Backends that can run on ``device`` (a device, a tensor, or None for the current one)."""
    device = _as_device(device)
    if not _ext.available():  # the public ops are torch.ops.vlattn.*, registered by the extension
        return []
    found = []
    if _native_unavailable_reason(device) is None:
        found.append("native")
    if device.type == "cuda":
        found.append("composite")
    found.append("reference")
    return found


def backend_for(device=None) -> str:
    """The backend an automatic choice picks on ``device`` for the benchmark's shapes."""
    return _auto_backend(_as_device(device))[0]


def _auto_backend(device: torch.device) -> tuple[str, str | None]:
    """(backend, why native was not chosen or None)."""
    if device.type != "cuda":
        return "reference", None
    reason = _native_unavailable_reason(device)
    return ("native", None) if reason is None else ("composite", reason)


_logged: set[tuple] = set()


def _log_once(key: tuple, level: int, msg: str) -> None:
    if key not in _logged:
        _logged.add(key)
        logger.log(level, msg)


def resolve_backend(op: str, requested: str, device: torch.device, dims: Dims) -> str:
    if requested in ("", "auto"):
        requested = os.environ.get("VLATTN_BACKEND", "auto") or "auto"
        source = "VLATTN_BACKEND" if requested != "auto" else "auto"
    else:
        source = "argument"
    if requested == "auto":
        backend, why_not_native = _auto_backend(device)
        if backend == "native":
            why_not_native = _shape_unavailable_reason(dims)
            if why_not_native:
                backend = "composite"
        if why_not_native and device.type == "cuda" and torch.cuda.get_device_capability(device) == (9, 0):
            _log_once((op, device, backend, why_not_native), logging.WARNING,
                      f"{op} on {device}: falling back to '{backend}': {why_not_native}")
        else:
            _log_once((op, device, backend), logging.INFO, f"{op} on {device}: backend '{backend}' (automatic)")
        return backend
    if requested not in BACKENDS:
        _fail(op, f"backend must be one of {('auto',) + BACKENDS}; got {requested!r} (from {source})")
    if requested == "native":
        reason = _native_unavailable_reason(device) or _shape_unavailable_reason(dims)
        if reason:
            raise RuntimeError(f"vlattn.{op}: backend 'native' (from {source}) cannot run: {reason}")
    if requested == "composite" and device.type != "cuda":
        raise RuntimeError(f"vlattn.{op}: backend 'composite' (from {source}) needs a CUDA device; got {device}")
    return requested


# --------------------------------------------------------------------------------------------
# GEMM
# --------------------------------------------------------------------------------------------

@functools.lru_cache(maxsize=None)
def _compiled_gemm_configs() -> frozenset[str]:
    return frozenset(c["name"] for c in _ext.require("vlattn.linear").gemm_configs())


@functools.lru_cache(maxsize=None)
def _sm_count(index: int) -> int:
    return torch.cuda.get_device_properties(index).multi_processor_count


def gemm_config_for(x: Tensor, weight: Tensor) -> str:
    k = weight.shape[-1]
    m = math.prod(x.shape[:-1])
    return dispatch.select_gemm_config(m, weight.shape[0], k, _sm_count(x.device.index or 0),
                                       _compiled_gemm_configs())


def linear(x: Tensor, weight: Tensor, bias: Tensor | None = None, *, out: Tensor | None = None,
           config: str | None = None) -> Tensor:
    """``x @ weight.T + bias`` on the sm_90a CUTLASS GEMM (bf16 in/out, fp32 accumulate, one rounding
    after the bias add). ``config`` names a GEMM config (vlattn.gemm_configs), a stream-K one optionally
    as "<name>/splitk<N>" (K split into N parts per output tile, 2 <= N <= 16), a parallel split-K one
    ("..._psplit") always so (K must cut into N equal slices of a multiple of 8); default: dispatch."""
    _ext.require("vlattn.linear")
    for name, t in (("x", x), ("weight", weight)):
        if not isinstance(t, Tensor):
            _fail("linear", f"{name} must be a torch.Tensor; got {type(t).__name__}")
    if config is None:
        config = gemm_config_for(x, weight) if x.is_cuda and weight.dim() == 2 else ""
    if out is None:
        return torch.ops.vlattn.linear(x, weight, bias, config)
    return torch.ops.vlattn.linear.out(x, weight, bias, config, out=out)


# --------------------------------------------------------------------------------------------
# Layer implementations behind torch.ops.vlattn.* (registered for CPU and CUDA)
# --------------------------------------------------------------------------------------------

def _native_linear(x: Tensor, weight: Tensor, bias: Tensor | None, out: Tensor | None = None) -> Tensor:
    # The TMA GEMM reads evenly strided rows; the layer's activations may be arbitrary views, and so may out
    # (written through one copy when its rows do not collapse, as csrc/ops/layers.cpp's output_projection does).
    x = x if x.is_contiguous() else x.contiguous()
    if out is not None and not _ext._C.linear_out_writable(out):
        return out.copy_(linear(x, weight, bias))
    return linear(x, weight, bias, out=out)


def _dense(t: Tensor) -> Tensor:
    """The fused kernels read activations as evenly strided rows (TMA); copy only if they are not."""
    return t if t.is_contiguous() else t.contiguous()


# Diagnosis switch: VLATTN_NATIVE_ATTENTION=0 makes the native layers use SDPA for the attention step.
_NATIVE_ATTENTION = os.environ.get("VLATTN_NATIVE_ATTENTION", "1") != "0"


def _native_attention(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, causal: bool) -> Tensor:
    """[B, Sq, Hq*128] from head-major q/k/v: the sm_90a attention kernel (or SDPA, see above)."""
    if _NATIVE_ATTENTION:
        if mask is not None and mask.stride(-1) != 1:  # the kernel reads mask rows with unit stride
            mask = mask.contiguous()
        return torch.ops.vlattn.attention(q, k, v, mask, causal=causal, scale=HEAD_DIM ** -0.5)
    o = composite.sdpa(q, k, v, mask, causal, HEAD_DIM ** -0.5)
    return o.transpose(1, 2).reshape(q.shape[0], q.shape[2], -1)


def _native_mrope(hidden_states, q_weight, q_bias, k_weight, k_bias, v_weight, v_bias, o_weight, cos, sin,
                  attention_mask=None, *, mrope_section, causal, out=None):
    """native 007: one fused QKV + bias + mRoPE launch (head-major q/k/v), the attention kernel with the
    mask (exact tile skipping), the O-projection GEMM."""
    q, k, v = torch.ops.vlattn.mrope_qkv(_dense(hidden_states), q_weight, q_bias, k_weight, k_bias, v_weight,
                                         v_bias, cos, sin, mrope_section=list(mrope_section))
    o = _native_attention(q, k, v, attention_mask, causal)
    return _native_linear(o, o_weight, None, out=out)


def _native_cross(language_hidden_states, vision_hidden_states, language_position_ids, vision_grid_thw,
                  q_proj_weight, q_proj_bias, k_proj_weight, k_proj_bias, v_proj_weight, v_proj_bias, o_proj_weight,
                  *, rope_theta, thw_split, out=None):
    """native 034: fused Q + 1D RoPE and fused K/V + t/h/w RoPE launches, SDPA, the O-projection GEMM."""
    q, k, v = torch.ops.vlattn.vision_qkv(_dense(language_hidden_states), _dense(vision_hidden_states),
                                          language_position_ids, vision_grid_thw, q_proj_weight, q_proj_bias,
                                          k_proj_weight, k_proj_bias, v_proj_weight, v_proj_bias,
                                          rope_theta=float(rope_theta), thw_split=list(thw_split))
    o = _native_attention(q, k, v, None, False)
    return _native_linear(o, o_proj_weight, None, out=out)


def _run_layer(chosen: str, dims: Dims, like: Tensor, args: tuple, kwargs: dict, reference_fn, composite_fn,
               native_fn, out: Tensor | None) -> Tensor:
    """Run a validated layer call on the chosen backend; ``like`` is the query-side activation."""
    if like.numel() == 0:
        result = like.new_empty(dims.batch, dims.q_len, dims.out_hidden)
    elif chosen == "reference":
        result = reference_fn(*args, **kwargs)
    elif chosen == "native":
        return native_fn(*args, **kwargs, out=out)  # the O-projection GEMM writes into out directly
    else:
        result = composite_fn(*args, **kwargs)
    return result if out is None else out.copy_(result)


@functools.lru_cache(maxsize=4096)
def _o_config(m: int, n: int, k: int, device_index: int) -> str:
    return dispatch.select_gemm_config(m, n, k, _sm_count(device_index), _compiled_gemm_configs())


def _fast_native(op: str, backend: str, like: Tensor) -> bool:
    """True when the call goes to the native backend without looking at shapes: the C++ layer path then
    runs it and validates as it goes (any error falls back to the full Python path below, which
    raises the layer's own message or picks another backend)."""
    if not isinstance(like, Tensor) or not like.is_cuda or like.numel() == 0:
        return False
    requested = backend if backend not in ("", "auto") else (os.environ.get("VLATTN_BACKEND", "auto") or "auto")
    if requested not in ("auto", "native") or not _NATIVE_ATTENTION:
        return False
    if _native_unavailable_reason(like.device) is not None:
        return False
    if requested == "auto":
        key = (op, like.device, "native")
        if key not in _logged:  # the message is formatted once, not on every call (host time of small layers)
            _log_once(key, logging.INFO, f"{op} on {like.device}: backend 'native' (automatic)")
    return True


def _mrope_impl(hidden_states, q_weight, q_bias, k_weight, k_bias, v_weight, v_bias, o_weight, cos, sin,
                attention_mask, mrope_section, causal, backend, out):
    op = "mrope_self_attention"
    if type(causal) is bool and _fast_native(op, backend, hidden_states):
        try:
            config = _o_config(hidden_states.shape[0] * hidden_states.shape[1], o_weight.shape[0], o_weight.shape[-1],
                               hidden_states.device.index)
            return _ext._C.mrope_layer(hidden_states, q_weight, q_bias, k_weight, k_bias, v_weight, v_bias, o_weight,
                                       cos, sin, attention_mask, list(mrope_section), causal, config, out)
        except (RuntimeError, ValueError, TypeError, IndexError, AttributeError):
            pass  # the full path below names the bad argument (or runs another backend)
    args = (hidden_states, q_weight, q_bias, k_weight, k_bias, v_weight, v_bias, o_weight, cos, sin, attention_mask)
    dims = validate_mrope_self_attention(*args, mrope_section, causal)
    if out is not None:
        _check_out(op, out, dims, hidden_states, "o_weight", o_weight)
    chosen = resolve_backend(op, backend, hidden_states.device, dims)
    kwargs = dict(mrope_section=tuple(mrope_section), causal=causal)
    return _run_layer(chosen, dims, hidden_states, args, kwargs, reference.mrope_self_attention,
                      composite.mrope_self_attention, _native_mrope, out)


def _cross_impl(language_hidden_states, vision_hidden_states, language_position_ids, vision_grid_thw,
                q_proj_weight, q_proj_bias, k_proj_weight, k_proj_bias, v_proj_weight, v_proj_bias, o_proj_weight,
                rope_theta, thw_split, backend, out):
    op = "vision_cross_attention"
    if _fast_native(op, backend, language_hidden_states):
        try:
            lang = language_hidden_states
            config = _o_config(lang.shape[0] * lang.shape[1], o_proj_weight.shape[0], o_proj_weight.shape[-1],
                               lang.device.index)
            return _ext._C.cross_layer(lang, vision_hidden_states, language_position_ids, vision_grid_thw,
                                       q_proj_weight, q_proj_bias, k_proj_weight, k_proj_bias, v_proj_weight,
                                       v_proj_bias, o_proj_weight, float(rope_theta), list(thw_split), config, out)
        except (RuntimeError, ValueError, TypeError, IndexError, AttributeError):
            pass  # the full path below names the bad argument (or runs another backend)
    args = (language_hidden_states, vision_hidden_states, language_position_ids, vision_grid_thw,
            q_proj_weight, q_proj_bias, k_proj_weight, k_proj_bias, v_proj_weight, v_proj_bias, o_proj_weight)
    dims = validate_vision_cross_attention(*args, rope_theta, thw_split)
    if out is not None:
        _check_out(op, out, dims, language_hidden_states, "o_proj_weight", o_proj_weight)
    chosen = resolve_backend(op, backend, language_hidden_states.device, dims)
    kwargs = dict(rope_theta=float(rope_theta), thw_split=tuple(thw_split))
    return _run_layer(chosen, dims, language_hidden_states, args, kwargs, reference.vision_cross_attention,
                      composite.vision_cross_attention, _native_cross, out)


def _register() -> None:
    """Python kernels and fakes for the schemas defined in C++ (no-op without the extension)."""
    if not _ext.available():
        return
    lib = "vlattn::"

    def mrope(*a, mrope_section=MROPE_SECTION, causal=False, backend="auto"):
        return _mrope_impl(*a, *(() if len(a) == 11 else (None,)), mrope_section, causal, backend, None)

    def mrope_out(*a, mrope_section=MROPE_SECTION, causal=False, backend="auto", out):
        return _mrope_impl(*a, *(() if len(a) == 11 else (None,)), mrope_section, causal, backend, out)

    def cross(*a, rope_theta=ROPE_THETA, thw_split=THW_SPLIT, backend="auto"):
        return _cross_impl(*a, rope_theta, thw_split, backend, None)

    def cross_out(*a, rope_theta=ROPE_THETA, thw_split=THW_SPLIT, backend="auto", out):
        return _cross_impl(*a, rope_theta, thw_split, backend, out)

    for key in ("CPU", "CUDA"):
        torch.library.impl(lib + "mrope_self_attention", key)(mrope)
        torch.library.impl(lib + "mrope_self_attention.out", key)(mrope_out)
        torch.library.impl(lib + "vision_cross_attention", key)(cross)
        torch.library.impl(lib + "vision_cross_attention.out", key)(cross_out)

    @torch.library.register_fake(lib + "linear")
    def _linear_fake(x, weight, bias=None, config=""):
        return x.new_empty(*x.shape[:-1], weight.shape[0])

    @torch.library.register_fake(lib + "linear.out")
    def _linear_out_fake(x, weight, bias=None, config="", *, out):
        return out

    @torch.library.register_fake(lib + "mrope_qkv")
    def _mrope_qkv_fake(hidden_states, q_weight, q_bias, k_weight, k_bias, v_weight, v_bias, cos, sin, **kw):
        bsz, seq_len = hidden_states.shape[:2]
        q = hidden_states.new_empty(bsz, q_weight.shape[0] // HEAD_DIM, seq_len, HEAD_DIM)
        k = hidden_states.new_empty(bsz, k_weight.shape[0] // HEAD_DIM, seq_len, HEAD_DIM)
        return q, k, torch.empty_like(k)

    @torch.library.register_fake(lib + "vision_qkv")
    def _vision_qkv_fake(language_hidden_states, vision_hidden_states, language_position_ids, vision_grid_thw,
                         q_proj_weight, q_proj_bias, k_proj_weight, *a, **kw):
        bsz, lang_len = language_hidden_states.shape[:2]
        vis_len = vision_hidden_states.shape[1]
        q = language_hidden_states.new_empty(bsz, q_proj_weight.shape[0] // HEAD_DIM, lang_len, HEAD_DIM)
        k = language_hidden_states.new_empty(bsz, k_proj_weight.shape[0] // HEAD_DIM, vis_len, HEAD_DIM)
        return q, k, torch.empty_like(k)

    @torch.library.register_fake(lib + "mrope_self_attention")
    def _mrope_fake(hidden_states, *a, **kw):
        o_weight = a[6]
        return hidden_states.new_empty(*hidden_states.shape[:2], o_weight.shape[0])

    @torch.library.register_fake(lib + "mrope_self_attention.out")
    def _mrope_out_fake(*a, out, **kw):
        return out

    @torch.library.register_fake(lib + "vision_cross_attention")
    def _cross_fake(language_hidden_states, *a, **kw):
        o_proj_weight = a[9]
        return language_hidden_states.new_empty(*language_hidden_states.shape[:2], o_proj_weight.shape[0])

    @torch.library.register_fake(lib + "vision_cross_attention.out")
    def _cross_out_fake(*a, out, **kw):
        return out


_register()


# --------------------------------------------------------------------------------------------
# Public API
# --------------------------------------------------------------------------------------------

def _layer_op(name: str):
    _ext.require(f"vlattn.{name}")
    return getattr(torch.ops.vlattn, name)


def _direct_call_ok(t) -> bool:
    """An eager call on a plain tensor may run the layer's implementation directly: going through the
    dispatcher to the Python kernel registered for torch.ops.vlattn.* costs ~15 µs of host time per
    call (measured on the CI CPU: 14.7 vs 0.9 µs for an 11-tensor op), which the benchmark's timer sees
    on small layers. torch.compile, tracing, tensor subclasses (FakeTensor) and dispatch modes still
    go through the op and its fake implementation."""
    return type(t) is Tensor and not torch.compiler.is_compiling() and torch._C._len_torch_dispatch_stack() == 0


def _grad_requested(args: tuple) -> bool:
    """True when autograd would record the call: grad mode on and an input requiring grad. Such calls go
    through the dispatcher, whose Autograd kernel (csrc/torch_bindings.cpp) makes backward raise "derivative
    for vlattn::<op> is not implemented" instead of the direct path's output silently without a grad_fn."""
    if not torch.is_grad_enabled():
        return False
    for a in args:  # a plain loop: ~2x faster than any() over a generator
        if isinstance(a, Tensor) and a.requires_grad:  # isinstance: nn.Parameter weights are the usual case
            return True
    return False


def mrope_self_attention(hidden_states: Tensor, q_weight: Tensor, q_bias: Tensor, k_weight: Tensor, k_bias: Tensor,
                         v_weight: Tensor, v_bias: Tensor, o_weight: Tensor, cos: Tensor, sin: Tensor,
                         attention_mask: Tensor | None = None, *, mrope_section: Sequence[int] = MROPE_SECTION,
                         causal: bool = False, backend: str | None = None, out: Tensor | None = None) -> Tensor:
    """Qwen2.5-VL text attention (SOL-ExecBench 007): QKV projections with bias, multimodal RoPE from
    the ``cos``/``sin`` tables [3, B, S, 128] (channel chunks of ``mrope_section`` read planes
    0, 1, 2, 0, ...), GQA attention with an optional additive ``attention_mask`` [B, 1, S, S] and/or
    ``causal``, output projection. Returns [B, S, o_weight.shape[0]] bf16 (written to ``out`` if given).
    """
    op = _layer_op("mrope_self_attention")
    args = (hidden_states, q_weight, q_bias, k_weight, k_bias, v_weight, v_bias, o_weight, cos, sin, attention_mask)
    mrope_section = _int_list_arg("mrope_self_attention", "mrope_section", mrope_section)
    if _direct_call_ok(hidden_states) and not _grad_requested(args):
        return _mrope_impl(*args, mrope_section, causal, backend or "auto", out)
    if not isinstance(causal, bool):  # the schema's bool would take it as truthy: refuse it with the layer's message
        _fail("mrope_self_attention", f"causal must be a bool; got {type(causal).__name__}")
    kwargs = dict(mrope_section=mrope_section, causal=causal, backend=backend or "auto")
    return op(*args, **kwargs) if out is None else op.out(*args, **kwargs, out=out)


def vision_cross_attention(language_hidden_states: Tensor, vision_hidden_states: Tensor,
                           language_position_ids: Tensor, vision_grid_thw: Tensor, q_proj_weight: Tensor,
                           q_proj_bias: Tensor, k_proj_weight: Tensor, k_proj_bias: Tensor, v_proj_weight: Tensor,
                           v_proj_bias: Tensor, o_proj_weight: Tensor, *, rope_theta: float = ROPE_THETA,
                           thw_split: Sequence[int] = THW_SPLIT, backend: str | None = None,
                           out: Tensor | None = None) -> Tensor:
    """Qwen3-VL-style cross attention (SOL-ExecBench 034): Q from language tokens with 1D RoPE at
    ``language_position_ids``; K/V from vision tokens, K with three rotate-half RoPEs over the
    channel segments ``thw_split`` at the t/h/w positions ``vision_grid_thw`` [B, Lv, 3]; full GQA
    attention; output projection. Returns [B, Lq, o_proj_weight.shape[0]] bf16.
    """
    op = _layer_op("vision_cross_attention")
    args = (language_hidden_states, vision_hidden_states, language_position_ids, vision_grid_thw, q_proj_weight,
            q_proj_bias, k_proj_weight, k_proj_bias, v_proj_weight, v_proj_bias, o_proj_weight)
    rope_theta = _theta_arg("vision_cross_attention", rope_theta)
    thw_split = _int_list_arg("vision_cross_attention", "thw_split", thw_split)
    if _direct_call_ok(language_hidden_states) and not _grad_requested(args):
        return _cross_impl(*args, rope_theta, thw_split, backend or "auto", out)
    kwargs = dict(rope_theta=rope_theta, thw_split=thw_split, backend=backend or "auto")
    return op(*args, **kwargs) if out is None else op.out(*args, **kwargs, out=out)


def mrope_qkv(hidden_states: Tensor, q_weight: Tensor, q_bias: Tensor | None, k_weight: Tensor,
              k_bias: Tensor | None, v_weight: Tensor, v_bias: Tensor | None, cos: Tensor, sin: Tensor, *,
              mrope_section: Sequence[int] = MROPE_SECTION, config: str = "") -> tuple[Tensor, Tensor, Tensor]:
    """007's Q/K/V projections in one sm_90a launch: bias, multimodal RoPE (``cos``/``sin``
    [3, B, S, 128], chunk i of ``mrope_section`` reads plane i % 3) and the reference's bf16
    roundings fused into the GEMM epilogue. Returns contiguous head-major q [B, Hq, S, 128],
    k and v [B, Hkv, S, 128] (v without RoPE). ``config``: "" (by M), "m128", "m64" (persistent
    ping-pong, 128- or 64-row tiles), "splitk2" / "splitk3" / "splitk4" (K split over a cluster; with a
    "d" suffix a 6-stage ring), "m256k1".."m256k4" (256-row tiles, K split over 1..4 CTAs), "c256"
    (persistent 128 x 256 head-pair tiles, both warpgroups on one tile; even head counts), "m128mc"
    (m128 in 2-CTA clusters along M, the weight tile multicast to both CTAs) or "gemm" (not fused: the
    projections on vlattn.linear's CUTLASS GEMMs with the bias (the tuned table's config for a GEMM alone,
    else the wave model's tile; the last group on a second stream), then one RoPE + layout kernel; the automatic choice takes it from 1024 rows on, VLATTN_QKV_GEMM_MIN_M=<rows>
    moves that, 0 turns it off), "grouped128" / "grouped64" (not fused: all three projections in one
    CUTLASS grouped GEMM launch with 128 x 192 cooperative or 64 x 192 ping-pong tiles, then the same
    RoPE + layout kernel; the biases all given or all None, 16-byte aligned) or "grouped" (the tile by
    wave count)."""
    _ext.require("vlattn.mrope_qkv")
    return torch.ops.vlattn.mrope_qkv(hidden_states, q_weight, q_bias, k_weight, k_bias, v_weight, v_bias, cos, sin,
                                      mrope_section=list(mrope_section), config=config)


def vision_qkv(language_hidden_states: Tensor, vision_hidden_states: Tensor, language_position_ids: Tensor,
               vision_grid_thw: Tensor, q_proj_weight: Tensor, q_proj_bias: Tensor | None, k_proj_weight: Tensor,
               k_proj_bias: Tensor | None, v_proj_weight: Tensor, v_proj_bias: Tensor | None, *,
               rope_theta: float = ROPE_THETA, thw_split: Sequence[int] = THW_SPLIT,
               config: str = "") -> tuple[Tensor, Tensor, Tensor]:
    """034's projections: Q from the language tokens with 1D RoPE at ``language_position_ids`` (one
    launch), K and V from the vision tokens with the t/h/w segment RoPE on K (a second launch).
    Angles in fp32 with accurate cosf/sinf. Returns head-major q [B, Hq, Lq, 128], k, v [B, Hkv, Lv, 128].
    ``config`` as for :func:`mrope_qkv`, applied to each launch; the grouped configs instead run all
    three projections (Q over the text rows, K and V over the vision rows) in one grouped GEMM launch,
    then a RoPE pass per input."""
    _ext.require("vlattn.vision_qkv")
    return torch.ops.vlattn.vision_qkv(language_hidden_states, vision_hidden_states, language_position_ids,
                                       vision_grid_thw, q_proj_weight, q_proj_bias, k_proj_weight, k_proj_bias,
                                       v_proj_weight, v_proj_bias, rope_theta=float(rope_theta),
                                       thw_split=list(thw_split), config=config)


def extension_info() -> dict:
    """What the compiled extension holds (or why it did not load)."""
    if not _ext.available():
        return {"built": False, "error": _ext.LOAD_ERROR}
    c = _ext._C
    return {"built": True, "archs": list(c.compiled_archs), "cuda_version": int(c.cuda_version),
            "gemm_configs": [cfg["name"] for cfg in c.gemm_configs()]}
