"""Shared test machinery: device markers, fresh per-test seeds, output poisoning, small inputs.

Markers (apply as decorators or ``pytestmark``; each becomes a skip with a reason when unmet):
- ``requires_cuda`` (``@pytest.mark.gpu``): an NVIDIA GPU.
- ``requires_sm90`` (``@pytest.mark.sm90``): a Hopper (sm_90) GPU and the compiled extension.
- ``requires_ext`` (``@pytest.mark.ext``): the compiled extension (registers ``torch.ops.vlattn.*``).

Shards: ``VLATTN_TEST_SHARD=i/n`` runs every n-th collected test from the i-th on (parse_test_shard).

Seeds: every test draws a fresh seed from ``random.getrandbits(32)`` and seeds torch with it (CPU
and CUDA). The seed is printed (pytest shows it with a failure's captured output) and recorded as
the test's ``seed`` property (junit XML). Rerun a failure with ``VLATTN_TEST_SEED=<seed>``.
"""
from __future__ import annotations

import gc
import os
import random

import pytest
import torch

from vlattn import _ext

# The seeds' reference.py files sit beside the checkout (../shared/sol_execbench). The installed
# package cannot find them from site-packages, so point it there from the tests' own location.
_SEEDS = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, os.pardir, "shared", "sol_execbench")
if "VLATTN_SEEDS_DIR" not in os.environ and os.path.isdir(_SEEDS):
    os.environ["VLATTN_SEEDS_DIR"] = os.path.normpath(_SEEDS)

BF16 = torch.bfloat16
HEAD_DIM = 128

requires_cuda = pytest.mark.gpu
requires_sm90 = pytest.mark.sm90
requires_ext = pytest.mark.ext


def _cuda_missing() -> str | None:
    return None if torch.cuda.is_available() else "needs an NVIDIA GPU"


def _sm90_missing() -> str | None:
    missing = []
    if not torch.cuda.is_available():
        missing.append("no CUDA GPU (torch.cuda.is_available() is False)")
    else:
        major, minor = torch.cuda.get_device_capability()
        if (major, minor) != (9, 0):
            missing.append(f"GPU is sm_{major}{minor} ({torch.cuda.get_device_name()}), not sm_90")
    if not _ext.available():
        missing.append(f"vlattn extension not built ({_ext.LOAD_ERROR})")
    return "needs an sm_90 (Hopper) GPU and the vlattn extension: " + "; ".join(missing) if missing else None


def _ext_missing() -> str | None:
    return None if _ext.available() else f"needs the compiled vlattn extension: {_ext.LOAD_ERROR}"


def pytest_configure(config):
    config.addinivalue_line("markers", "ext: needs the compiled vlattn extension (skipped with a reason otherwise)")


def parse_test_shard(value: str | None) -> tuple[int, int] | None:
    """``VLATTN_TEST_SHARD=i/n`` (0 <= i < n): this process runs every n-th collected test from the i-th on,
    so that n pytest processes share one GPU (scripts/gpu_check.sh SUITE_JOBS). Collection order is the
    same in every process, so the n shards partition the suite. None when unset or empty."""
    if not value:
        return None
    parts = value.split("/")
    if len(parts) == 2 and all(p.strip().isdigit() for p in parts):
        index, count = int(parts[0]), int(parts[1])
        if 0 <= index < count:
            return index, count
    raise pytest.UsageError(f"VLATTN_TEST_SHARD must be 'i/n' with 0 <= i < n; got {value!r}")


def pytest_collection_modifyitems(config, items):
    shard = parse_test_shard(os.environ.get("VLATTN_TEST_SHARD"))
    if shard is not None:
        index, count = shard
        config.hook.pytest_deselected(items=[it for k, it in enumerate(items) if k % count != index])
        items[:] = [it for k, it in enumerate(items) if k % count == index]
    checks = {"gpu": _cuda_missing, "sm90": _sm90_missing, "ext": _ext_missing}
    reasons: dict[str, str | None] = {}
    for item in items:
        for marker, check in checks.items():
            if item.get_closest_marker(marker) is None:
                continue
            if marker not in reasons:
                reasons[marker] = check()
            if reasons[marker]:
                item.add_marker(pytest.mark.skip(reason=reasons[marker]))
                break


@pytest.fixture(autouse=True)
def rng_seed(request) -> int:
    """A fresh seed per test (or $VLATTN_TEST_SEED), applied to torch's CPU and CUDA generators."""
    env = os.environ.get("VLATTN_TEST_SEED", "")
    value = int(env) if env else random.getrandbits(32)
    torch.manual_seed(value)
    request.node.user_properties.append(("seed", value))
    print(f"{request.node.nodeid}: seed {value} (reproduce with VLATTN_TEST_SEED={value})")
    return value


@pytest.fixture(autouse=True)
def _free_cuda_memory():
    """Large workloads run one after another: give their memory back between tests."""
    yield
    if torch.cuda.is_available() and torch.cuda.is_initialized() and torch.cuda.memory_reserved() > 2**32:
        gc.collect()
        torch.cuda.synchronize()
        torch.cuda.empty_cache()


@pytest.fixture
def highest_fp32_matmul():
    """The fp32 references must be fp32 (no TF32) while the test runs."""
    previous = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("highest")
    yield
    torch.set_float32_matmul_precision(previous)


def poison(t: torch.Tensor) -> torch.Tensor:
    """Fill a floating output buffer with NaN (in place) so that unwritten elements cannot pass."""
    if not t.is_floating_point():
        raise TypeError(f"poison() needs a floating tensor; got {t.dtype}")
    return t.fill_(float("nan"))


def poisoned(*shape: int, dtype: torch.dtype = BF16, device="cpu") -> torch.Tensor:
    return poison(torch.empty(*shape, dtype=dtype, device=device))


def outputs_in_subprocess(script: str, out_path, env: dict, *args) -> list:
    """Runs ``script`` (``python -c``) in a fresh process with ``env`` added to the environment (the
    library's switches start from it: vlattn.dev) and this checkout's package importable; the script
    saves a list of tensors to ``sys.argv[1]`` (= out_path), which is returned."""
    import subprocess
    import sys

    import vlattn

    package_root = os.path.dirname(os.path.dirname(os.path.abspath(vlattn.__file__)))
    full_env = dict(os.environ, **env,
                    PYTHONPATH=os.pathsep.join(filter(None, [package_root, os.environ.get("PYTHONPATH")])))
    subprocess.run([sys.executable, "-c", script, str(out_path), *map(str, args)], env=full_env, check=True,
                   timeout=600)
    return torch.load(out_path)


def rel_fro(out: torch.Tensor, ref: torch.Tensor) -> float:
    """Relative Frobenius-norm error ||out - ref|| / ||ref|| in fp32."""
    out, ref = out.float(), ref.float()
    return ((out - ref).norm() / ref.norm()).item()


# --------------------------------------------------------------------------------------------
# Small valid inputs (generalized shapes: head counts are inferred from the weights)
# --------------------------------------------------------------------------------------------

def _randn(*shape: int, scale: float | None = None, device="cpu") -> torch.Tensor:
    t = torch.randn(*shape, dtype=BF16, device=device)
    return t if scale is None else t * scale


def mrope_inputs(batch: int = 2, seq_len: int = 5, *, hidden: int = 256, num_heads: int = 4, num_kv_heads: int = 2,
                 out_hidden: int | None = None, mask: str | None = "causal", device="cpu") -> dict[str, torch.Tensor]:
    """Arguments of mrope_self_attention, in order. ``mask``: "causal" ([B, 1, S, S], finite bf16 min
    above the diagonal), "random" (arbitrary additive values), "broadcast" (causal, batch dim 1) or None."""
    q_dim, kv_dim = num_heads * HEAD_DIM, num_kv_heads * HEAD_DIM
    out_hidden = hidden if out_hidden is None else out_hidden
    inputs = {"hidden_states": _randn(batch, seq_len, hidden, device=device)}
    for name, dim in (("q", q_dim), ("k", kv_dim), ("v", kv_dim)):
        inputs[f"{name}_weight"] = _randn(dim, hidden, scale=0.02, device=device)
        inputs[f"{name}_bias"] = _randn(dim, scale=0.02, device=device)
    inputs["o_weight"] = _randn(out_hidden, q_dim, scale=0.02, device=device)
    inputs["cos"] = _randn(3, batch, seq_len, HEAD_DIM, device=device)
    inputs["sin"] = _randn(3, batch, seq_len, HEAD_DIM, device=device)
    causal = torch.full((seq_len, seq_len), torch.finfo(BF16).min, dtype=BF16, device=device).triu(1)
    if mask == "causal":
        inputs["attention_mask"] = causal.expand(batch, 1, seq_len, seq_len).contiguous()
    elif mask == "broadcast":
        inputs["attention_mask"] = causal.expand(1, 1, seq_len, seq_len).contiguous()
    elif mask == "random":
        inputs["attention_mask"] = _randn(batch, 1, seq_len, seq_len, scale=4.0, device=device)
    elif mask is None:
        inputs["attention_mask"] = None
    else:
        raise ValueError(f"unknown mask kind {mask!r}")
    return inputs


def cross_inputs(batch: int = 2, lang_len: int = 5, vision_len: int = 7, *, hidden: int = 256, num_heads: int = 4,
                 num_kv_heads: int = 2, out_hidden: int | None = None, device="cpu") -> dict[str, torch.Tensor]:
    """Arguments of vision_cross_attention, in order; positions are random non-negative ints."""
    q_dim, kv_dim = num_heads * HEAD_DIM, num_kv_heads * HEAD_DIM
    out_hidden = hidden if out_hidden is None else out_hidden
    return {
        "language_hidden_states": _randn(batch, lang_len, hidden, device=device),
        "vision_hidden_states": _randn(batch, vision_len, hidden, device=device),
        "language_position_ids": torch.randint(0, 4096, (batch, lang_len), dtype=torch.int64, device=device),
        "vision_grid_thw": torch.randint(0, 64, (batch, vision_len, 3), dtype=torch.int64, device=device),
        "q_proj_weight": _randn(q_dim, hidden, scale=0.02, device=device),
        "q_proj_bias": _randn(q_dim, scale=0.02, device=device),
        "k_proj_weight": _randn(kv_dim, hidden, scale=0.02, device=device),
        "k_proj_bias": _randn(kv_dim, scale=0.02, device=device),
        "v_proj_weight": _randn(kv_dim, hidden, scale=0.02, device=device),
        "v_proj_bias": _randn(kv_dim, scale=0.02, device=device),
        "o_proj_weight": _randn(out_hidden, q_dim, scale=0.02, device=device),
    }
