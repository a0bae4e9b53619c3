"""Argument validation of the public layer ops (CPU; the ops are registered by the compiled extension).

Every invalid argument must raise before any compute, naming the argument. Shapes are small but
generalized: hidden 256, 4 query heads (512 rows), 2 KV heads (256 rows), head_dim 128.

Run: PYTHONPATH=python python -m pytest -q tests/test_validation.py
"""
import math

import pytest
import torch

import vlattn
from conftest import BF16, cross_inputs, mrope_inputs, poisoned, requires_cuda, requires_ext, requires_sm90

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
    ("mrope_section-none", {}, {"mrope_section": None}, r"mrope_section must be a sequence of ints; got NoneType"),
    ("mrope_section-int", {}, {"mrope_section": 128}, r"mrope_section must be a sequence of ints; got int"),
    ("mrope_section-str", {}, {"mrope_section": "32,48,48"}, r"mrope_section must be a sequence of ints; got str"),
    ("causal-str", {}, {"causal": "no"}, r"causal must be a bool; got str"),
    ("causal-none", {}, {"causal": None}, r"causal must be a bool; got NoneType"),
    ("causal-int", {}, {"causal": 1}, r"causal must be a bool; got int"),
    ("o_weight-none", {"o_weight": lambda: None}, {}, r"o_weight must be a 2-D tensor; got NoneType"),
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
    ("thw_split-none", {}, {"thw_split": None}, r"thw_split must be a sequence of ints; got NoneType"),
    ("rope_theta-str", {}, {"rope_theta": "1e4"}, r"rope_theta must be a number; got str"),
    ("rope_theta-none", {}, {"rope_theta": None}, r"rope_theta must be a number; got NoneType"),
    ("rope_theta-bool", {}, {"rope_theta": True}, r"rope_theta must be a number; got bool"),
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


def test_linear_argument_checks_on_cpu():
    x, w = randn(4, 256), randn(128, 256)
    with pytest.raises(ValueError, match=r"^vlattn\.linear: x must be a torch\.Tensor; got list"):
        vlattn.linear([1.0] * 256, w)
    with pytest.raises(ValueError, match=r"^vlattn\.linear: weight must be a torch\.Tensor; got NoneType"):
        vlattn.linear(x, None)
    # out's shape is named before its layout (a [4, 127] out used to be refused for its row stride).
    with pytest.raises(RuntimeError, match=r"vlattn\.linear: out must have shape \[4, 128\]; got \[4, 127\]"):
        vlattn.linear(x, w, out=torch.empty(4, 127, dtype=BF16))


# --------------------------------------------------------------------------------------------
# No backward: the ops are for inference, and a backward must not pass silently
# --------------------------------------------------------------------------------------------

def _layer_calls(device="cpu"):
    mrope, cross = mrope_inputs(B, S, device=device), cross_inputs(B, LQ, LV, device=device)
    return {
        "mrope": (mrope, "q_weight", lambda d: vlattn.mrope_self_attention(**d),
                  lambda d: torch.ops.vlattn.mrope_self_attention(*d.values())),
        "cross": (cross, "language_hidden_states", lambda d: vlattn.vision_cross_attention(**d),
                  lambda d: torch.ops.vlattn.vision_cross_attention(*d.values())),
    }


@pytest.mark.parametrize("path", ["public", "op"])
@pytest.mark.parametrize("layer", ["mrope", "cross"])
def test_backward_raises(layer, path):
    """An input that requires grad (grad mode on) gives an output whose backward raises "not implemented",
    through the public function as through torch.ops (the default fallback let backward leave .grad None)."""
    inputs, grad_name, public, op = _layer_calls()[layer]
    inputs[grad_name].requires_grad_()
    out = (public if path == "public" else op)(inputs)
    assert out.requires_grad
    with pytest.raises(RuntimeError, match=r"derivative for vlattn::(mrope_self_attention|vision_cross_attention) "
                                           r"is not implemented"):
        out.float().sum().backward()
    assert inputs[grad_name].grad is None


@pytest.mark.parametrize("layer", ["mrope", "cross"])
def test_backward_raises_for_parameter_weights(layer):
    """The usual training-mode case: the weights are nn.Parameters (a Tensor subclass) that require grad."""
    inputs, _, public, _ = _layer_calls()[layer]
    for name in [k for k in inputs if k.endswith("weight")]:
        inputs[name] = torch.nn.Parameter(inputs[name])
    out = public(inputs)
    with pytest.raises(RuntimeError, match=r"derivative for vlattn::\w+ is not implemented"):
        out.float().sum().backward()


@pytest.mark.parametrize("layer", ["mrope", "cross"])
def test_no_grad_forward_matches(layer):
    """Under torch.no_grad the same inputs give an output without a grad_fn and the same values."""
    inputs, grad_name, public, _ = _layer_calls()[layer]
    inputs[grad_name].requires_grad_()
    with torch.no_grad():
        plain = public(inputs)
    assert not plain.requires_grad
    tracked = public(inputs)
    assert torch.equal(tracked.detach(), plain)


# --------------------------------------------------------------------------------------------
# The native path (sm_90): the layer's contract holds where the component ops are more permissive
# --------------------------------------------------------------------------------------------

def _cuda_mrope(**replace):
    inputs = mrope_inputs(B, 64, device="cuda")
    inputs.update(replace)
    return inputs


@requires_sm90
@pytest.mark.parametrize("kind,pattern", [
    ("mask-wide", r"attention_mask must have shape \[\*, 1, 64, 64\]"),
    ("causal-str", r"causal must be a bool; got str"),
    ("o_weight-none", r"o_weight must be a 2-D tensor; got NoneType"),
])
def test_native_mrope_contract(kind, pattern):
    inputs, kwargs = _cuda_mrope(), {}
    if kind == "mask-wide":
        inputs["attention_mask"] = torch.zeros(B, 1, 64, 72, dtype=BF16, device="cuda")
    elif kind == "causal-str":
        kwargs["causal"] = "no"
    else:
        inputs["o_weight"] = None
    with pytest.raises(ValueError, match=r"^vlattn\.mrope_self_attention: " + pattern):
        vlattn.mrope_self_attention(**inputs, **kwargs)


@requires_sm90
@pytest.mark.parametrize("kind,pattern", [
    ("theta-small", r"rope_theta must be a finite number > 1; got 0\.5"),
    ("no-vision", r"vision_hidden_states must have at least one token"),
])
def test_native_cross_contract(kind, pattern):
    inputs, kwargs = cross_inputs(B, 64, 96, device="cuda"), {}
    if kind == "theta-small":
        kwargs["rope_theta"] = 0.5
    else:
        inputs = cross_inputs(B, 64, 0, device="cuda")
    with pytest.raises(ValueError, match=r"^vlattn\.vision_cross_attention: " + pattern):
        vlattn.vision_cross_attention(**inputs, **kwargs)


@requires_sm90
@pytest.mark.parametrize("backend", ["auto", "native"])
def test_native_mrope_many_chunks(backend, caplog):
    """mrope_section with more than 16 chunks: the automatic choice runs composite, native says why it cannot."""
    inputs, section = _cuda_mrope(), [4] * 32
    if backend == "native":
        with pytest.raises(RuntimeError, match=r"backend 'native' \(from argument\) cannot run: mrope_section has "
                                               r"32 chunks; the native kernels take at most 16"):
            vlattn.mrope_self_attention(**inputs, mrope_section=section, backend="native")
        return
    got = vlattn.mrope_self_attention(**inputs, mrope_section=section)
    expected = vlattn.mrope_self_attention(**inputs, mrope_section=section, backend="composite")
    assert torch.equal(got, expected)


@requires_sm90
@pytest.mark.parametrize("kind", ["sin-expanded", "cos-strided", "both-strided"])
def test_native_mrope_table_views(kind):
    """Tables that are valid views but not what the QKV kernel reads (an expanded batch, a strided last dim)
    give the same bits as their contiguous copies."""
    inputs = _cuda_mrope()
    cos, sin = inputs["cos"], inputs["sin"]
    views = dict(inputs)
    if kind == "sin-expanded":
        sin = sin[:, :1].expand_as(sin)
        views["sin"] = sin
    if kind in ("cos-strided", "both-strided"):
        wide = torch.randn(*cos.shape[:-1], 256, device="cuda").to(BF16)
        cos = wide[..., ::2]
        views["cos"] = cos
    if kind == "both-strided":
        wide = torch.randn(*sin.shape[:-1], 256, device="cuda").to(BF16)
        sin = wide[..., 1::2]
        views["sin"] = sin
    dense = dict(inputs, cos=cos.contiguous(), sin=sin.contiguous())
    expected = vlattn.mrope_self_attention(**dense, backend="native")
    assert torch.equal(vlattn.mrope_self_attention(**views), expected)
    assert torch.equal(vlattn.mrope_self_attention(**views, backend="native"), expected)


@requires_sm90
@pytest.mark.parametrize("layer", ["mrope", "cross"])
def test_native_out_view_that_does_not_collapse(layer):
    """out= as a [B, S, N] view of an [S, B, N] buffer (rows that do not collapse): the result lands in it."""
    if layer == "mrope":
        inputs, fn = _cuda_mrope(), vlattn.mrope_self_attention
        rows = 64
    else:
        inputs, fn = cross_inputs(B, 48, 96, device="cuda"), vlattn.vision_cross_attention
        rows = 48
    expected = fn(**inputs)
    buf = poisoned(rows, B, HIDDEN, device="cuda")
    out = buf.transpose(0, 1)
    assert fn(**inputs, out=out) is out
    assert torch.equal(out, expected)


@requires_sm90
@pytest.mark.parametrize("layer", ["mrope", "cross"])
def test_native_backward_raises(layer):
    inputs, grad_name, public, _ = _layer_calls("cuda")[layer]
    inputs[grad_name].requires_grad_()
    out = public(inputs)
    with pytest.raises(RuntimeError, match=r"derivative for vlattn::\w+ is not implemented"):
        out.float().sum().backward()


@requires_sm90
def test_native_component_ops_backward_raises():
    x = torch.randn(64, 256, device="cuda").to(BF16).requires_grad_()
    w = (torch.randn(128, 256, device="cuda") * 0.02).to(BF16)
    y = vlattn.linear(x, w)
    with pytest.raises(RuntimeError, match=r"derivative for vlattn::linear is not implemented"):
        y.float().sum().backward()
    q = torch.randn(1, 4, 64, 128, device="cuda").to(BF16).requires_grad_()
    k = torch.randn(1, 2, 64, 128, device="cuda").to(BF16)
    o = vlattn.attention(q, k, k.clone())
    with pytest.raises(RuntimeError, match=r"derivative for vlattn::attention is not implemented"):
        o.float().sum().backward()
