"""Benchmark the vlattn layers and their GEMMs against plain PyTorch on the 32 seed workloads.

Run as ``vlattn-bench`` or ``python -m vlattn.bench`` (``--help`` lists the flags).

Two modes:
- ``layers``: each workload of SOL-ExecBench problems 007 and 034, each vlattn backend and the
  PyTorch baselines (``reference.py`` eager, the composite eager, the composite replayed from a
  CUDA graph, optionally ``torch.compile`` of the composite). Every output is checked against the
  exact bf16 reference under the benchmark's rule before it is timed.
- ``gemm``: every distinct projection shape of the chosen workloads, ``vlattn.linear`` against
  cuBLAS through ``F.linear``'s own path, timed in the same run.

Timing follows STYLE.md and METHOD.md: L2 is made cold before every call by writing a scratch
buffer twice the device's L2, CUDA events bracket the call alone, nothing is allocated by the
harness inside the timed region, and the median of many calls is reported (min, p20, p80 kept).

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
import json
import math
import os
import platform
import random
import subprocess
import sys
import time
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
DEFAULT_BASELINES = "reference,composite,composite_graph"

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
    """Median is the headline (robust to the odd preempted call); min and p20/p80 show spread."""
    return {
        "us_median": percentile(times_us, 50),
        "us_min": min(times_us),
        "us_p20": percentile(times_us, 20),
        "us_p80": percentile(times_us, 80),
        "iters": len(times_us),
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
    """The vlattn commit: ``VLATTN_COMMIT`` wins, since device copies of the tree carry no .git."""
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
    return (f"vlattn bench on {where}; torch {meta['torch']}, CUDA {meta['cuda']}, "
            f"cuDNN {meta['cudnn']}; commit {commit}")


# --------------------------------------------------------------------------------------------
# Timing.
# --------------------------------------------------------------------------------------------

class CudaTimer:
    """Cold-L2 CUDA-event timer.

    Before each call the queue is drained and a scratch buffer of twice the L2 is written, so the
    call finds none of its inputs or weights in cache (the benchmark flushes L2 the same way) and
    starts from an idle queue like a layer call in a model step. Events bracket the call alone.
    """

    def __init__(self, device: torch.device):
        props = torch.cuda.get_device_properties(device)
        l2_bytes = getattr(props, "L2_cache_size", 0) or FALLBACK_L2_BYTES
        self.scratch = torch.empty(2 * l2_bytes // 4, dtype=torch.int32, device=device)

    def __call__(self, step: Callable[[], Any], iters: int, warmup: int) -> list[float]:
        for _ in range(warmup):
            step()
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
        for start, end in zip(starts, ends):
            torch.cuda.synchronize()
            self.scratch.zero_()
            start.record()
            step()
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


def compile_impl(mode: str) -> Impl:
    """torch.compile of the composite, one specialisation per workload.

    Dynamo is reset per workload so the recompile limit never silently sends later shapes back to
    eager; the first call (compilation) is timed apart and reported as setup_s.
    """

    def build(case: Case) -> Runner:
        torch._dynamo.reset()
        fn = torch.compile(_composite_fn(case.op_name), mode=mode, dynamic=False)
        t0 = time.perf_counter()
        fn(*case.args)
        torch.cuda.synchronize(case.device)
        return _returning_runner(fn, case.args, setup_s=time.perf_counter() - t0)

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
    impls = [vlattn_backend_impl(b) for b in _resolve_backends(args.backends, device, notes)]
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


def measure_runner(build: Callable[[], Runner], device: torch.device, timer, opts: Options,
                   check: Optional[Callable[[Any], dict]] = None,
                   context: Callable[[], Any] = contextlib.nullcontext) -> dict:
    """Build, check (one call on poisoned output), warm up and time one implementation.

    Returns status ("measured", "OOM", "ERR"), the time statistics, ``check`` (``check`` applied
    to the checked call's output), ``setup_s`` and ``error``. Any failure, out-of-memory included,
    is recorded rather than raised, so one broken impl or one huge shape does not end the run.
    ``context`` (e.g. an SDPA backend choice) is held around the build, the check and the timing.
    """
    rec: dict[str, Any] = {"status": None, "us_median": None, "check": None}
    runner = None
    try:
        with context():
            runner = build()
            rec["setup_s"] = runner.setup_s
            if check is not None:
                poison = runner.poison
                for t in (poison if isinstance(poison, (tuple, list)) else (poison,)):
                    if t is not None:
                        t.fill_(float("nan"))
                runner.step()
                rec["check"] = check(runner.result())
            rec.update(time_stats(timer(runner.step, opts.iters, opts.warmup)))
        rec["status"] = "measured"
    except torch.cuda.OutOfMemoryError as exc:
        rec.update(status="OOM", error=_error_text(exc))
    except Exception as exc:
        rec.update(status="ERR", error=_error_text(exc))
    finally:
        del runner
        release_memory(device)
    return rec


def bench_impl(impl: Impl, case: Case, ref: Optional[torch.Tensor], timer, opts: Options) -> dict:
    """Check and time one layer impl on one workload (see measure_runner)."""
    w = case.workload
    rec = base_record(w, impl)
    check = (lambda out: check_layer_output(out, ref, w)) if ref is not None else None
    rec.update(measure_runner(lambda: impl.build(case), case.device, timer, opts, check))
    if rec["status"] == "measured":
        rec["tflops"] = tflops(rec["flops"], rec["us_median"])
        rec["pct_sol"] = pct_sol(rec["t_sol_us"], rec["us_median"])
    return rec


def exact_reference(case: Case) -> tuple[Optional[torch.Tensor], Optional[str]]:
    """The exact bf16 output, computed once per workload on the bench device."""
    try:
        return getattr(reference, case.op_name)(**case.inputs), None
    except torch.cuda.OutOfMemoryError as exc:
        return None, f"reference output: OOM ({_error_text(exc)}); outputs unchecked"
    except Exception as exc:
        return None, f"reference output failed ({_error_text(exc)}); outputs unchecked"


def bench_workload(w, impls: list[Impl], device: torch.device, timer,
                   opts: Options) -> tuple[list[dict], list[str]]:
    inputs = workloads.make_inputs(w, device, seed=opts.seed)
    case = Case(workload=w, op_name=OP_NAMES[w.problem], inputs=inputs, device=device)
    ref, note = exact_reference(case) if opts.check else (None, None)
    records = [bench_impl(impl, case, ref, timer, opts) for impl in impls]
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


def layer_notes(records: list[dict]) -> list[str]:
    """Detail lines under a workload: why an impl failed, and compile/capture times."""
    notes = []
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
    print(f"{'group':<6} {'impl':<18} {'n':>3} {'mean %SOL':>10} {'×best':>8} {'fail':>5} {'err':>4}")
    for group, table in summary.items():
        for key, row in table.items():
            pct = f"{row['mean_pct_sol']:9.1f}%" if row["mean_pct_sol"] is not None else f"{'-':>10}"
            x = f"{row['geomean_x_best_pytorch']:7.2f}x" if row["geomean_x_best_pytorch"] is not None else f"{'-':>8}"
            print(f"{group:<6} {key:<18} {row['n']:>3} {pct} {x} {row['failures']:>5} {row['errors']:>4}")
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
        for line in layer_notes(recs) + [f"    {n}" for n in ws_notes]:
            print(line, flush=True)
        notes.extend(f"{w.name}: {n}" for n in ws_notes)
    summary = summarize_layers(records, [impl.key for impl in impls])
    print_layer_summary(summary)
    return {"results": records, "summary": summary, "notes": notes, "aborted": sweep.aborted}


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


def _time_gemm(step: Callable[[], Any], s: GemmShape, timer, opts: Options) -> dict:
    try:
        stats = time_stats(timer(step, opts.iters, opts.warmup))
        return {"status": "measured", **stats, **_gemm_rates(s, stats["us_median"])}
    except torch.cuda.OutOfMemoryError as exc:
        return {"status": "OOM", "error": _error_text(exc), "us_median": None}
    except Exception as exc:
        return {"status": "ERR", "error": _error_text(exc), "us_median": None}


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
           "t_sol_us": s.t_sol_us, "flops": s.flops, "min_bytes": s.min_bytes,
           "cublas": _time_gemm(_cublas_linear(x, w, b, out_cublas), s, timer, opts), "vlattn": None}
    if vlattn_ok:
        rec["vlattn"] = _bench_vlattn_linear(s, x, w, b, timer, opts)
        v, c = rec["vlattn"], rec["cublas"]
        if v.get("us_median") and c.get("us_median"):
            v["x_cublas"] = c["us_median"] / v["us_median"]
    return rec


def _cublas_linear(x, w, b, out) -> Callable[[], Any]:
    """F.linear's own cuBLAS path for 2-D input (addmm, whose bias can ride the cuBLASLt
    epilogue, or mm), writing into a preallocated ``out`` so the harness allocates nothing."""
    wt = w.t()
    if b is None:
        return lambda: torch.mm(x, wt, out=out)
    return lambda: torch.addmm(b, x, wt, out=out)


def _bench_vlattn_linear(s: GemmShape, x, w, b, timer, opts: Options) -> dict:
    out = torch.full((s.m, s.n), float("nan"), dtype=torch.bfloat16, device=x.device)
    try:
        vlattn.linear(x, w, b, out=out)
        check = compare_gemm(out, F.linear(x, w, b)) if opts.check else None
    except torch.cuda.OutOfMemoryError as exc:
        return {"status": "OOM", "error": _error_text(exc), "us_median": None}
    except Exception as exc:
        return {"status": "ERR", "error": _error_text(exc), "us_median": None}
    result = _time_gemm(lambda: vlattn.linear(x, w, b, out=out), s, timer, opts)
    result["check"] = check
    return result


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


def run_gemm(ws: list, device: torch.device, timer, opts: Options, budget: Budget) -> dict:
    shapes = dedupe_gemm_shapes((w.name, workloads.projection_shapes(w)) for w in ws)
    notes: list[str] = []
    why_not = gemm_availability(device)
    if why_not:
        notes.append(f"vlattn.linear: skipped, {why_not}; timing cuBLAS alone")
        print(notes[-1], flush=True)
    print(f"\n{len(shapes)} distinct projection GEMMs (bf16, out[M,N] = x[M,K]·W[N,K]ᵀ + b)", flush=True)
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


def plot_panels(layers: Optional[dict], gemm: Optional[dict]) -> list[tuple[str, list[str], dict]]:
    """(title, x labels, {series: %SOL per label}) panels: one per problem, one for the GEMMs."""
    panels = []
    if layers:
        for problem in sorted({r["problem"] for r in layers["results"]}):
            rows = [r for r in layers["results"] if r["problem"] == problem]
            labels = list(dict.fromkeys(axes_label(r["axes"]) for r in rows))
            series: dict[str, list] = {}
            for r in rows:
                values = series.setdefault(r["impl"], [None] * len(labels))
                values[labels.index(axes_label(r["axes"]))] = r.get("pct_sol")
            panels.append((f"{problem} {OP_NAMES[problem]}: % of H200 speed of light", labels, series))
    if gemm and gemm["results"]:
        labels = [r["label"] for r in gemm["results"]]
        series = {side: [(r[side] or {}).get("pct_sol") for r in gemm["results"]]
                  for side in ("cublas", "vlattn")}
        panels.append(("projection GEMMs: % of H200 speed of light", labels, series))
    return panels


def save_plot(path: Path, panels: list[tuple[str, list[str], dict]]) -> Optional[str]:
    """Grouped bars of %SOL; returns why no plot was written, or None."""
    if not panels:
        return "plot skipped: nothing was measured"
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "plot skipped: matplotlib is not installed"
    widest = max(len(labels) for _, labels, _ in panels)
    fig, axes = plt.subplots(len(panels), 1, figsize=(max(8.0, 0.6 * widest + 2), 3.8 * len(panels)),
                             squeeze=False)
    for ax, (title, labels, series) in zip(axes[:, 0], panels):
        width = 0.8 / max(len(series), 1)
        for i, (name, values) in enumerate(series.items()):
            points = [(j + (i - (len(series) - 1) / 2) * width, v) for j, v in enumerate(values) if v is not None]
            if points:
                ax.bar([p[0] for p in points], [p[1] for p in points], width, label=name)
        ax.axhline(100.0, color="gray", linestyle="--", linewidth=0.8)
        ax.set_xticks(range(len(labels)))
        ax.set_xticklabels(labels, rotation=45, ha="right", fontsize=7)
        ax.set_ylabel("% of SOL (T_SOL / T)")
        ax.set_title(title, fontsize=10)
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
    p.add_argument("--mode", choices=["layers", "gemm", "all"], default="layers")
    p.add_argument("--backends", default=None,
                   help="comma list of vlattn backends from native,composite "
                        "(default: those available on the device)")
    p.add_argument("--baselines", default=DEFAULT_BASELINES,
                   help=f"comma list from {','.join(BASELINE_CHOICES)} (default {DEFAULT_BASELINES}; "
                        f"'' for none)")
    p.add_argument("--compile", action="store_true",
                   help="add torch.compile of the composite as a baseline (compiles per workload)")
    p.add_argument("--compile-mode", default="default",
                   choices=["default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs"])
    p.add_argument("--iters", type=int, default=None, help="timed calls per impl (default 30, --quick 10)")
    p.add_argument("--warmup", type=int, default=None, help="untimed calls first (default 5, --quick 2)")
    p.add_argument("--quick", action="store_true", help="fewer iterations")
    p.add_argument("--seed", type=int, default=None, help="input seed (default: a fresh one, recorded)")
    p.add_argument("--no-check", action="store_true", help="skip the correctness checks")
    p.add_argument("--json", type=Path, default=None,
                   help="results file (default with a GPU: bench/results/<time>_<commit>_<mode>.json)")
    p.add_argument("--plot", type=Path, default=None,
                   help="%%SOL plot, PNG (default with a GPU: beside the default JSON)")
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
    if args.iters < 1 or args.warmup < 0:
        p.error("--iters must be >= 1 and --warmup >= 0")
    if args.seed is None:
        args.seed = random.SystemRandom().randrange(2**31)
    return args


def main(argv: Optional[list[str]] = None) -> int:
    args = parse_args(argv)
    try:
        chosen = select_workloads(workloads.load(None if args.problem == "all" else args.problem),
                                  args.workloads)
    except ValueError as exc:
        print(exc, file=sys.stderr, flush=True)
        return 2
    chosen.sort(key=lambda w: w.sort_key)  # per problem, ascending T_SOL (ANCHORS.md's order)
    opts = Options(iters=args.iters, warmup=args.warmup, check=not args.no_check, seed=args.seed)
    has_cuda = torch.cuda.is_available()
    if args.device == "cuda" and not has_cuda:
        print("--device cuda: no CUDA device is visible", file=sys.stderr, flush=True)
        return 2
    device = torch.device("cuda", torch.cuda.current_device()) if (has_cuda and args.device != "cpu") else torch.device("cpu")
    meta = environment_meta(device, args)
    print(describe_meta(meta), flush=True)
    with torch.no_grad():
        if device.type == "cpu" and args.device is None:
            return run_cpu_fallback(chosen, opts, meta, args.json)
        return run_device(chosen, args, opts, device, meta)


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
    stem = default_output_stem(meta, args.mode) if device.type == "cuda" else None
    payload: dict[str, Any] = {"meta": meta, "results": [], "summary": None, "notes": []}
    print(f"seed {opts.seed}; {opts.iters} timed calls after {opts.warmup} warm-up, median; "
          f"{len(chosen)} workloads", flush=True)
    layers = gemm = None
    if args.mode in ("layers", "all"):
        impls, impl_notes = resolve_impls(args, device)
        for impl in impls:
            print(f"  {impl.key}: {impl.description}", flush=True)
        for note in impl_notes:
            print(f"  {note}", flush=True)
        print("cells: median µs | TFLOP/s | %SOL = T_SOL/T | ×best = T_best_PyTorch/T | check", flush=True)
        layers = run_layers(chosen, impls, device, timer, opts, budget)
        payload.update(results=layers["results"], summary=layers["summary"])
        payload["notes"] += impl_notes + layers["notes"]
    if args.mode in ("gemm", "all"):
        gemm = run_gemm(chosen, device, timer, opts, budget)
        payload["gemm"] = gemm
        payload["notes"] += gemm["notes"]
    json_path = args.json or (stem.with_suffix(".json") if stem else None)
    plot_path = args.plot or (stem.with_suffix(".png") if stem else None)
    if json_path:
        write_json(json_path, payload)
    if plot_path:
        try:
            why_not = save_plot(plot_path, plot_panels(layers, gemm))
        except Exception as exc:  # a plot is a convenience: never lose the exit status over it
            why_not = f"plot failed: {_error_text(exc)}"
        if why_not:
            print(why_not, flush=True)
    return exit_status(layers, gemm)


def exit_status(layers: Optional[dict], gemm: Optional[dict]) -> int:
    """1 when any checked impl FAILED the rule, a vlattn op raised (a bug of ours) or the run was
    aborted; baseline errors such as a reference OOM are reported but do not fail the run."""
    problems = [part["aborted"] for part in (layers, gemm) if part and part["aborted"]]
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
    if problems:
        print(f"result: {len(problems)} problem(s): " + "; ".join(problems[:20]), flush=True)
        return 1
    print("result: no check failed, no vlattn op raised", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
