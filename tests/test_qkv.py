"""The fused QKV projections (vlattn.mrope_qkv / vlattn.vision_qkv) against the reference stages.

Two kinds of checks:
- exact: with small-integer activations and weights every GEMM partial sum is exact in fp32, so
  the accumulator is the same in any summation order and the outputs must equal the reference
  stage (F.linear + PyTorch RoPE in bf16) bit for bit. This pins the epilogue's rounding pattern
  (bias add, the three RoPE roundings, cos/sin values, partner channels, layout).
- benchmark-like: random bf16 inputs on the workloads' shapes and tails; the GEMM's summation order
  differs from cuBLAS, so elementwise within about one bf16 ulp of the reference
  (|d| <= 1e-2 + 1e-2 |ref|) and no further from the fp32 reference than 2x the bf16 reference.

Run: PYTHONPATH=python python -m pytest -q tests/test_qkv.py   (GPU tests skip without an sm_90 GPU)
"""
import pytest
import torch

import vlattn
from vlattn import reference
from vlattn import workloads as W
from vlattn.bench import qkv_bound
from conftest import BF16, HEAD_DIM, outputs_in_subprocess, rel_fro, requires_ext, requires_sm90

SEED_SECTION = (32, 48, 48)
HF_SECTION = (16, 24, 24, 16, 24, 24)

SHAPES_007 = sorted({(w.axes["batch_size"], w.axes["seq_len"]) for w in W.load("007")})
SHAPES_034 = sorted({(w.axes["batch_size"], w.axes["lang_seq_len"], w.axes["vision_seq_len"]) for w in W.load("034")})
TAILS = [1, 127, 541, 613]
CONFIGS = ["m128", "m64", "splitk2", "splitk3", "splitk4", "splitk2d", "splitk3d", "splitk4d", "m256k1", "m256k2",
           "m256k3", "m256k4", "c256", "m128mc", "gemm", "grouped128", "grouped64", "grouped"]


@pytest.fixture(autouse=True)
def _fp32_references(highest_fp32_matmul):
    """Every test here compares with fp32 references: no TF32 (fixture in conftest)."""


# --------------------------------------------------------------------------------------------
# Inputs
# --------------------------------------------------------------------------------------------

def _weights(prefix, hq, hkv, hidden, *, integer=False, bias=True):
    def w(rows):
        if integer:  # exact: values k/64, |k| <= 2
            return (torch.randint(-2, 3, (rows, hidden), device="cuda").float() / 64).to(BF16)
        return torch.randn(rows, hidden, dtype=BF16, device="cuda") * 0.02

    def b(rows):
        return torch.randn(rows, dtype=BF16, device="cuda") * 0.02 if bias else None

    names = ("q_weight", "q_bias", "k_weight", "k_bias", "v_weight", "v_bias") if prefix == "" else (
        "q_proj_weight", "q_proj_bias", "k_proj_weight", "k_proj_bias", "v_proj_weight", "v_proj_bias")
    rows = (hq * HEAD_DIM, hkv * HEAD_DIM, hkv * HEAD_DIM)
    out = {}
    for i, r in enumerate(rows):
        out[names[2 * i]] = w(r)
        out[names[2 * i + 1]] = b(r)
    return out


def _activations(*shape, integer=False):
    if integer:
        return torch.randint(-2, 3, shape, device="cuda").to(BF16)
    return torch.randn(*shape, dtype=BF16, device="cuda")


def rotary_tables(batch, seq, *, kind="rotary"):
    """[3, B, S, 128] cos/sin: real rotary tables at random t/h/w positions, or arbitrary normals."""
    if kind == "randn":
        return (torch.randn(3, batch, seq, HEAD_DIM, dtype=BF16, device="cuda"),
                torch.randn(3, batch, seq, HEAD_DIM, dtype=BF16, device="cuda"))
    pos = torch.randint(0, 8192, (3, batch, seq, 1), device="cuda").float()
    inv = 1.0 / (1e6 ** (torch.arange(0, HEAD_DIM, 2, device="cuda").float() / HEAD_DIM))
    ang = torch.cat([pos * inv, pos * inv], dim=-1)
    return ang.cos().to(BF16), ang.sin().to(BF16)


def mrope_case(batch, seq, *, hidden=3584, hq=28, hkv=4, integer=False, tables="rotary", bias=True):
    args = {"hidden_states": _activations(batch, seq, hidden, integer=integer)}
    args.update(_weights("", hq, hkv, hidden, integer=integer, bias=bias))
    args["cos"], args["sin"] = rotary_tables(batch, seq, kind=tables)
    return args


def seed_grid_thw(batch, vision_len):
    """The seed's vision positions: t = i // 196, h, w on a 14 x 14 grid."""
    i = torch.arange(vision_len, device="cuda")
    thw = torch.stack([i // 196, (i % 196) // 14, i % 14], dim=-1)
    return thw.unsqueeze(0).expand(batch, -1, -1).contiguous()


def cross_case(batch, lq, lv, *, hidden=4096, hq=32, hkv=8, integer=False, positions="seed", bias=True):
    args = {"language_hidden_states": _activations(batch, lq, hidden, integer=integer),
            "vision_hidden_states": _activations(batch, lv, hidden, integer=integer)}
    if positions == "seed":
        args["language_position_ids"] = torch.arange(lq, device="cuda").unsqueeze(0).expand(batch, -1).contiguous()
        args["vision_grid_thw"] = seed_grid_thw(batch, lv)
    else:  # up to 8191: where fast-math sin/cos would be visibly wrong
        args["language_position_ids"] = torch.randint(0, 8192, (batch, lq), device="cuda")
        args["vision_grid_thw"] = torch.randint(0, 8192, (batch, lv, 3), device="cuda")
    args.update(_weights("proj", hq, hkv, hidden, integer=integer, bias=bias))
    return args


# --------------------------------------------------------------------------------------------
# Comparison
# --------------------------------------------------------------------------------------------

def assert_close_to_reference(got, ref, ref32, what, operand_scale=None):
    """``operand_scale``: |x| + |rotate_half(x)| of RoPE's input (default |ref|). A one-ulp difference
    in the projection (summation order) moves x*cos + rot(x)*sin by up to about one ulp of the
    operands, not of the possibly much smaller result, and the result's rounding can flip once more
    (vlattn.bench.qkv_bound)."""
    assert got.shape == ref.shape and got.dtype == BF16 and got.is_contiguous(), what
    assert torch.isfinite(got).all(), f"{what}: NaN/Inf (unwritten elements)"
    diff = (got.float() - ref.float()).abs()
    bound = qkv_bound(ref.float(), ref.float().abs() if operand_scale is None else operand_scale)
    bad = diff > bound
    if bad.any():
        i = int(diff.sub(bound).argmax())
        pytest.fail(f"{what}: {int(bad.sum())} of {diff.numel()} elements off by more than ~1 bf16 ulp; worst at "
                    f"flat index {i} (got {got.flatten()[i].item()}, reference {ref.flatten()[i].item()})")
    err, ref_err = rel_fro(got, ref32), rel_fro(ref, ref32)
    assert err <= 2 * ref_err + 1e-4, f"{what}: rel err vs fp32 {err:.3e}, bf16 reference {ref_err:.3e}"


def assert_bitwise(got, ref, what):
    assert got.shape == ref.shape, what
    if not torch.equal(got, ref.contiguous()):
        ne = got != ref
        i = int(ne.flatten().nonzero()[0])
        pytest.fail(f"{what}: {int(ne.sum())} of {ne.numel()} elements differ; first at flat index {i}: got "
                    f"{got.flatten()[i].item()}, reference {ref.flatten()[i].item()}")


def rope_operand_scale(x, weight, bias):
    """|y| + |rotate_half(y)| for the bf16 projection y of x (head-major), the RoPE input."""
    y = reference._project_heads(x, weight, bias, HEAD_DIM).float()
    return y.abs() + reference.rotate_half(y).abs()


def mrope_scales(args):
    x = args["hidden_states"]
    return [rope_operand_scale(x, args[f"{n}_weight"], args[f"{n}_bias"]) for n in "qkv"]


def cross_scales(args):
    xs = (args["language_hidden_states"], args["vision_hidden_states"], args["vision_hidden_states"])
    return [rope_operand_scale(x, args[f"{n}_proj_weight"], args[f"{n}_proj_bias"]) for x, n in zip(xs, "qkv")]


def run_mrope(args, section=SEED_SECTION, config=""):
    return vlattn.mrope_qkv(*args.values(), mrope_section=section, config=config)


def ref_mrope(args, section=SEED_SECTION, dtype=None):
    return reference.mrope_qkv(*args.values(), mrope_section=section, compute_dtype=dtype)


def run_cross(args, config=""):
    return vlattn.vision_qkv(*args.values(), config=config)


def ref_cross(args, dtype=None):
    return reference.vision_qkv(*args.values(), compute_dtype=dtype)


# --------------------------------------------------------------------------------------------
# 007
# --------------------------------------------------------------------------------------------

@requires_sm90
@pytest.mark.parametrize("section", [SEED_SECTION, HF_SECTION], ids=["seed-split", "hf-split"])
@pytest.mark.parametrize("config", CONFIGS)
@pytest.mark.parametrize("batch,seq", [(1, 128), (2, 541), (1, 613)])
def test_mrope_exact_rounding(batch, seq, config, section):
    """Exact GEMM -> every output bit equals the reference stage (bias, RoPE roundings, layout)."""
    args = mrope_case(batch, seq, integer=True, tables="randn")
    for got, ref, name in zip(run_mrope(args, section, config), ref_mrope(args, section), "qkv"):
        assert_bitwise(got, ref, f"{name} B={batch} S={seq} {config} section={section}")


@requires_sm90
@pytest.mark.parametrize("seq", [128, 129, 200, 255, 511, 512, 1023, 1024])
def test_mrope_auto_plan_bounds(seq):
    """The automatic choice around 007's grouped-plan bounds (qkv_config.h kQkvGroupedMinRows,
    kQkvGroupedMaxRows): the fused split-K kernel at 128 rows, the grouped GEMM on 64 x 192 tiles at
    129-511, on 128 x 192 at 512-1023, from 1024 Q's GEMM then K and V in one grouped GEMM; exact GEMM
    inputs, so every output bit equals the reference stage on each side of a bound."""
    args = mrope_case(1, seq, integer=True, tables="randn")
    for got, ref, name in zip(run_mrope(args, SEED_SECTION), ref_mrope(args, SEED_SECTION), "qkv"):
        assert_bitwise(got, ref, f"{name} S={seq} auto")


@requires_sm90
@pytest.mark.parametrize("batch,seq", SHAPES_007, ids=[f"B{b}-S{s}" for b, s in SHAPES_007])
def test_mrope_workload_shapes(batch, seq):
    args = mrope_case(batch, seq)
    ref, ref32 = ref_mrope(args), ref_mrope(args, dtype=torch.float32)
    for got, r, r32, sc, name in zip(run_mrope(args), ref, ref32, mrope_scales(args), "qkv"):
        assert_close_to_reference(got, r, r32, f"{name} B={batch} S={seq}", sc)


@requires_sm90
@pytest.mark.parametrize("config", CONFIGS)
@pytest.mark.parametrize("seq", TAILS)
def test_mrope_tails_and_configs(seq, config):
    args = mrope_case(1, seq, bias=seq != 127)
    ref, ref32 = ref_mrope(args, HF_SECTION), ref_mrope(args, HF_SECTION, dtype=torch.float32)
    for got, r, r32, sc, name in zip(run_mrope(args, HF_SECTION, config), ref, ref32, mrope_scales(args), "qkv"):
        assert_close_to_reference(got, r, r32, f"{name} S={seq} {config}", sc)


@requires_sm90
@pytest.mark.parametrize("seq", [3969, 4096])
def test_m128mc_matches_m128(seq):
    """The multicast cluster config runs each tile's MMAs in m128's order: bitwise equal outputs, over
    several tiles per CTA (phase wrap-around of the ring, both ping-pong warpgroups) and an odd
    row-tile count (3969 rows: 31 tiles, the last cluster pair padded)."""
    args = mrope_case(1, seq)
    for got, ref, name in zip(run_mrope(args, HF_SECTION, "m128mc"), run_mrope(args, HF_SECTION, "m128"), "qkv"):
        assert_bitwise(got, ref, f"{name} S={seq} m128mc vs m128")


_GEMM_AUTO_SCRIPT = r"""
import sys, torch, vlattn
torch.manual_seed(int(sys.argv[2]))
x = torch.randn(2, 541, 512, dtype=torch.bfloat16, device="cuda")
w = [torch.randn(h * 128, 512, dtype=torch.bfloat16, device="cuda") * 0.05 for h in (4, 2, 2)]
b = [torch.randn(h * 128, dtype=torch.bfloat16, device="cuda") for h in (4, 2, 2)]
cos, sin = torch.randn(2, 3, 2, 541, 128, dtype=torch.bfloat16, device="cuda")
outs = list(vlattn.mrope_qkv(x, w[0], b[0], w[1], b[1], w[2], b[2], cos, sin))             # auto: env -> gemm
outs += list(vlattn.mrope_qkv(x, w[0], b[0], w[1], b[1], w[2], b[2], cos, sin, config="gemm"))
# a bias 2 bytes past 16-byte alignment: the automatic choice falls back to the fused kernel
odd = torch.randn(4 * 128 + 1, dtype=torch.bfloat16, device="cuda")[1:]
outs += list(vlattn.mrope_qkv(x, w[0], odd, w[1], b[1], w[2], b[2], cos, sin))
try:
    vlattn.mrope_qkv(x, w[0], odd, w[1], b[1], w[2], b[2], cos, sin, config="gemm")
    outs.append(torch.zeros(1))
except RuntimeError as e:
    assert "16-byte aligned" in str(e), e
    outs.append(torch.ones(1))
torch.save([t.cpu() for t in outs], sys.argv[1])
"""


@requires_sm90
def test_gemm_config_by_env(tmp_path, rng_seed):
    """VLATTN_QKV_GEMM_MIN_M makes the automatic choice the two-pass "gemm" config (bitwise the named
    one); with a misaligned bias the automatic choice falls back to the fused kernel and the named
    config raises a clear error."""
    outs = outputs_in_subprocess(_GEMM_AUTO_SCRIPT, tmp_path / "out.pt",
                                 {"VLATTN_QKV_GEMM_MIN_M": "256", "VLATTN_QKV_PLAN": "0"}, rng_seed)
    assert len(outs) == 10
    for i in range(3):
        assert_bitwise(outs[i], outs[3 + i], f"{'qkv'[i]}: auto by env vs config='gemm'")
    for t in outs[6:9]:
        assert torch.isfinite(t.float()).all(), "fallback output not finite"
    assert outs[9].item() == 1, "config='gemm' with a misaligned bias did not raise"


def assert_switch_bitwise_neutral(script, tmp_path, rng_seed, var, count, what, values=(None,)):
    """``script``'s q, k, v outputs (``count`` tensors, in q/k/v order per call) with the switch ``var``
    at each of ``values`` (None: its default) and at 0, each in a fresh process: all finite, equal bit
    for bit."""
    off = outputs_in_subprocess(script, tmp_path / "off.pt", {var: "0"}, rng_seed)
    for value in values:
        env = {} if value is None else {var: value}
        on = outputs_in_subprocess(script, tmp_path / f"on{value or ''}.pt", env, rng_seed)
        assert len(on) == len(off) == count
        for i, (a, b) in enumerate(zip(on, off)):
            assert torch.isfinite(a.float()).all(), f"output {i} not finite"
            label = what if value is None else f"{what} ({var}={value})"
            assert_bitwise(a, b, f"{'qkv'[i % 3]} (call {i // 3}): {label}")


_GEMM_STREAMS_SCRIPT = r"""
import sys, torch, vlattn
torch.manual_seed(int(sys.argv[2]))
x = torch.randn(1, 1100, 1024, dtype=torch.bfloat16, device="cuda")
w = [torch.randn(h * 128, 1024, dtype=torch.bfloat16, device="cuda") * 0.05 for h in (8, 2, 2)]
b = [torch.randn(h * 128, dtype=torch.bfloat16, device="cuda") for h in (8, 2, 2)]
cos, sin = torch.randn(2, 3, 1, 1100, 128, dtype=torch.bfloat16, device="cuda")
outs = list(vlattn.mrope_qkv(x, w[0], b[0], w[1], b[1], w[2], b[2], cos, sin, config="gemm"))
side = torch.cuda.Stream()  # a caller's non-default stream: the fork and join follow it
with torch.cuda.stream(side):
    outs += list(vlattn.mrope_qkv(x, w[0], b[0], w[1], b[1], w[2], b[2], cos, sin, config="gemm"))
torch.cuda.synchronize()
torch.save([t.cpu() for t in outs], sys.argv[1])
"""


@requires_sm90
def test_gemm_config_side_stream_is_bitwise_neutral(tmp_path, rng_seed):
    """The two-pass config's last GEMM on a forked stream (VLATTN_QKV_GEMM_STREAMS=2; at these 1100 rows the
    default takes the grouped tail instead) gives the bits of the plain one-stream sequence (0), from the
    default and from a non-default stream."""
    assert_switch_bitwise_neutral(_GEMM_STREAMS_SCRIPT, tmp_path, rng_seed, "VLATTN_QKV_GEMM_STREAMS", 6,
                                  "side stream vs one stream", values=("2",))


@requires_sm90
@pytest.mark.parametrize("seq,hq,hkv", [(1024, 8, 2), (1100, 10, 5), (37, 9, 1)])
def test_gemm_grouped_tail_exact(seq, hq, hkv):
    """VLATTN_QKV_GEMM_STREAMS=3 (an A/B arm): config "gemm" runs the first group's GEMM alone, then the other
    groups in one grouped GEMM after it. With exact GEMM inputs every output is the reference's bit for bit:
    007's K and V in the grouped tail (64 x 192 tiles straddling heads and the problems' ends), 034's vision
    launch with V alone in it and its text launch with no tail."""
    from vlattn import dev
    args = mrope_case(1, seq, hidden=256, hq=hq, hkv=hkv, integer=True, tables="randn")
    cargs = cross_case(1, seq // 2 + 1, seq, hidden=256, hq=hq, hkv=hkv, integer=True, positions="random")
    with dev.switch("VLATTN_QKV_GEMM_STREAMS", 3):
        got = run_mrope(args, HF_SECTION, "gemm")
        cgot = run_cross(cargs, "gemm")
    for t, ref, name in zip(got, ref_mrope(args, HF_SECTION), "qkv"):
        assert_bitwise(t, ref, f"{name} 007 S={seq} hq={hq} hkv={hkv} grouped tail")
    for t, ref, name in zip(cgot, ref_cross(cargs), "qkv"):
        assert_bitwise(t, ref, f"{name} 034 Lv={seq} hq={hq} hkv={hkv} grouped tail")


_PAIR_STREAMS_SCRIPT = r"""
import sys, torch, vlattn
torch.manual_seed(int(sys.argv[2]))
outs = []
# 034's K / V pair of config "gemm" at 2 x 2300 = 4600 vision rows (the rule runs them back to back) and at
# 2 x 700 (side by side), the second from a caller's stream.
w = [torch.randn(h * 128, 512, dtype=torch.bfloat16, device="cuda") * 0.05 for h in (4, 2, 2)]
b = [torch.randn(h * 128, dtype=torch.bfloat16, device="cuda") for h in (4, 2, 2)]
side = torch.cuda.Stream()
for lv, stream in ((2300, None), (700, side)):
    lang = torch.randn(2, 300, 512, dtype=torch.bfloat16, device="cuda")
    vis = torch.randn(2, lv, 512, dtype=torch.bfloat16, device="cuda")
    pos = torch.randint(0, 8192, (2, 300), device="cuda")
    thw = torch.randint(0, 8192, (2, lv, 3), device="cuda")
    with torch.cuda.stream(stream):
        outs += list(vlattn.vision_qkv(lang, vis, pos, thw, w[0], b[0], w[1], b[1], w[2], b[2], config="gemm"))
torch.cuda.synchronize()
torch.save([t.cpu() for t in outs], sys.argv[1])
"""


@requires_sm90
def test_cross_pair_side_stream_is_bitwise_neutral(tmp_path, rng_seed):
    """034's K and V GEMMs of config "gemm" side by side on a forked stream or back to back (the rule:
    back to back at 4096-8191 vision rows; VLATTN_QKV_GEMM_STREAMS=2 always side by side, 0 never) give the
    same bits, inside and outside the rule's window, from the default and from a non-default stream."""
    assert_switch_bitwise_neutral(_PAIR_STREAMS_SCRIPT, tmp_path, rng_seed, "VLATTN_QKV_GEMM_STREAMS", 6,
                                  "K / V side by side vs back to back", values=(None, "2"))


@requires_sm90
@pytest.mark.filterwarnings("ignore:DEBUG")  # torch warns on every debug_dump
def test_side_stream_is_never_the_callers():
    """The K / V pair's side stream comes from c10's pool, round-robin over its 32 streams, and the caller's
    stream can be one of them (torch.cuda.Stream(); torch.cuda.graph captures on one). Had the pool handed the
    caller's own stream back, the fork would be empty and the GEMMs back to back: 034 B8 Lq128's graph replay
    read ~37 us slower in the bench's full run (bench/NOTES.md, fifty-sixth session). 33 captures from one pool
    stream pass every position of the pool's counter; each captured graph must join two branches (a node with
    two dependencies: the GEMM pair's join), which a chain of one stream's work never has."""
    import collections
    import os
    import re
    import tempfile
    torch.manual_seed(0)
    w = [torch.randn(h * 128, 256, dtype=torch.bfloat16, device="cuda") * 0.05 for h in (4, 2, 2)]
    b = [torch.randn(h * 128, dtype=torch.bfloat16, device="cuda") for h in (4, 2, 2)]
    lang = torch.randn(1, 40, 256, dtype=torch.bfloat16, device="cuda")
    vis = torch.randn(1, 300, 256, dtype=torch.bfloat16, device="cuda")  # 300 rows: side by side (rule: < 4096)
    pos = torch.randint(0, 8192, (1, 40), device="cuda")
    thw = torch.randint(0, 8192, (1, 300, 3), device="cuda")

    def call():
        return vlattn.vision_qkv(lang, vis, pos, thw, w[0], b[0], w[1], b[1], w[2], b[2], config="gemm")

    caller = torch.cuda.Stream()
    with torch.cuda.stream(caller):
        eager = [t.clone() for t in call()]
    torch.cuda.synchronize()
    chains = []
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(33):
            graph = torch.cuda.CUDAGraph(keep_graph=True)  # the cudaGraph_t kept for debug_dump
            graph.enable_debug_mode()
            with torch.cuda.graph(graph, stream=caller):
                out = call()
            graph.replay()
            torch.cuda.synchronize()
            for t, ref, name in zip(out, eager, "qkv"):
                assert torch.equal(t, ref), f"capture {i}: {name} differs from the eager call"
            path = f"{tmp}/graph{i}.dot"
            graph.debug_dump(path)
            assert os.path.exists(path), f"capture {i}: debug_dump wrote no {path}"
            with open(path) as f:
                edges = re.findall(r'"?(\w+)"?\s*->\s*"?(\w+)"?', f.read())
            assert edges, f"capture {i}: no edges in the graph's dump"
            deps = collections.Counter(dst for _, dst in edges)
            if max(deps.values()) < 2:
                chains.append(i)
    assert not chains, f"captures {chains} of 33 ran the K and V GEMMs on the caller's stream, back to back"


_ROPE_MERGE_SCRIPT = r"""
import sys, torch, vlattn
from vlattn import workloads as W
outs = []
# 034 workloads whose launches take the op-level plans: B2 Lq128/Lv196 runs every GEMM then the RoPE
# pass(es), B8 Lq256/Lv392 one grouped GEMM; then a small shape through the named grouped config, from a
# non-default stream.
for name in ("034[B=2,Lq=128,Lv=196]", "034[B=8,Lq=256,Lv=392]"):
    w = next(x for x in W.load("034") if x.name == name)
    i = W.make_inputs(w, "cuda", seed=int(sys.argv[2]))
    outs += list(vlattn.vision_qkv(i["language_hidden_states"], i["vision_hidden_states"], i["language_position_ids"],
                                   i["vision_grid_thw"], i["q_proj_weight"], i["q_proj_bias"], i["k_proj_weight"],
                                   i["k_proj_bias"], i["v_proj_weight"], i["v_proj_bias"]))
torch.manual_seed(int(sys.argv[2]))
lang = torch.randn(2, 37, 512, dtype=torch.bfloat16, device="cuda")
vis = torch.randn(2, 64, 512, dtype=torch.bfloat16, device="cuda")
pos = torch.randint(0, 8000, (2, 37), device="cuda")
thw = torch.randint(0, 8192, (2, 64, 3), device="cuda")
w = [torch.randn(h * 128, 512, dtype=torch.bfloat16, device="cuda") * 0.05 for h in (4, 2, 2)]
b = [torch.randn(h * 128, dtype=torch.bfloat16, device="cuda") for h in (4, 2, 2)]
side = torch.cuda.Stream()
with torch.cuda.stream(side):
    outs += list(vlattn.vision_qkv(lang, vis, pos, thw, w[0], b[0], w[1], b[1], w[2], b[2], config="grouped"))
torch.cuda.synchronize()
torch.save([t.cpu() for t in outs], sys.argv[1])
"""


@requires_sm90
def test_cross_rope_passes_merged_are_bitwise_neutral(tmp_path, rng_seed):
    """034's two launches share one RoPE pass after all their GEMMs (default, all-GEMMs plan) or each
    gets its own (VLATTN_QKV_ROPE_MERGE=0): the same bits, on the all-GEMMs plan, the grouped plan and the
    named grouped config."""
    assert_switch_bitwise_neutral(_ROPE_MERGE_SCRIPT, tmp_path, rng_seed, "VLATTN_QKV_ROPE_MERGE", 9,
                                  "one RoPE pass vs one per launch")


@requires_sm90
def test_cross_rope_table_is_bitwise_neutral(tmp_path, rng_seed):
    """The RoPE pass with its position-mode cos/sin precomputed into a table by a kernel of its own
    (default below 2048 rows; VLATTN_QKV_ROPE_TABLE=2 always) gives the bits of the pass computing
    them itself (0): the all-GEMMs plan's merged pass, the grouped GEMM's per-launch passes, and
    positions up to 8191 from a non-default stream."""
    assert_switch_bitwise_neutral(_ROPE_MERGE_SCRIPT, tmp_path, rng_seed, "VLATTN_QKV_ROPE_TABLE", 9,
                                  "cos/sin table vs computed in the pass", values=(None, "2"))


@requires_sm90
def test_rope_pass_width_is_bitwise_neutral(tmp_path, rng_seed):
    """The RoPE pass with runs of 8 or 32 heads per block (VLATTN_QKV_PASS_WIDTH, an A/B) gives the bits of
    the rule's runs (0): 034's merged and grouped-plan passes (1-D q, t/h/w k, v; 32 heads in one block walk
    8 steps of the copy ring) and 007's table-RoPE pass of config "gemm" (8 / 2 / 2 heads), from the default
    and from a non-default stream."""
    assert_switch_bitwise_neutral(_ROPE_MERGE_SCRIPT, tmp_path, rng_seed, "VLATTN_QKV_PASS_WIDTH", 9,
                                  "forced pass width vs the rule", values=("8", "32"))
    assert_switch_bitwise_neutral(_GEMM_STREAMS_SCRIPT, tmp_path, rng_seed, "VLATTN_QKV_PASS_WIDTH", 6,
                                  "forced pass width vs the rule", values=("8", "32"))


@requires_sm90
@pytest.mark.parametrize("config", ["grouped", "grouped128"])
def test_grouped_bias_rules(config):
    """The grouped GEMM reads every projection's bias through one array of 16-byte aligned pointers:
    a bias set with some None, or a bias at a 2-byte offset, is refused with a message naming the
    rule, never read out of bounds."""
    args = mrope_case(1, 64, hidden=256, hq=4, hkv=2)
    mixed = dict(args, k_bias=None)
    with pytest.raises(RuntimeError, match="all be given or all be None"):
        run_mrope(mixed, config=config)
    odd = dict(args, q_bias=torch.randn(4 * HEAD_DIM + 1, dtype=BF16, device="cuda")[1:])
    with pytest.raises(RuntimeError, match="16-byte aligned"):
        run_mrope(odd, config=config)


@requires_sm90
@pytest.mark.parametrize("lq,lv", [(0, 45), (21, 0)])
def test_grouped_cross_one_side_empty(lq, lv):
    """034 through the grouped GEMM with no text or no vision rows: the other side's projections
    still match the reference bit for bit, the empty side comes back empty."""
    args = cross_case(2, lq, lv, hidden=256, hq=4, hkv=2, integer=True, positions="random")
    # The reference cannot reshape zero rows: the fused kernel's outputs (bitwise the reference's on
    # these exact inputs, test_cross_exact_rounding) stand in for it.
    for got, ref, name in zip(run_cross(args, "grouped"), run_cross(args, "m128"), "qkv"):
        assert got.shape == ref.shape, name
        assert_bitwise(got, ref, f"{name} Lq={lq} Lv={lv} grouped vs m128")


@requires_sm90
@pytest.mark.parametrize("batch,seq", [(0, 5), (2, 0)])
def test_mrope_zero_rows(batch, seq):
    """No rows: the op returns empty head-major tensors without launching (the automatic config rule
    divided by the tile count, zero here, before that check)."""
    q, k, v = run_mrope(mrope_case(batch, seq, hidden=256, hq=4, hkv=2))
    assert q.shape == (batch, 4, seq, HEAD_DIM) and k.shape == v.shape == (batch, 2, seq, HEAD_DIM)


@requires_sm90
def test_mrope_strided_tables_and_gqa_1():
    """cos/sin as strided views (planes from a wider buffer) and Hq == Hkv."""
    batch, seq = 2, 130
    args = mrope_case(batch, seq, hidden=512, hq=2, hkv=2, integer=True)
    wide = torch.randn(3, batch, seq, 2 * HEAD_DIM, dtype=BF16, device="cuda")
    args["cos"], args["sin"] = wide[..., :HEAD_DIM], wide[..., HEAD_DIM:]
    for got, ref, name in zip(run_mrope(args), ref_mrope(args), "qkv"):
        assert_bitwise(got, ref, f"{name} strided tables")


@requires_sm90
@pytest.mark.parametrize("config", ["m128", "splitk2", "c256", "gemm"])
@pytest.mark.parametrize("layout", ["chunk-aligned", "off-chunk-section", "misaligned-table"])
def test_mrope_table_read_paths(layout, config):
    """cos/sin are read 16 bytes at a time when every 8-channel chunk lies in one mRoPE plane and the
    tables' rows are 16-byte aligned, element-wise otherwise: both paths bitwise against the reference
    (a section boundary inside a chunk; tables viewed at an odd element offset)."""
    batch, seq = 2, 70
    args = mrope_case(batch, seq, hidden=256, hq=4, hkv=2, integer=True, tables="randn")
    section = [36, 44, 48] if layout == "off-chunk-section" else HF_SECTION
    if layout == "misaligned-table":
        wide = torch.randn(3, batch, seq, HEAD_DIM + 1, dtype=BF16, device="cuda")
        wide2 = torch.randn(3, batch, seq, HEAD_DIM + 1, dtype=BF16, device="cuda")
        args["cos"], args["sin"] = wide[..., 1:], wide2[..., 1:]
    for got, ref, name in zip(run_mrope(args, section, config), ref_mrope(args, section), "qkv"):
        assert_bitwise(got, ref, f"{name} {layout} {config}")


# --------------------------------------------------------------------------------------------
# 034
# --------------------------------------------------------------------------------------------

@requires_sm90
@pytest.mark.parametrize("config", CONFIGS)
@pytest.mark.parametrize("positions", ["seed", "random"])
def test_cross_exact_rounding(positions, config):
    """Exact GEMM -> bitwise equal, including cos/sin computed in-kernel at positions up to 8191."""
    args = cross_case(2, 373, 588, integer=True, positions=positions)
    for got, ref, name in zip(run_cross(args, config), ref_cross(args), "qkv"):
        assert_bitwise(got, ref, f"{name} positions={positions} {config}")


@requires_sm90
@pytest.mark.parametrize("hq,hkv", [(10, 5), (9, 1), (3, 3)])
def test_gemm_rope_pass_head_chunks(hq, hkv):
    """The two-pass config's RoPE kernel takes up to 4 heads of a group per block: head counts that are
    not multiples of 4 (a partial last chunk), one head, and more chunks than groups, bitwise against
    the reference for the table mRoPE (007) and the in-kernel 1-D / t/h/w RoPE (034)."""
    args = mrope_case(2, 37, hidden=256, hq=hq, hkv=hkv, integer=True, tables="randn")
    for got, ref, name in zip(run_mrope(args, HF_SECTION, "gemm"), ref_mrope(args, HF_SECTION), "qkv"):
        assert_bitwise(got, ref, f"{name} 007 hq={hq} hkv={hkv} gemm")
    cargs = cross_case(2, 21, 45, hidden=256, hq=hq, hkv=hkv, integer=True, positions="random")
    for got, ref, name in zip(run_cross(cargs, "gemm"), ref_cross(cargs), "qkv"):
        assert_bitwise(got, ref, f"{name} 034 hq={hq} hkv={hkv} gemm")
    for config in ("grouped128", "grouped64"):  # tiles of 192 columns straddle heads and problems' ends
        for got, ref, name in zip(run_mrope(args, HF_SECTION, config), ref_mrope(args, HF_SECTION), "qkv"):
            assert_bitwise(got, ref, f"{name} 007 hq={hq} hkv={hkv} {config}")
        for got, ref, name in zip(run_cross(cargs, config), ref_cross(cargs), "qkv"):
            assert_bitwise(got, ref, f"{name} 034 hq={hq} hkv={hkv} {config}")


@requires_sm90
def test_gemm_rope_pass_head_runs():
    """From ~2k rows the RoPE pass gives a block a run of 8, 16 or 32 heads of a group, walked 4 at a time
    through its cp.async ring (qkv_rope_rows_sm90). On the H200, 4300 rows take runs of 16 Q heads (30:
    16 + 14, the last step 2 heads); 007's K/V groups (5 heads) ride along in runs of 8 (a step of 4, one
    of 1), 034's K/V launch keeps runs of 4. Small hidden size, so that the sanitizers can run it; bitwise
    against the reference for the table mRoPE (007) and the 1-D / t/h/w RoPE (034)."""
    args = mrope_case(1, 4300, hidden=256, hq=30, hkv=5, integer=True, tables="randn")
    for got, ref, name in zip(run_mrope(args, HF_SECTION, "gemm"), ref_mrope(args, HF_SECTION), "qkv"):
        assert_bitwise(got, ref, f"{name} 007 4300 rows gemm")
    cargs = cross_case(1, 4300, 4300, hidden=256, hq=30, hkv=5, integer=True, positions="random")
    for got, ref, name in zip(run_cross(cargs, "gemm"), ref_cross(cargs), "qkv"):
        assert_bitwise(got, ref, f"{name} 034 4300 rows gemm")


_GEMM_EPI_EXACT_SCRIPT = r"""
import sys, torch, vlattn
cases = torch.load(sys.argv[2])
outs = []
for kind, args, extra in cases:
    args = {k: None if v is None else v.cuda() for k, v in args.items()}
    fn = vlattn.mrope_qkv if kind == "007" else vlattn.vision_qkv
    outs += [t.cpu() for t in fn(*args.values(), config="gemm", **extra)]
torch.save(outs, sys.argv[1])
"""


@requires_sm90
@pytest.mark.parametrize("mode", ["2", "3", "4"], ids=["pingpong", "coop", "pingpong128"])
@pytest.mark.parametrize("batch,seq,bias", [(1, 1024, True), (2, 550, False), (3, 1400, True)],
                         ids=["B1-S1024", "B2-S550-nobias", "B3-S1400"])
def test_gemm_epilogue_exact(batch, seq, bias, mode, tmp_path):
    """Config "gemm" with every group that can take it on the GEMM whose epilogue applies bias, table
    RoPE and the head-major store in registers (VLATTN_QKV_GEMM_EPI=2: 007's q, k, v and 034's v from
    1024 rows; 034's q through its 1-D cos/sin table, VLATTN_QKV_EPI_POS1D; 034's k keeps the RoPE pass). Exact GEMM -> every bit equals the reference: rows that
    cross batches and end inside a tile, odd head counts (a 256-column tile's second head out of range),
    no bias, both mRoPE splits. Run in a fresh process: the switch is read once."""
    cases, refs = [], []
    for section in (SEED_SECTION, HF_SECTION):
        args = mrope_case(batch, seq, hidden=256, hq=9, hkv=3, integer=True, tables="randn", bias=bias)
        cases.append(("007", {k: None if v is None else v.cpu() for k, v in args.items()}, {"mrope_section": section}))
        refs += [(r, f"{n} 007 section={section}") for r, n in zip(ref_mrope(args, section), "qkv")]
    cargs = cross_case(batch, seq, seq + 131, hidden=256, hq=9, hkv=3, integer=True, positions="random", bias=bias)
    cases.append(("034", {k: None if v is None else v.cpu() for k, v in cargs.items()}, {}))
    refs += [(r, f"{n} 034") for r, n in zip(ref_cross(cargs), "qkv")]
    torch.save(cases, tmp_path / "cases.pt")
    outs = outputs_in_subprocess(_GEMM_EPI_EXACT_SCRIPT, tmp_path / "outs.pt", {"VLATTN_QKV_GEMM_EPI": mode},
                                 tmp_path / "cases.pt")
    assert len(outs) == len(refs)
    for got, (ref, what) in zip(outs, refs):
        assert_bitwise(got, ref.cpu(), f"{what} B={batch} S={seq} gemm, RoPE epilogue")


_GEMM_EPI_SCRIPT = r"""
import sys, torch, vlattn
torch.manual_seed(int(sys.argv[2]))
outs = []
# 007 at 2 x 2100 rows: inside the default rule's 4096-8191 rows.
x = torch.randn(2, 2100, 512, dtype=torch.bfloat16, device="cuda")
w = [torch.randn(h * 128, 512, dtype=torch.bfloat16, device="cuda") * 0.05 for h in (10, 2, 2)]
b = [torch.randn(h * 128, dtype=torch.bfloat16, device="cuda") for h in (10, 2, 2)]
cos, sin = torch.randn(2, 3, 2, 2100, 128, dtype=torch.bfloat16, device="cuda")
outs += list(vlattn.mrope_qkv(x, w[0], b[0], w[1], b[1], w[2], b[2], cos, sin, config="gemm"))
lang = torch.randn(1, 1500, 512, dtype=torch.bfloat16, device="cuda")
vis = torch.randn(1, 2100, 512, dtype=torch.bfloat16, device="cuda")
pos = torch.randint(0, 8192, (1, 1500), device="cuda")
thw = torch.randint(0, 8192, (1, 2100, 3), device="cuda")
side = torch.cuda.Stream()  # a caller's non-default stream
with torch.cuda.stream(side):
    outs += list(vlattn.vision_qkv(lang, vis, pos, thw, w[0], b[0], w[1], b[1], w[2], b[2], config="gemm"))
torch.cuda.synchronize()
torch.save([t.cpu() for t in outs], sys.argv[1])
"""


@requires_sm90
def test_gemm_epilogue_is_bitwise_neutral(tmp_path, rng_seed):
    """Config "gemm" with the RoPE in the GEMM epilogue gives the bits of the GEMM + RoPE pass path
    (VLATTN_QKV_GEMM_EPI=0) on random (not exactly representable) inputs, both by the default rule (007
    at 4200 rows) and everywhere it can run on any tile (=2 ping-pong, =3 cooperative, =4 ping-pong
    128 x 128; 034's v and its q, through the 1-D cos/sin table, too):
    the same fp32 accumulators, the same roundings."""
    assert_switch_bitwise_neutral(_GEMM_EPI_SCRIPT, tmp_path, rng_seed, "VLATTN_QKV_GEMM_EPI", 6,
                                  "RoPE epilogue vs the RoPE pass", values=("1", "2", "3", "4"))


_EPI_POS1D_SCRIPT = r"""
import sys, torch, vlattn
torch.manual_seed(int(sys.argv[2]))
outs = []
# 034's q at 3 x 1550 = 4650 text rows (the default rule's epilogue GEMM from 4096 rows), positions up to
# 8191, batches that end inside a tile; once by config "gemm", once automatically, on a caller's stream.
lang = torch.randn(3, 1550, 512, dtype=torch.bfloat16, device="cuda")
vis = torch.randn(3, 700, 512, dtype=torch.bfloat16, device="cuda")
w = [torch.randn(h * 128, 512, dtype=torch.bfloat16, device="cuda") * 0.05 for h in (10, 2, 2)]
b = [torch.randn(h * 128, dtype=torch.bfloat16, device="cuda") for h in (10, 2, 2)]
pos = torch.randint(0, 8192, (3, 1550), device="cuda")
thw = torch.randint(0, 8192, (3, 700, 3), device="cuda")
outs += list(vlattn.vision_qkv(lang, vis, pos, thw, w[0], b[0], w[1], b[1], w[2], b[2], config="gemm"))
side = torch.cuda.Stream()
with torch.cuda.stream(side):
    outs += list(vlattn.vision_qkv(lang, vis, pos, thw, w[0], b[0], w[1], b[1], w[2], b[2]))
torch.cuda.synchronize()
torch.save([t.cpu() for t in outs], sys.argv[1])
"""


@requires_sm90
def test_gemm_epilogue_pos1d_is_bitwise_neutral(tmp_path, rng_seed):
    """034's q with its 1-D position RoPE in the GEMM epilogue, read from the RoPE table kernel's cos/sin
    (VLATTN_QKV_EPI_POS1D, default on), gives the bits of the GEMM + RoPE pass path (=0) on random
    inputs: the same accumulators, the same table values, the same roundings."""
    assert_switch_bitwise_neutral(_EPI_POS1D_SCRIPT, tmp_path, rng_seed, "VLATTN_QKV_EPI_POS1D", 6,
                                  "1-D RoPE in the epilogue vs the RoPE pass")


@requires_sm90
@pytest.mark.parametrize("batch,lq,lv", SHAPES_034, ids=[f"B{b}-Lq{q}-Lv{v}" for b, q, v in SHAPES_034])
def test_cross_workload_shapes(batch, lq, lv):
    args = cross_case(batch, lq, lv)
    ref, ref32 = ref_cross(args), ref_cross(args, dtype=torch.float32)
    for got, r, r32, sc, name in zip(run_cross(args), ref, ref32, cross_scales(args), "qkv"):
        assert_close_to_reference(got, r, r32, f"{name} B={batch} Lq={lq} Lv={lv}", sc)


@requires_sm90
@pytest.mark.parametrize("lq,lv", [(1, 1), (127, 541), (613, 17)])
def test_cross_tails_no_bias_other_split(lq, lv):
    args = cross_case(1, lq, lv, positions="random", bias=False, integer=True)
    split = (40, 44, 44)
    got = vlattn.vision_qkv(*args.values(), thw_split=split, rope_theta=5e5)
    ref = reference.vision_qkv(*args.values(), thw_split=split, rope_theta=5e5)
    for g, r, name in zip(got, ref, "qkv"):
        assert_bitwise(g, r, f"{name} Lq={lq} Lv={lv} split={split}")


# --------------------------------------------------------------------------------------------
# Layers: the native backend now runs the fused projections
# --------------------------------------------------------------------------------------------

@requires_sm90
@pytest.mark.parametrize("w", [W.load("007")[0], W.load("034")[0]], ids=lambda w: w.problem)
def test_native_layer_uses_fused_projection(w):
    inputs = W.make_inputs(w, "cuda")
    fn = vlattn.mrope_self_attention if w.problem == "007" else vlattn.vision_cross_attention
    out = fn(*inputs.values(), backend="native")
    ref = (reference.mrope_self_attention if w.problem == "007" else reference.vision_cross_attention)(*inputs.values())
    assert W.check_workload(w, out, ref).ok


# --------------------------------------------------------------------------------------------
# Errors (CPU tensors reach the C++ op and get a clear message)
# --------------------------------------------------------------------------------------------

@requires_ext
def test_cpu_tensors_rejected():
    x = torch.randn(1, 4, 256, dtype=BF16)
    w = torch.randn(256, 256, dtype=BF16)
    t = torch.randn(3, 1, 4, HEAD_DIM, dtype=BF16)
    with pytest.raises(RuntimeError, match="vlattn.mrope_qkv: the native backend needs CUDA tensors"):
        torch.ops.vlattn.mrope_qkv(x, w, None, w[:128], None, w[:128], None, t, t)
    with pytest.raises(RuntimeError, match="vlattn.vision_qkv: the native backend needs CUDA tensors"):
        torch.ops.vlattn.vision_qkv(x, x, torch.zeros(1, 4, dtype=torch.long), torch.zeros(1, 4, 3, dtype=torch.long),
                                    w, None, w[:128], None, w[:128], None)


@requires_sm90
@pytest.mark.parametrize("change,match", [
    (lambda a: a.update(cos=a["cos"][:2]), r"cos must be \[3, B, S, 128\]"),
    (lambda a: a.update(sin=a["sin"].float()), "sin must be BFloat16"),
    (lambda a: a.update(q_weight=a["q_weight"][:100]), "must have heads \\* 128 rows"),
    (lambda a: a.update(k_bias=a["k_bias"][:128]), r"k_bias must be a contiguous 1-D \[256\]"),
    (lambda a: a.update(v_weight=a["v_weight"][:, :128]), "v_weight must have k_weight's shape"),
    (lambda a: a.update(hidden_states=a["hidden_states"].transpose(0, 1)), "hidden_states must have unit stride"),
    (lambda a: a.update(cos=a["cos"].cpu()), "cos must be on cuda"),
], ids=["cos-shape", "sin-dtype", "q-rows", "k-bias", "v-shape", "x-strides", "cos-device"])
def test_mrope_bad_inputs(change, match):
    args = mrope_case(2, 8, hidden=256, hq=4, hkv=2)
    change(args)
    with pytest.raises(RuntimeError, match=match):
        run_mrope(args)


@requires_sm90
def test_bad_section_and_split():
    args = mrope_case(1, 8, hidden=256, hq=2, hkv=1)
    with pytest.raises(RuntimeError, match="mrope_section must sum to head_dim = 128"):
        run_mrope(args, section=(32, 48, 40))
    cargs = cross_case(1, 4, 4, hidden=256, hq=2, hkv=1)
    with pytest.raises(RuntimeError, match="thw_split entries must be positive and even"):
        vlattn.vision_qkv(*cargs.values(), thw_split=(43, 41, 44))
    with pytest.raises(RuntimeError, match=r"vision_grid_thw must be \[B, Lv, 3\]"):
        cargs["vision_grid_thw"] = cargs["vision_grid_thw"][..., :2]
        vlattn.vision_qkv(*cargs.values())
    with pytest.raises(RuntimeError, match="config must be"):
        run_mrope(args, config="m256")
    with pytest.raises(RuntimeError, match=r"config 'c256' cannot run M=8, K=256 with heads per group 3/1/1 \(c256 "
                                           r"needs an even head count"):  # head pairs need even head counts
        run_mrope(mrope_case(1, 8, hidden=256, hq=3, hkv=1), config="c256")
    with pytest.raises(RuntimeError, match=r"config 'splitk4' cannot run M=8, K=64 .*splitk<N> needs at least N "
                                           r"k-tiles"):  # 4 splits of a single k tile
        run_mrope(mrope_case(1, 8, hidden=64, hq=2, hkv=1), config="splitk4")


def test_splitk_trace_rejects_bad_buffers():
    """vlattn.dev.splitk_trace checks its buffer before the extension sees a pointer."""
    from vlattn import _ext, dev

    if _ext._C is None:
        pytest.skip("needs the compiled extension vlattn._C")
    with pytest.raises(TypeError, match="buffer must be a torch.Tensor or None"):
        dev.splitk_trace([0] * 8)
    with pytest.raises(ValueError, match=r"contiguous int64 CUDA tensor of shape \[ctas >= 1, 8\]"):
        dev.splitk_trace(torch.zeros(4, 8, dtype=torch.int64))  # on the CPU
    if torch.cuda.is_available():
        with pytest.raises(ValueError, match="int64"):
            dev.splitk_trace(torch.zeros(4, 8, dtype=torch.int32, device="cuda"))
        with pytest.raises(ValueError, match="shape"):
            dev.splitk_trace(torch.zeros(4, 7, dtype=torch.int64, device="cuda"))


@requires_sm90
def test_splitk_trace_stamps_every_cta_in_order():
    """With a trace buffer the split-K kernel (007 at 128 rows: splitk3, 108 CTAs) fills one row per CTA with
    non-decreasing times, its SM and its cluster rank; the outputs keep their bits; without it nothing is written."""
    from vlattn import dev

    args = mrope_case(1, 128)
    plain = run_mrope(args, config="splitk3")
    ctas = 36 * 3
    buf = torch.full((ctas + 4, dev.SPLITK_TRACE_SLOTS), -1, dtype=torch.int64, device="cuda")
    try:
        dev.splitk_trace(buf)
        traced = run_mrope(args, config="splitk3")
        torch.cuda.synchronize()
    finally:
        dev.splitk_trace(None)
    for name, a, b in zip("qkv", plain, traced):
        assert torch.equal(a, b), f"{name}: the trace changed the result"
    rows = buf[:ctas].cpu()
    assert (rows >= 0).all(), "a CTA's slot was not written"
    times = rows[:, :6]
    assert (times[:, 1:] >= times[:, :-1]).all(), "stamps out of order"
    assert (rows[:, 7] == torch.arange(ctas) % 3).all(), "cluster ranks"
    assert (rows[:, 6] < torch.cuda.get_device_properties(0).multi_processor_count).all(), "SM ids"
    assert (buf[ctas:] == -1).all(), "rows beyond the launch's CTAs were written"
    before = buf.clone()
    run_mrope(args, config="splitk3")
    torch.cuda.synchronize()
    assert torch.equal(buf, before), "the trace wrote after it was turned off"
