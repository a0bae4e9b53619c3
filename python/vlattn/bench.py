"""Benchmark the vlattn layers and their GEMMs against plain PyTorch on the 32 seed workloads.

Run as ``vlattn-bench`` or ``python -m vlattn.bench`` (``--help`` lists the flags).

Four modes (``all`` runs them in this order):
- ``layers``: each workload of SOL-ExecBench problems 007 and 034, each vlattn backend and the
  PyTorch baselines (``reference.py`` eager, the composite eager, the composite replayed from a
  CUDA graph, optionally ``torch.compile`` of the composite). Every output is checked against the
  exact bf16 reference under the benchmark's rule before it is timed.
- ``gemm``: every distinct projection shape of the chosen workloads, ``vlattn.linear`` against
  cuBLAS through ``F.linear``'s own path, timed in the same run.
- ``qkv``: the fused QKV projection op (``vlattn.mrope_qkv`` / ``vision_qkv``, auto config and each
  forced config) against the unfused reference stage (F.linear + PyTorch bias/RoPE/reshape +
  ``.contiguous()``), eager, replayed from a CUDA graph and ``torch.compile``d; outputs checked to
  about one bf16 ulp.
- ``attention``: ``torch.ops.vlattn.attention`` (masked-tile skip on and, for 007, off) against
  SDPA with each backend forced and PyTorch's default choice, and the composite's SDPA, all
  producing [B, Sq, Hq*128]; checked under the benchmark rule against ``reference.attention``.
  An op missing from the build is skipped with a note and the baselines are timed alone.

Timing follows STYLE.md and METHOD.md: L2 is made cold before every call by writing a scratch
buffer twice the device's L2, CUDA events bracket the call alone, nothing is allocated by the
harness inside the timed region, and the median of many calls is reported (min, p20, p80 kept). In
every mode the columns of a workload (or GEMM shape) are timed in interleaved rounds (``--rounds``, each
round in a seeded order that never runs a column twice in a row), so that a slow stretch of the machine
falls on every column alike.

Without a CUDA device the bench runs the CPU reference on one small workload, says why it did no
more, and exits 0; ``--device cpu`` instead drives the whole pipeline on the CPU as a smoke test
(timings are wall clock and meaningless).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import gc
import importlib
import inspect
import itertools
import json
import math
import os
import platform
import random
import subprocess
import sys
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Optional

import torch
import torch.nn.functional as F

import vlattn

from . import reference, workloads

# Used when the device does not report its L2 size; 128 MiB is over twice any current GPU's L2.
FALLBACK_L2_BYTES = 128 * 1024 * 1024

OP_NAMES = {"007": "mrope_self_attention", "034": "vision_cross_attention"}
AXIS_ABBREVIATIONS = {"batch_size": "B", "seq_len": "S", "lang_seq_len": "Lq", "vision_seq_len": "Lv"}
BACKEND_CHOICES = ("native", "composite")
BASELINE_CHOICES = ("reference", "composite", "composite_graph", "compile")
# torch.compile of the composite is a default baseline: the best plain-PyTorch composition is the
# fastest of eager, CUDA-graphed and compiled (ANCHORS.md, issue 5), and on the H200 the compiled one
# is the fastest on 21 of the 32 workloads (2026-12-01). Compiling costs 0.3-3.5 s per workload there.
DEFAULT_BASELINES = "reference,composite,composite_graph,compile"
MODES = ("layers", "gemm", "qkv", "attention", "all")

# GEMM mode's rule for vlattn.linear against F.linear (both bf16 out): relative Frobenius error
# under 1e-2 (bf16 operands land between 1e-3 and 1e-2, METHOD.md) and 99% of elements within
# atol + rtol*|ref|, the benchmark's layer rule with a looser rtol for a single rounding.
GEMM_REL_FRO_MAX = 1e-2
GEMM_ATOL = 1e-2
GEMM_RTOL = 0.02
GEMM_MATCH_RATIO = 0.99


# --------------------------------------------------------------------------------------------
# Pure helpers: statistics and summary math (unit-tested without a GPU).
# --------------------------------------------------------------------------------------------

def percentile(values: Iterable[float], q: float) -> float:
    """Linear interpolation between closest ranks (numpy's default), q in [0, 100]."""
    xs = sorted(values)
    if not xs:
        raise ValueError("percentile of no values")
    pos = (len(xs) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def time_stats(times_us: list[float]) -> dict:
    """Median is the headline (robust to the odd preempted call); min and p20/p80 show spread;
    ``us_all`` keeps every call in the order timed (0.1 µs), for looking at rounds and episodes later."""
    return {
        "us_median": percentile(times_us, 50),
        "us_min": min(times_us),
        "us_p20": percentile(times_us, 20),
        "us_p80": percentile(times_us, 80),
        "iters": len(times_us),
        "us_all": [round(t, 1) for t in times_us],
    }


def pct_sol(t_sol_us: float, t_us: float) -> float:
    """Percent of speed of light: T_SOL / T * 100 (100 = at the floor)."""
    return 100.0 * t_sol_us / t_us


def tflops(flop_count: float, t_us: float) -> float:
    return flop_count / (t_us * 1e-6) / 1e12


def geomean(values: Iterable[float]) -> Optional[float]:
    """Geometric mean: the right average of speed-up ratios; None for no values."""
    xs = [v for v in values if v is not None]
    if not xs:
        return None
    return math.exp(sum(math.log(v) for v in xs) / len(xs))


def mean(values: Iterable[float]) -> Optional[float]:
    xs = [v for v in values if v is not None]
    return sum(xs) / len(xs) if xs else None


def best_pytorch(records: list[dict]) -> tuple[Optional[str], Optional[float]]:
    """The fastest measured plain-PyTorch implementation of one workload.

    Only records flagged ``pytorch`` count, and one whose check FAILED does not: a fast wrong
    answer is no target to beat.
    """
    candidates = [
        r for r in records
        if r["pytorch"] and r.get("us_median") is not None and (r.get("check") or {}).get("ok", True)
    ]
    if not candidates:
        return None, None
    best = min(candidates, key=lambda r: r["us_median"])
    return best["impl"], best["us_median"]


def add_relative_speed(records: list[dict]) -> None:
    """Fill ``x_best_pytorch`` = T_best / T (above 1: faster than the best PyTorch) in place."""
    name, best_us = best_pytorch(records)
    for r in records:
        r["best_pytorch"] = name
        r["best_pytorch_us"] = best_us
        us = r.get("us_median")
        r["x_best_pytorch"] = best_us / us if (best_us is not None and us) else None


def summarize_layers(records: list[dict], impl_keys: list[str]) -> dict:
    """Per problem (and over all): for each impl, mean %SOL, geomean × best PyTorch, failures.

    Also a ``best PyTorch`` row: the mean %SOL of the per-workload best baseline, the number the
    anchors quote (34% on 007, 36% on 034).
    """
    problems = sorted({r["problem"] for r in records})
    summary: dict[str, dict] = {}
    for group in problems + (["all"] if len(problems) > 1 else []):
        rows = [r for r in records if group == "all" or r["problem"] == group]
        table = {key: _summary_row([r for r in rows if r["impl"] == key]) for key in impl_keys}
        table["best PyTorch"] = _best_pytorch_row(rows)
        summary[group] = table
    return summary


def _summary_row(rows: list[dict]) -> dict:
    measured = [r for r in rows if r.get("us_median") is not None]
    return {
        "n": len(measured),
        "mean_pct_sol": mean(r["pct_sol"] for r in measured),
        "geomean_x_best_pytorch": geomean(r["x_best_pytorch"] for r in measured),
        "failures": sum(1 for r in rows if (r.get("check") or {}).get("ok") is False),
        "errors": sum(1 for r in rows if r["status"] in ("OOM", "ERR")),
    }


def _best_pytorch_row(rows: list[dict]) -> dict:
    per_workload: dict[tuple, dict] = {}
    for r in rows:
        if r.get("best_pytorch_us") is not None:
            per_workload[(r["problem"], r["index"])] = r
    return {
        "n": len(per_workload),
        "mean_pct_sol": mean(pct_sol(r["t_sol_us"], r["best_pytorch_us"]) for r in per_workload.values()),
        "geomean_x_best_pytorch": 1.0 if per_workload else None,
        "failures": 0,
        "errors": 0,
    }


@dataclass(frozen=True)
class GemmShape:
    """One distinct projection GEMM: out[M, N] = x[M, K] · W[N, K]ᵀ (+ bias[N])."""

    m: int
    n: int
    k: int
    bias: bool
    users: tuple[str, ...] = ()

    @property
    def flops(self) -> int:
        return 2 * self.m * self.n * self.k

    @property
    def min_bytes(self) -> int:
        """bf16 x, W and out once each, plus the bias."""
        return 2 * (self.m * self.k + self.n * self.k + self.m * self.n + (self.n if self.bias else 0))

    @property
    def t_sol_us(self) -> float:
        return max(self.flops / workloads.PEAK_FLOPS, self.min_bytes / workloads.PEAK_BYTES_PER_S) * 1e6

    @property
    def label(self) -> str:
        return f"{self.m}x{self.n}x{self.k}{'+b' if self.bias else ''}"


def dedupe_gemm_shapes(entries: Iterable[tuple[str, Iterable[tuple]]]) -> list[GemmShape]:
    """Merge (user, [(name, M, N, K, has_bias), ...]) into distinct shapes, smallest first.

    Workloads share shapes (007's k and v projections; 034's q and o), and timing a shape twice
    adds device time and nothing else; ``users`` keeps where each shape came from.
    """
    found: dict[tuple, list[str]] = {}
    for user, shapes in entries:
        for name, m, n, k, has_bias in shapes:
            found.setdefault((int(m), int(n), int(k), bool(has_bias)), []).append(f"{user} {name}")
    shapes = [GemmShape(*key, users=tuple(users)) for key, users in found.items()]
    return sorted(shapes, key=lambda s: (s.flops, s.m, s.n, s.k, s.bias))


def compare_gemm(out: torch.Tensor, ref: torch.Tensor) -> dict:
    """GEMM-mode check of ``out`` against ``ref``; see the GEMM_* constants for the rule."""
    o = out.float()
    r = ref.float()
    diff = (o - r).abs()
    finite = bool(torch.isfinite(o).all())
    rel_fro = float((o - r).norm() / r.norm().clamp_min(torch.finfo(torch.float32).tiny))
    matched = float((diff <= GEMM_ATOL + GEMM_RTOL * r.abs()).float().mean())
    return {
        "ok": finite and rel_fro < GEMM_REL_FRO_MAX and matched >= GEMM_MATCH_RATIO,
        "rel_fro_err": rel_fro,
        "max_abs_err": float(diff.max()) if diff.numel() else 0.0,
        "matched": matched,
        "nan_or_inf": not finite,
    }


def axes_label(axes: dict) -> str:
    """'B=4,S=128': a workload's variable axes, abbreviated, for plot ticks."""
    return ",".join(f"{AXIS_ABBREVIATIONS.get(k, k)}={v}" for k, v in axes.items())


def select_workloads(workloads: list, spec: Optional[str]) -> list:
    """Filter by a comma list: ``PPP:i`` (problem and index), ``i`` (index in every problem), or
    a substring of the workload's name or uuid. Names hold commas (``007[B=4,S=128]``), so the
    list splits only outside brackets, and a space stands for a comma (``B=4 S=128``).
    Keeps the given order."""
    if not spec:
        return list(workloads)
    chosen = []
    for token in _split_outside_brackets(spec):
        hits = [w for w in workloads if _matches(w, ",".join(token.split()))]
        if not hits:
            raise ValueError(f"--workloads: {token!r} matches no workload")
        chosen.extend(w for w in hits if w not in chosen)
    return [w for w in workloads if w in chosen]


def _split_outside_brackets(spec: str) -> list[str]:
    tokens, depth, current = [], 0, ""
    for ch in spec + ",":
        depth += {"[": 1, "]": -1}.get(ch, 0)
        if ch == "," and depth <= 0:
            tokens.append(current.strip())
            current = ""
        else:
            current += ch
    return [t for t in tokens if t]


def _matches(w, token: str) -> bool:
    problem, sep, index = token.partition(":")
    if sep:
        return w.problem == problem and index.isdigit() and w.index == int(index)
    if token.isdigit():
        return w.index == int(token)
    return token in w.name or token in w.uuid


# --------------------------------------------------------------------------------------------
# Environment: what ran where, for the JSON.
# --------------------------------------------------------------------------------------------

def _run_quiet(cmd: list[str], cwd: Optional[Path] = None) -> Optional[str]:
    """stdout of a helper command, or None when it is missing or fails (best effort only)."""
    try:
        done = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def commit_info() -> dict:
    """The vlattn commit: ``VLATTN_COMMIT`` wins, since a device copy of the tree carries no .git or a
    stale one (the session's base commit under the working tree's files: git then reports it dirty)."""
    env = os.environ.get("VLATTN_COMMIT")
    if env:
        return {"commit": env, "commit_source": "VLATTN_COMMIT"}
    here = Path(__file__).resolve().parent
    sha = _run_quiet(["git", "rev-parse", "HEAD"], cwd=here)
    if sha is None:
        return {"commit": None, "commit_source": None}
    dirty = _run_quiet(["git", "status", "--porcelain", "--untracked-files=no"], cwd=here)
    return {"commit": sha, "commit_source": "git", "dirty": bool(dirty)}


def nvidia_smi_info() -> Optional[dict]:
    """Driver, clocks and power limit as nvidia-smi reports them (the card is measured as found)."""
    fields = ["name", "driver_version", "clocks.sm", "clocks.max.sm", "clocks.mem", "power.limit",
              "temperature.gpu"]
    text = _run_quiet(["nvidia-smi", f"--query-gpu={','.join(fields)}", "--format=csv,noheader"])
    if not text:
        return None
    values = [v.strip() for v in text.splitlines()[0].split(",")]
    return dict(zip(fields, values))


def _vlattn_info(device: torch.device) -> dict:
    info: dict[str, Any] = {}
    for name, call in (("extension", lambda: vlattn.extension_info()),
                       ("backend_for", lambda: vlattn.backend_for(device)),
                       ("available_backends", lambda: vlattn.available_backends(device))):
        try:
            info[name] = call()
        except Exception as exc:  # a missing piece is reported, never fatal
            info[name] = f"unavailable: {type(exc).__name__}: {exc}"
    return info


def environment_meta(device: torch.device, args: argparse.Namespace) -> dict:
    try:
        cudnn = torch.backends.cudnn.version()
    except Exception:
        cudnn = None
    meta: dict[str, Any] = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "host": platform.node(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "cudnn": cudnn,
        "device": str(device),
        "vlattn": _vlattn_info(device),
        "args": vars(args),
        **commit_info(),
    }
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        smi = nvidia_smi_info()
        meta["gpu"] = {
            "name": props.name,
            "capability": f"{props.major}.{props.minor}",
            "sm_count": props.multi_processor_count,
            "l2_bytes": getattr(props, "L2_cache_size", None),
            "memory_bytes": props.total_memory,
        }
        meta["driver"] = smi["driver_version"] if smi else None
        meta["nvidia_smi"] = smi
    return meta


def describe_meta(meta: dict) -> str:
    gpu = meta.get("gpu")
    where = meta["device"]
    if gpu:
        l2 = f"{gpu['l2_bytes'] / 2**20:.0f} MiB" if gpu["l2_bytes"] else "unknown"
        where = (f"{gpu['name']} (sm_{gpu['capability'].replace('.', '')}, {gpu['sm_count']} SMs, "
                 f"L2 {l2}), driver {meta.get('driver')}")
    commit = (meta.get("commit") or "unknown")[:12] + (" (dirty)" if meta.get("dirty") else "")
    text = (f"vlattn bench on {where}; torch {meta['torch']}, CUDA {meta['cuda']}, "
            f"cuDNN {meta['cudnn']}; commit {commit}")
    if gpu and "H200" not in gpu["name"]:
        # T_SOL is the targets' (issue 5): the H200's peaks on every device (workloads.PEAK_*).
        text += (f"\nnot an H200: T_SOL and %SOL stay the H200's ({workloads.PEAK_FLOPS / 1e12:.0f} TFLOP/s dense bf16, "
                 f"{workloads.PEAK_BYTES_PER_S / 1e12:.1f} TB/s), so they do not compare this GPU with its own peaks")
    return text


# --------------------------------------------------------------------------------------------
# Timing.
# --------------------------------------------------------------------------------------------

# A spin kernel of this many clocks (~1 ms at the H200's 1.98 GHz) holds the GPU while the host queues the
# timed call: longer than any host stall seen before one GEMM launch on the device machines (≤ 0.1 ms).
HOST_AHEAD_CYCLES = 2_000_000


class CudaTimer:
    """Cold-L2 CUDA-event timer.

    Before each call the queue is drained and a scratch buffer of twice the L2 is written, so the
    call finds none of its inputs or weights in cache (the benchmark flushes L2 the same way) and
    starts from an idle queue like a layer call in a model step. Events bracket the call alone.

    ``host_ahead``: after the flush a spin kernel (``torch.cuda._sleep``, no memory traffic: L2 stays
    cold) holds the GPU while the host queues the start event, the call and the end event, so the events
    measure the GPU from the call's first kernel to its last — not the host's launch latency before the
    first. Without it (the default, "cold") a call whose host path outlasts the flush kernel starts its
    clock before its first kernel is queued: right for the layers' eager columns (the host path is part of
    a layer call), noise for one-kernel GEMMs (bench/NOTES.md, thirty-third session: cuBLAS's 6 µs
    128x512x3584 GEMM read 11–91 µs per call).
    """

    def __init__(self, device: torch.device, host_ahead: bool = False):
        props = torch.cuda.get_device_properties(device)
        l2_bytes = getattr(props, "L2_cache_size", 0) or FALLBACK_L2_BYTES
        self.scratch = torch.empty(2 * l2_bytes // 4, dtype=torch.int32, device=device)
        self.host_ahead = host_ahead

    def _before_call(self) -> None:
        """Every call's start, warm-up or timed: drain the queue, flush L2, [hold the GPU with the spin]."""
        torch.cuda.synchronize()
        self.scratch.zero_()
        if self.host_ahead:
            torch.cuda._sleep(HOST_AHEAD_CYCLES)

    def __call__(self, step: Callable[[], Any], iters: int, warmup: int,
                 host_us: Optional[list] = None) -> list[float]:
        """µs per timed call; with ``host_us``, also appends the host time each call took (a probe's view
        of a host path slower than the GPU's first kernels)."""
        # Warm-up calls take the timed calls' protocol (drain, flush, [spin,] call), so the first timed call
        # follows exactly what every later one follows. (Queued back to back they left it after a long drain;
        # that was not what made a block's first timed call 10-30% slower on the host-bound eager columns:
        # bench/NOTES.md, forty-fifth and forty-sixth sessions, `round_spread.py --positions`.)
        # torch creates a CUDA event at its first record(): an end event created there put its creation inside
        # its own call's interval (after the call's launches, counted whenever the GPU is done first). Every
        # event is recorded once here, before the warm-up calls, so no timed interval creates one.
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
        for event in starts + ends:
            event.record()
        for _ in range(warmup):
            self._before_call()
            step()
        for start, end in zip(starts, ends):
            self._before_call()
            start.record()
            if host_us is None:
                step()
            else:
                t0 = time.perf_counter()
                step()
                host_us.append((time.perf_counter() - t0) * 1e6)
            end.record()
        torch.cuda.synchronize()
        return [start.elapsed_time(end) * 1e3 for start, end in zip(starts, ends)]


def cpu_timer(step: Callable[[], Any], iters: int, warmup: int) -> list[float]:
    """Wall-clock timer for ``--device cpu`` smoke runs (no cache control: numbers are rough)."""
    for _ in range(warmup):
        step()
    times = []
    for _ in range(iters):
        t0 = time.perf_counter()
        step()
        times.append((time.perf_counter() - t0) * 1e6)
    return times


def _takes_host_us(timer) -> bool:
    """Whether ``timer`` can also record each call's host time (CudaTimer's ``host_us``)."""
    try:
        return "host_us" in inspect.signature(timer).parameters
    except (TypeError, ValueError):
        return False


# The host meter: launches timed per sample, samples per reading, and the spin that holds the GPU meanwhile
# (~8 ms at 1.98 GHz: longer than HOST_METER_LAUNCHES launches on the slowest host seen, ~10 us each).
HOST_METER_LAUNCHES = 40
HOST_METER_SAMPLES = 5
HOST_METER_HOLD_CYCLES = 16_000_000


def host_meter(device: torch.device) -> Optional[float]:
    """The host's speed in these minutes, independent of our code: median host µs per launch of a one-thread
    kernel (``torch.cuda._sleep(1)``: a Python call and a kernel launch, nothing else) while a spin holds the GPU,
    so no launch waits on the queue. The device machines are KVM guests whose host speed drifts within a process
    (bench/NOTES.md, seventieth session: the composite's host-bound eager cells ran 0.6-2.5x between two runs);
    reading the eager columns needs it. None off CUDA."""
    if device.type != "cuda":
        return None
    torch.cuda.synchronize(device)
    torch.cuda._sleep(HOST_METER_HOLD_CYCLES)
    samples = []
    for _ in range(HOST_METER_SAMPLES):
        t0 = time.perf_counter()
        for _ in range(HOST_METER_LAUNCHES):
            torch.cuda._sleep(1)
        samples.append((time.perf_counter() - t0) / HOST_METER_LAUNCHES * 1e6)
    torch.cuda.synchronize(device)
    return percentile(samples, 50)


def release_memory(device: torch.device) -> None:
    """Return freed blocks to the driver between impls: the largest reference runs need ~20 GB of
    transient memory, and the caching allocator would otherwise keep every workload's peak."""
    gc.collect()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        torch.cuda.empty_cache()


# --------------------------------------------------------------------------------------------
# Implementations of a layer: how to build a runnable step for one workload.
# --------------------------------------------------------------------------------------------

@dataclass
class Case:
    """One workload on one device: its inputs in the seed's argument order."""

    workload: Any
    op_name: str
    inputs: dict
    device: torch.device

    @property
    def args(self) -> tuple:
        return tuple(self.inputs.values())


@dataclass
class Runner:
    """A prepared implementation: ``step()`` is what gets timed, ``result()`` its last output.

    ``poison`` (when the impl writes into fixed buffers: a tensor or a tuple of them) is filled
    with NaN before the checked call, so an element the impl never writes fails the check instead
    of passing on stale data.
    """

    step: Callable[[], Any]
    result: Callable[[], Any]
    poison: Any = None
    setup_s: float = 0.0


def _returning_runner(fn: Callable[..., torch.Tensor], args: tuple, setup_s: float = 0.0) -> Runner:
    """For impls that return a fresh tensor each call (eager baselines, compiled code)."""
    last: dict[str, torch.Tensor] = {}

    def step() -> None:
        last["y"] = fn(*args)

    return Runner(step=step, result=lambda: last["y"], setup_s=setup_s)


@dataclass(frozen=True)
class Impl:
    key: str
    pytorch: bool  # counts toward "best PyTorch"
    needs_cuda: bool
    build: Callable[[Case], Runner] = field(compare=False)
    description: str = ""


def vlattn_backend_impl(backend: str) -> Impl:
    """The public op with an explicit backend, writing into a preallocated ``out=``."""

    def build(case: Case) -> Runner:
        op = getattr(vlattn, case.op_name)
        out = torch.empty_like(case.args[0])  # [B, S|Lq, hidden], the same shape as the input
        args = case.args
        return Runner(step=lambda: op(*args, backend=backend, out=out), result=lambda: out, poison=out)

    return Impl(f"vlattn:{backend}", pytorch=False, needs_cuda=False, build=build,
                description=f"vlattn.<op>(..., backend={backend!r}, out=...)")


def vlattn_graph_impl(backend: str) -> Impl:
    """The public op replayed from a CUDA graph: its GPU time without the host path. Small native
    layers are bound by their host path, whose speed varies between machines (bench/NOTES.md, sixth
    session); this column separates the two. Not a PyTorch baseline, not the headline column."""

    def build(case: Case) -> Runner:
        op = getattr(vlattn, case.op_name)
        return graph_runner(lambda *a: op(*a, backend=backend), case.args, case.device)

    return Impl(f"vlattn:{backend}_graph", pytorch=False, needs_cuda=True, build=build,
                description=f"vlattn.<op>(..., backend={backend!r}) replayed from a CUDA graph")


def switched_impl(inner: Impl, name: str, value: int) -> Impl:
    """``inner`` with the development switch ``name`` (vlattn.dev) at ``value`` for its calls: set during
    the build (a CUDA graph captures what the switch chose) and before every call (an eager call
    dispatches on it; the set is a host call of ~1 µs inside the timed region, the same in every arm).
    Columns of one workload run interleaved, so the arms of an A/B see the same clocks."""

    def build(case: Case) -> Runner:
        dev = importlib.import_module("vlattn.dev")
        with dev.switch(name, value):
            runner = inner.build(case)
        step = runner.step

        def switched_step() -> None:
            dev.set_switch(name, value)
            step()

        return Runner(step=switched_step, result=runner.result, poison=runner.poison, setup_s=runner.setup_s)

    short = name[len("VLATTN_"):] if name.startswith("VLATTN_") else name
    return Impl(f"{inner.key}[{short}={value}]", pytorch=inner.pytorch, needs_cuda=inner.needs_cuda, build=build,
                description=f"{inner.description}, {name}={value}")


def parse_switch(spec: str) -> tuple[str, list[int]]:
    """'NAME=v1,v2,...' -> (NAME, [v1, v2, ...]); ValueError naming what is wrong."""
    name, sep, values = spec.partition("=")
    if not sep or not name.strip() or not values.strip():
        raise ValueError(f"--switch {spec!r}: expected NAME=v1,v2,... (e.g. VLATTN_QKV_GEMM_EPI=1,4)")
    try:
        vals = [int(v) for v in values.split(",")]
    except ValueError:
        raise ValueError(f"--switch {spec!r}: the values must be integers") from None
    if len(set(vals)) != len(vals):
        raise ValueError(f"--switch {spec!r}: a value is given twice")
    return name.strip(), vals


def _reference_py(problem: str, op_name: str) -> Callable[..., torch.Tensor]:
    """The seed's own reference.py ``run``; vlattn.reference's bit-identical copy when the seeds
    directory is absent (it does not travel to the device machine)."""
    seed = reference.load_seed(problem)
    return seed.run if seed is not None else getattr(reference, op_name)


def build_reference(case: Case) -> Runner:
    return _returning_runner(_reference_py(case.workload.problem, case.op_name), case.args)


def _composite_fn(op_name: str) -> Callable[..., torch.Tensor]:
    return getattr(importlib.import_module("vlattn.composite"), op_name)


def build_composite(case: Case) -> Runner:
    return _returning_runner(_composite_fn(case.op_name), case.args)


def graph_runner(fn: Callable[..., Any], args: tuple, device: torch.device) -> Runner:
    """``fn(*args)`` captured once into a CUDA graph with static inputs; replays are timed.

    Warm-up runs on a side stream first (torch.cuda.graphs' documented recipe) so that lazy
    initialisation such as cuBLAS workspaces stays out of the capture. ``fn`` may return a tensor
    or a tuple of tensors (all of them are the static outputs, poisoned before the check).
    """
    t0 = time.perf_counter()
    side = torch.cuda.Stream(device=device)
    side.wait_stream(torch.cuda.current_stream(device))
    with torch.cuda.stream(side):
        for _ in range(2):
            fn(*args)
    torch.cuda.current_stream(device).wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        static_out = fn(*args)
    torch.cuda.synchronize(device)
    return Runner(step=graph.replay, result=lambda: static_out, poison=static_out,
                  setup_s=time.perf_counter() - t0)


def build_composite_graph(case: Case) -> Runner:
    """The composite replayed from a CUDA graph (see graph_runner)."""
    return graph_runner(_composite_fn(case.op_name), case.args, case.device)


def compiled_runner(fn: Callable[..., Any], args: tuple, device: torch.device, mode: str = "default") -> Runner:
    """torch.compile(fn) specialised to these inputs: dynamo reset first, so that the recompile limit
    never silently sends later shapes back to eager; the first call (compilation) is timed apart and
    reported as setup_s."""
    torch._dynamo.reset()
    compiled = torch.compile(fn, mode=mode, dynamic=False)
    t0 = time.perf_counter()
    compiled(*args)
    torch.cuda.synchronize(device)
    return _returning_runner(compiled, args, setup_s=time.perf_counter() - t0)


def compile_impl(mode: str) -> Impl:
    """torch.compile of the composite, one specialisation per workload.

    See compiled_runner.
    """

    def build(case: Case) -> Runner:
        return compiled_runner(_composite_fn(case.op_name), case.args, case.device, mode)

    return Impl("compile", pytorch=True, needs_cuda=True, build=build,
                description=f"torch.compile(vlattn.composite.<op>, mode={mode!r}, dynamic=False)")


def baseline_impl(key: str, compile_mode: str) -> Impl:
    if key == "reference":
        source = ("the seed's reference.py run()" if reference.seeds_dir() is not None else
                  "vlattn.reference (seeds directory not found; bit-identical to reference.py)")
        return Impl(key, pytorch=True, needs_cuda=False, build=build_reference, description=f"{source}, eager")
    if key == "composite":
        return Impl(key, pytorch=True, needs_cuda=False, build=build_composite,
                    description="vlattn.composite.<op>: F.linear + PyTorch RoPE + SDPA, eager")
    if key == "composite_graph":
        return Impl(key, pytorch=True, needs_cuda=True, build=build_composite_graph,
                    description="vlattn.composite.<op> replayed from a CUDA graph")
    return compile_impl(compile_mode)


def resolve_impls(args: argparse.Namespace, device: torch.device) -> tuple[list[Impl], list[str]]:
    """The impls to run, and one note for each asked-for impl that cannot run here and why."""
    notes: list[str] = []
    backends = _resolve_backends(args.backends, device, notes)
    impls = [vlattn_backend_impl(b) for b in backends]
    if "native" in backends and getattr(args, "native_graph", True):
        if device.type == "cuda":
            impls.append(vlattn_graph_impl("native"))
        else:
            notes.append("vlattn:native_graph: skipped, needs a CUDA device")
    if getattr(args, "switch", None):
        # One column of each native vlattn impl per switch value, side by side in one process (the
        # composite backend dispatches on no switch).
        name, values = parse_switch(args.switch)
        impls = [switched_impl(impl, name, v) for impl in impls for v in values if "native" in impl.key] + [
            impl for impl in impls if "native" not in impl.key]
    baselines = _split(args.baselines)
    if args.compile and "compile" not in baselines:
        baselines.append("compile")
    composite_error = _import_error("vlattn.composite")
    for key in baselines:
        impl = baseline_impl(key, args.compile_mode)
        if impl.needs_cuda and device.type != "cuda":
            notes.append(f"{key}: skipped, needs a CUDA device")
        elif key != "reference" and composite_error:
            notes.append(f"{key}: skipped, vlattn.composite is missing ({composite_error})")
        else:
            impls.append(impl)
    return impls, notes


def _resolve_backends(spec: Optional[str], device: torch.device, notes: list[str]) -> list[str]:
    try:
        available = list(vlattn.available_backends(device))
    except Exception as exc:
        notes.append(f"vlattn backends: skipped, vlattn.available_backends failed "
                     f"({type(exc).__name__}: {exc})")
        return []
    chosen = []
    for backend in _split(spec) if spec is not None else BACKEND_CHOICES:
        if backend in available:
            chosen.append(backend)
        else:
            notes.append(f"vlattn:{backend}: skipped, not available on {device} "
                         f"(available: {', '.join(available) or 'none'}; "
                         f"extension: {_safe(vlattn.extension_info)})")
    return chosen


def _split(spec: Optional[str]) -> list[str]:
    return [t.strip() for t in (spec or "").split(",") if t.strip()]


def _import_error(module: str) -> Optional[str]:
    try:
        importlib.import_module(module)
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"
    return None


def _safe(call: Callable[[], Any]) -> Any:
    try:
        return call()
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"


# --------------------------------------------------------------------------------------------
# Layers mode.
# --------------------------------------------------------------------------------------------

@dataclass
class Options:
    iters: int
    warmup: int
    check: bool
    seed: int
    rounds: int = 1  # the timed calls of a workload's columns split over this many interleaved rounds
    round_warmup: Optional[int] = None  # untimed calls before each round's block after the first (None: warmup)


def round_sizes(iters: int, rounds: int) -> list[int]:
    """``iters`` timed calls split over ``rounds`` rounds as evenly as possible (empty rounds dropped)."""
    rounds = max(1, rounds)
    return [n for n in (iters // rounds + (1 if r < iters % rounds else 0) for r in range(rounds)) if n > 0]


def _error_text(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}".strip().splitlines()
    return text[0][:300] if text else type(exc).__name__


def check_layer_output(out: torch.Tensor, ref: torch.Tensor, w) -> dict:
    """The benchmark's rule (workloads.check_close with the workload's tolerances), as JSON."""
    if tuple(out.shape) != tuple(ref.shape) or out.dtype != ref.dtype:
        return {"ok": False, "error": f"got {tuple(out.shape)} {out.dtype}, "
                                      f"expected {tuple(ref.shape)} {ref.dtype}"}
    res = workloads.check_close(out, ref, atol=w.atol, rtol=w.rtol, match_ratio=w.match_ratio)
    return {
        "ok": bool(res.ok),
        "matched": float(res.matched),
        "max_abs_err": float(res.max_abs_err),
        "max_rel_err": float(res.max_rel_err),
        "nan_or_inf": bool(res.nan_or_inf),
    }


def base_record(w, impl: Impl) -> dict:
    return {
        "problem": w.problem,
        "index": w.index,
        "uuid": w.uuid,
        "name": w.name,
        "axes": dict(w.axes),
        "impl": impl.key,
        "pytorch": impl.pytorch,
        "t_sol_us": float(workloads.t_sol_us(w)),
        "flops": float(workloads.flops(w)),
        "min_bytes": float(workloads.min_bytes(w)),
        "status": None,
        "us_median": None,
        "check": None,
    }


def build_checked(build: Callable[[], Runner], rec: dict,
                  check: Optional[Callable[[Any], dict]] = None) -> Runner:
    """Build one implementation and, with ``check``, run it once on NaN-poisoned output and record
    ``check`` of that output in ``rec`` (with ``setup_s``). Raises what the build or the call raises."""
    runner = build()
    rec["setup_s"] = runner.setup_s
    if check is not None:
        poison = runner.poison
        for t in (poison if isinstance(poison, (tuple, list)) else (poison,)):
            if t is not None:
                t.fill_(float("nan"))
        runner.step()
        rec["check"] = check(runner.result())
    return runner


def record_failure(rec: dict, exc: BaseException) -> None:
    """An impl's failure as its record's status ("OOM" or "ERR") and one-line error."""
    rec.update(status="OOM" if isinstance(exc, torch.cuda.OutOfMemoryError) else "ERR", error=_error_text(exc))


def exact_reference(case: Case) -> tuple[Optional[torch.Tensor], Optional[str]]:
    """The exact bf16 output, computed once per workload on the bench device."""
    try:
        return getattr(reference, case.op_name)(**case.inputs), None
    except torch.cuda.OutOfMemoryError as exc:
        return None, f"reference output: OOM ({_error_text(exc)}); outputs unchecked"
    except Exception as exc:
        return None, f"reference output failed ({_error_text(exc)}); outputs unchecked"


# Each call of measure_runners_in_rounds in a process draws its orders from its own seed: the run's seed and the
# call's number (workloads, shapes and modes in the order the run takes them), so no two workloads share one
# sequence of orders and the same command reproduces them all.
_ROUND_ORDER_CALLS = itertools.count()


def round_order_rng(seed: int) -> random.Random:
    return random.Random(seed * 1_000_003 + next(_ROUND_ORDER_CALLS))


def next_round_order(live: list[int], previous_last: Optional[int], rng: random.Random) -> list[int]:
    """The order of one round over the live entries: a shuffle (``rng``, seeded from the run's seed:
    reproducible), rotated if it would start with the entry that ended the round before. A column's time on the
    H200 depends on how much heavy work ran just before it (the GPU starts a workload cool and settles ~10% slower
    under sustained load), so no column keeps a place: under the old order (the given one, reversed every other
    round) the first column (ours) ran its first block on the cool GPU and two blocks back to back at the second
    round's end, and read ~9% slower in round 3 than in round 1 on the large layers (bench/NOTES.md forty-second
    session)."""
    order = list(live)
    rng.shuffle(order)
    if len(order) > 1 and order[0] == previous_last:
        order = order[1:] + order[:1]
    return order


def measure_runners_in_rounds(entries: list[tuple], timer, opts: Options) -> list[dict]:
    """Several implementations of one workload, interleaved: every entry (build, check, context) is built and
    checked first, then the timed calls are split over ``opts.rounds`` rounds, each running every entry's block
    once in the order next_round_order gives (seeded shuffles that never put an entry's block right after its
    own), with ``opts.warmup`` untimed calls before the first round's block and
    ``opts.round_warmup`` (default: the same) before each later one, and ``context`` held around each of the
    entry's build, check and blocks. Statistics are over all of an entry's timed calls. A slow stretch of the
    machine (on the H200 hosts, host-side episodes that put 30-60 us before a call's first kernel for seconds at
    a time, bench/NOTES.md twenty-third session; clocks that drop under sustained load, forty-second session)
    then lands on a share of every entry's calls instead of all of one entry's. A timer that takes ``host_us``
    (CudaTimer) also gives each timed call's host time: its median is the record's ``host_us_median``. The caller
    releases memory afterwards: all runners are alive together until then."""
    recs: list[dict] = []
    runners: list[Optional[Runner]] = []
    for build, check, context in entries:
        rec: dict[str, Any] = {"status": None, "us_median": None, "check": None}
        runner = None
        try:
            with context():
                runner = build_checked(build, rec, check)
        except Exception as exc:
            record_failure(rec, exc)
        recs.append(rec)
        runners.append(runner)
    times: list[list[float]] = [[] for _ in entries]
    hosts: list[list[float]] = [[] for _ in entries]
    host_kw = _takes_host_us(timer)
    later_warmup = opts.warmup if opts.round_warmup is None else opts.round_warmup
    rng = round_order_rng(opts.seed)
    last: Optional[int] = None
    for r, n in enumerate(round_sizes(opts.iters, opts.rounds)):
        live = [i for i, runner in enumerate(runners) if runner is not None]
        for i in next_round_order(live, last, rng):
            try:
                with entries[i][2]():
                    warm = opts.warmup if r == 0 else later_warmup
                    times[i] += (timer(runners[i].step, n, warm, host_us=hosts[i]) if host_kw
                                 else timer(runners[i].step, n, warm))
                last = i
            except Exception as exc:
                record_failure(recs[i], exc)
                runners[i] = None
    del runners
    for rec, ts, hs in zip(recs, times, hosts):
        if rec["status"] is None and ts:
            rec.update(time_stats(ts))
            rec["status"] = "measured"
            if hs:  # the CPU time each timed call took to return: its host path (launches are asynchronous)
                rec["host_us_median"] = percentile(hs, 50)
    return recs


def measure_columns(entries: list[tuple], device: torch.device, timer, opts: Options) -> list[dict]:
    """One record per (build, check, context) entry: status ("measured", "OOM", "ERR"), the time
    statistics, ``check`` (``check`` applied to the output of one call on poisoned output), ``setup_s``
    and ``error``. Any failure, out-of-memory included, is recorded rather than raised, so one broken impl
    or one huge shape does not end the run. With ``opts.rounds`` > 1 the entries are timed in interleaved
    rounds (measure_runners_in_rounds); with 1, each entry is built, checked and timed in one block and
    its memory released before the next."""
    if opts.rounds > 1:
        return measure_runners_in_rounds(entries, timer, opts)
    recs = []
    for entry in entries:
        recs += measure_runners_in_rounds([entry], timer, opts)
        release_memory(device)
    return recs


def bench_workload(w, impls: list[Impl], device: torch.device, timer,
                   opts: Options) -> tuple[list[dict], list[str]]:
    inputs = workloads.make_inputs(w, device, seed=opts.seed)
    case = Case(workload=w, op_name=OP_NAMES[w.problem], inputs=inputs, device=device)
    ref, note = exact_reference(case) if opts.check else (None, None)
    check = (lambda out: check_layer_output(out, ref, w)) if ref is not None else None
    entries = [((lambda impl=impl: impl.build(case)), check, contextlib.nullcontext) for impl in impls]
    records = []
    cols = measure_columns(entries, device, timer, opts)
    launch_us = host_meter(device)  # right after the rounds: the host of these minutes
    for impl, col in zip(impls, cols):
        rec = base_record(w, impl)
        rec.update(col)
        rec["host_launch_us"] = launch_us
        if rec["status"] == "measured":
            rec["tflops"] = tflops(rec["flops"], rec["us_median"])
            rec["pct_sol"] = pct_sol(rec["t_sol_us"], rec["us_median"])
        records.append(rec)
    add_relative_speed(records)
    del case, inputs, ref
    release_memory(device)
    return records, [note] if note else []


CELL_WIDTH = 34


def _cell(rec: dict) -> str:
    if rec["status"] != "measured":
        return f"{rec['status']:<{CELL_WIDTH}}"
    x = rec.get("x_best_pytorch")
    check = rec.get("check")
    verdict = "" if check is None else ("PASS" if check["ok"] else "FAIL")
    text = (f"{rec['us_median']:9.1f} {rec['tflops']:5.0f} {rec['pct_sol']:5.1f}% "
            f"{(f'{x:5.2f}x' if x is not None else '    -')} {verdict}")
    return f"{text:<{CELL_WIDTH}}"


def layer_header(impls: list[Impl]) -> str:
    cols = " | ".join(f"{impl.key:<{CELL_WIDTH}}" for impl in impls)
    sub = " | ".join(f"{'µs':>9} {'TF/s':>5} {'%SOL':>6} {'×best':>6} {'chk':<4}".ljust(CELL_WIDTH)
                     for _ in impls)
    return f"{'workload':<24} {'T_SOL µs':>9} | {cols} | best PyTorch\n{'':<24} {'':>9} | {sub} |"


def layer_line(records: list[dict]) -> str:
    first = records[0]
    best = first.get("best_pytorch")
    best_text = f"{best} {first['best_pytorch_us']:.1f} µs" if best else "-"
    cells = " | ".join(_cell(r) for r in records)
    return f"{first['name']:<24} {first['t_sol_us']:9.1f} | {cells} | {best_text}"


# A graph replay runs the same GPU work as the eager call without the host between the kernels, so its fastest call
# should not be slower than the eager call's fastest. One that is by more than this factor is flagged: the fifty-sixth
# session found 034 B8 Lq128's replay 1.17-1.20x its eager minimum in seven full runs, a fork that captured empty
# (the K / V pair back to back; bench/NOTES.md). Every earlier run's cells sit at or below 1.06x but those of A/Bs
# that took the same fork, which this flag would have shown too (1.13x).
GRAPH_SLOWER_FACTOR = 1.10


def graph_replay_anomalies(records: list[dict]) -> list[str]:
    """One line per "<impl>_graph" record whose fastest call is slower than GRAPH_SLOWER_FACTOR times its eager
    impl's fastest (vlattn:native_graph against vlattn:native, composite_graph against composite, switched
    columns against the same switch value)."""
    by_impl = {r["impl"]: r for r in records if r.get("status") == "measured" and r.get("us_min")}
    lines = []
    for impl, graph in by_impl.items():
        if "_graph" not in impl:
            continue
        eager = by_impl.get(impl.replace("_graph", "", 1))
        if eager is None:
            continue
        ratio = graph["us_min"] / eager["us_min"]
        if ratio > GRAPH_SLOWER_FACTOR:
            lines.append(f"{impl}: graph replay's fastest call {graph['us_min']:.1f} us is {ratio:.2f}x "
                         f"{eager['impl']}'s ({eager['us_min']:.1f} us): the same GPU work should not be slower "
                         f"replayed; look for serialized streams or a state the capture saw")
    return lines


def host_line(records: list[dict]) -> Optional[str]:
    """The workload's host reading: the host meter (µs per launch) and, per eager column that recorded it, the
    host path of one call (median CPU µs to return) against its GPU-timed median. A host path near the timed µs
    means the call was paced by the host; the meter says whether the host was a slow one."""
    launch = next((r.get("host_launch_us") for r in records if r.get("host_launch_us") is not None), None)
    cols = [f"{r['impl']} {r['host_us_median']:.1f} of {r['us_median']:.1f}" for r in records
            if r.get("status") == "measured" and r.get("host_us_median") is not None and "_graph" not in r["impl"]
            and r["impl"] != "reference"]
    if launch is None and not cols:
        return None
    head = f"host: {launch:.2f} µs per launch" if launch is not None else "host:"
    return f"    {head}" + (f"; host path / timed µs per call: {', '.join(cols)}" if cols else "")


def layer_notes(records: list[dict]) -> list[str]:
    """Detail lines under a workload: why an impl failed, compile times, and graph replays slower than the eager
    calls (graph_replay_anomalies)."""
    notes = [f"    {line}" for line in graph_replay_anomalies(records)]
    for r in records:
        check = r.get("check")
        if r["status"] in ("OOM", "ERR"):
            notes.append(f"    {r['impl']}: {r['status']}: {r.get('error')}")
        elif check is not None and not check["ok"]:
            details = ", ".join(f"{k} {v:.4g}" if isinstance(v, float) else f"{k} {v}"
                                for k, v in check.items() if k != "ok")
            notes.append(f"    {r['impl']}: FAIL ({details})")
        if r["impl"] == "compile" and r.get("setup_s"):
            notes.append(f"    compile: first call (compilation) took {r['setup_s']:.1f} s")
    return notes


def print_layer_summary(summary: dict) -> None:
    print("\n== layers summary: mean %SOL = mean of T_SOL/T; ×best = geomean of T_best_PyTorch/T ==",
          flush=True)
    print(f"{'group':<6} {'impl':<20} {'n':>3} {'mean %SOL':>10} {'×best':>8} {'fail':>5} {'err':>4}")
    for group, table in summary.items():
        for key, row in table.items():
            pct = f"{row['mean_pct_sol']:9.1f}%" if row["mean_pct_sol"] is not None else f"{'-':>10}"
            x = f"{row['geomean_x_best_pytorch']:7.2f}x" if row["geomean_x_best_pytorch"] is not None else f"{'-':>8}"
            print(f"{group:<6} {key:<20} {row['n']:>3} {pct} {x} {row['failures']:>5} {row['errors']:>4}")
    sys.stdout.flush()


@dataclass
class Budget:
    """Stops starting new workloads past ``limit_s`` (device commands are capped at 10 minutes)."""

    limit_s: Optional[float]
    start: float = field(default_factory=time.perf_counter)

    def exceeded(self) -> bool:
        return self.limit_s is not None and time.perf_counter() - self.start > self.limit_s

    def elapsed(self) -> float:
        return time.perf_counter() - self.start


def run_layers(ws: list, impls: list[Impl], device: torch.device, timer, opts: Options,
               budget: Budget) -> dict:
    records: list[dict] = []
    notes: list[str] = []
    if not impls:
        notes.append("layers: no implementation to run")
        print(notes[-1], flush=True)
        ws = []
    else:
        print(layer_header(impls), flush=True)
    sweep = Sweep(budget, notes)
    for w, (recs, ws_notes) in sweep(ws, "workloads", lambda w: w.name,
                                     lambda w: bench_workload(w, impls, device, timer, opts)):
        records.extend(recs)
        print(layer_line(recs), flush=True)
        host = host_line(recs)
        for line in layer_notes(recs) + [f"    {n}" for n in ws_notes] + ([host] if host else []):
            print(line, flush=True)
        notes.extend(f"{w.name}: {n}" for n in graph_replay_anomalies(recs) + ws_notes)
    summary = summarize_layers(records, [impl.key for impl in impls])
    print_layer_summary(summary)
    meter = host_meter_summary(records)
    if meter:
        print(f"host meter: {meter['median']:.2f} µs per launch (median over {meter['n']} workloads, "
              f"{meter['min']:.2f}-{meter['max']:.2f}): compare it between runs before reading an eager column's "
              f"movement on the small layers", flush=True)
    return {"results": records, "summary": summary, "notes": notes, "aborted": sweep.aborted, "host_meter": meter}


def host_meter_summary(records: list[dict]) -> Optional[dict]:
    """Median, min and max of the per-workload host meter readings (one per workload), or None without any."""
    per_workload = {r["name"]: r["host_launch_us"] for r in records if r.get("host_launch_us") is not None}
    if not per_workload:
        return None
    values = list(per_workload.values())
    return {"median": percentile(values, 50), "min": min(values), "max": max(values), "n": len(values)}


class Sweep:
    """Measures items one by one until the time budget runs out (a note says how far it got) or
    the harness itself breaks, e.g. a sticky CUDA error (``aborted`` says where and why)."""

    def __init__(self, budget: Budget, notes: list[str]):
        self.budget, self.notes, self.aborted = budget, notes, None

    def __call__(self, items: list, what: str, label: Callable[[Any], str], measure: Callable[[Any], Any]):
        for done, item in enumerate(items):
            if self.budget.exceeded():
                self.notes.append(_budget_note(self.budget, done, len(items), what))
                print(self.notes[-1], flush=True)
                return
            try:
                result = measure(item)
            except Exception as exc:
                self.aborted = f"{label(item)}: run aborted: {_error_text(exc)}"
                self.notes.append(self.aborted)
                print(self.aborted, flush=True)
                return
            yield item, result


def _budget_note(budget: Budget, done: int, total: int, what: str) -> str:
    return (f"budget of {budget.limit_s:.0f} s exceeded after {budget.elapsed():.0f} s: "
            f"ran {done} of {total} {what}, skipped the rest")


# --------------------------------------------------------------------------------------------
# GEMM mode.
# --------------------------------------------------------------------------------------------

def gemm_availability(device: torch.device) -> Optional[str]:
    """Why vlattn.linear cannot run here, or None when it can."""
    if not hasattr(vlattn, "linear"):
        return "vlattn has no linear"
    if device.type != "cuda":
        return "needs a CUDA device"
    major, minor = torch.cuda.get_device_capability(device)
    if (major, minor) != (9, 0):
        return f"needs sm_90, this is sm_{major}{minor}"
    info = _safe(vlattn.extension_info)
    if isinstance(info, dict) and not info.get("built"):
        return f"the vlattn extension is not built ({info.get('error')})"
    return None


def _gemm_operands(s: GemmShape, device: torch.device, seed: int):
    """Operands scaled like the seeds' (activations ~N(0,1), weights and bias ~N(0,0.02))."""
    gen = torch.Generator(device=device).manual_seed(seed)
    x = torch.randn(s.m, s.k, device=device, generator=gen).to(torch.bfloat16)
    w = (torch.randn(s.n, s.k, device=device, generator=gen) * 0.02).to(torch.bfloat16)
    b = (torch.randn(s.n, device=device, generator=gen) * 0.02).to(torch.bfloat16) if s.bias else None
    return x, w, b


def _gemm_rates(s: GemmShape, us: float) -> dict:
    return {"tflops": tflops(s.flops, us), "gbps": s.min_bytes / (us * 1e-6) / 1e9,
            "pct_sol": pct_sol(s.t_sol_us, us)}


def bench_gemm_shape(s: GemmShape, device: torch.device, timer, opts: Options,
                     vlattn_ok: bool) -> dict:
    """cuBLAS and (when it can run) vlattn.linear on one shape, the same operands for both."""
    rec = _measure_gemm_shape(s, device, timer, opts, vlattn_ok)
    release_memory(device)  # the operands died with the call above
    return rec


def _measure_gemm_shape(s: GemmShape, device: torch.device, timer, opts: Options,
                        vlattn_ok: bool) -> dict:
    x, w, b = _gemm_operands(s, device, opts.seed)
    out_cublas = torch.empty(s.m, s.n, dtype=torch.bfloat16, device=device)
    rec = {"m": s.m, "n": s.n, "k": s.k, "bias": s.bias, "label": s.label, "users": list(s.users),
           "t_sol_us": s.t_sol_us, "flops": s.flops, "min_bytes": s.min_bytes, "cublas": None, "vlattn": None}
    step = _cublas_linear(x, w, b, out_cublas)
    entries = [(lambda: Runner(step=step, result=lambda: out_cublas), None, contextlib.nullcontext)]
    if vlattn_ok:
        out = torch.empty(s.m, s.n, dtype=torch.bfloat16, device=device)
        check = (lambda y: compare_gemm(y, F.linear(x, w, b))) if opts.check else None
        entries.append((lambda: Runner(step=lambda: vlattn.linear(x, w, b, out=out), result=lambda: out, poison=out),
                        check, contextlib.nullcontext))
    cols = measure_columns(entries, device, timer, opts)
    for key, col in zip(("cublas", "vlattn"), cols):
        col.pop("setup_s", None)
        if key == "cublas":
            col.pop("check", None)
        if col["status"] == "measured":
            col.update(_gemm_rates(s, col["us_median"]))
        rec[key] = col
    v, c = rec["vlattn"], rec["cublas"]
    if v is not None and v.get("us_median") and c.get("us_median"):
        v["x_cublas"] = c["us_median"] / v["us_median"]
    return rec


def _cublas_linear(x, w, b, out) -> Callable[[], Any]:
    """F.linear's own cuBLAS path for 2-D input (addmm, whose bias can ride the cuBLASLt
    epilogue, or mm), writing into a preallocated ``out`` so the harness allocates nothing."""
    wt = w.t()
    if b is None:
        return lambda: torch.mm(x, wt, out=out)
    return lambda: torch.addmm(b, x, wt, out=out)


def _gemm_cell(r: Optional[dict], width: int) -> str:
    if r is None:
        return f"{'-':<{width}}"
    if r["status"] != "measured":
        return f"{r['status']:<{width}}"
    return f"{r['us_median']:9.1f} {r['tflops']:5.0f} {r['gbps']:6.0f} {r['pct_sol']:5.1f}%".ljust(width)


def gemm_header() -> str:
    sub = f"{'µs':>9} {'TF/s':>5} {'GB/s':>6} {'%SOL':>6}"
    return (f"{'M':>6} {'N':>5} {'K':>5} {'b':>1} {'T_SOL µs':>9} | {'cuBLAS':<29} | "
            f"{'vlattn.linear':<29} | {'×cuBLAS':>7} {'check':<5} {'rel_fro':>8} users\n"
            f"{'':>6} {'':>5} {'':>5} {'':>1} {'':>9} | {sub:<29} | {sub:<29} |")


def gemm_line(rec: dict) -> str:
    v = rec["vlattn"] or {}
    x = v.get("x_cublas")
    check = v.get("check")
    verdict = "" if not check else ("PASS" if check["ok"] else "FAIL")
    rel = f"{check['rel_fro_err']:8.1e}" if check else f"{'':>8}"
    return (f"{rec['m']:>6} {rec['n']:>5} {rec['k']:>5} {'b' if rec['bias'] else '-'} "
            f"{rec['t_sol_us']:9.1f} | {_gemm_cell(rec['cublas'], 29)} | {_gemm_cell(rec['vlattn'], 29)} | "
            f"{(f'{x:6.2f}x' if x else '      -')} {verdict:<5} {rel} {len(rec['users'])}")


def summarize_gemm(records: list[dict]) -> dict:
    """Geomean × cuBLAS and mean %SOL over the shapes, plus failed checks and errors."""
    def measured(side: str) -> list[dict]:
        return [r[side] for r in records if r[side] and r[side].get("us_median") is not None]

    vl = [r["vlattn"] for r in records if r["vlattn"]]
    return {
        "shapes": len(records),
        "cublas_mean_pct_sol": mean(r["pct_sol"] for r in measured("cublas")),
        "vlattn_mean_pct_sol": mean(r["pct_sol"] for r in measured("vlattn")),
        "vlattn_geomean_x_cublas": geomean(r.get("x_cublas") for r in measured("vlattn")),
        "vlattn_measured": len(measured("vlattn")),
        "vlattn_failures": sum(1 for r in vl if (r.get("check") or {}).get("ok") is False),
        "errors": sum(1 for r in records for side in ("cublas", "vlattn")
                      if r[side] and r[side]["status"] in ("OOM", "ERR")),
    }


def print_gemm_summary(summary: dict) -> None:
    def fmt(v: Optional[float], spec: str, suffix: str = "") -> str:
        return format(v, spec) + suffix if v is not None else "-"

    print(f"\n== gemm summary over {summary['shapes']} shapes: cuBLAS mean %SOL "
          f"{fmt(summary['cublas_mean_pct_sol'], '.1f', '%')}; vlattn.linear on {summary['vlattn_measured']} "
          f"shapes: mean %SOL {fmt(summary['vlattn_mean_pct_sol'], '.1f', '%')}, "
          f"geomean x cuBLAS {fmt(summary['vlattn_geomean_x_cublas'], '.2f')}; "
          f"check failures {summary['vlattn_failures']}, errors {summary['errors']} ==", flush=True)


def timer_kind(timer) -> tuple[str, str]:
    """("ahead" | "cold" | "cpu", how the header says it) of a mode's timer."""
    if getattr(timer, "host_ahead", False):
        return "ahead", "GPU span, host queued ahead"
    return ("cold" if isinstance(timer, CudaTimer) else "cpu"), "events around the call as launched"


def run_gemm(ws: list, device: torch.device, timer, opts: Options, budget: Budget) -> dict:
    shapes = dedupe_gemm_shapes((w.name, workloads.projection_shapes(w)) for w in ws)
    notes: list[str] = []
    why_not = gemm_availability(device)
    if why_not:
        notes.append(f"vlattn.linear: skipped, {why_not}; timing cuBLAS alone")
        print(notes[-1], flush=True)
    kind, how = timer_kind(timer)
    print(f"\n{len(shapes)} distinct projection GEMMs (bf16, out[M,N] = x[M,K]·W[N,K]ᵀ + b); timer: {how}",
          flush=True)
    print(gemm_header(), flush=True)
    records = []
    sweep = Sweep(budget, notes)
    for _, rec in sweep(shapes, "GEMM shapes", lambda s: f"gemm {s.label}",
                        lambda s: bench_gemm_shape(s, device, timer, opts, vlattn_ok=why_not is None)):
        records.append(rec)
        print(gemm_line(rec), flush=True)
        for side in ("cublas", "vlattn"):
            if rec[side] and rec[side]["status"] in ("OOM", "ERR"):
                print(f"    {side}: {rec[side]['status']}: {rec[side]['error']}", flush=True)
    summary = summarize_gemm(records)
    print_gemm_summary(summary)
    return {"results": records, "summary": summary, "notes": notes, "aborted": sweep.aborted, "timer": kind}


# --------------------------------------------------------------------------------------------
# Shared by the qkv and attention modes: one record per workload, one timed column per impl.
# --------------------------------------------------------------------------------------------

def vlattn_op_unavailable(name: str, device: torch.device) -> Optional[str]:
    """Why ``torch.ops.vlattn.<name>`` cannot run here, or None when it can."""
    try:
        present = hasattr(torch.ops.vlattn, name)
    except Exception:
        present = False
    if not present:
        return (f"torch.ops.vlattn.{name} is missing from this build "
                f"(extension: {_safe(vlattn.extension_info)})")
    if device.type != "cuda":
        return "needs a CUDA device"
    return None


def stage_record(w) -> dict:
    return {"problem": w.problem, "index": w.index, "uuid": w.uuid, "name": w.name,
            "axes": dict(w.axes), "columns": {}}


def dedupe_workloads(ws: list) -> list:
    """One workload per (problem, axes): identical shapes are timed once."""
    seen, kept = set(), []
    for w in ws:
        key = (w.problem, tuple(sorted(w.axes.items())))
        if key not in seen:
            seen.add(key)
            kept.append(w)
    return kept


def best_column(columns: dict, keys: Iterable[str]) -> tuple[Optional[str], Optional[float]]:
    """The fastest measured column among ``keys`` whose check did not FAIL (None, None if none)."""
    found = [(col["us_median"], key) for key, col in columns.items()
             if key in keys and col.get("us_median") is not None
             and (col.get("check") or {}).get("ok", True)]
    if not found:
        return None, None
    us, key = min(found)
    return key, us


def speedup(base: Optional[dict], ours: Optional[dict]) -> Optional[float]:
    """T_base / T_ours from two columns (None when either was not measured)."""
    b = (base or {}).get("us_median")
    o = (ours or {}).get("us_median")
    return b / o if (b and o) else None


def _verdict(col: Optional[dict]) -> str:
    check = (col or {}).get("check")
    return "" if not check else ("PASS" if check["ok"] else "FAIL")


def _us_cell(col: Optional[dict], width: int = 14) -> str:
    if col is None:
        return f"{'-':<{width}}"
    if col["status"] != "measured":
        return f"{col['status']:<{width}}"
    return f"{col['us_median']:8.1f} {_verdict(col):<4}".ljust(width)


def _x(v: Optional[float], width: int = 6) -> str:
    return f"{v:{width - 1}.2f}x" if v is not None else f"{'-':>{width}}"


def _num(v: Optional[float], spec: str, width: int) -> str:
    return format(v, spec).rjust(width) if v is not None else f"{'-':>{width}}"


def _xs(v: Optional[float]) -> str:
    """A speed-up in a sentence: '1.42x', or '-' when not measured."""
    return f"{v:.2f}x" if v is not None else "-"


def column_notes(rec: dict) -> list[str]:
    """Detail lines under a workload: a column's error, or its failed check."""
    notes = []
    for key, col in rec["columns"].items():
        check = col.get("check")
        if col["status"] in ("OOM", "ERR"):
            notes.append(f"    {key}: {col['status']}: {col.get('error')}")
        elif check is not None and not check["ok"]:
            details = ", ".join(f"{k} {v:.4g}" if isinstance(v, float) else f"{k} {v}"
                                for k, v in check.items() if k != "ok")
            notes.append(f"    {key}: FAIL ({details})")
        if col.get("note"):
            notes.append(f"    {key}: {col['note']}")
    return notes


def _column_stats(values: list[Optional[float]]) -> dict:
    xs = [v for v in values if v is not None]
    return {"n": len(xs), "geomean": geomean(xs), "min": min(xs) if xs else None}


def _column_failures(records: list[dict], key: str) -> tuple[int, int]:
    cols = [r["columns"][key] for r in records if key in r["columns"]]
    return (sum(1 for c in cols if (c.get("check") or {}).get("ok") is False),
            sum(1 for c in cols if c["status"] in ("OOM", "ERR")))


# --------------------------------------------------------------------------------------------
# QKV mode: the fused projection + bias + RoPE op against the unfused reference stage.
# --------------------------------------------------------------------------------------------

# (stage in vlattn.reference and vlattn, its inputs in make_inputs' names) per problem.
QKV_STAGES = {
    "007": ("mrope_qkv", ("hidden_states", "q_weight", "q_bias", "k_weight", "k_bias", "v_weight",
                          "v_bias", "cos", "sin")),
    "034": ("vision_qkv", ("language_hidden_states", "vision_hidden_states", "language_position_ids",
                           "vision_grid_thw", "q_proj_weight", "q_proj_bias", "k_proj_weight",
                           "k_proj_bias", "v_proj_weight", "v_proj_bias")),
}
# Fused columns: "fused" is the op's own choice (config ""), the others force a config.
QKV_FUSED = {"fused": "", "fused:m128": "m128", "fused:m64": "m64", "fused:c256": "c256"}
# unfused_compile: torch.compile of the same stage (inductor fuses the bias/RoPE/layout ops around cuBLAS).
QKV_BASELINES = ("unfused", "unfused_graph", "unfused_compile")
# Check of the fused stage against the reference stage: about one bf16 ulp everywhere.
QKV_ATOL = 1e-2
QKV_RTOL = 1e-2


def bf16_ulp(x: torch.Tensor) -> torch.Tensor:
    """The spacing of bf16 numbers at |x| for normal x (fp32 tensor; below 2^-126 and at zero it
    overstates the spacing, which is harmless next to QKV_ATOL)."""
    _, e = torch.frexp(x.float())
    return torch.ldexp(torch.ones_like(x, dtype=torch.float32), e - 8)


def qkv_bound(ref: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """Allowed |fused - reference| per element: QKV_ATOL + QKV_RTOL*scale (about one bf16 ulp of
    RoPE's operands, see qkv_operand_scales) plus one ulp of the result: a one-ulp change of an operand
    can flip the final rounding the other way too (H200, 2026-11-30: 1 of 458752 q elements of 007
    [B=1,S=128] at 4.4375 vs 4.375, two result ulps, with operand scale < 5.25)."""
    return QKV_ATOL + QKV_RTOL * scale + bf16_ulp(ref)


QKV_TARGET_X = 1.3  # issue 3: fused >= 1.3x the unfused sequence on every shape
QKV_SMALL_M = 256  # rows at or under this M stream the weights; their rate is held to:
QKV_WEIGHT_TARGET_BYTES_PER_S = 3.4e12


def qkv_shapes(w) -> list[tuple[str, int, int, int, bool]]:
    """The q, k and v projections (name, M, N, K, bias) of the stage."""
    return [s for s in workloads.projection_shapes(w) if s[0] != "o"]


def qkv_m(w) -> int:
    """The stage's largest M (007: B*S for all three; 034: max(B*Lq, B*Lv))."""
    return max(m for _, m, _, _, _ in qkv_shapes(w))


def qkv_flops(w) -> int:
    """2*M*N*K summed over the q, k and v GEMMs (bias and RoPE not counted)."""
    return sum(2 * m * n * k for _, m, n, k, _ in qkv_shapes(w))


def qkv_weight_bytes(w) -> int:
    """The three bf16 weights and biases: what a small-M call must stream from HBM."""
    return sum(2 * (n * k + (n if bias else 0)) for _, _, n, k, bias in qkv_shapes(w))


def qkv_min_bytes(w) -> int:
    """Inputs read once and q, k, v written once: activations, RoPE tables (007: the bf16 cos/sin
    [3, B, S, 128]) or int64 positions (034), weights and biases, bf16 outputs."""
    c = w.consts
    q_tokens, kv_tokens = w.batch * w.q_len, w.batch * w.kv_len
    outputs = 2 * (q_tokens * c["num_heads"] + 2 * kv_tokens * c["num_kv_heads"]) * c["head_dim"]
    if w.problem == "007":
        inputs = 2 * q_tokens * c["hidden_size"] + 2 * 2 * 3 * q_tokens * c["head_dim"]
    else:
        inputs = 2 * (q_tokens + kv_tokens) * c["hidden_size"] + 8 * (q_tokens + 3 * kv_tokens)
    return inputs + qkv_weight_bytes(w) + outputs


def qkv_t_sol_us(w) -> float:
    return max(qkv_flops(w) / workloads.PEAK_FLOPS, qkv_min_bytes(w) / workloads.PEAK_BYTES_PER_S) * 1e6


def qkv_rates(rec: dict, us: float) -> dict:
    return {"tflops": tflops(rec["flops"], us),
            "weight_gbps": rec["weight_bytes"] / (us * 1e-6) / 1e9,
            "gbps": rec["min_bytes"] / (us * 1e-6) / 1e9,
            "pct_sol": pct_sol(rec["t_sol_us"], us)}


def qkv_operand_scales(stage_name: str, args: tuple) -> list[torch.Tensor]:
    """Per output element, the magnitude RoPE's rounding works at: |y| + |rotate_half(y)| for q and k
    (y = the bf16 projection, head-major), |y| for v. A one-ulp difference in y (the GEMM's summation
    order differs from cuBLAS) moves y*cos + rot(y)*sin by about one ulp of these operands, which can
    be far more than one ulp of a small (cancelling) result."""
    if stage_name == "mrope_qkv":
        xs, wbs = (args[0],) * 3, ((args[1], args[2]), (args[3], args[4]), (args[5], args[6]))
    else:
        xs, wbs = (args[0], args[1], args[1]), ((args[4], args[5]), (args[6], args[7]), (args[8], args[9]))
    scales = []
    for i, (x, (wt, b)) in enumerate(zip(xs, wbs)):
        y = reference._project_heads(x, wt, b, 128).float()
        scales.append(y.abs() + reference.rotate_half(y).abs() if i < 2 else y.abs())
    return scales


def compare_qkv(outs, refs, scales=None) -> dict:
    """q, k, v against the reference stage: every element within qkv_bound(ref, scale), scale =
    ``scales`` (see qkv_operand_scales) or |ref| (a NaN never is); PASS only with no violation."""
    outs, refs = tuple(outs), tuple(refs)
    if len(outs) != len(refs) or any(tuple(o.shape) != tuple(r.shape) or o.dtype != r.dtype
                                     for o, r in zip(outs, refs)):
        return {"ok": False, "error": f"got {[(tuple(o.shape), str(o.dtype)) for o in outs]}, expected "
                                      f"{[(tuple(r.shape), str(r.dtype)) for r in refs]}"}
    violations, max_abs, elements = 0, 0.0, 0
    for i, (o, r) in enumerate(zip(outs, refs)):
        o, r = o.float(), r.float()
        diff = (o - r).abs()
        scale = r.abs() if scales is None else scales[i]
        violations += int((~(diff <= qkv_bound(r, scale))).sum())
        finite = diff[torch.isfinite(diff)]
        max_abs = max(max_abs, float(finite.max()) if finite.numel() else 0.0)
        elements += o.numel()
    return {"ok": violations == 0, "violations": violations, "elements": elements,
            "max_abs_err": max_abs}


def _contiguous_stage(stage: Callable[..., tuple]) -> Callable[..., tuple]:
    """The reference stage as PyTorch runs it unfused, then .contiguous() on each output (the
    fused op's head-major layout)."""
    def run(*args):
        return tuple(t.contiguous() for t in stage(*args))
    return run


def _fused_stage(stage_name: str, config: str) -> Callable[..., tuple]:
    op = getattr(vlattn, stage_name)

    def run(*args):
        return op(*args, config=config)
    return run


def qkv_columns(device: torch.device) -> tuple[list[str], dict[str, str], list[str]]:
    """(columns to run, per-problem reason the fused op cannot run, notes)."""
    notes: list[str] = []
    fused_missing = {p: why for p, (stage, _) in QKV_STAGES.items()
                     if (why := vlattn_op_unavailable(stage, device))}
    for p, why in fused_missing.items():
        notes.append(f"qkv {p}: fused vlattn.{QKV_STAGES[p][0]}: skipped, {why}; timing the unfused baselines alone")
    keys = ["unfused"]
    if device.type == "cuda":
        keys += ["unfused_graph", "unfused_compile"]
    else:
        notes.append("qkv: unfused_graph, unfused_compile: skipped, need a CUDA device")
    if len(fused_missing) < len(QKV_STAGES):
        keys += list(QKV_FUSED)
    return keys, fused_missing, notes


def bench_qkv_workload(w, keys: list[str], fused_missing: dict, device: torch.device, timer,
                       opts: Options) -> dict:
    """Every column on one workload: the same inputs, checked against the reference stage."""
    rec = _measure_qkv_workload(w, keys, fused_missing, device, timer, opts)
    release_memory(device)  # the inputs and reference outputs died with the call above
    return rec


def _measure_qkv_workload(w, keys: list[str], fused_missing: dict, device: torch.device, timer,
                          opts: Options) -> dict:
    stage_name, names = QKV_STAGES[w.problem]
    inputs = workloads.make_inputs(w, device, seed=opts.seed)
    args = tuple(inputs[n] for n in names)
    del inputs
    rec = stage_record(w)
    rec.update(m=qkv_m(w), flops=float(qkv_flops(w)), weight_bytes=float(qkv_weight_bytes(w)),
               min_bytes=float(qkv_min_bytes(w)), t_sol_us=qkv_t_sol_us(w))
    unfused = _contiguous_stage(getattr(reference, stage_name))
    refs, check = None, None
    if opts.check:
        try:
            refs = unfused(*args)
            scales = qkv_operand_scales(stage_name, args)
            check = lambda outs: compare_qkv(outs, refs, scales)  # noqa: E731
        except Exception as exc:
            rec["note"] = f"reference stage failed ({_error_text(exc)}); outputs unchecked"
    builds = {"unfused": lambda: _returning_runner(unfused, args),
              "unfused_graph": lambda: graph_runner(unfused, args, device),
              "unfused_compile": lambda: compiled_runner(unfused, args, device)}
    for key, config in QKV_FUSED.items():
        builds[key] = (lambda config=config: _returning_runner(_fused_stage(stage_name, config), args))
    run = [key for key in keys if not (key in QKV_FUSED and w.problem in fused_missing)]
    cols = measure_columns([(builds[key], check, contextlib.nullcontext) for key in run], device, timer, opts)
    for key, col in zip(run, cols):
        col["ours"] = key in QKV_FUSED
        if col["status"] == "measured":
            col.update(qkv_rates(rec, col["us_median"]))
        rec["columns"][key] = col
    add_qkv_speedups(rec)
    return rec


def add_qkv_speedups(rec: dict) -> None:
    """× unfused eager, × unfused graph and × best baseline for each fused column, in place."""
    cols = rec["columns"]
    rec["best_baseline"], rec["best_baseline_us"] = best_column(cols, QKV_BASELINES)
    best = {"us_median": rec["best_baseline_us"]}
    for key in QKV_FUSED:
        if key in cols:
            cols[key]["x_unfused"] = speedup(cols.get("unfused"), cols[key])
            cols[key]["x_unfused_graph"] = speedup(cols.get("unfused_graph"), cols[key])
            cols[key]["x_unfused_compile"] = speedup(cols.get("unfused_compile"), cols[key])
            cols[key]["x_best"] = speedup(best, cols[key])


def summarize_qkv(records: list[dict]) -> dict:
    """Per fused column: geomean and min × best baseline, rows under the 1.3x target, failures;
    and the weight-streaming rate of the auto-config fused op on rows with M <= 256."""
    summary: dict[str, Any] = {"workloads": len(records), "target_x": QKV_TARGET_X, "columns": {}}
    for key in QKV_FUSED:
        rows = [r for r in records if key in r["columns"]]
        xs = [r["columns"][key].get("x_best") for r in rows]
        stats = _column_stats(xs)
        failures, errors = _column_failures(records, key)
        summary["columns"][key] = {
            "n": stats["n"], "geomean_x_best": stats["geomean"], "min_x_best": stats["min"],
            "below_target": [r["name"] for r, x in zip(rows, xs) if x is not None and x < QKV_TARGET_X],
            "failures": failures, "errors": errors,
        }
    small = [r for r in records if r["m"] <= QKV_SMALL_M
             and (r["columns"].get("fused") or {}).get("weight_gbps") is not None]
    rates = [r["columns"]["fused"]["weight_gbps"] for r in small]
    target_gbps = QKV_WEIGHT_TARGET_BYTES_PER_S / 1e9
    summary["small_m"] = {
        "m_max": QKV_SMALL_M, "target_gbps": target_gbps, "n": len(small),
        "mean_weight_gbps": mean(rates),
        "min_weight_gbps": min(rates) if rates else None,
        "below_target": [r["name"] for r, g in zip(small, rates) if g < target_gbps],
    }
    return summary


QKV_COLS = (*QKV_BASELINES, *QKV_FUSED)


def qkv_header() -> str:
    cells = " | ".join(f"{k:<14}" for k in QKV_COLS)
    return (f"{'workload':<24} {'M':>6} {'T_SOL µs':>9} | {cells} | {'TF/s':>5} {'wGB/s':>6} {'GB/s':>6} "
            f"{'%SOL':>5} | {'×eager':>6} {'×graph':>6} {'×compl':>6} {'×best':>6} best\n"
            f"{'':<24} {'':>6} {'':>9} | " + " | ".join(f"{'µs':>8} {'chk':<4} " for _ in QKV_COLS)
            + " | fused (auto config)")


def qkv_line(rec: dict) -> str:
    cols = rec["columns"]
    f = cols.get("fused") or {}
    cells = " | ".join(_us_cell(cols.get(k)) for k in QKV_COLS)
    return (f"{rec['name']:<24} {rec['m']:>6} {rec['t_sol_us']:9.1f} | {cells} | "
            f"{_num(f.get('tflops'), '.0f', 5)} {_num(f.get('weight_gbps'), '.0f', 6)} "
            f"{_num(f.get('gbps'), '.0f', 6)} {_num(f.get('pct_sol'), '.1f', 5)} | "
            f"{_x(f.get('x_unfused'))} {_x(f.get('x_unfused_graph'))} {_x(f.get('x_unfused_compile'))} "
            f"{_x(f.get('x_best'))} {rec.get('best_baseline') or '-'}")


def print_qkv_summary(summary: dict) -> None:
    print(f"\n== qkv summary over {summary['workloads']} workloads: ×best = T_best_unfused / T_fused; "
          f"target >= {summary['target_x']}x on every shape ==", flush=True)
    for key, row in summary["columns"].items():
        below = row["below_target"]
        print(f"{key:<11} n={row['n']:<3} geomean ×best {_xs(row['geomean_x_best'])}, "
              f"min {_xs(row['min_x_best'])}, below {summary['target_x']}x: {len(below)}"
              f"{' (' + ', '.join(below[:8]) + ')' if below else ''}; "
              f"check failures {row['failures']}, errors {row['errors']}", flush=True)
    s = summary["small_m"]
    print(f"fused, rows with M <= {s['m_max']} ({s['n']}): weight streaming mean "
          f"{_num(s['mean_weight_gbps'], '.0f', 0)} GB/s, min {_num(s['min_weight_gbps'], '.0f', 0)} GB/s "
          f"vs target {s['target_gbps']:.0f} GB/s; below target: {len(s['below_target'])}", flush=True)


def run_qkv(ws: list, device: torch.device, timer, opts: Options, budget: Budget) -> dict:
    keys, fused_missing, notes = qkv_columns(device)
    ws = dedupe_workloads(ws)
    for note in notes:
        print(note, flush=True)
    kind, how = timer_kind(timer)
    print(f"\nqkv stage on {len(ws)} workloads: fused = vlattn.mrope_qkv / vision_qkv (auto config and "
          f"forced {', '.join(c for c in QKV_FUSED.values() if c)}); unfused = vlattn.reference stage + "
          f".contiguous(), eager, CUDA graph and torch.compile; timer: {how}. cells: median µs | check (|d| <= "
          f"{QKV_ATOL:g} + {QKV_RTOL:g}|RoPE operands| + ulp(ref) everywhere)", flush=True)
    print(qkv_header(), flush=True)
    records = []
    sweep = Sweep(budget, notes)
    for w, rec in sweep(ws, "qkv workloads", lambda w: f"qkv {w.name}",
                        lambda w: bench_qkv_workload(w, keys, fused_missing, device, timer, opts)):
        records.append(rec)
        print(qkv_line(rec), flush=True)
        for line in column_notes(rec) + ([f"    {rec['note']}"] if rec.get("note") else []):
            print(line, flush=True)
    summary = summarize_qkv(records)
    print_qkv_summary(summary)
    return {"results": records, "summary": summary, "notes": notes, "aborted": sweep.aborted, "timer": kind}


# --------------------------------------------------------------------------------------------
# Attention mode: vlattn's attention op against every SDPA backend and the composite's SDPA.
# --------------------------------------------------------------------------------------------

ATTN_SCALE = 128 ** -0.5
# Column key -> torch.nn.attention.SDPBackend member forced for it.
SDPA_BACKENDS = {"sdpa:flash": "FLASH_ATTENTION", "sdpa:cudnn": "CUDNN_ATTENTION",
                 "sdpa:efficient": "EFFICIENT_ATTENTION", "sdpa:math": "MATH"}
SDPA_KEYS = (*SDPA_BACKENDS, "sdpa:default")
ATTN_OURS = ("vlattn", "vlattn:noskip")
ATTN_COLS = (*ATTN_OURS, *SDPA_KEYS, "composite")
MASKED_BELOW = -1e30  # an additive mask entry under this removes the (i, j) pair
SKIP_RATIO_WORKLOAD = "007[B=1,S=4096]"


def token_major(o: torch.Tensor) -> torch.Tensor:
    """[B, H, S, D] -> [B, S, H*D], the vlattn attention op's output layout."""
    bsz, heads, seq, dim = o.shape
    return o.transpose(1, 2).reshape(bsz, seq, heads * dim)


def allowed_pairs(mask: Optional[torch.Tensor], batch: int, q_len: int, kv_len: int) -> int:
    """Unmasked (i, j) pairs over the batch: entries of the additive mask's first ``kv_len``
    columns above MASKED_BELOW (a mask broadcast over the batch counts once per entry)."""
    if mask is None:
        return batch * q_len * kv_len
    kept = int((mask[..., :q_len, :kv_len] > MASKED_BELOW).sum())
    return kept * (batch // mask.shape[0])


def attention_flops(batch: int, heads: int, q_len: int, kv_len: int, head_dim: int = 128,
                    pairs: Optional[int] = None) -> int:
    """4*D per (head, i, j) pair: QK^T and PV. ``pairs`` None: the full B*Sq*Sk matrix."""
    return 4 * heads * head_dim * (batch * q_len * kv_len if pairs is None else pairs)


def attention_inputs(w, device: torch.device, seed: int):
    """q, k, v from the reference stage (contiguous) and the mask as the layer uses it."""
    stage_name, names = QKV_STAGES[w.problem]
    inputs = workloads.make_inputs(w, device, seed=seed)
    q, k, v = _contiguous_stage(getattr(reference, stage_name))(*(inputs[n] for n in names))
    mask = inputs.get("attention_mask") if w.problem == "007" else None
    return q, k, v, mask


def _sdpa_kernel(backend: str) -> Callable[[], Any]:
    from torch.nn.attention import SDPBackend, sdpa_kernel
    return lambda: sdpa_kernel([getattr(SDPBackend, backend)])


def _sdpa(q, k, v, mask):
    gqa = q.shape[1] != k.shape[1]
    return token_major(F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=ATTN_SCALE,
                                                      enable_gqa=gqa))


def _sdpa_plain(q, k, v, mask):
    return token_major(F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=ATTN_SCALE))


def _build_sdpa(q, k, v, mask, info: dict) -> Runner:
    """SDPA (inside the backend's context) with enable_gqa; a backend that refuses GQA gets K/V
    expanded to Hq heads once, outside the timed region (a head start for the baseline). A
    refusal raises with PyTorch's warning that says why."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            _sdpa(q, k, v, mask)
            info["gqa"] = "enable_gqa"
            return _returning_runner(_sdpa, (q, k, v, mask))
        except RuntimeError as first:
            if q.shape[1] == k.shape[1]:
                raise RuntimeError(_with_warnings(first, caught)) from None
            rep = q.shape[1] // k.shape[1]
            k, v = reference.repeat_kv(k, rep).contiguous(), reference.repeat_kv(v, rep).contiguous()
            try:
                _sdpa_plain(q, k, v, mask)
            except RuntimeError as second:
                raise RuntimeError(_with_warnings(second, caught)) from None
    info["gqa"] = "kv expanded to Hq heads outside the timed region"
    return _returning_runner(_sdpa_plain, (q, k, v, mask))


def _with_warnings(exc: BaseException, caught: list) -> str:
    """The refusal's first line and PyTorch's warnings (why each kernel declined), once each."""
    first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]
    why = "; ".join(dict.fromkeys(str(c.message).strip().splitlines()[0] for c in caught if str(c.message).strip()))
    return f"{first}{' (' + why[:600] + ')' if why else ''}"


def _vlattn_attention(skip: bool) -> Callable[..., torch.Tensor]:
    def run(q, k, v, mask):
        return torch.ops.vlattn.attention(q, k, v, mask, causal=False, scale=ATTN_SCALE, skip=skip)
    return run


def _composite_attention(q, k, v, mask):
    return token_major(importlib.import_module("vlattn.composite").sdpa(q, k, v, mask, False, ATTN_SCALE))


def attention_columns(device: torch.device) -> tuple[list[str], list[str]]:
    notes: list[str] = []
    keys = []
    why = vlattn_op_unavailable("attention", device)
    if why:
        notes.append(f"attention: vlattn: skipped, {why}; timing the SDPA baselines alone")
    else:
        keys += list(ATTN_OURS)
    keys += list(SDPA_KEYS)
    composite_error = _import_error("vlattn.composite")
    if composite_error:
        notes.append(f"attention: composite: skipped, vlattn.composite is missing ({composite_error})")
    else:
        keys.append("composite")
    return keys, notes


def bench_attention_workload(w, keys: list[str], device: torch.device, timer, opts: Options) -> dict:
    """Every column on one workload: the same q, k, v and mask, checked against the reference."""
    rec = _measure_attention_workload(w, keys, device, timer, opts)
    release_memory(device)
    return rec


def _measure_attention_workload(w, keys: list[str], device: torch.device, timer, opts: Options) -> dict:
    q, k, v, mask = attention_inputs(w, device, opts.seed)
    heads = q.shape[1]
    rec = stage_record(w)
    pairs = allowed_pairs(mask, w.batch, w.q_len, w.kv_len)
    rec.update(flops_full=float(attention_flops(w.batch, heads, w.q_len, w.kv_len)),
               flops_needed=float(attention_flops(w.batch, heads, w.q_len, w.kv_len, pairs=pairs)),
               masked=mask is not None)
    rec["needed_fraction"] = rec["flops_needed"] / rec["flops_full"]
    ref, check = None, None
    if opts.check:
        try:
            ref = token_major(reference.attention(q, k, v, mask))
            check = lambda out: check_layer_output(out, ref, w)  # noqa: E731
        except Exception as exc:
            rec["note"] = f"reference attention failed ({_error_text(exc)}); outputs unchecked"
    args = (q, k, v, mask)
    run, entries, infos = [], [], []
    for key in keys:
        if key == "vlattn:noskip" and w.problem != "007":
            continue  # nothing to skip without a mask
        info: dict[str, Any] = {}
        context: Callable[[], Any] = contextlib.nullcontext
        if key in ATTN_OURS:
            build = (lambda skip=(key == "vlattn"): _returning_runner(_vlattn_attention(skip), args))
        elif key in SDPA_BACKENDS:
            context = _sdpa_kernel(SDPA_BACKENDS[key])
            build = (lambda info=info: _build_sdpa(q, k, v, mask, info))
        elif key == "sdpa:default":
            build = (lambda info=info: _build_sdpa(q, k, v, mask, info))
        else:
            build = (lambda: _returning_runner(_composite_attention, args))
        run.append(key)
        entries.append((build, check, context))
        infos.append(info)
    for key, info, col in zip(run, infos, measure_columns(entries, device, timer, opts)):
        col["ours"] = key in ATTN_OURS
        col.update(info)
        if col["status"] == "measured":
            col["tflops_full"] = tflops(rec["flops_full"], col["us_median"])
            col["tflops_needed"] = tflops(rec["flops_needed"], col["us_median"])
        rec["columns"][key] = col
    add_attention_speedups(rec)
    return rec


def add_attention_speedups(rec: dict) -> None:
    """× best SDPA and × composite for vlattn's columns, and the skip on/off ratio, in place."""
    cols = rec["columns"]
    rec["best_sdpa"], rec["best_sdpa_us"] = best_column(cols, SDPA_KEYS)
    best = {"us_median": rec["best_sdpa_us"]}
    for key in ATTN_OURS:
        if key in cols:
            cols[key]["x_best_sdpa"] = speedup(best, cols[key])
            cols[key]["x_composite"] = speedup(cols.get("composite"), cols[key])
    # T(skip off) / T(skip on): how much the masked-tile skip buys.
    rec["skip_ratio"] = speedup(cols.get("vlattn:noskip"), cols.get("vlattn"))


def summarize_attention(records: list[dict]) -> dict:
    summary: dict[str, Any] = {"workloads": len(records), "columns": {}}
    for key in ATTN_OURS:
        rows = [r["columns"][key] for r in records if key in r["columns"]]
        best, comp = _column_stats([c.get("x_best_sdpa") for c in rows]), \
            _column_stats([c.get("x_composite") for c in rows])
        failures, errors = _column_failures(records, key)
        summary["columns"][key] = {
            "n": best["n"], "geomean_x_best_sdpa": best["geomean"], "min_x_best_sdpa": best["min"],
            "geomean_x_composite": comp["geomean"], "failures": failures, "errors": errors,
        }
    best_counts: dict[str, int] = {}
    for r in records:
        if r.get("best_sdpa"):
            best_counts[r["best_sdpa"]] = best_counts.get(r["best_sdpa"], 0) + 1
    summary["best_sdpa_counts"] = best_counts
    summary["geomean_skip_ratio_007"] = geomean(r.get("skip_ratio") for r in records if r["problem"] == "007")
    named = [r for r in records if r["name"] == SKIP_RATIO_WORKLOAD]
    summary["skip_ratio_workload"] = SKIP_RATIO_WORKLOAD
    summary["skip_ratio"] = named[0].get("skip_ratio") if named else None
    return summary


def attention_header() -> str:
    cells = " | ".join(f"{k:<14}" for k in ATTN_COLS)
    return (f"{'workload':<24} {'need%':>5} | {cells} | {'match%':>6} {'TF/s':>5} {'TF/s*':>5} | "
            f"{'×bestSDPA':>9} {'×comp':>6} {'skip':>6} best SDPA\n"
            f"{'':<24} {'':>5} | " + " | ".join(f"{'µs':>8} {'chk':<4} " for _ in ATTN_COLS)
            + " | vlattn (skip on): full-matrix TF/s, TF/s* on needed FLOPs; skip = T_off/T_on")


def attention_line(rec: dict) -> str:
    cols = rec["columns"]
    o = cols.get("vlattn") or {}
    matched = (o.get("check") or {}).get("matched")
    cells = " | ".join(_us_cell(cols.get(k)) for k in ATTN_COLS)
    best = f"{rec['best_sdpa']} {rec['best_sdpa_us']:.1f} µs" if rec.get("best_sdpa") else "-"
    return (f"{rec['name']:<24} {100 * rec['needed_fraction']:5.1f} | {cells} | "
            f"{_num(None if matched is None else 100 * matched, '.2f', 6)} "
            f"{_num(o.get('tflops_full'), '.0f', 5)} {_num(o.get('tflops_needed'), '.0f', 5)} | "
            f"{_x(o.get('x_best_sdpa'), 9)} {_x(o.get('x_composite'))} {_x(rec.get('skip_ratio'))} {best}")


def print_attention_summary(summary: dict) -> None:
    print(f"\n== attention summary over {summary['workloads']} workloads: ×best SDPA = T_best_SDPA / T ==",
          flush=True)
    for key, row in summary["columns"].items():
        print(f"{key:<14} n={row['n']:<3} geomean ×best SDPA {_xs(row['geomean_x_best_sdpa'])}, "
              f"min {_xs(row['min_x_best_sdpa'])}, geomean ×composite "
              f"{_xs(row['geomean_x_composite'])}; check failures {row['failures']}, "
              f"errors {row['errors']}", flush=True)
    counts = ", ".join(f"{k} {n}" for k, n in sorted(summary["best_sdpa_counts"].items())) or "-"
    print(f"best SDPA backend per workload: {counts}", flush=True)
    print(f"skip on/off (T_noskip / T_skip): {summary['skip_ratio_workload']} "
          f"{_xs(summary['skip_ratio'])}; geomean over 007 "
          f"{_xs(summary['geomean_skip_ratio_007'])}", flush=True)


def run_attention(ws: list, device: torch.device, timer, opts: Options, budget: Budget) -> dict:
    keys, notes = attention_columns(device)
    ws = dedupe_workloads(ws)
    for note in notes:
        print(note, flush=True)
    print(f"\nattention on {len(ws)} workloads: q/k/v from the reference stage, 007 with its additive "
          f"mask, scale 128**-0.5, output [B, Sq, Hq*128] for every column; cells: median µs | "
          f"check (benchmark rule vs vlattn.reference.attention); need% = unmasked pairs", flush=True)
    print(attention_header(), flush=True)
    records = []
    sweep = Sweep(budget, notes)
    for w, rec in sweep(ws, "attention workloads", lambda w: f"attention {w.name}",
                        lambda w: bench_attention_workload(w, keys, device, timer, opts)):
        records.append(rec)
        print(attention_line(rec), flush=True)
        for line in column_notes(rec) + ([f"    {rec['note']}"] if rec.get("note") else []):
            print(line, flush=True)
    summary = summarize_attention(records)
    print_attention_summary(summary)
    return {"results": records, "summary": summary, "notes": notes, "aborted": sweep.aborted}


# --------------------------------------------------------------------------------------------
# Output files.
# --------------------------------------------------------------------------------------------

def default_output_stem(meta: dict, mode: str) -> Path:
    """bench/results/<UTC time>_<commit>_<mode> beside the repository's bench/ (or the cwd's)."""
    root = Path(__file__).resolve().parents[2]
    if not (root / "bench").is_dir():
        root = Path.cwd()
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%d-%H%M%S")
    commit = (meta.get("commit") or "nocommit")[:8]
    return root / "bench" / "results" / f"{stamp}_{commit}_{mode}"


def write_json(path: Path, payload: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(payload, indent=1, default=str) + "\n")
    print(f"wrote {path}", flush=True)


@dataclass
class Panel:
    """One bar chart: ``series`` maps a name to one value (or None) per x label."""

    title: str
    labels: list[str]
    series: dict
    ylabel: str = "% of SOL (T_SOL / T)"
    reference_line: float = 100.0


def plot_panels(layers: Optional[dict], gemm: Optional[dict], qkv: Optional[dict] = None,
                attention: Optional[dict] = None) -> list[Panel]:
    """%SOL per problem (layers) and for the GEMMs; speed-ups per problem for qkv and attention."""
    panels = []
    if layers:
        for problem in sorted({r["problem"] for r in layers["results"]}):
            rows = [r for r in layers["results"] if r["problem"] == problem]
            labels = list(dict.fromkeys(axes_label(r["axes"]) for r in rows))
            series: dict[str, list] = {}
            for r in rows:
                values = series.setdefault(r["impl"], [None] * len(labels))
                values[labels.index(axes_label(r["axes"]))] = r.get("pct_sol")
            panels.append(Panel(f"{problem} {OP_NAMES[problem]}: % of H200 speed of light", labels, series))
    if gemm and gemm["results"]:
        labels = [r["label"] for r in gemm["results"]]
        series = {side: [(r[side] or {}).get("pct_sol") for r in gemm["results"]]
                  for side in ("cublas", "vlattn")}
        panels.append(Panel("projection GEMMs: % of H200 speed of light", labels, series))
    stages = ((qkv, QKV_FUSED, "x_best", "×best unfused (T_unfused / T)", QKV_TARGET_X,
               "qkv stage: fused vs best unfused baseline (line: 1.3x target)"),
              (attention, ATTN_OURS, "x_best_sdpa", "×best SDPA (T_SDPA / T)", 1.0,
               "attention: vlattn vs best SDPA backend"))
    for part, keys, field_name, ylabel, line, title in stages:
        for problem in sorted({r["problem"] for r in (part or {}).get("results", [])}):
            rows = [r for r in part["results"] if r["problem"] == problem]
            series = {k: [(r["columns"].get(k) or {}).get(field_name) for r in rows] for k in keys}
            series = {k: v for k, v in series.items() if any(x is not None for x in v)}
            if series:
                panels.append(Panel(f"{problem} {title}", [axes_label(r["axes"]) for r in rows], series,
                                    ylabel, line))
    return panels


def save_plot(path: Path, panels: list[Panel]) -> Optional[str]:
    """Grouped bars, one chart per panel; returns why no plot was written, or None."""
    if not panels:
        return "plot skipped: nothing was measured"
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "plot skipped: matplotlib is not installed"
    widest = max(len(panel.labels) for panel in panels)
    fig, axes = plt.subplots(len(panels), 1, figsize=(max(8.0, 0.6 * widest + 2), 3.8 * len(panels)),
                             squeeze=False)
    for ax, panel in zip(axes[:, 0], panels):
        labels, series = panel.labels, panel.series
        width = 0.8 / max(len(series), 1)
        for i, (name, values) in enumerate(series.items()):
            points = [(j + (i - (len(series) - 1) / 2) * width, v) for j, v in enumerate(values) if v is not None]
            if points:
                ax.bar([p[0] for p in points], [p[1] for p in points], width, label=name)
        ax.axhline(panel.reference_line, color="gray", linestyle="--", linewidth=0.8)
        ax.set_xticks(range(len(labels)))
        ax.set_xticklabels(labels, rotation=45, ha="right", fontsize=7)
        ax.set_ylabel(panel.ylabel)
        ax.set_title(panel.title, fontsize=10)
        ax.legend(fontsize=7, ncol=min(len(series), 6))
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    print(f"wrote {path}", flush=True)
    return None


# --------------------------------------------------------------------------------------------
# Without a GPU.
# --------------------------------------------------------------------------------------------

def run_cpu_fallback(ws: list, opts: Options, meta: dict, json_path: Optional[Path]) -> int:
    """The CPU reference on the smallest chosen workload, checked against the seed's run().

    This proves the inputs, the reference and the check run end to end on a machine with no GPU;
    timing anything on a CPU would say nothing about the H200.
    """
    w = min(ws, key=workloads.flops)
    inputs = workloads.make_inputs(w, torch.device("cpu"), seed=opts.seed)
    op_name = OP_NAMES[w.problem]
    t0 = time.perf_counter()
    out = getattr(reference, op_name)(**inputs)
    wall_us = (time.perf_counter() - t0) * 1e6
    seed_module = reference.load_seed(w.problem)
    check = (check_layer_output(out, seed_module.run(**inputs), w)
             if seed_module is not None and opts.check else None)
    verdict = "unchecked" if check is None else ("PASS" if check["ok"] else "FAIL")
    print(f"{w.name:<24} vlattn.reference on CPU: {wall_us / 1e3:.1f} ms wall (one call); "
          f"vs the seed's reference.py: {verdict}", flush=True)
    message = (f"no CUDA device: ran the CPU reference on {w.name} only; "
               f"GPU timing needs an NVIDIA GPU")
    print(message, flush=True)
    if json_path is not None:
        record = {"problem": w.problem, "index": w.index, "uuid": w.uuid, "name": w.name,
                  "axes": dict(w.axes), "impl": "reference_cpu",
                  "status": "measured", "us_wall": wall_us, "check": check}
        write_json(json_path, {"meta": meta, "results": [record], "summary": None, "notes": [message]})
    return 0 if check is None or check["ok"] else 1


# --------------------------------------------------------------------------------------------
# Entry point.
# --------------------------------------------------------------------------------------------

def parse_args(argv: Optional[list[str]]) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="vlattn-bench",
        description="Check and time the vlattn layers (and their GEMMs) against PyTorch baselines "
                    "on the SOL-ExecBench 007/034 workloads, cold L2, CUDA events, median.")
    p.add_argument("--problem", choices=["007", "034", "all"], default="all")
    p.add_argument("--workloads", default=None,
                   help="comma list: PPP:i (problem:index), i (index in each problem), or a "
                        "substring of a workload's name or uuid, e.g. '007[B=4,S=128]' or 'B=4 S=128'")
    p.add_argument("--mode", choices=MODES, default="layers",
                   help="layers (default); gemm: the projection GEMMs vs cuBLAS; qkv: the fused QKV "
                        "projection op vs the unfused reference stage; attention: the vlattn "
                        "attention op vs each SDPA backend; all: the four in turn")
    p.add_argument("--backends", default=None,
                   help="comma list of vlattn backends from native,composite "
                        "(default: those available on the device)")
    p.add_argument("--baselines", default=DEFAULT_BASELINES,
                   help=f"comma list from {','.join(BASELINE_CHOICES)} (default {DEFAULT_BASELINES}; "
                        f"'' for none)")
    p.add_argument("--no-native-graph", dest="native_graph", action="store_false",
                   help="leave out vlattn:native_graph (the native op replayed from a CUDA graph: GPU "
                        "time without the host path)")
    p.add_argument("--switch", default=None, metavar="NAME=v1,v2",
                   help="layers mode: A/B of a development switch (vlattn.dev) in one process, each vlattn column once "
                        "per value, interleaved with the others (e.g. VLATTN_QKV_GEMM_EPI=1,4)")
    p.add_argument("--compile", action="store_true",
                   help="add torch.compile of the composite as a baseline when --baselines leaves it out "
                        "(it is in the default list; compiles per workload)")
    p.add_argument("--compile-mode", default="default",
                   choices=["default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs"])
    p.add_argument("--gemm-timer", choices=["ahead", "cold"], default="ahead",
                   help="gemm mode: 'ahead' (default) times each call's GPU span with the host queued ahead "
                        "of the GPU (a spin kernel after the L2 flush); 'cold' the layers' timer, whose "
                        "clock starts before the host has launched the kernel (host launch latency included)")
    p.add_argument("--qkv-timer", choices=["ahead", "cold"], default="cold",
                   help="qkv mode: 'cold' (default) the layers' timer, host launch path included as a caller "
                        "sees it in eager mode; 'ahead' the GPU span from the first kernel to the last, every "
                        "column's host queued ahead (as --gemm-timer ahead)")
    p.add_argument("--iters", type=int, default=None, help="timed calls per impl (default 30, --quick 10)")
    p.add_argument("--warmup", type=int, default=None, help="untimed calls first (default 5, --quick 2)")
    p.add_argument("--rounds", type=int, default=10,
                   help="split each column's timed calls (per workload or GEMM shape) over this many rounds, "
                        "the columns interleaved (a seeded order per round, never a column twice in a row); "
                        "1: each column timed in one block (default 10: the H200's speed drifts within a block "
                        "of 10 calls, bench/NOTES.md forty-second session)")
    p.add_argument("--round-warmup", type=int, default=2,
                   help="untimed calls before each round's block after the first (which takes --warmup), each "
                        "drained and flushed like a timed call (default 2; bench/NOTES.md forty-fourth and "
                        "forty-fifth sessions)")
    p.add_argument("--quick", action="store_true", help="fewer iterations")
    p.add_argument("--seed", type=int, default=None, help="input seed (default: a fresh one, recorded)")
    p.add_argument("--no-check", action="store_true", help="skip the correctness checks")
    p.add_argument("--json", type=Path, default=None,
                   help="results file (default with a GPU: bench/results/<time>_<commit>_<mode>.json)")
    p.add_argument("--plot", type=Path, default=None,
                   help="%%SOL plot, PNG (default with a GPU: beside the default JSON)")
    p.add_argument("--warmup-s", type=float, default=2.0,
                   help="seconds of GPU + host work before the first timed call (default 2; 0: none)")
    p.add_argument("--budget-s", type=float, default=None,
                   help="start no new workload or shape after this many seconds")
    p.add_argument("--device", choices=["cuda", "cpu"], default=None,
                   help="default: cuda when present, else the CPU-reference fallback; 'cpu' runs "
                        "the full pipeline on the CPU as a smoke test (timings meaningless)")
    args = p.parse_args(argv)
    bad = [b for b in _split(args.backends) if b not in BACKEND_CHOICES]
    bad += [b for b in _split(args.baselines) if b not in BASELINE_CHOICES]
    if bad:
        p.error(f"unknown backend or baseline: {', '.join(bad)}")
    args.iters = args.iters if args.iters is not None else (10 if args.quick else 30)
    args.warmup = args.warmup if args.warmup is not None else (2 if args.quick else 5)
    if args.iters < 1 or args.warmup < 0 or args.rounds < 1 or args.round_warmup < 0:
        p.error("--iters and --rounds must be >= 1, --warmup and --round-warmup >= 0")
    if args.switch is not None:
        try:
            name, _ = parse_switch(args.switch)
        except ValueError as exc:
            p.error(str(exc))
        known = _known_switches()
        if known is not None and name not in known:
            p.error(f"--switch: unknown switch {name!r}; the switches are {', '.join(known)}")
    if args.seed is None:
        args.seed = random.SystemRandom().randrange(2**31)
    return args


def _known_switches() -> Optional[list[str]]:
    """The development switches' names, or None without the compiled extension."""
    from . import _ext
    if not _ext.available():
        return None
    return list(importlib.import_module("vlattn.dev").switches())


def main(argv: Optional[list[str]] = None) -> int:
    args = parse_args(argv)
    try:
        chosen = select_workloads(workloads.load(None if args.problem == "all" else args.problem),
                                  args.workloads)
    except ValueError as exc:
        print(exc, file=sys.stderr, flush=True)
        return 2
    chosen.sort(key=lambda w: w.sort_key)  # per problem, ascending T_SOL (ANCHORS.md's order)
    opts = Options(iters=args.iters, warmup=args.warmup, check=not args.no_check, seed=args.seed,
                   rounds=args.rounds, round_warmup=args.round_warmup)
    has_cuda = torch.cuda.is_available()
    if args.device == "cuda" and not has_cuda:
        print("--device cuda: no CUDA device is visible", file=sys.stderr, flush=True)
        return 2
    device = torch.device("cuda", torch.cuda.current_device()) if (has_cuda and args.device != "cpu") else torch.device("cpu")
    meta = environment_meta(device, args)
    print(describe_meta(meta), flush=True)
    with torch.no_grad(), _switch_restored(args.switch):
        if device.type == "cpu" and args.device is None:
            return run_cpu_fallback(chosen, opts, meta, args.json)
        return run_device(chosen, args, opts, device, meta)


@contextlib.contextmanager
def _switch_restored(spec: Optional[str]):
    """--switch's columns leave the switch at their last value: put it back after the run."""
    if spec is None or not importlib.import_module("vlattn._ext").available():
        yield
        return
    dev = importlib.import_module("vlattn.dev")
    name, _ = parse_switch(spec)
    start = dev.get_switch(name)
    try:
        yield
    finally:
        dev.set_switch(name, start)


def warm_up_process(device: torch.device, seconds: float) -> float:
    """``seconds`` of back-to-back small GPU launches with host synchronization before the first
    timed call. Without it the first workloads of a run measured slower in the cold (host-paced)
    column than the same code later in the run, graph replay unchanged (bench/NOTES.md, eighth
    session: 007 B1 S128 70 vs 56 us), as if host and GPU clocks were still ramping up."""
    if seconds <= 0:
        return 0.0
    a = torch.randn(1024, 1024, device=device, dtype=torch.bfloat16)
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        for _ in range(32):
            a = torch.tanh(a @ a)
        torch.cuda.synchronize(device)
    return time.perf_counter() - t0


def run_device(chosen: list, args: argparse.Namespace, opts: Options, device: torch.device,
               meta: dict) -> int:
    """Layers and/or GEMM mode on ``device``; the JSON and plot go to the given paths, else (on a
    GPU) under bench/results/. Returns the exit status (see exit_status)."""
    if device.type == "cuda":
        torch.cuda.set_device(device)
        timer = CudaTimer(device)
    else:
        print("--device cpu: smoke run of the pipeline; wall-clock times, no L2 control", flush=True)
        timer = cpu_timer
    budget = Budget(args.budget_s)
    if device.type == "cuda":
        meta["process_warmup_s"] = round(warm_up_process(device, args.warmup_s), 2)
    stem = default_output_stem(meta, args.mode) if device.type == "cuda" else None
    payload: dict[str, Any] = {"meta": meta, "results": [], "summary": None, "notes": []}
    print(f"seed {opts.seed}; {opts.iters} timed calls after {opts.warmup} warm-up, median; "
          f"{len(chosen)} workloads", flush=True)
    layers = gemm = qkv = attention = None
    if args.mode in ("layers", "all"):
        impls, impl_notes = resolve_impls(args, device)
        for impl in impls:
            print(f"  {impl.key}: {impl.description}", flush=True)
        for note in impl_notes:
            print(f"  {note}", flush=True)
        print("cells: median µs | TFLOP/s | %SOL = T_SOL/T | ×best = T_best_PyTorch/T | check", flush=True)
        layers = run_layers(chosen, impls, device, timer, opts, budget)
        payload.update(results=layers["results"], summary=layers["summary"], host_meter=layers["host_meter"])
        payload["notes"] += impl_notes + layers["notes"]
    if args.mode in ("gemm", "all"):
        gemm_timer = timer
        if device.type == "cuda" and args.gemm_timer == "ahead":
            gemm_timer = CudaTimer(device, host_ahead=True)
        gemm = run_gemm(chosen, device, gemm_timer, opts, budget)
        payload["gemm"] = gemm
        payload["notes"] += gemm["notes"]
    if args.mode in ("qkv", "all"):
        qkv_timer = timer
        if device.type == "cuda" and args.qkv_timer == "ahead":
            qkv_timer = CudaTimer(device, host_ahead=True)
        qkv = run_qkv(chosen, device, qkv_timer, opts, budget)
        payload["qkv"] = qkv
        payload["notes"] += qkv["notes"]
    if args.mode in ("attention", "all"):
        attention = run_attention(chosen, device, timer, opts, budget)
        payload["attention"] = attention
        payload["notes"] += attention["notes"]
    json_path = args.json or (stem.with_suffix(".json") if stem else None)
    plot_path = args.plot or (stem.with_suffix(".png") if stem else None)
    if json_path:
        write_json(json_path, payload)
    if plot_path:
        try:
            why_not = save_plot(plot_path, plot_panels(layers, gemm, qkv, attention))
        except Exception as exc:  # a plot is a convenience: never lose the exit status over it
            why_not = f"plot failed: {_error_text(exc)}"
        if why_not:
            print(why_not, flush=True)
    return exit_status(layers, gemm, qkv, attention)


def exit_status(layers: Optional[dict], gemm: Optional[dict], qkv: Optional[dict] = None,
                attention: Optional[dict] = None) -> int:
    """1 when any checked impl FAILED the rule, a vlattn op raised (a bug of ours) or the run was
    aborted; baseline errors such as a reference OOM are reported but do not fail the run."""
    problems = [part["aborted"] for part in (layers, gemm, qkv, attention) if part and part["aborted"]]
    for r in (layers or {}).get("results", []):
        if (r.get("check") or {}).get("ok") is False:
            problems.append(f"{r['name']} {r['impl']}: FAIL")
        elif r["status"] in ("OOM", "ERR") and not r["pytorch"]:
            problems.append(f"{r['name']} {r['impl']}: {r['status']}")
    for r in (gemm or {}).get("results", []):
        v = r["vlattn"] or {}
        if (v.get("check") or {}).get("ok") is False:
            problems.append(f"gemm {r['label']}: FAIL")
        elif v.get("status") in ("OOM", "ERR"):
            problems.append(f"gemm {r['label']}: {v['status']}")
    for mode, part in (("qkv", qkv), ("attention", attention)):
        for r in (part or {}).get("results", []):
            for key, col in r["columns"].items():
                if (col.get("check") or {}).get("ok") is False:
                    problems.append(f"{mode} {r['name']} {key}: FAIL")
                elif col["ours"] and col["status"] in ("OOM", "ERR"):
                    problems.append(f"{mode} {r['name']} {key}: {col['status']}")
    if problems:
        print(f"result: {len(problems)} problem(s): " + "; ".join(problems[:20]), flush=True)
        return 1
    print("result: no check failed, no vlattn op raised", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
