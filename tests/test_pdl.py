"""Programmatic dependent launch (csrc/launch/pdl.h): kernels of the native layer may start before
their predecessor ends, so every kernel must wait before it touches memory. These tests chain calls
without synchronizing, on inputs written by the kernel just before, with the caching allocator
handing each call the blocks the previous call just freed: a kernel that read early would see the
previous call's values (or the poison), not its own."""
import pytest
import torch

import vlattn
from vlattn import workloads as W
from conftest import outputs_in_subprocess, requires_sm90

WORKLOADS = [("007", 0), ("007", 4), ("034", 0), ("034", 3)]  # small, one with Sk tail 613 / pre-pass


def _inputs(problem, index):
    w = W.sorted_by_sol(W.load(problem))[index]
    return w, W.make_inputs(w, "cuda", seed=1234 + index)


def _layer(problem):
    return vlattn.mrope_self_attention if problem == "007" else vlattn.vision_cross_attention


@requires_sm90
@pytest.mark.parametrize("problem,index", WORKLOADS, ids=[f"{p}-{i}" for p, i in WORKLOADS])
def test_back_to_back_calls_equal_isolated_calls(problem, index):
    w, base = _inputs(problem, index)
    layer = _layer(problem)
    first = next(iter(base))  # hidden_states / language_hidden_states
    scales = [1.0, -0.5, 2.0, 0.25]

    def args(x):
        v = dict(base)
        v[first] = x
        return list(v.values())

    # Isolated: synchronized before and after every kernel chain.
    isolated = []
    for s in scales:
        x = base[first] * s
        torch.cuda.synchronize()
        isolated.append(layer(*args(x)).clone())
        torch.cuda.synchronize()
    # Chained: the input of call i is written by the kernel right before it (poison first), and the
    # previous call's buffers are free for the allocator to hand out again.
    chained = []
    for s in scales:
        x = torch.full_like(base[first], float("nan"))
        x.copy_(base[first] * s)
        chained.append(layer(*args(x)))
    torch.cuda.synchronize()
    for i, (a, b) in enumerate(zip(isolated, chained)):
        assert torch.isfinite(b).all(), f"{w.name} call {i}: NaN/Inf (read before its input was written?)"
        assert torch.equal(a, b), f"{w.name} call {i}: chained result differs from the isolated one"
    assert not torch.equal(isolated[0], isolated[1]), "inputs did not change between calls"


_SCRIPT = r"""
import sys, torch, vlattn
from vlattn import workloads as W
outs = []
for problem, index in ((("007", 0), ("007", 4), ("034", 0))):
    w = W.sorted_by_sol(W.load(problem))[index]
    v = list(W.make_inputs(w, "cuda", seed=99).values())
    layer = vlattn.mrope_self_attention if problem == "007" else vlattn.vision_cross_attention
    outs.append(layer(*v).cpu())
torch.save(outs, sys.argv[1])
"""


@requires_sm90
def test_pdl_off_gives_the_same_bits(tmp_path):
    """VLATTN_PDL=0 (plain launches) and the default give bitwise the same outputs (subprocesses: the
    switch is read once per process)."""
    results = [outputs_in_subprocess(_SCRIPT, tmp_path / f"out_{pdl}.pt", {"VLATTN_PDL": pdl}) for pdl in ("0", "1")]
    for i, (a, b) in enumerate(zip(*results)):
        assert torch.isfinite(a).all() and torch.equal(a, b), f"case {i}: PDL on and off differ"
