"""Measure every compiled GEMM config (stream-K ones also at each split count of gemm_configs.SPLITS,
parallel split-K ones at each of gemm_configs.PARALLEL_SPLITS that fits the shape's K; split variants only where
their config's whole-K grid is under one wave, see configs_for_shape) on the workloads' projection shapes and
write the tuned table that `vlattn.dispatch` reads first (data/gemm_tuned_h200.json).

    python -m vlattn.tune [--out PATH] [--iters 30] [--warmup 5] [--rounds 3] [--problem 007|034|all]
                          [--min-m M] [--max-m M] [--configs a,b,...] [--all-splits]

Each config is checked against F.linear on the shape before it is timed (a config that fails is
never chosen); timing is the bench's cold-L2 CUDA-event median over --rounds rounds per shape, the
configs' order rotated each round. The JSON keeps every timing, so a
reader can see by how much the winner won. Commit the file with the GPU and date in its meta.
"""
from __future__ import annotations

import argparse
import datetime
import json
import sys
from importlib import resources
from pathlib import Path

import torch
import torch.nn.functional as F

from . import _ext, bench, workloads
from .gemm_configs import BY_NAME, expand_splits, parse_name, splits_fit
from .ops import linear


def round_orders(configs: list[str], rounds: int) -> list[list[str]]:
    """The configs' timing order in each round: rotated by one per round, so that no config is always
    timed first or last on a shape (a fixed order put a clock drift into one config's numbers:
    bench/NOTES.md twenty-eighth session, where one pair's sum read -3.3% and then -1.3%)."""
    n = len(configs)
    return [configs[r % n:] + configs[:r % n] for r in range(rounds)] if n else [[] for _ in range(rounds)]


_CUBLAS = "<cublas>"  # cuBLAS's slot in the rotation (no config name has angle brackets)


def configs_for_shape(configs: list[str], m: int, n: int, k: int, sm_count: int) -> list[str]:
    """The configs worth timing on this shape. A parallel split-K count that does not cut K into equal slices
    of a multiple of 8 columns is refused by the op (gemm_configs.splits_fit), so it is left out, never timed.
    So is a parallel split-K config whose own whole-K grid already fills a wave (>= sm_count tiles): splitting
    then adds no busy SM, only the fp32 partials' round trip. Measured on an H100 (bench/NOTES.md,
    sixty-fourth session): it won only where its grid had 8-56 tiles and lost on every grid of 80 tiles or
    more; the calls this leaves out (132 tiles and up) lost by 25-84% and were 47% of the full tuner's timed
    GPU time. The same rule holds for a stream-K config's split variants (CUTLASS's plain split-K on it): in
    the fourteen tuner runs on file with those timings (bench/runs/*tune*.json, H200 and H100, 2026-11-30 to
    2026-12-07) none beat its own whole-K config on a grid of >= sm_count tiles; in the nine runs that timed
    any, those calls were 17-64% of the run's timed GPU time (32% in ed37721's full H200 run)."""
    kept = []
    for name in configs:
        if not splits_fit(name, k):
            continue
        base, splits = parse_name(name)
        config = BY_NAME.get(base)
        # Only split-K configs (parallel or stream-K) have split variants (gemm_configs.is_valid_name).
        if splits > 1 and config is not None and config.tile_count(m, n) >= sm_count:
            continue
        kept.append(name)
    return kept


def measure(shapes: list, configs: list[str], device: torch.device, iters: int, warmup: int, seed: int,
            rounds: int = 1, host_ahead: bool = True, sm_count: int | None = None) -> dict:
    """Per shape: every config checked against F.linear, then ``rounds`` rounds of ``iters / rounds``
    cold calls each, the order rotated per round (round_orders); the median over all of a config's calls.
    cuBLAS (F.linear, for the reader) takes its turn in the same rotation: timed in one block after the
    configs, it read 20-60% high on many shapes in the thirtieth session's three tuner processes while the
    bench's GEMM mode read it normally (bench/NOTES.md). ``sm_count``: configs_for_shape's full-wave rule
    for parallel split-K at this many SMs (None: only the K fit)."""
    timer = bench.CudaTimer(device, host_ahead=host_ahead)
    sm_count = 1 << 30 if sm_count is None else sm_count
    timings = {}
    per_round = max(1, iters // max(1, rounds))
    for s in shapes:
        x, w, b = bench._gemm_operands(s, device, seed)
        ref = F.linear(x, w, b)
        out = torch.empty(s.m, s.n, dtype=torch.bfloat16, device=device)
        samples: dict[str, list[float]] = {}  # the configs that are right on this shape
        timed = configs_for_shape(configs, s.m, s.n, s.k, sm_count)
        for name in timed:
            out.fill_(float("nan"))
            linear(x, w, b, out=out, config=name)
            if bench.compare_gemm(out, ref)["ok"]:
                samples[name] = []
        calls = {name: (lambda name=name: linear(x, w, b, out=out, config=name)) for name in samples}
        # cuBLAS in the same conditions, for the reader (never a candidate: callers get our kernels).
        calls[_CUBLAS], samples[_CUBLAS] = (lambda: F.linear(x, w, b)), []
        for order in round_orders(list(calls), rounds):
            for name in order:
                samples[name] += timer(calls[name], per_round, warmup)
        cublas = bench.time_stats(samples.pop(_CUBLAS))["us_median"]
        # None: never chosen here, either left out (configs_for_shape: the K fit, the full-wave rule; listed under
        # "left_out", printed "skip") or wrong on this shape (printed "FAIL": a kernel bug to look at).
        row = {n: bench.time_stats(samples[n])["us_median"] if n in samples else None for n in configs}
        left_out = [n for n in configs if n not in timed]
        timings[s.label] = {"m": s.m, "n": s.n, "k": s.k, "bias": s.bias, "us": row, "cublas_us": cublas,
                            "left_out": left_out}
        best = min((us, n) for n, us in row.items() if us is not None)
        cells = [f"{n}={us:.1f}" if us is not None else f"{n}=skip" if n in left_out else f"{n}=FAIL"
                 for n, us in row.items()]
        print(f"{s.label:>22}  " + "  ".join(cells)
              + f"  cublas={cublas:.1f}  -> {best[1]} ({cublas / best[0]:.3f}x cuBLAS)", flush=True)
    return timings


# A tuned entry must beat the analytic rule's own choice by this factor in the same timings. Run-to-run
# spread on the H200 is several percent (2026-11-30: a table taken at face value picked stream-K for
# 16384x4096x4096 on a 0.3% lead, and the bench then measured it 15% slower than the analytic choice).
MIN_GAIN = 1.05


def shape_totals(timings: dict) -> dict[str, dict[str, float]]:
    """"M,N,K" -> config -> µs summed over the shape's bias variants (inf where a config failed), and under
    the key "<cublas>" cuBLAS's summed µs where the timings have it. Tuned entries are per shape, so with and without bias share one."""
    totals: dict[str, dict[str, float]] = {}
    for t in timings.values():
        row = totals.setdefault(f"{t['m']},{t['n']},{t['k']}", {})
        for name, us in t["us"].items():
            row[name] = row.get(name, 0.0) + (float("inf") if us is None else us)
        if t.get("cublas_us") is not None:
            row[_CUBLAS] = row.get(_CUBLAS, 0.0) + t["cublas_us"]
    return totals


def best_entries(timings: dict, sm_count: int, min_gain: float = MIN_GAIN) -> dict[str, str]:
    """"M,N,K" -> fastest config where it beats dispatch.analytic_config's choice by ``min_gain``; with
    and without bias share an entry (the sum of both times). Other shapes are left to the rule."""
    from .dispatch import analytic_config

    entries = {}
    for key, totals in sorted(shape_totals(timings).items()):
        row = {name: us for name, us in totals.items() if name != _CUBLAS}
        best = min(row, key=row.get)
        if row[best] == float("inf"):
            continue
        m, n, k = (int(v) for v in key.split(","))
        rule = analytic_config(m, n, k, sm_count, row.keys())
        if rule is None or row.get(rule, float("inf")) >= min_gain * row[best]:
            entries[key] = best
    return entries


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m vlattn.tune", description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=None, help="default: the package's data/gemm_tuned_h200.json")
    parser.add_argument("--problem", default="all", choices=("007", "034", "all"))
    parser.add_argument("--iters", type=int, default=30)
    parser.add_argument("--warmup", type=int, default=5, help="untimed calls before each config's block")
    parser.add_argument("--rounds", type=int, default=3,
                        help="rounds per shape, the config order rotated each round (--iters split over them)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--timer", choices=("ahead", "cold"), default="ahead",
                        help="ahead (default): each call's GPU span with the host queued ahead (the layers run "
                             "these GEMMs in a PDL chain, where the host's launch latency is not on the path); "
                             "cold: the clock starts before the host launches the call (bench.CudaTimer)")
    parser.add_argument("--min-m", type=int, default=0, help="only shapes with at least this many rows")
    parser.add_argument("--max-m", type=int, default=1 << 30, help="only shapes with at most this many rows")
    parser.add_argument("--configs", default=None, help="comma-separated config names (default: every compiled one)")
    parser.add_argument("--all-splits", action="store_true",
                        help="also time split variants (parallel and stream-K) where their config's whole-K "
                             "grid fills a wave (left out by default)")
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("vlattn.tune: no CUDA device; tuning needs the GPU it tunes for", file=sys.stderr)
        return 2
    device = torch.device("cuda", torch.cuda.current_device())
    configs = expand_splits(c["name"] for c in _ext.require("vlattn.tune").gemm_configs())
    chosen = workloads.load(None if args.problem == "all" else args.problem)
    shapes = [s for s in bench.dedupe_gemm_shapes((w.name, workloads.projection_shapes(w)) for w in chosen)
              if args.min_m <= s.m <= args.max_m]
    if args.configs:
        wanted = [n.strip() for n in args.configs.split(",") if n.strip()]
        unknown = sorted(set(wanted) - set(configs))
        if unknown:
            parser.error(f"--configs: not compiled: {unknown}; compiled: {configs}")
        configs = wanted
    if args.rounds < 1:
        parser.error(f"--rounds: expected at least 1, got {args.rounds}")
    props = torch.cuda.get_device_properties(device)
    timings = measure(shapes, configs, device, args.iters, args.warmup, args.seed, args.rounds,
                      host_ahead=args.timer == "ahead",
                      sm_count=None if args.all_splits else props.multi_processor_count)
    table = {
        "meta": {"gpu": props.name, "sm_count": props.multi_processor_count, "torch": torch.__version__,
                 "cuda": torch.version.cuda, "date": datetime.date.today().isoformat(),
                 "commit": bench.commit_info().get("commit"), "iters": args.iters, "rounds": args.rounds,
                 "configs": configs, "timer": args.timer,
                 "tool": "python -m vlattn.tune", "min_gain": MIN_GAIN},
        "entries": best_entries(timings, props.multi_processor_count),
        "timings": timings,
    }
    out = args.out or Path(str(resources.files("vlattn").joinpath("data", "gemm_tuned_h200.json")))
    out.write_text(json.dumps(table, indent=1) + "\n")
    print(f"wrote {out}: {len(table['entries'])} entries")
    return 0


if __name__ == "__main__":
    sys.exit(main())
