"""Argument validation of the public layer ops (CPU; the ops are registered by the compiled extension).

Every invalid argument must raise before any compute, naming the argument. Shapes are small but
generalized: hidden 256, 4 query heads (512 rows), 2 KV heads (256 rows), head_dim 128.

Run: PYTHONPATH=python python -m pytest -q tests/test_validation.py
"""
import math

import pytest
import torch

import vlattn
from conftest import BF16, cross_inputs, mrope_inputs, poisoned, requires_cuda, requires_ext

pytestmark = requires_ext

B, S, LQ, LV, HIDDEN = 2, 5, 5, 7, 256


def randn(*shape, dtype=BF16):
    return torch.randn(*shape, dtype=dtype)


def call_mrope(inputs, **kwargs):
    return vlattn.mrope_self_attention(**inputs, **kwargs)


def call_cross(inputs, **kwargs):
    return vlattn.vision_cross_attention(**inputs, **kwargs)


# Each case: (id, replacements for the valid inputs, keyword arguments, message pattern).
MROPE_CASES = [
    ("hidden_states-dtype", {"hidden_states": lambda: randn(B, S, HIDDEN, dtype=torch.float32)}, {},
     r"hidden_states must be torch\.bfloat16; got torch\.float32"),
    ("hidden_states-dims", {"hidden_states": lambda: randn(B * S, HIDDEN)}, {},
     r"hidden_states must be a 3-D \[batch, seq_len, hidden\] tensor"),
    ("hidden_states-type", {"hidden_states": lambda: None}, {}, r"hidden_states must be a 3-D"),
    ("q_weight-rows", {"q_weight": lambda: randn(500, HIDDEN)}, {},
     r"q_weight must have a positive multiple of head_dim = 128 rows; got 500"),
    ("q_weight-zero-rows", {"q_weight": lambda: randn(0, HIDDEN)}, {}, r"q_weight must have a positive multiple"),
    ("k_weight-rows", {"k_weight": lambda: randn(200, HIDDEN)}, {}, r"k_weight must have a positive multiple"),
    ("heads-not-divisible", {"q_weight": lambda: randn(384, HIDDEN), "q_bias": lambda: randn(384),
                             "o_weight": lambda: randn(HIDDEN, 384)}, {},
     r"query heads \(3, from q_weight\) must be a multiple of KV heads \(2, from k_weight\)"),
    ("q_weight-dims", {"q_weight": lambda: randn(512, HIDDEN, 1)}, {}, r"q_weight must be a 2-D tensor"),
    ("q_weight-hidden", {"q_weight": lambda: randn(512, 128)}, {}, r"q_weight must have shape \[512, 256\]"),
    ("k_weight-hidden", {"k_weight": lambda: randn(256, 384)}, {}, r"k_weight must have shape \[256, 256\]"),
    ("v_weight-rows", {"v_weight": lambda: randn(128, HIDDEN)}, {}, r"v_weight must have shape \[256, 256\]"),
    ("q_weight-dtype", {"q_weight": lambda: randn(512, HIDDEN, dtype=torch.float16)}, {},
     r"q_weight must be torch\.bfloat16; got torch\.float16"),
    ("q_bias-length", {"q_bias": lambda: randn(511)}, {}, r"q_bias must have shape \[512\]; got \[511\]"),
    ("k_bias-length", {"k_bias": lambda: randn(512)}, {}, r"k_bias must have shape \[256\]"),
    ("v_bias-dims", {"v_bias": lambda: randn(1, 256)}, {}, r"v_bias must have shape \[256\]"),
    ("o_weight-columns", {"o_weight": lambda: randn(HIDDEN, 256)}, {}, r"o_weight must have shape \[\*, 512\]"),
    ("o_weight-no-rows", {"o_weight": lambda: randn(0, 512)}, {}, r"o_weight must have at least one output row"),
    ("q_weight-non-contiguous", {"q_weight": lambda: randn(HIDDEN, 512).t()}, {},
     r"q_weight must be contiguous"),
    ("o_weight-non-contiguous", {"o_weight": lambda: randn(HIDDEN, 1024)[:, ::2]}, {},
     r"o_weight must be contiguous"),
    ("k_bias-non-contiguous", {"k_bias": lambda: randn(512)[::2]}, {}, r"k_bias must be contiguous"),
    ("cos-shape", {"cos": lambda: randn(3, B, S, 64)}, {}, r"cos must have shape \[3, 2, 5, 128\]"),
    ("cos-planes", {"cos": lambda: randn(2, B, S, 128)}, {}, r"cos must have shape \[3, 2, 5, 128\]"),
    ("sin-seq", {"sin": lambda: randn(3, B, S + 1, 128)}, {}, r"sin must have shape \[3, 2, 5, 128\]"),
    ("cos-dtype", {"cos": lambda: randn(3, B, S, 128, dtype=torch.float32)}, {}, r"cos must be torch\.bfloat16"),
    ("attention_mask-shape", {"attention_mask": lambda: randn(B, 1, S, S + 1)}, {},
     r"attention_mask must have shape \[\*, 1, 5, 5\]"),
    ("attention_mask-heads", {"attention_mask": lambda: randn(B, 2, S, S)}, {},
     r"attention_mask must have shape \[\*, 1, 5, 5\]"),
    ("attention_mask-batch", {"attention_mask": lambda: randn(B + 1, 1, S, S)}, {},
     r"attention_mask must be \[batch \(= 2\) or 1, 1, 5, 5\]"),
    ("attention_mask-dtype", {"attention_mask": lambda: randn(B, 1, S, S, dtype=torch.float32)}, {},
     r"attention_mask must be torch\.bfloat16"),
    ("attention_mask-bool", {"attention_mask": lambda: torch.ones(B, 1, S, S, dtype=torch.bool)}, {},
     r"attention_mask must be torch\.bfloat16; got torch\.bool"),
    ("mrope_section-sum", {}, {"mrope_section": [32, 48, 40]}, r"mrope_section must sum to head_dim = 128"),
    ("mrope_section-entries", {}, {"mrope_section": [64, 80, -16]}, r"mrope_section entries must be positive"),
    ("mrope_section-zero", {}, {"mrope_section": [0, 64, 64]}, r"mrope_section entries must be positive"),
    ("mrope_section-empty", {}, {"mrope_section": []}, r"mrope_section must have at least 1 entries"),
    ("backend", {}, {"backend": "fast"}, r"backend must be one of .*'reference'.*; got 'fast' \(from argument\)"),
    ("out-shape", {}, {"out": lambda: poisoned(B, S, HIDDEN + 8)}, r"out must have shape \[2, 5, 256\]"),
    ("out-dtype", {}, {"out": lambda: poisoned(B, S, HIDDEN, dtype=torch.float32)},
     r"out must be torch\.bfloat16; got torch\.float32"),
]

CROSS_CASES = [
    ("language_hidden_states-dtype", {"language_hidden_states": lambda: randn(B, LQ, HIDDEN, dtype=torch.float32)},
     {}, r"language_hidden_states must be torch\.bfloat16; got torch\.float32"),
    ("language_hidden_states-dims", {"language_hidden_states": lambda: randn(LQ, HIDDEN)}, {},
     r"language_hidden_states must be a 3-D \[batch, lang_seq_len, hidden\] tensor"),
    ("vision_hidden_states-dims", {"vision_hidden_states": lambda: randn(B, LV, 2, HIDDEN)}, {},
     r"vision_hidden_states must be a 3-D \[batch, vision_seq_len, hidden\] tensor"),
    ("vision_hidden_states-hidden", {"vision_hidden_states": lambda: randn(B, LV, 128)}, {},
     r"vision_hidden_states must have shape \[2, 7, 256\]"),
    ("vision_hidden_states-batch", {"vision_hidden_states": lambda: randn(B + 1, LV, HIDDEN)}, {},
     r"vision_hidden_states must have shape \[2, 7, 256\]"),
    ("vision_hidden_states-dtype", {"vision_hidden_states": lambda: randn(B, LV, HIDDEN, dtype=torch.float16)}, {},
     r"vision_hidden_states must be torch\.bfloat16"),
    ("vision_hidden_states-empty", {"vision_hidden_states": lambda: randn(B, 0, HIDDEN),
                                    "vision_grid_thw": lambda: torch.zeros(B, 0, 3, dtype=torch.int64)}, {},
     r"vision_hidden_states must have at least one token"),
    ("language_position_ids-dtype",
     {"language_position_ids": lambda: torch.zeros(B, LQ, dtype=torch.int32)}, {},
     r"language_position_ids must be torch\.int64; got torch\.int32"),
    ("language_position_ids-shape",
     {"language_position_ids": lambda: torch.zeros(B, LQ + 1, dtype=torch.int64)}, {},
     r"language_position_ids must have shape \[2, 5\]"),
    ("language_position_ids-dims",
     {"language_position_ids": lambda: torch.zeros(B, 1, LQ, dtype=torch.int64)}, {},
     r"language_position_ids must have shape \[2, 5\]"),
    ("vision_grid_thw-shape", {"vision_grid_thw": lambda: torch.zeros(B, LV, 2, dtype=torch.int64)}, {},
     r"vision_grid_thw must have shape \[2, 7, 3\]"),
    ("vision_grid_thw-length", {"vision_grid_thw": lambda: torch.zeros(B, LV - 1, 3, dtype=torch.int64)}, {},
     r"vision_grid_thw must have shape \[2, 7, 3\]"),
    ("vision_grid_thw-dtype", {"vision_grid_thw": lambda: torch.zeros(B, LV, 3, dtype=torch.float32)}, {},
     r"vision_grid_thw must be torch\.int64; got torch\.float32"),
    ("q_proj_weight-rows", {"q_proj_weight": lambda: randn(500, HIDDEN)}, {},
     r"q_proj_weight must have a positive multiple of head_dim = 128 rows; got 500"),
    ("heads-not-divisible", {"q_proj_weight": lambda: randn(384, HIDDEN), "q_proj_bias": lambda: randn(384),
                             "o_proj_weight": lambda: randn(HIDDEN, 384)}, {},
     r"query heads \(3, from q_proj_weight\) must be a multiple of KV heads \(2, from k_proj_weight\)"),
    ("k_proj_weight-hidden", {"k_proj_weight": lambda: randn(256, 128)}, {},
     r"k_proj_weight must have shape \[256, 256\]"),
    ("v_proj_weight-rows", {"v_proj_weight": lambda: randn(384, HIDDEN)}, {},
     r"v_proj_weight must have shape \[256, 256\]"),
    ("q_proj_bias-length", {"q_proj_bias": lambda: randn(513)}, {}, r"q_proj_bias must have shape \[512\]"),
    ("v_proj_bias-length", {"v_proj_bias": lambda: randn(128)}, {}, r"v_proj_bias must have shape \[256\]"),
    ("o_proj_weight-columns", {"o_proj_weight": lambda: randn(HIDDEN, 640)}, {},
     r"o_proj_weight must have shape \[\*, 512\]"),
    ("v_proj_weight-non-contiguous", {"v_proj_weight": lambda: randn(HIDDEN, 256).t()}, {},
     r"v_proj_weight must be contiguous"),
    ("k_proj_weight-dtype", {"k_proj_weight": lambda: randn(256, HIDDEN, dtype=torch.float32)}, {},
     r"k_proj_weight must be torch\.bfloat16"),
    ("rope_theta-small", {}, {"rope_theta": 0.5}, r"rope_theta must be a finite number > 1; got 0\.5"),
    ("rope_theta-one", {}, {"rope_theta": 1.0}, r"rope_theta must be a finite number > 1"),
    ("rope_theta-nan", {}, {"rope_theta": math.nan}, r"rope_theta must be a finite number > 1; got nan"),
    ("rope_theta-inf", {}, {"rope_theta": math.inf}, r"rope_theta must be a finite number > 1; got inf"),
    ("thw_split-count", {}, {"thw_split": [64, 64]}, r"thw_split must have 3 entries; got \[64, 64\]"),
    ("thw_split-odd", {}, {"thw_split": [41, 43, 44]}, r"thw_split entries must be positive even ints"),
    ("thw_split-negative", {}, {"thw_split": [-2, 64, 66]}, r"thw_split entries must be positive even ints"),
    ("thw_split-sum", {}, {"thw_split": [42, 42, 42]}, r"thw_split must sum to head_dim = 128"),
    ("backend", {}, {"backend": "cutlass"}, r"backend must be one of .*; got 'cutlass' \(from argument\)"),
    ("out-shape", {}, {"out": lambda: poisoned(B, LV, HIDDEN)}, r"out must have shape \[2, 5, 256\]"),
    ("out-dtype", {}, {"out": lambda: poisoned(B, LQ, HIDDEN, dtype=torch.float16)},
     r"out must be torch\.bfloat16; got torch\.float16"),
]


def _materialize(replace, kwargs):
    return ({k: v() for k, v in replace.items()},
            {k: v() if callable(v) else v for k, v in kwargs.items()})


def test_valid_inputs_pass():
    """The baseline every failure case mutates is itself valid (so each failure is the mutation's)."""
    assert call_mrope(mrope_inputs(B, S)).shape == (B, S, HIDDEN)
    assert call_cross(cross_inputs(B, LQ, LV)).shape == (B, LQ, HIDDEN)


@pytest.mark.parametrize("replace,kwargs,pattern", [c[1:] for c in MROPE_CASES], ids=[c[0] for c in MROPE_CASES])
def test_mrope_invalid(replace, kwargs, pattern):
    inputs = mrope_inputs(B, S)
    replace, kwargs = _materialize(replace, kwargs)
    inputs.update(replace)
    with pytest.raises(ValueError, match=r"^vlattn\.mrope_self_attention: " + pattern):
        call_mrope(inputs, **kwargs)


@pytest.mark.parametrize("replace,kwargs,pattern", [c[1:] for c in CROSS_CASES], ids=[c[0] for c in CROSS_CASES])
def test_cross_invalid(replace, kwargs, pattern):
    inputs = cross_inputs(B, LQ, LV)
    replace, kwargs = _materialize(replace, kwargs)
    inputs.update(replace)
    with pytest.raises(ValueError, match=r"^vlattn\.vision_cross_attention: " + pattern):
        call_cross(inputs, **kwargs)


def test_invalid_out_is_not_written():
    out = poisoned(B, S, HIDDEN + 8)
    with pytest.raises(ValueError):
        call_mrope(mrope_inputs(B, S), out=out)
    assert out.isnan().all()


@pytest.mark.parametrize("layer", ["mrope", "cross"])
@pytest.mark.parametrize("kind", ["expanded", "rows-overlap", "o-weight"])
def test_out_that_shares_memory_is_refused(layer, kind):
    """The O projection writes out while it reads its weight, each element once: an out whose elements share
    memory, or that lies in the O weight, is refused before any compute (the native GEMM would race)."""
    call, inputs = (call_mrope, mrope_inputs(B, S)) if layer == "mrope" else (call_cross, cross_inputs(B, LQ, LV))
    rows, o_name = (S, "o_weight") if layer == "mrope" else (LQ, "o_proj_weight")
    if kind == "expanded":
        out, pattern = poisoned(1, 1, HIDDEN).expand(B, rows, HIDDEN), r"out must not have elements that share memory"
    elif kind == "rows-overlap":
        out = torch.as_strided(poisoned(B * rows * HIDDEN), (B, rows, HIDDEN), (rows * HIDDEN, HIDDEN // 2, 1))
        pattern = r"out must not have elements that share memory .*strides \[%d, 128, 1\]" % (rows * HIDDEN)
    else:
        out = inputs[o_name].view(-1)[HIDDEN:HIDDEN + B * rows * HIDDEN].view(B, rows, HIDDEN)
        pattern = rf"out must not share memory with {o_name} \(the output projection reads it while writing out\)"
    before = inputs[o_name].clone()
    with pytest.raises(ValueError, match=pattern):
        call(inputs, out=out)
    assert torch.equal(inputs[o_name], before)


@pytest.mark.parametrize("layer", ["mrope", "cross"])
def test_out_in_a_shared_buffer_or_over_the_input_is_accepted(layer):
    """What is not refused: out as a column slice of a buffer it shares with other data, and out over the
    layer's input activations (read by the QKV projection, which has finished before the O projection writes)."""
    call, inputs = (call_mrope, mrope_inputs(B, S)) if layer == "mrope" else (call_cross, cross_inputs(B, LQ, LV))
    key, rows = ("hidden_states", S) if layer == "mrope" else ("language_hidden_states", LQ)
    expected = call(dict(inputs))
    buffer = poisoned(B, rows, 2 * HIDDEN)
    sliced = call(dict(inputs), out=buffer[:, :, HIDDEN:])
    assert sliced.data_ptr() == buffer[:, :, HIDDEN:].data_ptr() and torch.equal(sliced, expected)
    assert buffer[:, :, :HIDDEN].isnan().all()  # the other half untouched
    over_input = dict(inputs, **{key: inputs[key].clone()})
    result = call(over_input, out=over_input[key])
    assert result.data_ptr() == over_input[key].data_ptr() and torch.equal(result, expected)


# --------------------------------------------------------------------------------------------
# Backend choice errors on a CPU tensor
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("layer", ["mrope", "cross"])
def test_composite_backend_on_cpu(layer):
    call, inputs = (call_mrope, mrope_inputs(B, S)) if layer == "mrope" else (call_cross, cross_inputs(B, LQ, LV))
    with pytest.raises(RuntimeError, match=r"backend 'composite' \(from argument\) needs a CUDA device; got cpu"):
        call(inputs, backend="composite")


@pytest.mark.parametrize("layer", ["mrope", "cross"])
def test_native_backend_on_cpu(layer):
    call, inputs = (call_mrope, mrope_inputs(B, S)) if layer == "mrope" else (call_cross, cross_inputs(B, LQ, LV))
    with pytest.raises(RuntimeError, match=r"backend 'native' \(from argument\) cannot run: "
                                           r"native kernels need a CUDA device; got cpu"):
        call(inputs, backend="native")


def test_backend_from_environment_is_validated(monkeypatch):
    monkeypatch.setenv("VLATTN_BACKEND", "turbo")
    with pytest.raises(ValueError, match=r"backend must be one of .*; got 'turbo' \(from VLATTN_BACKEND\)"):
        call_mrope(mrope_inputs(B, S))
    monkeypatch.setenv("VLATTN_BACKEND", "native")
    with pytest.raises(RuntimeError, match=r"backend 'native' \(from VLATTN_BACKEND\) cannot run"):
        call_cross(cross_inputs(B, LQ, LV))


# --------------------------------------------------------------------------------------------
# Devices (needs a GPU to build a mismatched pair)
# --------------------------------------------------------------------------------------------

@requires_cuda
def test_mrope_wrong_device():
    inputs = mrope_inputs(B, S)
    inputs["k_weight"] = inputs["k_weight"].cuda()
    with pytest.raises(ValueError, match=r"k_weight must be on cpu \(the device of the first input\); got cuda"):
        call_mrope(inputs)
    inputs = mrope_inputs(B, S, device="cuda")
    inputs["attention_mask"] = inputs["attention_mask"].cpu()
    with pytest.raises(ValueError, match=r"attention_mask must be on cuda:\d+ .*; got cpu"):
        call_mrope(inputs, backend="composite")


@requires_cuda
def test_cross_wrong_device():
    inputs = cross_inputs(B, LQ, LV, device="cuda")
    inputs["vision_grid_thw"] = inputs["vision_grid_thw"].cpu()
    with pytest.raises(ValueError, match=r"vision_grid_thw must be on cuda:\d+ .*; got cpu"):
        call_cross(inputs, backend="composite")
    inputs = cross_inputs(B, LQ, LV, device="cuda")
    with pytest.raises(ValueError, match=r"out must be on cuda:\d+ .*; got cpu"):
        call_cross(inputs, backend="composite", out=poisoned(B, LQ, HIDDEN))


# --------------------------------------------------------------------------------------------
# Empty problems return empty tensors
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("batch,seq_len", [(0, 5), (2, 0), (0, 0)])
@pytest.mark.parametrize("use_out", [False, True])
def test_mrope_empty(batch, seq_len, use_out):
    inputs = mrope_inputs(batch, seq_len, out_hidden=384)
    out = torch.empty(batch, seq_len, 384, dtype=BF16) if use_out else None
    result = call_mrope(inputs, out=out)
    assert result.shape == (batch, seq_len, 384) and result.dtype == BF16
    assert out is None or result is out


@pytest.mark.parametrize("batch,lang_len,vision_len", [(0, 5, 7), (2, 0, 7), (2, 0, 0)])
def test_cross_empty(batch, lang_len, vision_len):
    result = call_cross(cross_inputs(batch, lang_len, vision_len, out_hidden=384))
    assert result.shape == (batch, lang_len, 384) and result.dtype == BF16


# --------------------------------------------------------------------------------------------
# vlattn.linear on CPU
# --------------------------------------------------------------------------------------------

def test_linear_on_cpu_raises():
    # vlattn::linear has a CPU kernel too (csrc/torch_bindings.cpp), which names the problem instead of the
    # dispatcher's generic "Could not run ... with arguments from the 'CPU' backend".
    x, w, b = randn(4, 256), randn(128, 256), randn(128)
    with pytest.raises(RuntimeError, match=r"vlattn\.linear: the native backend needs CUDA tensors; got cpu"):
        vlattn.linear(x, w, b)
    with pytest.raises(RuntimeError, match=r"vlattn\.linear: the native backend needs CUDA tensors; got cpu"):
        vlattn.linear(x, w, b, out=torch.empty(4, 128, dtype=BF16))
