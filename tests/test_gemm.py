"""vlattn.linear (the sm_90a CUTLASS GEMMs) against cuBLAS (F.linear) and an fp32 reference.

Shapes: every projection GEMM of the 32 workloads, off-by-one tails (M = 1, 127, 541) on the layer
widths, every compiled config on a subset, and the tensor checks of csrc/ops/linear.cpp.
Tolerance: bf16 out vs F.linear's bf16 out within about one bf16 ulp elementwise
(|d| <= 1e-2 + 1e-2 |ref|), relative Frobenius error < 5e-3, and vs the fp32 reference no worse
than 2x cuBLAS's own error.

Run: PYTHONPATH=python python -m pytest -q tests/test_gemm.py   (skips without an sm_90 GPU)
"""
import pytest
import torch
import torch.nn.functional as F

import vlattn
from vlattn import workloads as W
from vlattn.gemm_configs import (GEMM_CONFIGS, PARALLEL_SPLITS, SPLITS, is_valid_name, parse_name, runnable_name,
                                 splits_fit, split_name)
from conftest import BF16, poisoned, rel_fro, requires_sm90

pytestmark = requires_sm90

WORKLOAD_SHAPES = sorted({(m, n, k, bias) for w in W.load() for _, m, n, k, bias in W.projection_shapes(w)})
# Layer widths (N, K): fused QKV of 007, Q/O of 007, Q/O of 034, fused K+V of 034, K or V of 034, K or V of 007.
LAYER_NK = [(4608, 3584), (3584, 3584), (4096, 4096), (2048, 4096), (1024, 4096), (512, 3584)]
TAIL_M = [1, 127, 541]
STREAMK = [c.name for c in GEMM_CONFIGS if c.scheduler == "streamk"]
PSPLIT = [c.name for c in GEMM_CONFIGS if c.scheduler == "splitk"]


@pytest.fixture(autouse=True)
def _fp32_references(highest_fp32_matmul):
    """Every test here compares with fp32 references: no TF32 (fixture in conftest)."""


def operands(m, n, k, bias, *, x_shape=None):
    x = torch.randn(*(x_shape or (m, k)), dtype=BF16, device="cuda")
    weight = torch.randn(n, k, dtype=BF16, device="cuda") * 0.02
    b = torch.randn(n, dtype=BF16, device="cuda") * 0.02 if bias else None
    return x, weight, b


def assert_matches_cublas(got, x, weight, b, what):
    ref = F.linear(x, weight, b)
    ref32 = F.linear(x.float(), weight.float(), None if b is None else b.float())
    assert got.shape == ref.shape and got.dtype == BF16, what
    assert torch.isfinite(got).all(), f"{what}: NaN/Inf in output (unwritten elements stay NaN)"
    diff = (got.float() - ref.float()).abs()
    bound = 1e-2 + 1e-2 * ref.float().abs()
    bad = diff > bound
    if bad.any():
        i = diff.sub(bound).argmax()
        pytest.fail(f"{what}: {int(bad.sum())} of {diff.numel()} elements off; worst at flat index {int(i)}: "
                    f"got {got.flatten()[i].item()}, cuBLAS {ref.flatten()[i].item()}")
    err, cublas_err = rel_fro(got, ref32), rel_fro(ref, ref32)
    assert rel_fro(got, ref) < 5e-3, what
    assert err <= 2 * cublas_err + 1e-4, f"{what}: rel err vs fp32 {err:.3e}, cuBLAS {cublas_err:.3e}"


def check(m, n, k, bias, config=None, x_shape=None):
    x, weight, b = operands(m, n, k, bias, x_shape=x_shape)
    what = f"M={m} N={n} K={k} bias={bias} config={config or 'dispatch'}"
    out = poisoned(*x.shape[:-1], n, device="cuda")
    assert vlattn.linear(x, weight, b, out=out, config=config) is out
    assert_matches_cublas(out, x, weight, b, what + " (out=)")
    assert_matches_cublas(vlattn.linear(x, weight, b, config=config), x, weight, b, what)


# --------------------------------------------------------------------------------------------
# Numerics
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("m,n,k,bias", WORKLOAD_SHAPES,
                         ids=[f"M{m}-N{n}-K{k}{'-bias' if b else ''}" for m, n, k, b in WORKLOAD_SHAPES])
def test_workload_shapes(m, n, k, bias):
    check(m, n, k, bias)


@pytest.mark.parametrize("bias", [True, False], ids=["bias", "no-bias"])
@pytest.mark.parametrize("n,k", LAYER_NK, ids=[f"N{n}-K{k}" for n, k in LAYER_NK])
@pytest.mark.parametrize("m", TAIL_M)
def test_tails(m, n, k, bias):
    check(m, n, k, bias)


# Every compiled config by a name vlattn.linear runs: a parallel split-K config exists only as '<name>/splitk<N>' (the
# bare name is refused: test_invalid), so it runs here as /splitk2 (its other splits: test_parallel_split_k). Checked
# at collection, so that CPU runs catch a name the GPU would refuse.
EACH_CONFIG = [runnable_name(c) for c in GEMM_CONFIGS]
assert all(is_valid_name(name) and splits_fit(name, 3584) for name in EACH_CONFIG), EACH_CONFIG


@pytest.mark.parametrize("m", TAIL_M + [2048])
@pytest.mark.parametrize("config", EACH_CONFIG)
def test_each_config(config, m):
    if parse_name(config)[0] not in vlattn.extension_info()["gemm_configs"]:
        pytest.skip(f"{config} is not compiled into this build (VLATTN_GEMM_CONFIGS subset)")
    check(m, 3584, 3584, True, config=config)
    check(m, 512, 3584, False, config=config)


def test_batched_input():
    """The layers pass [B, S, hidden] activations."""
    check(542, 4608, 3584, True, x_shape=(2, 271, 3584))


def test_vector_input():
    check(1, 1024, 4096, True, x_shape=(4096,))


SWAPPED = [c.name for c in GEMM_CONFIGS if c.swap_ab]


@pytest.mark.parametrize("config", [None] + SWAPPED)
def test_strided_rows(config):
    """Rows of a wider buffer (row stride K + 64) are read in place, not copied; the swapped configs
    take the strides on the other operand and write the output column-major in their own terms."""
    if config is not None and config not in vlattn.extension_info()["gemm_configs"]:
        pytest.skip(f"{config} is not compiled into this build (VLATTN_GEMM_CONFIGS subset)")
    m, n, k = 300, 1024, 4096
    _, weight, b = operands(m, n, k, True)
    x = torch.randn(m, k + 64, dtype=BF16, device="cuda")[:, :k]
    out = poisoned(m, n, device="cuda")
    vlattn.linear(x, weight, b, out=out, config=config)
    assert_matches_cublas(out, x, weight, b, "strided x")
    wide = poisoned(m, n + 64, device="cuda")
    vlattn.linear(x, weight, b, out=wide[:, :n], config=config)
    assert_matches_cublas(wide[:, :n], x, weight, b, "strided out")
    assert wide[:, n:].isnan().all(), "wrote past the out view"


@pytest.mark.parametrize("config", STREAMK)
@pytest.mark.parametrize("m,n,k", [(128, 3584, 3584), (541, 512, 3584), (1, 4096, 4096)])
def test_stream_k_deterministic(config, m, n, k):
    if config not in vlattn.extension_info()["gemm_configs"]:
        pytest.skip(f"{config} is not compiled into this build")
    x, weight, b = operands(m, n, k, True)
    first = vlattn.linear(x, weight, b, config=config)
    for _ in range(3):
        again = poisoned(m, n, device="cuda")
        vlattn.linear(x, weight, b, out=again, config=config)
        assert torch.equal(again, first)


SPLIT_SHAPES = [(1, 512, 3584), (128, 3584, 3584), (541, 512, 3584), (1024, 512, 3584), (613, 1024, 4096),
                (2048, 3584, 3584)]


@pytest.mark.parametrize("splits", list(SPLITS) + [16])
@pytest.mark.parametrize("m,n,k", SPLIT_SHAPES, ids=[f"M{m}-N{n}-K{k}" for m, n, k in SPLIT_SHAPES])
def test_split_k(m, n, k, splits):
    """'<stream-K config>/splitk<N>': K cut into N parts per tile, reduced in a fixed order: matches
    cuBLAS, and the same bits on every run (a poisoned out each time)."""
    for config in STREAMK:
        check_split(config, splits, m, n, k, True)


def check_split(config, splits, m, n, k, bias):
    """config/splitk<splits> matches cuBLAS and gives the same bits on a second run (a poisoned out each time)."""
    if config not in vlattn.extension_info()["gemm_configs"]:
        pytest.skip(f"{config} is not compiled into this build")
    name = split_name(config, splits)
    x, weight, b = operands(m, n, k, bias)
    out = poisoned(m, n, device="cuda")
    vlattn.linear(x, weight, b, out=out, config=name)
    assert_matches_cublas(out, x, weight, b, f"M={m} N={n} K={k} {name}")
    again = poisoned(m, n, device="cuda")
    vlattn.linear(x, weight, b, out=again, config=name)
    assert torch.equal(again, out), f"{name}: two runs differ"


def integer_operands(m=300, n=512, k=3584):
    """Small integers: every partial sum is exact in fp32, so any split order gives the unsplit GEMM's bits."""
    x = torch.randint(-3, 4, (m, k), device="cuda").to(BF16)
    weight = torch.randint(-3, 4, (n, k), device="cuda").to(BF16)
    b = torch.randint(-8, 9, (n,), device="cuda").to(BF16)
    return x, weight, b


def test_split_k_exact_on_integers():
    """Integer operands: every partial sum is exact in fp32, so split-K equals the unsplit GEMM bit for bit."""
    x, weight, b = integer_operands()
    whole = vlattn.linear(x, weight, b, config=GEMM_CONFIGS[0].name)
    for config in STREAMK:
        for splits in SPLITS:
            assert torch.equal(vlattn.linear(x, weight, b, config=split_name(config, splits)), whole), splits


PSPLIT_SHAPES = [(1, 512, 3584), (128, 512, 3584), (127, 3584, 3584), (392, 1024, 4096), (613, 512, 3584),
                 (541, 1024, 4096), (64, 256, 512)]


@pytest.mark.parametrize("splits", list(PARALLEL_SPLITS) + [7, 14])
@pytest.mark.parametrize("m,n,k", PSPLIT_SHAPES, ids=[f"M{m}-N{n}-K{k}" for m, n, k in PSPLIT_SHAPES])
@pytest.mark.parametrize("bias", [True, False], ids=["bias", "nobias"])
def test_parallel_split_k(m, n, k, splits, bias):
    """'<parallel split-K config>/splitk<N>': K in N equal slices (fp32 partials), summed in slice order with the
    bias, rounded once: matches cuBLAS, and the same bits on every run (a poisoned out each time)."""
    if k % splits or (k // splits) % 8:
        pytest.skip(f"K={k} does not cut into {splits} slices of a multiple of 8 (refused: test_invalid)")
    for config in PSPLIT:
        check_split(config, splits, m, n, k, bias)


def test_parallel_split_k_exact_on_integers():
    """Integer operands: every partial sum is exact in fp32, so the slices' sum equals the unsplit GEMM bit for bit
    (a slice summed twice, skipped, or reading its neighbour's columns would not)."""
    x, weight, b = integer_operands()
    whole = vlattn.linear(x, weight, b, config=GEMM_CONFIGS[0].name)
    for config in PSPLIT:
        for splits in PARALLEL_SPLITS:
            assert torch.equal(vlattn.linear(x, weight, b, config=split_name(config, splits)), whole), (config, splits)


def test_parallel_split_k_strided_views():
    """Padded rows in x, weight and out (the leading dimensions), with the slices' column offsets on top."""
    m, n, k = 200, 512, 3584
    xs = torch.randn(m, k + 64, dtype=BF16, device="cuda")[:, :k]
    ws = (torch.randn(n, k + 128, dtype=BF16, device="cuda") * 0.02)[:, 8:8 + k]
    b = torch.randn(n, dtype=BF16, device="cuda") * 0.02
    for config in PSPLIT:
        big = poisoned(m, n + 32, device="cuda")
        out = big[:, :n]
        vlattn.linear(xs, ws, b, out=out, config=split_name(config, 8))
        assert_matches_cublas(out, xs, ws, b, f"strided {config}/splitk8")
        assert torch.isnan(big[:, n:].float()).all(), f"{config}: wrote past out's columns"


# --------------------------------------------------------------------------------------------
# Empty problems
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("x_shape", [(0, 256), (2, 0, 256)])
def test_empty_m(x_shape):
    x, weight, b = operands(0, 128, 256, True, x_shape=x_shape)
    assert vlattn.linear(x, weight, b).shape == (*x_shape[:-1], 128)
    out = torch.empty(*x_shape[:-1], 128, dtype=BF16, device="cuda")
    assert vlattn.linear(x, weight, b, out=out) is out


@pytest.mark.parametrize("bias", [True, False], ids=["bias", "no-bias"])
def test_empty_k(bias):
    x, weight, b = operands(5, 64, 0, bias)
    out = poisoned(5, 64, device="cuda")
    vlattn.linear(x, weight, b, out=out)
    assert torch.equal(out, F.linear(x, weight, b))


# --------------------------------------------------------------------------------------------
# Tensor checks
# --------------------------------------------------------------------------------------------

M, N, K = 64, 256, 512


def bad_call(**replace):
    x, weight, b = operands(M, N, K, True)
    args = {"x": x, "weight": weight, "bias": b, "out": None, "config": None}
    args.update(replace)
    return vlattn.linear(args["x"], args["weight"], args["bias"], out=args["out"], config=args["config"])


def cuda_randn(*shape, dtype=BF16):
    return torch.randn(*shape, dtype=dtype, device="cuda")


@pytest.mark.parametrize("replace,pattern", [
    pytest.param(lambda: {"x": cuda_randn(K, M).t()}, r"x must have unit stride in its last dim", id="x-transposed"),
    pytest.param(lambda: {"weight": cuda_randn(K, N).t()}, r"weight must have unit stride in its last dim",
                 id="weight-transposed"),
    pytest.param(lambda: {"x": cuda_randn(M, K + 4)[:, :K]}, r"x's row stride must be a multiple of 8",
                 id="x-row-stride"),
    pytest.param(lambda: {"x": cuda_randn(M * K + 8)[1:1 + M * K].view(M, K)},
                 r"x must start at a 16-byte aligned address", id="x-misaligned"),
    pytest.param(lambda: {"out": poisoned(M, N + 4, device="cuda")[:, :N]}, r"out's row stride must be a multiple of 8",
                 id="out-row-stride"),
    pytest.param(lambda: {"x": cuda_randn(M, K + 8)}, r"x must be \[\.\.\., K\] with K = weight\.size\(1\) = 512",
                 id="x-K-mismatch"),
    pytest.param(lambda: {"x": cuda_randn(M, 500), "weight": cuda_randn(N, 500)},
                 r"K and N must be multiples of 8 .*got K=500", id="K-not-multiple-of-8"),
    pytest.param(lambda: {"weight": cuda_randn(252, K), "bias": None}, r"K and N must be multiples of 8 .*N=252",
                 id="N-not-multiple-of-8"),
    pytest.param(lambda: {"weight": cuda_randn(1, N, K)}, r"weight must be 2-D \[N, K\]", id="weight-3d"),
    pytest.param(lambda: {"bias": cuda_randn(N - 8)}, r"bias must be a contiguous 1-D \[N\] tensor with N = 256",
                 id="bias-length"),
    pytest.param(lambda: {"bias": cuda_randn(2 * N)[::2]}, r"bias must be a contiguous 1-D \[N\] tensor",
                 id="bias-strided"),
    pytest.param(lambda: {"bias": cuda_randn(N, dtype=torch.float32)}, r"bias must be bfloat16", id="bias-dtype"),
    pytest.param(lambda: {"x": cuda_randn(M, K, dtype=torch.float16)}, r"x must be bfloat16", id="x-dtype"),
    pytest.param(lambda: {"weight": cuda_randn(N, K, dtype=torch.float32)}, r"weight must be bfloat16",
                 id="weight-dtype"),
    pytest.param(lambda: {"weight": torch.randn(N, K, dtype=BF16)}, r"weight must be on cuda:\d+; got cpu",
                 id="weight-device"),
    pytest.param(lambda: {"bias": torch.randn(N, dtype=BF16)}, r"bias must be on cuda:\d+; got cpu", id="bias-device"),
    pytest.param(lambda: {"out": poisoned(M, N + 8, device="cuda")}, r"out must have shape \[64, 256\]",
                 id="out-shape"),
    pytest.param(lambda: {"out": poisoned(M, N, dtype=torch.float32, device="cuda")}, r"out must be bfloat16",
                 id="out-dtype"),
    pytest.param(lambda: {"config": "t1x1x1_c1x1_coop"},
                 r"config must be one of \[.*\] \(a stream-K one optionally with '/splitk<N>', a parallel split-K one with it\) "
                 r"or empty; got 't1x1x1_c1x1_coop'", id="config-unknown"),
    pytest.param(lambda: {"config": "t128x128x64_c1x1_coop_streamk/splitk1"},
                 r"a config suffix must be '/splitk<N>' with 2 <= N <= 16; got '.*/splitk1'", id="splitk1"),
    pytest.param(lambda: {"config": "t128x128x64_c1x1_coop_streamk/splitk17"},
                 r"a config suffix must be '/splitk<N>' with 2 <= N <= 16", id="splitk17"),
    pytest.param(lambda: {"config": "t128x128x64_c1x1_coop_streamk/splitk04"},
                 r"a config suffix must be '/splitk<N>'", id="splitk-leading-zero"),
    pytest.param(lambda: {"config": "t128x128x64_c1x1_coop_streamk/split4"},
                 r"a config suffix must be '/splitk<N>'", id="split-suffix-typo"),
    pytest.param(lambda: {"config": "t128x128x64_c1x1_coop/splitk4"},
                 r"'/splitk<N>' needs a stream-K or parallel split-K config; t128x128x64_c1x1_coop is persistent",
                 id="splitk-persistent"),
    pytest.param(lambda: {"config": "t64x64x64_c1x1_pingpong_psplit"},
                 r"t64x64x64_c1x1_pingpong_psplit is a parallel split-K config: name it with '/splitk<N>' "
                 r"\(2 <= N <= 16\)", id="psplit-bare"),
    # K = 512 cuts into 16 slices of 32 columns, but not into 3 equal ones.
    pytest.param(lambda: {"config": "t64x64x64_c1x1_pingpong_psplit/splitk3"},
                 r"config t64x64x64_c1x1_pingpong_psplit/splitk3 failed for M=64 N=256 K=512: a parallel split-K "
                 r"config needs K to divide into its split count's equal slices", id="psplit-k-indivisible"),
])
def test_invalid(replace, pattern):
    with pytest.raises(RuntimeError, match=r"vlattn\.linear: " + pattern):
        bad_call(**replace())


@pytest.mark.parametrize("case", ["out-is-x", "out-in-weight", "out-in-bias", "out-expanded", "out-rows-overlap"])
def test_out_sharing_memory_is_refused(case):
    """The GEMM's CTAs write out while they read x, weight and bias, each output element once: an out that
    shares an element with an operand or with itself would race, so it is refused and nothing is written."""
    x, weight, b = operands(M, K, K, True)  # square (N = K): out = x has the right shape
    pattern = {
        "out-is-x": r"out must not share memory with x",
        "out-in-weight": r"out must not share memory with weight",
        "out-in-bias": r"out must not share memory with bias",
        "out-expanded": r"out's rows must not share memory; got row stride 0",
        "out-rows-overlap": r"out's rows must not share memory; got row stride 256 for rows of N = 512",
    }[case]
    if case == "out-is-x":
        out = x
    elif case == "out-in-weight":
        out = weight[8:8 + M]
    elif case == "out-in-bias":
        big = torch.randn(M * K + K, dtype=BF16, device="cuda")
        out, b = big[K:].view(M, K), big[K - 8:2 * K - 8]  # the bias runs into out's first row
    elif case == "out-expanded":
        out = poisoned(1, K, device="cuda").expand(M, K)
    else:
        out = torch.as_strided(poisoned(M * K, device="cuda"), (M, K), (K // 2, 1))
    snapshot = [t.clone() for t in (x, weight, b, out)]
    with pytest.raises(RuntimeError, match=r"vlattn\.linear: " + pattern):
        vlattn.linear(x, weight, b, out=out)
    assert all(torch.equal(t.view(torch.int16), s.view(torch.int16)) for t, s in zip((x, weight, b, out), snapshot))


def test_out_beside_x_in_one_buffer():
    """x and out as two column slices of one [M, K + N] buffer share no element: allowed, and exact."""
    buffer = torch.randn(M, K + N, dtype=BF16, device="cuda")
    x, out = buffer[:, :K], buffer[:, K:]
    _, weight, b = operands(M, N, K, True)
    expected = vlattn.linear(x.contiguous(), weight, b)
    assert vlattn.linear(x, weight, b, out=out) is out
    assert torch.equal(out, expected)
    assert torch.equal(buffer[:, :K], x)
